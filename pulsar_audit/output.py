"""How commands print: an aligned text table for people, one JSON object with --json."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any, TextIO


def _default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def print_json(obj: Any, out: TextIO | None = None) -> None:
    # sys.stdout is looked up at each call, so a redirected stdout (tests, callers) gets it
    (out or sys.stdout).write(json.dumps(obj, default=_default, sort_keys=False) + "\n")


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> str:
    """Render dict rows as an aligned text table (columns default to the first row's keys)."""
    if not rows:
        return "(none)"
    columns = list(columns or rows[0].keys())
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat(timespec="milliseconds")
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)
