"""The reference for fixed costs: a bare local Spark session with Delta that starts, counts
range(1) and stops — what any pulsar-audit command pays at least.

    .venv/bin/python -m bench.bare_spark SCRATCH_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench.spark_session import local_spark


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m bench.bare_spark SCRATCH_DIR")
    spark = local_spark(Path(args[0]))
    assert spark.range(1).count() == 1
    spark.stop()


if __name__ == "__main__":
    main()
