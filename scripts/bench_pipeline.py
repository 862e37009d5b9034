"""Benchmark: generate a clean N-message trace with Spark, run the main job on it, print figures.

    .venv/bin/python scripts/bench_pipeline.py --messages 1000000 [--workdir /tmp/bench]

Generation stays in Spark (spark.range → JSON lines), so N can exceed memory; the figures are
wall-clock seconds per stage and messages per second, printed, not asserted.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from pyspark.sql import functions as F

from pulsar_audit.config import load_config
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.spark import get_spark

T0_MS = 1_741_082_400_000
TOPIC = "persistent://public/default/bench"


def _lines(spark, messages: int, partitions: int):  # noqa: ANN001, ANN202
    seq = F.col("id")
    base = {"run_id": F.lit("bench"), "topic": F.lit(TOPIC), "partition": F.lit(-1)}
    send = F.struct(
        *[v.alias(k) for k, v in base.items()],
        F.lit("producer").alias("role"),
        F.lit("p1").alias("client"),
        F.lit("send").alias("event"),
        (F.lit(T0_MS) + seq).alias("ts"),
        seq.alias("seq"),
        (seq * 2).alias("event_index"),
    )
    ack = F.struct(
        *[v.alias(k) for k, v in base.items()],
        F.lit("producer").alias("role"),
        F.lit("p1").alias("client"),
        F.lit("ack").alias("event"),
        (F.lit(T0_MS) + seq + 0.5).alias("ts"),
        seq.alias("seq"),
        (F.lit(10) + F.floor(seq / 50000)).alias("ledger_id"),
        (seq % 50000).alias("entry_id"),
        (seq * 2 + 1).alias("event_index"),
    )
    receive = F.struct(
        *[v.alias(k) for k, v in base.items()],
        F.lit("consumer").alias("role"),
        F.lit("r1").alias("client"),
        F.lit("receive").alias("event"),
        (F.lit(T0_MS + messages + 1000) + seq).alias("ts"),
        seq.alias("seq"),
        F.lit("r1").alias("subscription"),
        F.lit("p1").alias("producer"),
        (F.lit(10) + F.floor(seq / 50000)).alias("ledger_id"),
        (seq % 50000).alias("entry_id"),
        seq.alias("event_index"),
    )
    ids = spark.range(0, messages, numPartitions=partitions)
    events = ids.select(F.explode(F.array(F.to_json(send), F.to_json(ack), F.to_json(receive))))
    end = {
        "run_id": "bench",
        "topic": TOPIC,
        "role": "consumer",
        "client": "r1",
        "event": "end",
        "ts": T0_MS + 2 * messages + 2000,
        "event_index": messages,
    }
    config = {
        "run_id": "bench",
        "topic": TOPIC,
        "role": "run",
        "client": "harness",
        "event": "config",
        "ts": T0_MS - 1,
        "ensemble_size": 1,
        "write_quorum": 1,
        "ack_quorum": 1,
        "deduplication": False,
    }
    extra = spark.createDataFrame([(json.dumps(end),), (json.dumps(config),)], "col string")
    return events.unionByName(extra)


def generate(spark, folder: Path, messages: int, partitions: int) -> None:  # noqa: ANN001
    _lines(spark, messages, partitions).write.mode("overwrite").option("compression", "gzip").text(
        str(folder / "spark")
    )
    for n, part in enumerate(sorted((folder / "spark").glob("part-*.txt.gz"))):
        part.rename(folder / f"bench-{n:05d}.jsonl.gz")
    shutil.rmtree(folder / "spark")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--workdir", default="/tmp/pulsar-audit-bench")
    args = parser.parse_args()
    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    config = load_config("local", lakehouse=str(work / "lakehouse"))
    spark = get_spark(config)
    lakehouse = Lakehouse(spark, config)
    figures = {}
    started = time.monotonic()
    generate(spark, work / "traces", args.messages, args.partitions)
    figures["generate_s"] = time.monotonic() - started

    from ingest.traces import ingest_traces
    from pipelines.job import run_pipeline

    started = time.monotonic()
    report = ingest_traces(lakehouse, work / "traces")
    figures["ingest_s"] = time.monotonic() - started
    started = time.monotonic()
    run_pipeline(lakehouse, config)
    figures["pipeline_s"] = time.monotonic() - started
    summary = lakehouse.read("run_summary").first()
    total = figures["ingest_s"] + figures["pipeline_s"]
    print(f"messages            {args.messages}")
    print(f"trace records       {report.records} (accepted {report.accepted})")
    print(
        f"verdict             valid={summary.valid} lost={summary.lost} received={summary.received}"
    )
    for name, seconds in figures.items():
        print(f"{name:<19} {seconds:.1f}")
    print(f"messages/s (ingest+pipeline) {args.messages / total:,.0f}")


if __name__ == "__main__":
    main()
