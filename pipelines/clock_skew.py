"""Clock skew: estimate each host's offset from happenings seen from two sides.

The trace's timestamps are the clients' clock, so that is the reference. A broker closing a
producer ("Disconnecting producer") is seen by the client a moment later ("Schedule
reconnection"); a broker taking a bundle ("Successfully acquired ownership") is seen by the
ZooKeeper capture as the ownership znode appearing. For each broker host, the median of
(broker time − reference time) over such pairs is its offset; events are corrected by it.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from pulsar_audit.schemas import CLOCK_OFFSETS, conform

# (event seen on the host to correct, the same happening seen on the reference clock, key)
PAIRS = [
    ("producer_disconnected", "client_reconnect_scheduled", "topic"),
    ("bundle_ownership_acquired", "zk_bundle_owned", "bundle"),
]
MAX_PAIR_GAP_MS = 5000
MIN_MATCHES = 1


def _pairs(events: DataFrame, host_type: str, ref_type: str, key: str) -> DataFrame:
    host_side = events.filter(F.col("event_type") == host_type).select(
        F.col("event_id").alias("host_event"),
        "host",
        F.col(key).alias("key"),
        F.unix_micros("ts").alias("host_us"),
    )
    ref_side = events.filter(F.col("event_type") == ref_type).select(
        F.col(key).alias("key"),
        F.unix_micros("ts").alias("ref_us"),
    )
    joined = (
        host_side.join(ref_side, on="key", how="inner")
        .withColumn("delta_ms", (F.col("host_us") - F.col("ref_us")) / F.lit(1000.0))
        .filter(F.abs("delta_ms") <= MAX_PAIR_GAP_MS)
    )
    nearest = (
        W.partitionBy("host_event")
        .orderBy(F.abs("delta_ms"), "ref_us")
        .rowsBetween(W.unboundedPreceding, W.currentRow)
    )
    return (
        joined.withColumn("_n", F.row_number().over(nearest))
        .filter(F.col("_n") == 1)
        .select("host", "delta_ms", F.lit(f"{host_type}~{ref_type}").alias("pairing"))
    )


def estimate_offsets(events: DataFrame) -> DataFrame:
    """One CLOCK_OFFSETS row per host with paired events: offset, matches, spread."""
    pairs = None
    for host_type, ref_type, key in PAIRS:
        part = _pairs(events, host_type, ref_type, key)
        pairs = part if pairs is None else pairs.unionByName(part)
    offsets = pairs.groupBy("host").agg(
        F.percentile_approx("delta_ms", 0.5).alias("offset_ms"),
        F.count("*").alias("matches"),
        (F.max("delta_ms") - F.min("delta_ms")).alias("spread_ms"),
        F.array_join(F.array_sort(F.collect_set("pairing")), ",").alias("pairings"),
    )
    return conform(offsets.filter(F.col("matches") >= MIN_MATCHES), CLOCK_OFFSETS)


def with_corrected_ts(events: DataFrame, offsets: DataFrame) -> DataFrame:
    """Set `corrected_ts` = ts − the host's offset (ts itself where no offset is known)."""
    shift = offsets.select("host", F.col("offset_ms").alias("_offset_ms"))
    corrected = F.timestamp_micros(
        F.unix_micros("ts") - F.round(F.coalesce("_offset_ms", F.lit(0.0)) * 1000).cast("long")
    )
    return (
        events.join(F.broadcast(shift), on="host", how="left")
        .withColumn("corrected_ts", corrected)
        .drop("_offset_ms")
        .select(*events.columns)
    )
