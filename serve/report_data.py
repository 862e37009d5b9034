"""What the HTML report plots, aggregated in Spark to a bounded number of points.

Per-message rows never leave Spark: the time series has at most MAX_SLICES points, the ledger
map at most `max_cells` cells per anomaly kind, whatever the size of the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pulsar_audit.errors import InputError

# Rate slices: a round width (1 ms .. 1 h) giving about TARGET_SLICES slices over a short run
# and 1 s slices over a long one (up to MAX_SLICES of them), never fewer than
# MIN_SENDS_PER_SLICE sends in an average slice, so that a rate is not one batch's noise.
TARGET_SLICES = 100
MAX_SLICES = 3600
LONG_RUN_SLICE_US = 1_000_000
MIN_SENDS_PER_SLICE = 10
ROUND_WIDTHS_MS = (
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000,
    120_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000,
)  # fmt: skip
MAP_CELLS = 500
MARGIN = timedelta(seconds=2)
MAX_MARKERS = 300
MAX_FINDINGS = 200
MAP_KINDS = ("lost", "duplicated", "out_of_order", "redelivered", "poll_skip")
STREAM = ["run_id", "topic", "partition", "producer"]
# Infrastructure events worth a marker on the timeline (others stay in `explain`).
MARKER_EVENTS = (
    "bundle_unload_requested",
    "bundle_unload_started",
    "bundle_unload_finished",
    "bundle_ownership_acquired",
    "bundle_ownership_released",
    "bundle_ownership_lost",
    "topic_unloading",
    "topic_loaded",
    "topic_fenced",
    "ledger_created",
    "ledger_closed",
    "ledger_recovery",
    "new_ensemble",
    "bookie_lost",
    "bookie_replaced",
    "bookie_registered",
    "broker_lost",
    "broker_registered",
    "zk_session_lost",
)


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime
    sends: int = 0

    @property
    def width_us(self) -> int:
        span = int((self.end - self.start) / timedelta(microseconds=1))
        return max(1, span)


def run_window(producer_events: DataFrame, run_id: str) -> Window:
    """First and last producer event of the run, and how many sends it made."""
    is_send = F.col("event") == "send"
    span = (
        producer_events.filter(F.col("run_id") == run_id)
        .agg(
            F.min("ts").alias("start"),
            F.max("ts").alias("end"),
            F.count(F.when(is_send, 1)).alias("sends"),
        )
        .first()
    )
    if span is None or span["start"] is None:
        raise InputError(f"run {run_id!r} has no producer events in this lakehouse")
    return Window(span["start"], span["end"], span["sends"])


def slice_width_us(window: Window) -> int:
    """The rate slices' width in µs: the smallest round width that gives about TARGET_SLICES
    slices (1 s ones once a run is longer), at most MAX_SLICES and at least
    MIN_SENDS_PER_SLICE sends in an average slice (1 h slices past all that)."""
    span = window.width_us
    wanted_us = max(
        span / MAX_SLICES,
        min(LONG_RUN_SLICE_US, span / TARGET_SLICES),
        span * MIN_SENDS_PER_SLICE / max(1, window.sends),
    )
    fits = [ms for ms in ROUND_WIDTHS_MS if ms * 1000 >= wanted_us]
    return (fits[0] if fits else ROUND_WIDTHS_MS[-1]) * 1000


def _slice(ts: Column, window: Window, width_us: int) -> Column:
    """0, 1, ...: which slice of `width_us` from the run's start `ts` falls in."""
    offset = F.unix_micros(ts) - F.lit(int(window.start.timestamp() * 1e6))
    return F.floor(offset / F.lit(width_us)).cast("long")


def time_series(
    message_history: DataFrame, run_id: str, window: Window, width_us: int
) -> list[dict[str, Any]]:
    """Per time slice of `width_us`: sends, acks, their rates per second, ack latency p50 /
    p99 / max. Sends are counted at their send time, acks and latency at their ack time.
    """
    run = message_history.filter(F.col("run_id") == run_id)
    sends = run.filter(F.col("send_ts").isNotNull()).select(
        _slice(F.col("send_ts"), window, width_us).alias("b"),
        F.lit(1).alias("send"),
        F.lit(0).alias("ack"),
        F.lit(None).cast("double").alias("latency"),
    )
    acks = run.filter(F.col("acked") & F.col("ack_ts").isNotNull()).select(
        _slice(F.col("ack_ts"), window, width_us).alias("b"),
        F.lit(0).alias("send"),
        F.lit(1).alias("ack"),
        F.col("ack_latency_ms").alias("latency"),
    )
    per_bucket = (
        sends.unionByName(acks)
        .groupBy("b")
        .agg(
            F.sum("send").alias("sends"),
            F.sum("ack").alias("acks"),
            F.percentile_approx("latency", [0.5, 0.99], 1000).alias("pct"),
            F.max("latency").alias("max_ms"),
        )
        .orderBy("b")
    )
    found = {r["b"]: r for r in per_bucket.collect()}
    last = max(found, default=-1)
    rows = []
    # Slices with no send and no ack are rates of zero, not gaps to draw a line across.
    for b in range(last + 1):
        r = found.get(b)
        sends, acks = (r["sends"], r["acks"]) if r else (0, 0)
        pct = (r["pct"] if r else None) or [None, None]
        rows.append(
            {
                "t": window.start + timedelta(microseconds=b * width_us + width_us / 2),
                "sends": sends,
                "acks": acks,
                "send_rate": sends / (width_us / 1e6),
                "ack_rate": acks / (width_us / 1e6),
                "p50_ms": pct[0],
                "p99_ms": pct[1],
                "max_ms": r["max_ms"] if r else None,
            }
        )
    return rows


def ledger_map(
    anomalies: DataFrame, message_history: DataFrame, run_id: str, max_cells: int = MAP_CELLS
) -> list[dict[str, Any]]:
    """Where anomalous messages were stored: (kind, ledger, entry slice) → count of copies.

    Each message of an anomaly block counts at every MessageId it was stored under (its ack's
    when no copy was delivered); entries are sliced so each kind has at most ~max_cells cells.
    """
    blocks = anomalies.filter((F.col("run_id") == run_id) & F.col("kind").isin(*MAP_KINDS))
    in_block = (F.col("m.seq") >= F.col("a.seq_from")) & (F.col("m.seq") <= F.col("a.seq_to"))
    same_stream = [F.col(f"m.{c}") == F.col(f"a.{c}") for c in STREAM]
    condition = in_block
    for clause in same_stream:
        condition &= clause
    messages = message_history.filter(F.col("run_id") == run_id).alias("m")
    joined = messages.join(F.broadcast(blocks.alias("a")), condition, how="inner")
    positions = F.when(F.size("m.copies") > 0, F.col("m.copies")).otherwise(
        F.array(F.col("m.ack_id"))
    )
    stored = joined.select(F.col("a.kind").alias("kind"), F.explode(positions).alias("id")).filter(
        F.col("id.ledger_id").isNotNull()
    )
    widest = stored.agg(F.max("id.entry_id").alias("m")).first()["m"]
    if widest is None:
        return []
    width = max(1, -(-(int(widest) + 1) // max_cells))
    cells = (
        stored.groupBy(
            "kind",
            F.col("id.ledger_id").alias("ledger_id"),
            F.floor(F.col("id.entry_id") / width).alias("slice"),
        )
        .agg(
            F.count("*").alias("count"),
            F.min("id.entry_id").alias("entry_from"),
            F.max("id.entry_id").alias("entry_to"),
        )
        .orderBy("kind", "ledger_id", "slice")
    )
    return [r.asDict() for r in cells.drop("slice").collect()]


def markers(
    infra_events: DataFrame, run_events: DataFrame, run_id: str, window: Window
) -> list[dict[str, Any]]:
    """Infrastructure events near the run (corrected clock) and the run's chaos actions."""
    lo, hi = window.start - MARGIN, window.end + MARGIN
    infra = infra_events.filter(
        F.col("corrected_ts").between(lo, hi) & F.col("event_type").isin(*MARKER_EVENTS)
    ).select(
        F.col("corrected_ts").alias("ts"),
        "event_type",
        "source",
        "host",
        F.coalesce("detail", F.substring("raw", 1, 160)).alias("detail"),
    )
    chaos = run_events.filter((F.col("run_id") == run_id) & (F.col("event") == "chaos")).select(
        "ts",
        F.concat(F.lit("chaos: "), F.coalesce("action", F.lit("?"))).alias("event_type"),
        F.lit("trace").alias("source"),
        F.col("client").alias("host"),
        F.concat_ws(" ", "action", "target").alias("detail"),
    )
    merged = chaos.unionByName(infra).orderBy("ts", "event_type").limit(MAX_MARKERS)
    return [r.asDict() for r in merged.collect()]


def _rows(df: DataFrame, order: list[str], limit: int) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.orderBy(*order).limit(limit).collect()]


def report_data(read: Any, run_id: str) -> dict[str, Any]:
    """Everything the report shows about `run_id`; read: table name → DataFrame."""
    window = run_window(read("producer_events"), run_id)
    width_us = slice_width_us(window)
    of_run = F.col("run_id") == run_id
    history = read("message_history")
    anomalies = read("anomalies")
    run_events = read("run_events").filter(of_run)
    return {
        "run_id": run_id,
        "window": window,
        "summary": _rows(read("run_summary").filter(of_run), ["topic", "subscription"], 100),
        "slice_ms": width_us / 1000,
        "series": time_series(history, run_id, window, width_us),
        "outages": _rows(read("outages").filter(of_run), ["start"], MAX_FINDINGS),
        "markers": markers(read("infra_events"), read("run_events"), run_id, window),
        "ledger_map": ledger_map(anomalies, history, run_id),
        "anomalies": _rows(anomalies.filter(of_run), ["kind", "seq_from"], MAX_FINDINGS),
        "config": _rows(run_events.filter(F.col("event") == "config").drop("extra"), ["ts"], 20),
        "checks": _rows(
            read("check_results").filter(of_run),
            ["table", "expectation", "column"],
            MAX_FINDINGS,
        ),
        # what a watch has raised so far (empty unless one has run): open, confirmed, withdrawn
        "provisional": _rows(
            read("provisional").filter(of_run),
            ["first_seen_batch", "kind", "seq_from", "started_at"],
            MAX_FINDINGS,
        ),
    }
