"""docs/anomalies.md defines every anomaly kind once, with the verdict pulsar_audit.kinds gives
it, and the command line points to it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from pulsar_audit.kinds import ANOMALY_KINDS, VIOLATION_KINDS
from pulsar_audit.paths import REPO_ROOT

GLOSSARY = REPO_ROOT / "docs" / "anomalies.md"
ROW = re.compile(r"^\| `(?P<kind>[a-z_]+)` \| [^|]+ \| [^|]+ \| (?P<verdict>[^|]+) \|")


def glossary_rows() -> dict[str, list[str]]:
    """kind → the verdict cells of its table rows."""
    rows: dict[str, list[str]] = {}
    for line in GLOSSARY.read_text().splitlines():
        found = ROW.match(line)
        if found:
            rows.setdefault(found["kind"], []).append(found["verdict"].strip())
    return rows


def test_every_kind_has_one_row_whose_verdict_matches_the_code():
    rows = glossary_rows()
    assert sorted(rows) == sorted(ANOMALY_KINDS)
    assert all(len(cells) == 1 for cells in rows.values()), rows
    said_violation = {kind for kind, (cell,) in rows.items() if cell.startswith("violation")}
    assert said_violation == set(VIOLATION_KINDS)


def test_help_points_to_the_glossary():
    exe = Path(sys.executable).parent / "pulsar-audit"
    shown = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=True)
    assert "docs/anomalies.md" in shown.stdout
