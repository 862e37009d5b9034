"""The table checks of a `watch` micro-batch, whole-run against incremental, in one process.

    .venv/bin/python -m bench.incremental_checks LANDING [--repeat 3] [--small-frames] [--reuse]

LANDING: the chunk files `bench.watch_batches` cut (chunk-001.jsonl, ...). All but the last
are ingested with their checks into a scratch lakehouse, then the last one's rows without
them; then, in turn, REPEAT times each: the checks' metrics over the runs' whole bronze
(`run_metrics`, what `analyze` runs) and from the last check and the new file's rows
(`previous_metrics` + `metrics_with_new_rows`, what a micro-batch runs), each judged by GX
(`check_runs`), nothing written. Prints each one's seconds, their medians and the ratio, and
whether both gave the same check results. --small-frames: both under the SQL settings a
`watch` micro-batch of a small input runs with (pulsar_audit/spark.py:SMALL_FRAMES_CONF).
--reuse: the scratch lakehouse of an earlier run, not ingested again.
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import functions as F

from bench.spark_session import local_spark
from checks.gate import ROW_GATE
from checks.incremental import gains_a_producer, metrics_with_new_rows
from checks.run_checks import EVENT_TABLES, IS_NEW, previous_metrics
from checks.tables import check_runs, check_schemas, run_metrics
from ingest import traces
from jobs.ingest import ingest_traces
from pulsar_audit.config import load_config
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.spark import SMALL_FRAMES_CONF, session_settings
from pulsar_audit.storage import FileStore


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("landing", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/pulsar-audit-bench-checks"))
    parser.add_argument("--small-frames", action="store_true", help="a micro-batch's settings")
    parser.add_argument("--reuse", action="store_true", help="the scratch lakehouse as it is")
    args = parser.parse_args(argv)
    spark = local_spark(args.scratch / "spark")
    lakehouse = Lakehouse(spark, load_config("local", lakehouse=str(args.scratch / "lh")))
    lakehouse.create_all()
    store = FileStore(spark)
    chunks = [store.status(str(p)) for p in sorted(args.landing.glob("chunk-*.jsonl"))]
    new_files = [chunks[-1].path]
    if args.reuse:
        of_new = lakehouse.read("run_files").filter(F.col("source_file").isin(new_files))
        runs = sorted({r["run_id"] for r in of_new.select("run_id").collect()})
    else:
        for chunk in chunks[:-1]:
            ingest_traces(lakehouse, args.landing, listed=[chunk])
        runs = traces.ingest_traces(lakehouse, args.landing, ROW_GATE, None, chunks[-1:]).runs
    at = datetime.now(UTC).replace(tzinfo=None)
    of_runs = F.col("run_id").isin(runs)
    is_new = F.col("source_file").isin(new_files)

    def judged(incremental: bool) -> list[tuple]:
        tables = {name: lakehouse.read(name) for name in EVENT_TABLES}
        schemas_ok = check_schemas(tables)
        producer, consumer, run = (tables[name].filter(of_runs) for name in EVENT_TABLES)
        quarantine = lakehouse.read("quarantine").filter(of_runs)
        if incremental:
            previous = previous_metrics(lakehouse, runs, new_files)
            flagged = [df.withColumn(IS_NEW, is_new) for df in (producer, consumer, run)]
            assert previous is not None and gains_a_producer(flagged[0], IS_NEW).isEmpty()
            metrics = metrics_with_new_rows(previous, *flagged, quarantine.filter(is_new), IS_NEW)
        else:
            metrics = run_metrics(producer, consumer, run, quarantine)
        results = check_runs(spark, metrics, schemas_ok, "bench", at).collect()
        return sorted(
            (r.run_id, r.table, r.expectation, r.success, r.observed_value) for r in results
        )

    seconds: dict[bool, list[float]] = {False: [], True: []}
    answers: dict[bool, list[tuple]] = {}
    settings = SMALL_FRAMES_CONF if args.small_frames else {}
    with session_settings(spark, settings):
        for _ in range(args.repeat):
            for incremental in (False, True):
                started = time.monotonic()
                answers[incremental] = judged(incremental)
                seconds[incremental].append(time.monotonic() - started)
    whole, new = (statistics.median(seconds[k]) for k in (False, True))
    print(f"{len(chunks)} chunks, runs {runs}; the last chunk's rows new; settings {settings}")
    print(
        f"whole-run checks: {', '.join(f'{s:.1f}' for s in seconds[False])} s (median {whole:.1f})"
    )
    print(
        f"incremental checks: {', '.join(f'{s:.1f}' for s in seconds[True])} s (median {new:.1f})"
    )
    same = answers[True] == answers[False]
    print(f"incremental / whole-run: {new / whole:.2f}; same results: {same}")


if __name__ == "__main__":
    main()
