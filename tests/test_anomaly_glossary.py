"""docs/anomalies.md defines every anomaly kind once, with the verdict pulsar_audit.kinds gives
it, and the command line points to it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from pulsar_audit.kinds import ANOMALY_KINDS, OVERLAPPING_KINDS, VIOLATION_KINDS
from pulsar_audit.paths import REPO_ROOT

GLOSSARY = REPO_ROOT / "docs" / "anomalies.md"
PAIR = re.compile(
    r"^- \*\*`(?P<a>[a-z_]+)` and `(?P<b>[a-z_]+)`\.?\*\*(?: \(or \*\*`(?P<c>[a-z_]+)`\*\*\))?"
)
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


def test_the_overlapping_pairs_are_the_ones_the_output_marks():
    """The pairs docs/anomalies.md lists as one fact under two kinds (before "do not
    overlap") are pulsar_audit.kinds.OVERLAPPING_KINDS, which analyze marks."""
    text = GLOSSARY.read_text()
    section = text.split("## Where one fact shows under two kinds")[1].split("do not overlap")[0]
    listed = set()
    for line in section.splitlines():
        found = PAIR.match(line)
        if found:
            listed |= {(found["a"], other) for other in (found["b"], found["c"]) if other}
    assert listed == set(OVERLAPPING_KINDS)
