"""Messages and deliveries → trace format v1.1 lines, written by Spark as gzip JSONL files
(or Parquet, the format's columnar form).

v1.1: every consumer event names its subscription's type; with `keys`, send, ack, nack and
receive events carry the message's key (a null field is left out of the line)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ingest.traces import write_columnar
from pulsar_audit.local_frames import local_frame
from simulate.consumers import READ_STEP_US, REDELIVERY_LAG, Consumer, read_start_us
from simulate.dispatch_keys import key_column
from simulate.plan import Plan

ZOOKEEPER_HOST = "zk-0"  # the one ZooKeeper of a simulated cluster (infra.ZOOKEEPER)


def producer_name(stream: Column | int, partitioned: bool) -> Column | str:
    if isinstance(stream, int):
        return f"p{stream}" if partitioned else "p1"
    return F.concat(F.lit("p"), stream.cast("string")) if partitioned else F.lit("p1")


def _ts(us: Column) -> Column:
    """Epoch milliseconds with microseconds, as a JSON number (no exponent)."""
    return (us.cast("decimal(20,0)") / F.lit(1000)).cast("decimal(20,3)")


def _common(plan: Plan, role: str) -> list[Column]:
    s = plan.scenario
    partition = F.col("stream") if s.partitions else F.lit(-1)
    return [
        F.lit(s.run_id).alias("run_id"),
        F.lit(s.topic).alias("topic"),
        F.lit(role).alias("role"),
        partition.cast("long").alias("partition"),
    ]


def producer_lines(messages: DataFrame, plan: Plan) -> DataFrame:
    """Two lines per message: its send and its ack or nack."""
    partitioned = bool(plan.scenario.partitions)
    client = producer_name(F.col("stream"), partitioned).alias("client")
    key = key_column(F.col("seq"), plan.scenario.keys).alias("key")
    send = F.struct(
        *_common(plan, "producer"),
        client,
        F.lit("send").alias("event"),
        _ts(F.col("send_us")).alias("ts"),
        F.col("seq").alias("seq"),
        key,
    )
    done = F.struct(
        *_common(plan, "producer"),
        client,
        F.col("outcome").alias("event"),
        _ts(F.col("done_us")).alias("ts"),
        F.col("seq").alias("seq"),
        F.col("ack_id.ledger_id").alias("ledger_id"),
        F.col("ack_id.entry_id").alias("entry_id"),
        F.when(F.col("outcome") == "ack", F.lit(-1)).alias("batch_index"),
        F.col("error").alias("error"),
        key,
    )
    return messages.select(F.explode(F.array(F.to_json(send), F.to_json(done))).alias("value"))


def consumer_lines(delivered: DataFrame, plan: Plan, consumer: Consumer, index: int) -> DataFrame:
    """One `receive` line per delivery, in its consumer's order (slot); `consumer` names it."""
    s = plan.scenario
    event_index = F.col("slot") * s.streams + F.col("stream")
    start = read_start_us(plan, index)
    receive = F.struct(
        *_common(plan, "consumer"),
        F.col("consumer").alias("client"),
        F.lit("receive").alias("event"),
        _ts(F.lit(start) + event_index * READ_STEP_US).alias("ts"),
        F.col("seq").alias("seq"),
        F.lit(consumer.subscription).alias("subscription"),
        producer_name(F.col("stream"), bool(s.partitions)).alias("producer"),
        "ledger_id",
        "entry_id",
        F.lit(-1).alias("batch_index"),
        "redelivery_count",
        event_index.cast("long").alias("event_index"),
        F.lit(consumer.subscription_type).alias("subscription_type"),
        key_column(F.col("seq"), s.keys).alias("key"),
    )
    return delivered.select(F.to_json(receive).alias("value"))


def end_event(plan: Plan, consumer: Consumer, index: int, client: str = "") -> dict[str, Any]:
    """The `end` of one client of `consumer`'s subscription (default: consumer.name)."""
    s = plan.scenario
    event_index = (2 * (2 * s.messages + REDELIVERY_LAG) + 2) * s.streams
    return {
        "run_id": s.run_id,
        "topic": s.topic,
        "role": "consumer",
        "client": client or consumer.name,
        "event": "end",
        "subscription": consumer.subscription,
        "subscription_type": consumer.subscription_type,
        "ts": (read_start_us(plan, index) + event_index * READ_STEP_US) / 1000,
        "event_index": event_index,
    }


def subscribe_event(plan: Plan, consumer: Consumer, index: int) -> dict[str, Any]:
    """The harness's `subscribe` line of a one-client subscription (a Reader, sub-1), just
    before its first read: a reader stuck at the first entry still shows in the trace."""
    s = plan.scenario
    return {
        "run_id": s.run_id,
        "topic": s.topic,
        "role": "consumer",
        "client": consumer.name,
        "event": "subscribe",
        "subscription": consumer.subscription,
        "subscription_type": consumer.subscription_type,
        "ts": (read_start_us(plan, index) - 1_000) / 1000,
        "event_index": -1,  # receives count from 0
    }


def run_events(plan: Plan) -> list[dict[str, Any]]:
    """The harness's `config` line and, per fault, a `chaos` line with phase "start" and, when
    the fault is undone in the run (bookies back, link healed), one with phase "end"."""
    s = plan.scenario
    base = {"run_id": s.run_id, "topic": s.topic, "role": "run", "client": "simulator"}
    config = {
        **base,
        "event": "config",
        "ts": (s.t0_us - 2 * s.session_timeout_us - 1_000_000) / 1000,
        "ensemble_size": s.ensemble,
        "write_quorum": s.write_quorum,
        "ack_quorum": s.ack_quorum,
        "brokers": s.brokers,
        "bookies": s.bookies,
        "deduplication": s.dedup,
        "scenario": s.name if s.name != "kill-bookies" else f"kill-bookies:{s.kill_count}",
        "seed": s.seed,
        "simulated": True,
    }
    chaos = []
    for f in plan.faults:
        fault = {**base, "event": "chaos", "action": f["action"], "target": f["target"]}
        chaos.append({**fault, "ts": f["ts_us"] / 1000, "phase": "start", **_start_details(f)})
        if f.get("end_us") is not None:
            chaos.append({**fault, "ts": f["end_us"] / 1000, "phase": "end", **_end_details(f)})
    return [config, *chaos]


def _start_details(fault: dict[str, Any]) -> dict[str, Any]:
    """What the harness adds to a fault's start (capture/chaos.py): the bundle unloaded
    (and, transferred, from and to which broker); a network fault's peers and how long it is
    held."""
    if fault["action"] in ("unload", "transfer"):
        bundle = {"bundle": fault["target"].rpartition("/")[2]}
        if fault["action"] == "transfer":
            bundle.update({"from": fault["broker"], "to": fault["new_owner"]})
        return bundle
    if not fault["action"].endswith("-from-zk"):
        return {}
    held = fault["end_us"] - fault["ts_us"]
    return {"from": ZOOKEEPER_HOST, "hold_s": round(held / 1e6, 3)}


def _end_details(fault: dict[str, Any]) -> dict[str, Any]:
    """What the harness reports when it undoes a fault: the link healed (the DROP rules both
    ways in both namespaces) or the bookies restarted."""
    if fault["action"].endswith("-from-zk"):
        return {"rules_removed": 4, "from": ZOOKEEPER_HOST}
    return {"restarted": True}


def write_trace(
    spark: SparkSession,
    lines: DataFrame,
    small: list[dict[str, Any]],
    out: Path,
    run_id: str,
    gzip: bool = True,
    columnar: bool = False,
) -> list[Path]:
    """Write `lines` plus the `small` driver-built events as trace-<run>-NNNNN.jsonl.gz files
    (`.jsonl`, uncompressed, when not `gzip`; `.parquet`, the format's columnar form, when
    `columnar`)."""
    extra = local_frame(spark, [(json.dumps(e),) for e in small], "value string")
    staging = out / "_spark"
    shutil.rmtree(staging, ignore_errors=True)
    every = lines.unionByName(extra)
    if columnar:  # parsed by ingest's own parser: a refused line is a simulator bug, said loudly
        return write_columnar(every, out, f"trace-{run_id}")
    compression = "gzip" if gzip else "none"
    every.write.mode("overwrite").option("compression", compression).text(str(staging))
    parts, suffix = sorted(staging.glob("part-*.txt*")), ".jsonl.gz" if gzip else ".jsonl"
    written = []
    for n, part in enumerate(parts):
        target = out / f"trace-{run_id}-{n:05d}{suffix}"
        part.rename(target)
        written.append(target)
    shutil.rmtree(staging)
    return written
