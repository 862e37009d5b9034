"""Copy the part of each broker/bookie log written during a run next to the run's trace.

At the start of a run we note each log file's size; at the end we copy from there to the end
into <out>/logs/<component>/<process>.log — component broker or bookie, the folders that
`ingest logs --source` takes (a standalone's single log holds broker and bookie lines; it goes
under broker/; AutoRecovery's under bookie/) — and list the copies in <out>/logs/manifest.json
for log ingest.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from capture.processes import ClusterState

# AutoRecovery's log goes with the bookies' (BookKeeper's auditor and replication worker).
COMPONENT = {
    "standalone": "broker",
    "broker": "broker",
    "bookie": "bookie",
    "autorecovery": "bookie",
}


def mark(state: ClusterState | None) -> dict[str, dict]:
    """Where each broker/bookie log of `state` ends now."""
    if state is None:
        return {}
    marks = {}
    for spec in state.processes:
        if spec.role in COMPONENT:
            path = Path(spec.log)
            marks[spec.name] = {
                "component": COMPONENT[spec.role],
                "source": str(path),
                "offset": path.stat().st_size if path.exists() else 0,
            }
    return marks


def copy_since(marks: dict[str, dict], dest: Path, settle_s: float = 0.5) -> list[dict]:
    """Copy each log from its mark to its current end into `dest`; returns the manifest rows."""
    if not marks:
        return []
    time.sleep(settle_s)  # the last lines of the run reach the file (log4j flushes per line)
    dest.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, info in marks.items():
        target = dest / info["component"] / f"{name}.log"
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(info["source"], "rb") as src, open(target, "wb") as out:
            src.seek(info["offset"])
            while chunk := src.read(1 << 20):
                out.write(chunk)
        rows.append(
            {
                "file": str(target.relative_to(dest)),
                "process": name,
                **info,
                "bytes": target.stat().st_size,
            }
        )
    (dest / "manifest.json").write_text(json.dumps(rows, indent=1) + "\n")
    return rows
