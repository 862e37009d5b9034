"""Whether each watch of a `bench.watch_batches` run left the gold tables the cold `analyze`
did, and which provisional findings it settled how.

    .venv/bin/python -m bench.watch_agree WORKDIR

Compares, for each WORKDIR/lh-NAME beside WORKDIR/lh-analyze: gold.anomalies (id, kind,
count), gold.outages (id, duration) and gold.run_summary (run, subscription, verdict), and
prints each watch's gold.provisional (kind, state, closing micro-batch, what confirmed it).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.spark_session import local_spark
from pulsar_audit.config import load_config
from pulsar_audit.delta_io import Lakehouse

COMPARED = {
    "anomalies": ("anomaly_id", "kind", "count"),
    "outages": ("outage_id", "duration_ms"),
    "run_summary": ("run_id", "subscription", "valid"),
}
PROVISIONAL = ("kind", "state", "closed_batch", "resolved_by")


def rows(lakehouse: Lakehouse, table: str, columns: tuple[str, ...]) -> list[tuple]:
    """`columns` of every row of `table` (gold of one 10^4 trace: a few hundred rows)."""
    return sorted((tuple(r) for r in lakehouse.read(table).select(*columns).collect()), key=repr)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("workdir", type=Path)
    args = parser.parse_args(argv)
    spark = local_spark(args.workdir / "agree-scratch")

    def lakehouse(name: str) -> Lakehouse:
        return Lakehouse(spark, load_config("local", lakehouse=str(args.workdir / name)))

    reference = lakehouse("lh-analyze")
    expected = {t: rows(reference, t, c) for t, c in COMPARED.items()}
    for folder in sorted(p.name for p in args.workdir.glob("lh-*") if p.name != "lh-analyze"):
        watched = lakehouse(folder)
        verdicts = [
            f"{t} {'equal' if rows(watched, t, c) == expected[t] else 'DIFFER'} "
            f"({len(expected[t])} rows)"
            for t, c in COMPARED.items()
        ]
        print(f"{folder} vs lh-analyze: {', '.join(verdicts)}")
        for row in rows(watched, "provisional", PROVISIONAL):
            print(f"  provisional {row}")


if __name__ == "__main__":
    main()
