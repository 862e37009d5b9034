"""Clock skew: estimate each host's offset from happenings seen from two sides.

The trace's timestamps are the clients' clock, and so are the client logs': that is the
reference. A broker closing a producer ("Disconnecting producer") is seen by its client a
moment later ("Schedule reconnection"): the median of (broker time − client time) over such
pairs is the broker host's offset. A broker taking a bundle is seen in ZooKeeper as the
ownership znode appearing: once brokers are corrected, the same median gives the ZooKeeper
host's offset. Hosts without pairs keep their own clock and are marked "uncorrected", so a
cause that is only a few ms away on such a host can be called uncertain.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from pulsar_audit.schemas import CLOCK_OFFSETS, conform

REFERENCE, CORRECTED, UNCORRECTED = "reference", "corrected", "uncorrected"
REFERENCE_SOURCES = ("client",)
MAX_PAIR_GAP_MS = 5000


class Pairing:
    """The same happening seen on a host to correct (`host_*`) and on a trusted clock (`ref_*`)."""

    def __init__(
        self, host_event: str, host_source: str, ref_event: str, ref_source: str, key: str
    ):
        self.host_event, self.host_source = host_event, host_source
        self.ref_event, self.ref_source = ref_event, ref_source
        self.key = key

    @property
    def name(self) -> str:
        return f"{self.host_source}:{self.host_event}~{self.ref_source}:{self.ref_event}"


BROKER_PAIRINGS = [
    Pairing("producer_disconnected", "broker", "client_reconnect_scheduled", "client", "topic"),
]
ZOOKEEPER_PAIRINGS = [
    Pairing(
        "bundle_ownership_acquired", "zookeeper", "bundle_ownership_acquired", "broker", "bundle"
    ),
]


def _side(events: DataFrame, event_type: str, source: str) -> DataFrame:
    return events.filter((F.col("event_type") == event_type) & (F.col("source") == source))


def _pairs(events: DataFrame, pairing: Pairing) -> DataFrame:
    """(host, delta_ms): each host-side event against its nearest reference-side event."""
    host_side = _side(events, pairing.host_event, pairing.host_source).select(
        F.col("event_id").alias("host_event"),
        "host",
        F.col(pairing.key).alias("key"),
        F.unix_micros("ts").alias("host_us"),
    )
    ref_side = _side(events, pairing.ref_event, pairing.ref_source).select(
        F.col(pairing.key).alias("key"),
        F.unix_micros("corrected_ts").alias("ref_us"),
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
        .select("host", "delta_ms", F.lit(pairing.name).alias("pairing"))
    )


def _offsets(events: DataFrame, pairings: list[Pairing]) -> DataFrame:
    pairs = None
    for pairing in pairings:
        part = _pairs(events, pairing)
        pairs = part if pairs is None else pairs.unionByName(part)
    offsets = pairs.groupBy("host").agg(
        F.percentile_approx("delta_ms", 0.5).alias("offset_ms"),
        F.count("*").alias("matches"),
        (F.max("delta_ms") - F.min("delta_ms")).alias("spread_ms"),
        F.array_join(F.array_sort(F.collect_set("pairing")), ",").alias("pairings"),
    )
    return conform(offsets, CLOCK_OFFSETS)


def estimate_offsets(events: DataFrame) -> DataFrame:
    """One CLOCK_OFFSETS row per host with paired events: brokers first, then ZooKeeper."""
    brokers = _offsets(events, BROKER_PAIRINGS)
    zookeeper = _offsets(with_corrected_ts(events, brokers), ZOOKEEPER_PAIRINGS)
    return brokers.unionByName(zookeeper.join(brokers.select("host"), "host", how="left_anti"))


def with_corrected_ts(events: DataFrame, offsets: DataFrame) -> DataFrame:
    """Set `corrected_ts` = ts − the host's offset, and `clock` to how far it can be trusted."""
    shift = offsets.select("host", F.col("offset_ms").alias("_offset_ms"))
    corrected = F.timestamp_micros(
        F.unix_micros("ts") - F.round(F.coalesce("_offset_ms", F.lit(0.0)) * 1000).cast("long")
    )
    clock = (
        F.when(F.col("source").isin(*REFERENCE_SOURCES), F.lit(REFERENCE))
        .when(F.col("_offset_ms").isNotNull(), F.lit(CORRECTED))
        .otherwise(F.lit(UNCORRECTED))
    )
    return (
        events.join(F.broadcast(shift), on="host", how="left")
        .withColumns({"corrected_ts": corrected, "clock": clock})
        .drop("_offset_ms")
        .select(*events.columns)
    )


HOUR_MS = 3_600_000


def whole_hour_offsets(events: DataFrame, pairings: list[Pairing] | None = None) -> DataFrame:
    """Hosts whose paired events are a whole number of hours (± MAX_PAIR_GAP_MS) off.

    Such pairs never reach `estimate_offsets` (it keeps pairs a few seconds apart): a whole
    number of hours usually means log timestamps without an offset read in the wrong time
    zone (`ingest logs --tz`), on the client's side or the host's. Out: host, hours, matches.
    """
    pairs = None
    for pairing in pairings or BROKER_PAIRINGS:
        host_side = _side(events, pairing.host_event, pairing.host_source).select(
            F.col("event_id").alias("host_event"),
            "host",
            F.col(pairing.key).alias("key"),
            F.unix_micros("ts").alias("host_us"),
        )
        ref_side = _side(events, pairing.ref_event, pairing.ref_source).select(
            F.col(pairing.key).alias("key"), F.unix_micros("ts").alias("ref_us")
        )
        delta_ms = (F.col("host_us") - F.col("ref_us")) / F.lit(1000.0)
        hours = F.round(delta_ms / F.lit(HOUR_MS)).cast("int")
        part = (
            host_side.join(ref_side, on="key", how="inner")
            .select(
                "host_event",
                "host",
                hours.alias("hours"),
                (delta_ms - hours * HOUR_MS).alias("rest"),
            )
            .filter((F.col("hours") != 0) & (F.abs("rest") <= MAX_PAIR_GAP_MS))
        )
        pairs = part if pairs is None else pairs.unionByName(part)
    # one host event may fall near several reference events: it counts once
    return pairs.groupBy("host", "hours").agg(F.count_distinct("host_event").alias("matches"))


def describe_whole_hour_offset(host: str, hours: int, matches: int) -> str:
    """The warning for one host whose clock looks a whole number of hours off."""
    sign = "ahead of" if hours > 0 else "behind"
    return (
        f"{host}'s log times are {abs(hours)} h {sign} the client logs' in {matches} paired "
        "event(s): a whole number of hours usually means timestamps without an offset were "
        "read in the wrong time zone (check `ingest logs --tz` for the client and BookKeeper "
        "logs)"
    )
