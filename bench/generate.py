"""Generate a trace (format v1) of N messages per run with injected anomalies, in Spark.

    .venv/bin/python -m bench.generate --messages 100000 --seed 7 --out /tmp/bench/traces
        [--runs 2] [--run-prefix bench] [--gzip]

Per-message data never reaches the driver: spark.range → one JSON line per event (to_json) →
text part files renamed to PREFIX-NNNNN.jsonl[.gz]. Only the few run-level events (config,
chaos, each consumer's `end`) are written by the driver, to PREFIX-harness.jsonl. The output
is a function of (messages, runs, seed, run-prefix) alone.

Layout of each run (message m of N goes to stream m % 9 with seq m // 9):
- streams 0–7: partitioned topic `orders`, partitions 0–3, producers p1 and p2 on each;
  subscription sub-a read by ca1 (partitions 0, 1) and ca2 (partitions 2, 3), both ended.
- stream 8: non-partitioned topic `audit`, sole producer p3 (its receives omit `producer`);
  sub-a read by ca3 (ended) and sub-b read by cb1, which has no `end` and stops before the
  last 0.5 % of the messages (unseen).
Injected per message (rate per million, plus one forced copy of each kind at seq 10, 16, …
of every stream so that small traces have each): see KIND_RATES. Producer stalls (outages):
in each block of 1,000 seqs of a stream, with probability 30 % (always in block 0 of stream
0), the acks of the messages sent from seq 150 of the block on stall for ~100/300/700 ms
(+5–40 ms), then all complete at once.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import time
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

T0_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
RUN_SPACING_MS = 86_400_000  # one day per run: 10⁸ messages take ~6 h of trace time
SEND_INTERVAL_MS = 2
RECEIVE_DELAY_MS = 4
PARTITIONED_TOPIC = "persistent://bench/default/orders"
PLAIN_TOPIC = "persistent://bench/default/audit"
STREAMS = 9  # 8 on the partitioned topic (4 partitions × 2 producers), 1 on the plain topic
PLAIN = STREAMS - 1
SUB_A, SUB_B = "sub-a", "sub-b"
UNENDED_CONSUMER = "cb1"
OUTAGE_BLOCK = 1_000
OUTAGE_OFFSET = 150
OUTAGE_PERCENT = 30
OUTAGE_STEPS_MS = [100, 300, 700]
# Kinds of message, by code (0 = normal). Rates are per million messages.
KIND_RATES = {
    "lost": 500,  # acked, delivered to no subscription
    "reordered": 1000,  # delivered right after the next seq
    "dup_delivered": 300,  # delivered to sub-a again under a second MessageId
    "dup_acked": 200,  # acked twice under two MessageIds, delivered under the first
    "redelivered": 500,  # delivered to sub-a twice under the same MessageId
    "nacked_delivered": 200,  # nacked to the producer, delivered all the same
    "unacked_delivered": 200,  # never acked nor nacked, delivered
    "nacked": 200,  # nacked, not delivered
    "lost_sub_a": 200,  # acked, delivered to sub-b only (plain topic; lost on the other)
    "unseen_sub_b": 1000,  # acked, delivered to sub-a only (plain topic; normal on the other)
}
KIND_CODE = {name: code for code, name in enumerate(KIND_RATES, start=1)}
FORCED_FIRST_SEQ, FORCED_STEP = 10, 6


def _hash_unit(seed: int, *parts: Column | int, modulo: int) -> Column:
    """A deterministic pseudo-random integer in [0, modulo) for `parts` under `seed`."""
    cols = [p if isinstance(p, Column) else F.lit(p) for p in parts]
    return F.pmod(F.xxhash64(F.lit(seed), *cols), F.lit(modulo))


def _div(col: Column, by: int) -> Column:
    return F.floor(col / F.lit(by)).cast("long")


def _kind(seed: int, run: Column, s: Column, q: Column) -> Column:
    """The injected kind's code for message (run, stream s, seq q)."""
    u = _hash_unit(seed, run, s, q, 1, modulo=1_000_000)
    kind = F.when(F.lit(False), F.lit(0))
    for code in KIND_CODE.values():
        kind = kind.when(q == FORCED_FIRST_SEQ + FORCED_STEP * (code - 1), F.lit(code))
    bound = 0
    for name, rate in KIND_RATES.items():
        bound += rate
        kind = kind.when(u < bound, F.lit(KIND_CODE[name]))
    return kind.otherwise(F.lit(0))


class Clock:
    """Per (run, stream) timestamps in epoch ms as Column functions of a seq Column."""

    def __init__(self, seed: int, run: Column, s: Column):
        self.seed, self.run, self.s = seed, run, s
        self.base = F.lit(T0_MS) + run * F.lit(RUN_SPACING_MS)

    def send(self, q: Column) -> Column:
        return self.base + q * F.lit(SEND_INTERVAL_MS)

    def done(self, q: Column) -> Column:
        """When the message's ack (or nack) arrives: 1–3 ms after its send, or at the end of
        its block's stall when it was sent during one."""
        block = _div(q, OUTAGE_BLOCK)
        stalls = (
            _hash_unit(self.seed, self.run, self.s, block, 2, modulo=100) < OUTAGE_PERCENT
        ) | ((block == 0) & (self.s == 0))
        steps = F.array(*[F.lit(step) for step in OUTAGE_STEPS_MS])
        step = F.element_at(
            steps, (_hash_unit(self.seed, self.run, self.s, block, 3, modulo=3) + 1).cast("int")
        )
        stall_ms = step + 5 + _hash_unit(self.seed, self.run, self.s, block, 4, modulo=36)
        first = block * OUTAGE_BLOCK + OUTAGE_OFFSET
        # Sends go on every 2 ms during the stall: those of seqs first .. first + ⌈stall/2⌉ − 1.
        stalled = stalls & (q >= first) & (q < first + _div(stall_ms + 1, 2))
        latency = 1 + _hash_unit(self.seed, self.run, self.s, q, 5, modulo=3)
        return F.when(stalled, self.send(first) + stall_ms).otherwise(self.send(q) + latency)

    def receive(self, q: Column) -> Column:
        return self.done(q) + RECEIVE_DELAY_MS


def _messages(spark: SparkSession, messages: int, runs: int, prefix: str) -> DataFrame:
    total = messages * runs
    parts = max(2, math.ceil(total / 250_000))
    ids = spark.range(0, total, numPartitions=parts)
    run = _div(F.col("id"), messages)
    m = F.pmod(F.col("id"), F.lit(messages))
    s = F.pmod(m, F.lit(STREAMS))
    plain = s == PLAIN
    return ids.select(
        run.alias("run"),
        F.concat(F.lit(f"{prefix}-"), F.lpad(run.cast("string"), 3, "0")).alias("run_id"),
        s.alias("s"),
        _div(m, STREAMS).alias("q"),
        F.when(plain, PLAIN_TOPIC).otherwise(PARTITIONED_TOPIC).alias("topic"),
        F.when(~plain, _div(s, 2).cast("int")).alias("partition"),
        F.when(plain, "p3").when(F.pmod(s, F.lit(2)) == 0, "p1").otherwise("p2").alias("producer"),
        F.when(plain, "ca3").when(s < 4, "ca1").otherwise("ca2").alias("consumer_a"),
    )


def _json(
    role: str, client: Column, event: str, ts: Column, event_index: Column, **fields
) -> Column:
    """One trace line; fields that are null are left out of the JSON."""
    return F.to_json(
        F.struct(
            F.col("run_id").alias("run_id"),
            F.col("topic").alias("topic"),
            F.lit(role).alias("role"),
            client.alias("client"),
            F.lit(event).alias("event"),
            ts.alias("ts"),
            F.col("q").alias("seq"),
            F.col("partition").alias("partition"),
            *[value.alias(name) for name, value in fields.items()],
            event_index.alias("event_index"),
        )
    )


def _with_times(seed: int, rows: DataFrame) -> DataFrame:
    """Add `kind`, then each timestamp the message's events need (computed once per row)."""
    run, s, q = F.col("run"), F.col("s"), F.col("q")
    clock = Clock(seed, run, s)
    kind = F.col("kind")
    return rows.withColumn("kind", _kind(seed, run, s, q)).select(
        "*",
        clock.send(q).alias("send_ts"),
        clock.done(q).alias("done_ts"),
        # Where an extra or moved delivery goes: after seq q+1, q+2 or q+3's delivery.
        F.when(kind == KIND_CODE["reordered"], clock.receive(q + 1)).alias("reorder_ts"),
        F.when(kind == KIND_CODE["redelivered"], clock.receive(q + 2)).alias("redeliver_ts"),
        F.when(kind == KIND_CODE["dup_delivered"], clock.receive(q + 3)).alias("copy_ts"),
    )


def _lines(seed: int, rows: DataFrame, messages: int) -> DataFrame:
    """Every event of every message, one JSON text per row (`value`)."""
    s, q = F.col("s"), F.col("q")
    is_kind = {name: F.col("kind") == code for name, code in KIND_CODE.items()}
    producer = F.col("producer")
    plain = s == PLAIN

    def p_index(k: int) -> Column:  # unique per producer client: 3 slots per (seq, stream)
        return (q * STREAMS + s) * 3 + k

    def c_index(slot: Column, k: int) -> Column:  # unique per consumer client: 4 per slot
        return (slot * STREAMS + s) * 4 + k

    ledger = F.lit(10_000) + s * 10_000 + _div(q, 100_000)
    entry = F.pmod(q, F.lit(100_000))
    first_id = {"ledger_id": ledger, "entry_id": entry}
    second_id = {"ledger_id": F.lit(5_000_000) + s, "entry_id": q}
    acked = ~(is_kind["nacked_delivered"] | is_kind["unacked_delivered"] | is_kind["nacked"])
    nacked = is_kind["nacked_delivered"] | is_kind["nacked"]
    to_a = ~(is_kind["lost"] | is_kind["nacked"] | is_kind["lost_sub_a"])
    tail = max(1, (messages // STREAMS) // 200)
    to_b = (
        plain
        & ~(is_kind["lost"] | is_kind["nacked"] | is_kind["unseen_sub_b"])
        & (q < F.lit(messages // STREAMS - tail))
    )
    # A reordered delivery takes the next seq's place, right after it (k = 1).
    reordered = is_kind["reordered"]
    slot_ts = F.when(reordered, F.col("reorder_ts")).otherwise(F.col("done_ts") + RECEIVE_DELAY_MS)
    slot_index = F.when(reordered, c_index(q + 1, 1)).otherwise(c_index(q, 0))
    sent_by = F.when(~plain, producer)  # the plain topic's receives omit their sole producer

    def receive(consumer: Column, subscription: str, ts: Column, index: Column, **ids) -> Column:
        return _json(
            "consumer",
            consumer,
            "receive",
            ts,
            index,
            subscription=F.lit(subscription),
            producer=sent_by,
            **ids,
        )

    consumer_a = F.col("consumer_a")
    done = F.col("done_ts")
    events = [
        _json("producer", producer, "send", F.col("send_ts"), p_index(0)),
        F.when(acked, _json("producer", producer, "ack", done, p_index(1), **first_id)),
        F.when(
            nacked,
            _json("producer", producer, "nack", done, p_index(1), error=F.lit("Timeout")),
        ),
        F.when(
            is_kind["dup_acked"],
            _json("producer", producer, "ack", done, p_index(2), **second_id),
        ),
        F.when(to_a, receive(consumer_a, SUB_A, slot_ts, slot_index, **first_id)),
        F.when(
            is_kind["redelivered"],
            receive(
                consumer_a,
                SUB_A,
                F.col("redeliver_ts"),
                c_index(q + 2, 2),
                **first_id,
                redelivery_count=F.lit(1),
            ),
        ),
        F.when(
            is_kind["dup_delivered"],
            receive(consumer_a, SUB_A, F.col("copy_ts"), c_index(q + 3, 3), **second_id),
        ),
        F.when(to_b, receive(F.lit(UNENDED_CONSUMER), SUB_B, slot_ts, slot_index, **first_id)),
    ]
    return _with_times(seed, rows).select(
        F.explode(F.array_compact(F.array(*events))).alias("value")
    )


def _harness_events(messages: int, runs: int, prefix: str) -> list[dict]:
    """Per run: the config, one chaos event, and the `end` of every consumer but cb1."""
    per_stream = messages // STREAMS + 1
    out = []
    for run in range(runs):
        run_id = f"{prefix}-{run:03d}"
        base = T0_MS + run * RUN_SPACING_MS
        end_ts = base + SEND_INTERVAL_MS * (per_stream + 20) + 10_000
        end_index = (per_stream + 10) * STREAMS * 4
        common = {"run_id": run_id, "role": "run", "client": "harness"}
        out.append(
            {
                **common,
                "topic": PARTITIONED_TOPIC,
                "event": "config",
                "ts": base - 1_000,
                "ensemble_size": 3,
                "write_quorum": 2,
                "ack_quorum": 2,
                "brokers": 2,
                "bookies": 3,
                "deduplication": False,
                "scenario": "bench",
                "event_index": 0,
            }
        )
        out.append(
            {
                **common,
                "topic": PARTITIONED_TOPIC,
                "event": "chaos",
                "ts": base + SEND_INTERVAL_MS * per_stream // 2,
                "action": "unload",
                "target": "bench/default/0x00000000_0x40000000",
                "event_index": 1,
            }
        )
        for topic, consumer in (
            (PARTITIONED_TOPIC, "ca1"),
            (PARTITIONED_TOPIC, "ca2"),
            (PLAIN_TOPIC, "ca3"),
        ):
            out.append(
                {
                    "run_id": run_id,
                    "topic": topic,
                    "role": "consumer",
                    "client": consumer,
                    "event": "end",
                    "ts": end_ts,
                    "subscription": SUB_A,
                    "event_index": end_index,
                }
            )
    return out


def generate(
    spark: SparkSession,
    out: Path,
    messages: int,
    seed: int = 1,
    runs: int = 1,
    prefix: str = "bench",
    gzip: bool = False,
) -> list[Path]:
    """Write the trace under `out` (files of the same prefix are replaced); return the files."""
    if messages < 1 or runs < 1:
        raise ValueError(f"messages and runs must be >= 1, got {messages} and {runs}")
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob(f"{prefix}-*.jsonl*"):
        old.unlink()
    staging = out / f".{prefix}-spark"
    shutil.rmtree(staging, ignore_errors=True)
    lines = _lines(seed, _messages(spark, messages, runs, prefix), messages)
    lines.write.text(str(staging), compression="gzip" if gzip else "none")
    suffix = ".jsonl.gz" if gzip else ".jsonl"
    files = []
    for n, part in enumerate(sorted(staging.glob("part-*"))):
        target = out / f"{prefix}-{n:05d}{suffix}"
        part.rename(target)
        files.append(target)
    shutil.rmtree(staging)
    harness = out / f"{prefix}-harness.jsonl"
    harness.write_text(
        "".join(
            json.dumps(e, separators=(",", ":")) + "\n"
            for e in _harness_events(messages, runs, prefix)
        )
    )
    return [*files, harness]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=float, required=True, help="messages per run (1e6 ok)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", required=True, help="folder for the trace files")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--run-prefix", default="bench", help="run ids are PREFIX-000, PREFIX-001, …"
    )
    parser.add_argument("--gzip", action="store_true", help="write *.jsonl.gz instead of *.jsonl")
    args = parser.parse_args(argv)

    from bench.spark_session import local_spark

    started = time.monotonic()
    spark = local_spark(Path(args.out).parent / ".bench-spark")
    files = generate(
        spark, Path(args.out), int(args.messages), args.seed, args.runs, args.run_prefix, args.gzip
    )
    spark.stop()
    size = sum(f.stat().st_size for f in files)
    print(
        f"wrote {len(files)} files, {size / 1e6:,.1f} MB, {int(args.messages) * args.runs:,} "
        f"messages in {time.monotonic() - started:.1f} s to {args.out}"
    )


if __name__ == "__main__":
    main()
