"""Which readers the poll skip must check exactly (`pipelines.detect_order.detect_poll_skip`).

The exact checks join every delivery with the stored MessageIds' ranks and walk each reader's
deliveries (and, where several consumers of a subscription read one partition, each one's
view). Most readers read every stored MessageId of their range in storage order and cannot
have jumped; one sort of each reader's deliveries and two rank look-ups per reader clear
them, so that the exact checks run for the others alone.
"""

from __future__ import annotations

from typing import NamedTuple

from pyspark.sql import DataFrame, Row
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from pipelines.common import ID, READER, TOPIC_PARTITION
from pulsar_audit.local_frames import local_frame

PARTITION_FIELDS = "run_id string, topic string, partition int"


class Suspect(NamedTuple):
    """A reader of a partition that may have jumped, with its deliveries' subscriptions."""

    run_id: str
    topic: str
    partition: int
    consumer: str
    subscriptions: list[str]


def suspect_readers(delivery: DataFrame, ranks: DataFrame) -> list[Suspect]:
    """The readers of a partition that may have jumped over a stored MessageId, with every
    subscription their deliveries there with a whole MessageId name; no other reader can
    have, alone or sharing a subscription. Two Spark jobs (a sort of every delivery, a scan
    of the ranks) whose collected results are small: one row per reader, then at most two
    rank rows per reader; no per-message rows.

    A delivery advances when its MessageId is above every one the consumer got before on the
    partition (its first one does). Advancing MessageIds rise strictly and lie between the
    lowest and the highest the reader got, so there are at most as many as the stored
    MessageIds (dense ranks) from the lowest to the highest. A reader is cleared when there
    are exactly that many and its deliveries there name one subscription. Then it got every
    stored MessageId of that span in storage order, the lowest first: its furthest rank never
    rose by more than one (no jump alone), and in its view of a shared partition every
    MessageId between two of its own deliveries came to it before the later one (no jump
    there either). One subscription, because the exact check of a reader alone in its
    subscriptions walks it across them, and a reader split in one subscription and alone in
    another is checked in both ways: with one, all of its deliveries are in one group, alone
    or shared. A reader whose lowest or highest MessageId is not among `ranks` stays a
    suspect (the exact checks then judge it).

    delivery: the deliveries the poll skip reads; ranks: `ranked_ids` of message history,
    which must hold every stored MessageId a delivery names (silver builds message history
    from the same deliveries): a middle MessageId missing from it would count as an advance
    here and be left out of the exact checks' joins. Deliveries without a whole stored
    MessageId are not counted, as those joins leave them out too."""
    message_id = F.struct(*ID)
    before = W.partitionBy(*READER).orderBy("delivery_index").rowsBetween(W.unboundedPreceding, -1)
    whole = (
        (F.col("ledger_id") >= 0) & F.col("entry_id").isNotNull() & F.col("batch_index").isNotNull()
    )
    reads = delivery.filter(whole).select(
        *READER,
        "subscription",
        message_id.alias("id"),
        F.max(message_id).over(before).alias("furthest"),
    )
    advancing = F.col("furthest").isNull() | (F.col("id") > F.col("furthest"))
    reach = (
        reads.groupBy(*READER)
        .agg(
            F.count(F.when(advancing, 1)).alias("advances"),
            F.min("id").alias("lowest"),
            F.max("id").alias("highest"),
            F.array_sort(F.collect_set("subscription")).alias("subscriptions"),
        )
        .collect()
    )
    rank = _ranks_of(ranks, {(*r[:3], *end) for r in reach for end in (r.lowest, r.highest)})

    def cleared(r: Row) -> bool:
        low, high = rank.get((*r[:3], *r.lowest)), rank.get((*r[:3], *r.highest))
        if low is None or high is None or len(r.subscriptions) != 1:
            return False
        return r.advances == high - low + 1

    return [Suspect(*r[:4], r.subscriptions) for r in reach if not cleared(r)]


def _ranks_of(ranks: DataFrame, ids: set[tuple]) -> dict[tuple, int]:
    """{(run_id, topic, partition, ledger_id, entry_id, batch_index): rank} of `ids`, those
    that are among `ranks`."""
    if not ids:
        return {}
    wanted = local_frame(
        ranks.sparkSession,
        ids,
        f"{PARTITION_FIELDS}, ledger_id bigint, entry_id bigint, batch_index int",
    )
    found = (
        ranks.join(F.broadcast(wanted), [*TOPIC_PARTITION, *ID], how="left_semi")
        .select(*TOPIC_PARTITION, *ID, "rank")
        .distinct()
        .collect()
    )
    return {tuple(r[:6]): r["rank"] for r in found}
