"""The runs in examples/ that the forensics and report tests look at."""

from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SYNTHETIC_RUN = "synthetic-faults"
UNLOAD_RUN = "unload-20261122T024253-0c27"
