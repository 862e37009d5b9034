"""The duplicated-write detector: delivered messages stored under two or more MessageIds."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipelines.common import (
    BLOCK_KEY,
    SUBSCRIBED_MESSAGE,
    delivered_to,
    from_producer,
    plural,
    seq_range,
    to_anomalies,
    was_or_were,
    with_seq_block,
)


def run_deduplication(run_events: DataFrame) -> DataFrame:
    """(run_id, deduplication): true / false as the run's config events say; null if they
    do not say (a run without config event has no row)."""
    return (
        run_events.filter(F.col("event") == "config")
        .groupBy("run_id")
        .agg(F.bool_or("deduplication").alias("deduplication"))
    )


def _copy_text() -> Column:
    """Where copy k of a block lies: 'ledger 12 entries 5–9' or 'ledgers 12–14 (12:5 to 14:1)'."""
    lo, hi = F.col("lowest"), F.col("highest")
    one_ledger = F.when(
        lo["entry_id"] == hi["entry_id"],
        F.format_string("ledger %d entry %d", lo["ledger_id"], lo["entry_id"]),
    ).otherwise(
        F.format_string("ledger %d entries %d–%d", lo["ledger_id"], lo["entry_id"], hi["entry_id"])
    )
    several = F.format_string(
        "ledgers %d–%d (%d:%d to %d:%d)",
        lo["ledger_id"],
        hi["ledger_id"],
        lo["ledger_id"],
        lo["entry_id"],
        hi["ledger_id"],
        hi["entry_id"],
    )
    where = F.when(lo["ledger_id"] == hi["ledger_id"], one_ledger).otherwise(several)
    return F.format_string("copy %d at %s (%d acked)", F.col("k") + 1, where, F.col("acked"))


def _copies_by_block(with_block: DataFrame) -> DataFrame:
    """Per block: one text naming where each copy rank (1st, 2nd, ...) was stored."""
    copies = with_block.select(
        *BLOCK_KEY, "block", "ack_id", F.posexplode("copies").alias("k", "copy")
    )
    per_rank = copies.groupBy(*BLOCK_KEY, "block", "k").agg(
        F.min("copy").alias("lowest"),
        F.max("copy").alias("highest"),
        F.sum((F.col("copy") == F.col("ack_id")).cast("long")).alias("acked"),
    )
    return per_rank.groupBy(*BLOCK_KEY, "block").agg(
        F.array_join(
            F.transform(
                F.array_sort(F.collect_list(F.struct("k", _copy_text().alias("text")))),
                lambda rank: rank["text"],
            ),
            "; ",
        ).alias("copies_text")
    )


def detect_duplicated(message_history: DataFrame, deduplication: DataFrame) -> DataFrame:
    """Messages delivered to a subscription and stored under ≥ 2 MessageIds; count = messages.

    A block's time is when it was written twice: from the first send to the last ack (the
    second copy is stored after the failover that made the producer send again, so that is
    where its cause lies). Without producer events (a consumer-only trace), the deliveries'
    to the subscription. Read from silver.message_history alone (its `copies` and
    `subscriptions`): no scan of silver.delivery.
    """
    with_block = with_seq_block(
        delivered_to(message_history.filter(F.size("copies") >= 2)).select(
            *SUBSCRIBED_MESSAGE,
            "copies",
            "ack_id",
            F.coalesce("send_ts", "ack_ts", "first_ts").alias("first_ts"),
            F.coalesce("ack_ts", "send_ts", "last_ts").alias("last_ts"),
            F.lit("duplicated").alias("kind"),
        ),
        BLOCK_KEY,
    )
    blocks = (
        with_block.groupBy(*BLOCK_KEY, "block")
        .agg(
            F.min("seq").alias("seq_from"),
            F.max("seq").alias("seq_to"),
            F.count("*").alias("count"),
            F.min("first_ts").alias("first_ts"),
            F.max("last_ts").alias("last_ts"),
            F.min(F.size("copies")).alias("fewest"),
            F.max(F.size("copies")).alias("most"),
        )
        .join(_copies_by_block(with_block), [*BLOCK_KEY, "block"], how="inner")
        .join(F.broadcast(deduplication), ["run_id"], how="left")
    )
    times = (
        F.when(F.col("most") == 2, "twice")
        .when(F.col("fewest") == F.col("most"), F.format_string("%d times", F.col("most")))
        .otherwise(F.format_string("%d–%d times", F.col("fewest"), F.col("most")))
    )
    # What the data shows about deduplication; the cause of the second send is only named by
    # the correlated infrastructure events (`causes`), never assumed here.
    why = (
        F.when(
            F.col("deduplication"),
            "although deduplication is on for this run; why it did not drop the second copy is "
            "unknown unless a cause is listed",
        )
        .when(
            ~F.col("deduplication"),
            "deduplication is off for this run, so each send of the same message is stored; "
            "why the producer sent it again is unknown unless a cause is listed",
        )
        .otherwise(
            "the trace does not say whether deduplication was on; the cause is unknown unless "
            "a cause is listed"
        )
    )
    explanation = F.format_string(
        "%s (%s) %s, delivered to subscription %s, %s stored %s: %s — %s",
        plural("count", "message", "messages"),
        seq_range(),
        from_producer(),
        F.col("subscription"),
        was_or_were("count"),
        times,
        F.col("copies_text"),
        why,
    )
    return to_anomalies(blocks.withColumn("explanation", explanation))
