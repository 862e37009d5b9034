"""The ground truth of a simulated run: what `analyze --json` must report, and why.

Computed in Spark from the simulator's own per-message facts (what was stored where, what was
acked, what each consumer got) — not from the trace, and not with the product's detectors —
then collected as small aggregates: counts per subscription, anomaly blocks, outages.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from pulsar_audit.kinds import RUN_COUNTS, VIOLATION_KINDS
from simulate.plan import Plan

COUNT_FIELDS = RUN_COUNTS


def iso(us: int) -> str:
    return datetime.fromtimestamp(us / 1_000_000, UTC).isoformat().replace("+00:00", "Z")


def nearest_step(duration_ms: float, ladder: list[int]) -> int:
    """1-based index of the nearest ladder value (the lower on a tie), as `analyze` reports."""
    return min(range(len(ladder)), key=lambda i: (abs(duration_ms - ladder[i]), i)) + 1


def labels(messages: DataFrame, delivered: DataFrame, subscription: str, ended: bool) -> DataFrame:
    """(stream, seq, kind) for every anomalous message of one subscription."""
    got = delivered.groupBy("stream", "seq").agg(
        F.count("*").alias("deliveries"), F.countDistinct("ledger_id", "entry_id").alias("ids")
    )
    joined = messages.select("stream", "seq", "outcome", F.size("copies").alias("stored")).join(
        got, ["stream", "seq"], how="left"
    )
    is_acked, is_got = F.col("outcome") == "ack", F.col("deliveries").isNotNull()
    kinds = F.array_compact(
        F.array(
            F.when(is_acked & ~is_got, F.lit("lost" if ended else "unseen")),
            F.when(is_got & ~is_acked, F.lit("unacked_received")),
            F.when(is_got & (F.col("stored") >= 2), F.lit("duplicated")),
            F.when(is_got & (F.col("deliveries") > F.col("ids")), F.lit("redelivered")),
        )
    )
    return joined.select("stream", "seq", F.explode(kinds).alias("kind")).withColumn(
        "subscription", F.lit(subscription)
    )


def out_of_order(delivered: DataFrame, subscription: str, kind: str = "out_of_order") -> DataFrame:
    """(stream, seq, kind, subscription) for each first receipt by a consumer of a seq lower
    than the one that consumer got just before (a repeat is a redelivery, not a reordering).

    kind: "shared_reordered" on a Shared subscription, which promises no order."""
    in_order = W.partitionBy("stream", "consumer").orderBy("slot").rowsBetween(-1, -1)
    same_seq = W.partitionBy("stream", "consumer", "seq").rowsBetween(
        W.unboundedPreceding, W.unboundedFollowing
    )
    walked = delivered.select(
        "stream",
        "seq",
        "slot",
        F.lag("seq").over(in_order).alias("previous_seq"),
        F.min("slot").over(same_seq).alias("first_slot"),
    )
    is_first_receipt = F.col("slot") == F.col("first_slot")
    return walked.filter((F.col("seq") < F.col("previous_seq")) & is_first_receipt).select(
        "stream",
        "seq",
        F.lit(kind).alias("kind"),
        F.lit(subscription).alias("subscription"),
    )


def redispatched(delivered: DataFrame) -> set[tuple[int, int]]:
    """(stream, seq) delivered again after a consumer left: a receiver queue's worth per
    stream (dispatch.UNACKED_WINDOW, plus what a Key_Shared join took back), small enough to
    collect."""
    again = delivered.filter(F.col("redelivery_count") > 0)
    return {(r.stream, r.seq) for r in again.select("stream", "seq").collect()}


def nonmonotonic_sends(messages: DataFrame) -> DataFrame:
    """A later send stored under a lower MessageId (a producer-side kind: no subscription).

    The simulator stores each stream's messages in send order, so there are none: the
    harness recording an ack callback before the previous one (`callback_reorder_every`,
    `ack_recorded_after_next`) is acks arriving out of order, not a non-monotonic send
    (Jepsen's definition is by send order; issue 26)."""
    return messages.filter(F.lit(False)).select(
        "stream",
        "seq",
        F.lit("nonmonotonic_send").alias("kind"),
        F.lit(None).cast("string").alias("subscription"),
    )


def poll_skips(
    copies: DataFrame, delivered: DataFrame, unreadable: Column, subscription: str
) -> DataFrame:
    """Unreadable copies a skipping reader jumped over: between its first and last delivery
    (a jump needs a delivery before and after it to be seen)."""
    span = (
        delivered.filter(F.col("redelivery_count") == 0)
        .groupBy("stream")
        .agg((F.min("slot") / 2).alias("first_pos"), (F.max("slot") / 2).alias("last_pos"))
    )
    return (
        copies.join(F.broadcast(span), ["stream"], how="inner")
        .filter(
            unreadable & (F.col("pos") > F.col("first_pos")) & (F.col("pos") < F.col("last_pos"))
        )
        .select(
            "stream",
            "seq",
            F.lit("poll_skip").alias("kind"),
            F.lit(subscription).alias("subscription"),
        )
        .distinct()
    )


def received(delivered: DataFrame, subscription: str) -> DataFrame:
    """One row: (subscription, received) — distinct messages delivered."""
    return (
        delivered.select("stream", "seq")
        .distinct()
        .agg(F.count("*").alias("received"))
        .select(F.lit(subscription).alias("subscription"), "received")
    )


def blocks(labels: DataFrame) -> list[dict[str, Any]]:
    """Contiguous seq ranges per (subscription, stream, kind), collected (small).

    dense_rank, as the product's blocks: two consumers' labels on one seq stay one block."""
    order = (
        W.partitionBy("subscription", "stream", "kind")
        .orderBy("seq")
        .rowsBetween(W.unboundedPreceding, W.currentRow)
    )
    grouped = (
        labels.withColumn("block", F.col("seq") - F.dense_rank().over(order))
        .groupBy("subscription", "stream", "kind", "block")
        .agg(
            F.min("seq").alias("seq_from"),
            F.max("seq").alias("seq_to"),
            F.count("*").alias("count"),
        )
    )
    return [
        r.asDict()
        for r in grouped.drop("block")
        .orderBy("subscription", "kind", "stream", "seq_from")
        .collect()
    ]


def outages(
    messages: DataFrame, plan: Plan, threshold_ms: int, ladder: list[int]
) -> list[dict[str, Any]]:
    """Stretches ≥ threshold between consecutive completions while messages were pending.

    Only the messages around an owner change can have one (the producer otherwise always has a
    message in flight and completes one per send interval), so only those are looked at.
    """
    s = plan.scenario
    windows = [
        (p.stream, max(0, p.a - 3), p.a + p.pre + s.in_flight + 3) for p in plan.streams if p.pre
    ]
    if not windows:
        return []
    near = F.lit(False)
    for stream, lo, hi in windows:
        near = near | ((F.col("stream") == stream) & (F.col("seq") >= lo) & (F.col("seq") < hi))
    order = W.partitionBy("stream").orderBy("done_us", "seq").rowsBetween(-1, -1)
    gaps = (
        messages.filter(near)
        .select("stream", "seq", "done_us", F.lag("done_us").over(order).alias("previous_us"))
        .filter((F.col("done_us") - F.col("previous_us")) >= threshold_ms * 1000)
        .orderBy("stream", "done_us")
        .collect()
    )
    found = []
    for row in gaps:
        duration = (row.done_us - row.previous_us) / 1000
        found.append(
            {
                "stream": row.stream,
                "start": iso(row.previous_us),
                "end": iso(row.done_us),
                "duration_ms": duration,
                "backoff_step": nearest_step(duration, ladder),
                "ended_by_seq": row.seq,
            }
        )
    return found


def valid(row: dict[str, Any], dedup: bool, all_ended: bool) -> str:
    """The verdict the product's documented rules give for these true counts: false on any
    violation kind (information kinds such as shared_reordered never make it false)."""
    violated = any(row[kind] for kind in VIOLATION_KINDS)
    if violated or (row["duplicated"] and dedup):
        return "false"
    return "true" if all_ended else "unknown"
