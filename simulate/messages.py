"""Per-message truth, generated in Spark from the plan: one row per (stream, seq).

Every column is a closed-form function of (stream, seq) and the stream's plan row (a
broadcast join on `stream`), so nothing per message ever reaches the driver and the same
seed gives the same rows. See `plan.py` for the model.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_audit.local_frames import local_frame
from simulate.backoff import latency_column
from simulate.plan import BURST_STEP_US, LEDGER_BASE, Plan

# A stored copy: the MessageId and its place in the stream's storage order (a reader's order).
COPY = T.StructType(
    [
        T.StructField("ledger_id", T.LongType(), False),
        T.StructField("entry_id", T.LongType(), False),
        T.StructField("ledger_index", T.LongType(), False),
        T.StructField("pos", T.LongType(), False),
    ]
)


def stream_plans(spark: SparkSession, plan: Plan) -> DataFrame:
    """The plan's per-stream numbers as a tiny DataFrame (one row per stream)."""
    rows = [
        (
            p.stream,
            p.a,
            p.written,
            p.t_reconnect,
            p.pre,
            p.resent,
            p.new_lo,
            p.t_resume,
            p.epoch0_ledgers,
        )
        for p in plan.streams
    ]
    schema = (
        "stream long, a long, written long, t_reconnect long, pre long, resent long, "
        "new_lo long, t_resume long, epoch0_ledgers long"
    )
    return local_frame(spark, rows, schema)


def _copy(plan: Plan, ledger_index: Column, entry: Column, pos: Column) -> Column:
    streams = plan.scenario.streams
    ledger_id = F.lit(LEDGER_BASE) + ledger_index * F.lit(streams) + F.col("stream")
    return F.struct(
        ledger_id.cast("long").alias("ledger_id"),
        entry.cast("long").alias("entry_id"),
        ledger_index.cast("long").alias("ledger_index"),
        pos.cast("long").alias("pos"),
    )


def build_messages(spark: SparkSession, plan: Plan, partitions: int | None = None) -> DataFrame:
    """One row per message: send_us, done_us, outcome, error, ack_id, copies (stored MessageIds).

    partitions: Spark partitions of the generated range (default: one per 250k messages).
    """
    s = plan.scenario
    total = s.messages * s.streams
    parts = partitions or max(2, total // 250_000)
    ids = spark.range(0, total, numPartitions=parts).select(
        (F.col("id") % s.streams).alias("stream"),
        (F.col("id") / s.streams).cast("long").alias("seq"),
    )
    joined = ids.join(F.broadcast(stream_plans(spark, plan)), ["stream"], how="inner")
    return joined.transform(lambda df: with_timing(df, plan)).transform(
        lambda df: with_storage(df, plan)
    )


def with_timing(df: DataFrame, plan: Plan) -> DataFrame:
    """send_us, done_us, outcome, error and the flags the storage step needs."""
    s = plan.scenario
    d, window, timeout = s.interval_us, s.in_flight, s.send_timeout_us
    seq, a, pre = F.col("seq"), F.col("a"), F.col("pre")
    lat = latency_column(s.seed, F.col("stream"), seq, s.latency_us, d)
    r = seq - a
    i, k = r % window, F.floor(r / window)
    nominal_i = F.lit(s.t0_us) + (a + i) * d
    chunks_i = F.floor((F.col("t_reconnect") - nominal_i) / timeout)
    is_before, is_pre = seq < a, (seq >= a) & (seq < a + pre)
    timed_out = is_pre & (k < chunks_i)
    resent = is_pre & ~timed_out
    burst_ack = F.col("t_reconnect") + s.latency_us + (r - (pre - F.col("resent"))) * BURST_STEP_US
    burst_end = F.col("t_reconnect") + s.latency_us + (F.col("resent") - 1) * BURST_STEP_US
    send = (
        F.when(is_before, F.lit(s.t0_us) + seq * d)
        .when(is_pre, nominal_i + k * timeout)
        .otherwise(F.col("t_resume") + (seq - a - pre) * d)
    )
    done = (
        F.when(is_before, send + lat)
        .when(timed_out, send + timeout)
        .when(resent, burst_ack)
        .otherwise(F.greatest(send + lat, burst_end + BURST_STEP_US))
    )
    every = s.callback_reorder_every
    if every:  # the harness records the second ack of a pair just before the first
        pair_second = is_before & (seq % every == every - 1) & (seq >= 1)
        previous_ack = (
            F.lit(s.t0_us)
            + (seq - 1) * d
            + latency_column(s.seed, F.col("stream"), seq - 1, s.latency_us, d)
        )
        done = F.when(pair_second & (seq < a - 1), previous_ack - 1).otherwise(done)
    reordered_first = (seq % every == every - 2) & (seq + 1 < a - 1) if every else F.lit(False)
    return df.select(
        "*",
        send.cast("long").alias("send_us"),
        done.cast("long").alias("done_us"),
        F.when(timed_out, "nack").otherwise("ack").alias("outcome"),
        F.when(timed_out, "Timeout").alias("error"),
        is_before.alias("before_fault"),
        reordered_first.alias("ack_recorded_after_next"),
        resent.alias("resend"),
    )


def with_storage(df: DataFrame, plan: Plan) -> DataFrame:
    """copies (array of COPY, storage order) and ack_id (null on a nack; −1:−1 if dropped)."""
    s = plan.scenario
    per = s.entries_per_ledger
    seq = F.col("seq")
    in_epoch0 = seq < F.col("a") + F.col("written")
    in_epoch1 = seq >= F.col("new_lo")
    offset1 = seq - F.col("new_lo")
    copy0 = _copy(plan, F.floor(seq / per), seq % per, seq)
    copy1 = _copy(
        plan,
        F.col("epoch0_ledgers") + F.floor(offset1 / per),
        offset1 % per,
        F.col("a") + F.col("written") + offset1,
    )
    none = F.array().cast(T.ArrayType(COPY))
    copies = F.concat(
        F.when(in_epoch0, F.array(copy0)).otherwise(none),
        F.when(in_epoch1, F.array(copy1)).otherwise(none),
    )
    dropped = F.col("resend") & F.lit(s.dedup) & in_epoch0 & ~in_epoch1
    no_id = F.struct(
        F.lit(-1).cast("long").alias("ledger_id"), F.lit(-1).cast("long").alias("entry_id")
    )
    ack_id = (
        F.when(F.col("outcome") == "nack", F.lit(None))
        .when(
            F.col("before_fault"),
            F.struct(copy0["ledger_id"].alias("ledger_id"), copy0["entry_id"].alias("entry_id")),
        )
        .when(dropped, no_id)
        .otherwise(
            F.struct(copy1["ledger_id"].alias("ledger_id"), copy1["entry_id"].alias("entry_id"))
        )
    )
    return df.select(
        "stream",
        "seq",
        "send_us",
        "done_us",
        "outcome",
        "error",
        ack_id.alias("ack_id"),
        copies.alias("copies"),
        dropped.alias("dedup_dropped"),
        "ack_recorded_after_next",
    )
