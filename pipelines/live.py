"""Provisional findings of `watch` (issue 29): what a run still being written already shows,
judged from the same silver and gold the batch detectors build, and their lifecycle.

Time here is the trace's own clock: a run's `now` is the latest event of any of its clients,
so a replayed trace gives the same findings as a live one. Pure transforms; jobs/live.py reads
and writes.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipelines.common import no_causes, seq_blocks, seq_range, stable_id, to_millis
from pipelines.detect_outages import STREAM
from pulsar_audit.schemas import PROVISIONAL, conform

OPEN, CONFIRMED, WITHDRAWN = "open", "confirmed", "withdrawn"
SUSPECTED_LOSS, OUTAGE_IN_PROGRESS = "suspected_loss", "outage_in_progress"
# Batch kind → the provisional kind it confirms (an outage: any gold.outages row), and the
# batch kinds that say a suspected loss's messages are still missing.
CONFIRMING = {"lost": SUSPECTED_LOSS, "duplicated": "duplicated", "out_of_order": "out_of_order"}
STILL_MISSING = {"unseen": SUSPECTED_LOSS, "lost": SUSPECTED_LOSS}
SEEN_AS_THEY_ARE = ("duplicated", "out_of_order")
FINDING_KEY = ["run_id", "topic", "subscription", "partition", "producer"]
# Provisional kind → the batch kind whose cause rules rank it (pipelines/correlate.py).
RANKED_AS = {
    SUSPECTED_LOSS: "lost",
    OUTAGE_IN_PROGRESS: "outage",
    **{kind: kind for kind in SEEN_AS_THEY_ARE},
}


def run_clock(producer_events: DataFrame, consumer_events: DataFrame) -> DataFrame:
    """(run_id, now): the latest event of the run, producers' and consumers' alike."""
    return (
        producer_events.select("run_id", "ts")
        .unionByName(consumer_events.select("run_id", "ts"))
        .groupBy("run_id")
        .agg(F.max("ts").alias("now"))
    )


def ended_runs(subscriptions: DataFrame) -> DataFrame:
    """(run_id): runs whose every traced consumer has written its `end` event.

    subscriptions: `pipelines.silver.subscriptions` of the runs."""
    traced = subscriptions.filter(F.col("subscription") != "")
    return (
        traced.groupBy("run_id").agg(F.bool_and("all_ended").alias("ended")).filter("ended")
    ).select("run_id")


def suspected_losses(awaiting: DataFrame, clock: DataFrame, threshold_ms: int) -> DataFrame:
    """Blocks of acked messages a subscription has not got (`watch`'s LIVE_AWAITING rows,
    what the batch detector calls `unseen`), while it got later messages of the same producer
    and partition over `threshold_ms` ago. Columns: the finding's key, seqs, started_at,
    explanation."""
    later = (
        seq_blocks(
            awaiting.withColumn("kind", F.lit(SUSPECTED_LOSS)),
            F.min("first_ts").alias("first_ts"),
            F.max_by("passed_at", "seq").alias("later_delivered"),
        )
        .filter(F.col("later_delivered").isNotNull())
        .join(clock, ["run_id"], how="inner")
    )
    waited_ms = to_millis(F.col("later_delivered"), F.col("now"))
    explanation = F.format_string(
        "acked messages %s from producer %s not delivered to subscription %s, while it has "
        "had later messages of that producer and partition for %.0f ms (suspected loss: "
        "confirmed if the run ends without them, withdrawn if they arrive)",
        seq_range(),
        F.col("producer"),
        F.col("subscription"),
        waited_ms,
    )
    return later.filter(waited_ms >= threshold_ms).select(
        F.lit(SUSPECTED_LOSS).alias("kind"),
        *FINDING_KEY,
        "seq_from",
        "seq_to",
        F.col("first_ts").alias("started_at"),
        explanation.alias("explanation"),
    )


def outages_in_progress(streams: DataFrame, clock: DataFrame, step_ms: int) -> DataFrame:
    """Producers with messages in flight and no completion for `step_ms` or more up to the
    producer's own latest event folded: the stretch gold.outages will hold once a completion
    ends it (same counting, pipelines/detect_outages.py). streams: `watch`'s LIVE_STREAMS rows
    (pipelines/live_state.py); clock: (run_id, now), for a stream whose latest event is not
    known (a state written before `seen_until`); step_ms: the client's first reconnect
    backoff step.

    Not the run's `now`: each client rolls its own files, so a consumer's later file can be
    folded before the producer's, whose completions are then not known yet."""
    open_now = (
        streams.filter(F.col("in_flight") > 0)
        .withColumn("started_at", F.greatest("last_completion", "last_rise"))
        .join(clock, ["run_id"], how="inner")
    )
    waited_ms = to_millis(F.col("started_at"), F.coalesce("seen_until", "now"))
    explanation = F.format_string(
        "producer %s has had %d message(s) in flight and none completed for %.0f ms so far "
        "(outage in progress)",
        F.col("producer"),
        F.col("in_flight"),
        waited_ms,
    )
    return open_now.filter(waited_ms >= step_ms).select(
        F.lit(OUTAGE_IN_PROGRESS).alias("kind"),
        *STREAM,
        F.lit(None).cast("string").alias("subscription"),
        F.lit(None).cast("long").alias("seq_from"),
        F.lit(None).cast("long").alias("seq_to"),
        "started_at",
        explanation.alias("explanation"),
    )


def awaited(awaiting: DataFrame) -> DataFrame:
    """LIVE_AWAITING rows in `as_provisional`'s shape: what a suspected loss still misses."""
    return awaiting.select(
        F.lit(SUSPECTED_LOSS).alias("kind"),
        *FINDING_KEY,
        F.col("seq").alias("seq_from"),
        F.col("seq").alias("seq_to"),
        F.col("first_ts").alias("start"),
        F.col("ack_ts").alias("end"),
        F.lit(None).cast("double").alias("duration_ms"),
        F.lit(None).cast("string").alias("batch_id"),
    )


def seen_as_they_are(anomalies: DataFrame) -> DataFrame:
    """Duplicates and out-of-order deliveries: provisional as soon as the detectors see them."""
    return anomalies.filter(F.col("kind").isin(*SEEN_AS_THEY_ARE)).select(
        "kind",
        *FINDING_KEY,
        "seq_from",
        "seq_to",
        F.col("first_ts").alias("started_at"),
        "explanation",
    )


def _first_seen(found: DataFrame, batch_id: int) -> DataFrame:
    """`found` with its finding_id (the kind with where it starts, so the same finding seen
    again keeps its row) and when it was first seen."""
    starts = F.coalesce(F.col("seq_from").cast("string"), F.unix_micros("started_at"))
    return (
        found.withColumn("finding_id", stable_id("kind", *FINDING_KEY, starts))
        .withColumn("first_seen_batch", F.lit(batch_id).cast("long"))
        .withColumn("first_seen_at", F.current_timestamp())
    )


def opened(found: DataFrame, batch_id: int) -> DataFrame:
    """PROVISIONAL rows, open, for findings first seen in micro-batch `batch_id`."""
    return conform(
        _first_seen(found, batch_id)
        .withColumn("state", F.lit(OPEN))
        .withColumn("closed_batch", F.lit(None).cast("long"))
        .withColumn("closed_at", F.lit(None).cast("timestamp"))
        .withColumn("duration_ms", F.lit(None).cast("double"))
        .withColumn("resolved_by", F.lit(None).cast("string"))
        .withColumn("causes", no_causes())
        .withColumn("causes_batch", F.lit(None).cast("long")),
        PROVISIONAL,
    )


def seen_closed(closed: DataFrame, provisional: DataFrame, batch_id: int) -> DataFrame:
    """PROVISIONAL rows, confirmed at once, for the outages micro-batch `batch_id` closed
    that no provisional outage of the same producer stream holds: stretches that began and
    ended between two looks of the watch (inside one micro-batch, or between its latest
    event and the next one's), so they were never seen in progress. Each is confirmed by
    the very stretch (`resolved_by` its outage_id, gold.outages' once the run is analyzed).

    closed: OUTAGES rows the micro-batch's completions closed; provisional: the runs' rows."""
    known = provisional.filter(F.col("kind") == OUTAGE_IN_PROGRESS).select(*STREAM, "started_at")
    holds = F.col("k.started_at").between(F.col("c.start"), F.col("c.end"))
    for column in STREAM:
        holds = holds & (F.col(f"c.{column}") == F.col(f"k.{column}"))
    unseen = closed.alias("c").join(known.alias("k"), holds, how="left_anti")
    explanation = F.format_string(
        "producer %s had %d message(s) in flight and none completed for %.0f ms (%s to %s): "
        "an outage that began and ended between two looks of the watch, confirmed as seen",
        F.col("producer"),
        F.col("in_flight"),
        F.col("duration_ms"),
        F.date_format("start", "HH:mm:ss.SSS"),
        F.date_format("end", "HH:mm:ss.SSS"),
    )
    found = unseen.select(
        F.lit(OUTAGE_IN_PROGRESS).alias("kind"),
        *STREAM,
        F.lit(None).cast("string").alias("subscription"),
        F.lit(None).cast("long").alias("seq_from"),
        F.lit(None).cast("long").alias("seq_to"),
        F.col("start").alias("started_at"),
        explanation.alias("explanation"),
        "duration_ms",
        F.col("outage_id").alias("resolved_by"),
    )
    return conform(
        _first_seen(found, batch_id)
        .withColumn("state", F.lit(CONFIRMED))
        .withColumn("closed_batch", F.lit(batch_id).cast("long"))
        .withColumn("closed_at", F.current_timestamp())
        .withColumn("causes", no_causes())
        .withColumn("causes_batch", F.lit(None).cast("long")),
        PROVISIONAL,
    )


def as_findings(
    provisional: DataFrame, clock: DataFrame, streams: DataFrame | None = None
) -> DataFrame:
    """Open and confirmed provisional findings as the correlation's findings (finding_id,
    kind, topic, partition, start, end: `pipelines.correlate.rank_causes`), each ranked by the
    rules of the batch kind it stands for (RANKED_AS).

    An outage ends where its stretch ended once closed, and while it is in progress at its
    producer's latest event folded (streams: LIVE_STREAMS' `seen_until`; the window grows
    with the outage), else at its run's `now` (clock: run_id, now); a finding of messages
    spans its first message (a suspected loss gets the batch `lost`'s longer window after
    it). Withdrawn findings are not ranked."""
    ranked_as = F.create_map(*[F.lit(x) for pair in RANKED_AS.items() for x in pair])
    closed_end = F.timestamp_micros(
        F.unix_micros("started_at") + (F.col("duration_ms") * 1000).cast("long")
    )
    end = F.when(
        F.col("kind") == OUTAGE_IN_PROGRESS,
        F.coalesce(closed_end, "seen_until", "now", "started_at"),
    ).otherwise(F.col("started_at"))
    found = provisional.filter(
        F.col("state").isin(OPEN, CONFIRMED) & F.col("started_at").isNotNull()
    ).join(clock.select("run_id", "now"), ["run_id"], how="left")
    if streams is None:
        found = found.withColumn("seen_until", F.lit(None).cast("timestamp"))
    else:
        found = found.join(streams.select(*STREAM, "seen_until"), STREAM, how="left")
    return found.select(
        "finding_id",
        ranked_as[F.col("kind")].alias("kind"),
        "topic",
        "partition",
        F.col("started_at").alias("start"),
        end.alias("end"),
    )


def as_provisional(anomalies: DataFrame, kinds: dict[str, str]) -> DataFrame:
    """gold.anomalies of the batch kinds in `kinds` (batch kind → provisional kind), in the
    shape `resolved` matches against: kind, FINDING_KEY, seqs, start, end, duration_ms,
    batch_id."""
    provisional_kind = F.create_map(*[F.lit(x) for pair in kinds.items() for x in pair])
    return anomalies.filter(F.col("kind").isin(*kinds)).select(
        provisional_kind[F.col("kind")].alias("kind"),
        *FINDING_KEY,
        "seq_from",
        "seq_to",
        F.col("first_ts").alias("start"),
        F.col("last_ts").alias("end"),
        F.lit(None).cast("double").alias("duration_ms"),
        F.col("anomaly_id").alias("batch_id"),
    )


def batch_findings(anomalies: DataFrame, outages: DataFrame) -> DataFrame:
    """The batch findings that confirm a provisional one (`as_provisional` shape): the
    anomalies of CONFIRMING's kinds and every gold.outages row."""
    from_outages = outages.select(
        F.lit(OUTAGE_IN_PROGRESS).alias("kind"),
        "run_id",
        "topic",
        F.lit(None).cast("string").alias("subscription"),
        "partition",
        "producer",
        F.lit(None).cast("long").alias("seq_from"),
        F.lit(None).cast("long").alias("seq_to"),
        "start",
        "end",
        "duration_ms",
        F.col("outage_id").alias("batch_id"),
    )
    return as_provisional(anomalies, CONFIRMING).unionByName(from_outages)


def _same_finding() -> Column:
    """A batch finding `b` is the provisional finding `p`: same kind and place, and their
    seqs overlap (findings of messages) or the outage's stretch holds `p`'s start."""
    same_place = [F.col(f"p.{c}").eqNullSafe(F.col(f"b.{c}")) for c in ("kind", *FINDING_KEY)]
    seqs_overlap = (F.col("b.seq_from") <= F.col("p.seq_to")) & (
        F.col("p.seq_from") <= F.col("b.seq_to")
    )
    holds_start = F.col("p.seq_from").isNull() & F.col("p.started_at").between(
        F.col("b.start"), F.col("b.end")
    )
    condition = seqs_overlap | holds_start
    for clause in same_place:
        condition = clause & condition
    return condition


def _matching(open_rows: DataFrame, findings: DataFrame, flag: str) -> DataFrame:
    """(finding_id, <flag>, resolved_by, duration_ms) of the open rows some finding matches."""
    return (
        open_rows.alias("p")
        .join(findings.alias("b"), _same_finding(), how="inner")
        .groupBy("p.finding_id")
        .agg(
            F.lit(True).alias(flag),
            F.min("b.batch_id").alias("resolved_by"),
            F.max("b.duration_ms").alias("duration_ms"),
        )
    )


def resolved(
    provisional: DataFrame,
    confirming: DataFrame,
    still_missing: DataFrame,
    final: Column,
    batch_id: int,
) -> DataFrame:
    """The open provisional findings settled in micro-batch `batch_id`, as (finding_id,
    state, closed_batch, closed_at, duration_ms, resolved_by).

    confirming: `batch_findings`; a match confirms (an outage once acks resumed and the
    batch detector closed it, with its duration). still_missing: the `unseen` and `lost`
    blocks (`as_provisional(anomalies, STILL_MISSING)`): a suspected loss none holds any
    more was delivered after all, and is withdrawn. final: true for a row whose run ended;
    then every other open finding of it is withdrawn too."""
    open_rows = provisional.filter(F.col("state") == OPEN)
    missing = _matching(open_rows, still_missing, "missing").select("finding_id", "missing")
    settled = (
        open_rows.select("finding_id", "kind", final.alias("final"))
        .join(_matching(open_rows, confirming, "matched"), ["finding_id"], how="left")
        .join(missing, ["finding_id"], how="left")
    )
    is_loss = F.col("kind") == SUSPECTED_LOSS
    delivered = is_loss & F.col("missing").isNull()
    state = F.when(F.col("matched"), F.lit(CONFIRMED)).when(
        F.col("final") | delivered, F.lit(WITHDRAWN)
    )
    return (
        settled.withColumn("state", state)
        .filter(F.col("state").isNotNull())
        .select(
            "finding_id",
            "state",
            F.lit(batch_id).cast("long").alias("closed_batch"),
            F.current_timestamp().alias("closed_at"),
            F.when(F.col("matched"), F.col("duration_ms")).alias("duration_ms"),
            F.when(F.col("matched"), F.col("resolved_by")).alias("resolved_by"),
        )
    )


def watched_runs(runs: DataFrame, reconciled: DataFrame) -> DataFrame:
    """(run_id, now, reconciled_batch) of the runs a watch has folded and not reconciled
    since (live_runs, live_reconciled): those whose provisional findings can still gain
    causes live (those it settled at a reconciliation keep the batch finding's)."""
    return (
        runs.join(reconciled, ["run_id"], how="left")
        .filter(
            F.col("reconciled_batch").isNull() | (F.col("reconciled_batch") < F.col("folded_batch"))
        )
        .select("run_id", "now", "reconciled_batch")
    )


def ranked_live(provisional: DataFrame, watched: DataFrame) -> DataFrame:
    """The provisional findings whose causes the watch ranks: those of the watched runs
    (`watched_runs`) that are open, or were confirmed by a micro-batch after the run's last
    reconciliation."""
    settled_since = F.col("closed_batch") > F.coalesce("reconciled_batch", F.lit(-1))
    return (
        provisional.join(watched.select("run_id", "reconciled_batch"), ["run_id"], how="inner")
        .filter((F.col("state") == OPEN) | ((F.col("state") == CONFIRMED) & settled_since))
        .drop("reconciled_batch")
    )


def batch_causes(provisional: DataFrame, anomalies: DataFrame, outages: DataFrame) -> DataFrame:
    """(finding_id, causes): a confirmed provisional finding takes the causes of the batch
    finding that confirmed it (`resolved_by`), ranked from the whole run once it is analyzed."""
    confirming = anomalies.select(F.col("anomaly_id").alias("resolved_by"), "causes").unionByName(
        outages.select(F.col("outage_id").alias("resolved_by"), "causes")
    )
    return (
        provisional.filter(F.col("state") == CONFIRMED)
        .select("finding_id", "resolved_by")
        .join(confirming, ["resolved_by"], how="inner")
        .select("finding_id", "causes")
    )
