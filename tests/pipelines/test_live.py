"""pipelines/live.py on tiny literal frames: when an outage is in progress, and how the open
provisional findings are settled (the end-to-end lifecycle: tests/live/)."""

from __future__ import annotations

from pipeline_events import T0, MicroBatches, ack, at, send
from pyspark.sql import functions as F

from pipelines.live import (
    CONFIRMED,
    OPEN,
    WITHDRAWN,
    as_findings,
    batch_causes,
    opened,
    outages_in_progress,
    resolved,
    seen_closed,
    watched_runs,
)
from pulsar_audit.schemas import ANOMALIES, OUTAGES, PROVISIONAL

STEP_MS = 100
SHAPE = (
    "kind string, run_id string, topic string, subscription string, partition int, "
    "producer string, seq_from long, seq_to long, start timestamp, end timestamp, "
    "duration_ms double, batch_id string"
)
# LIVE_STREAMS of each case's events folded in as one micro-batch: the cases are the runs of
# one micro-batch, folded once (the `folds` fixture)
MICRO_BATCHES = MicroBatches()


def _clock(spark, now_ms: float, run_id: str = "r1"):  # noqa: ANN001, ANN202
    return spark.createDataFrame([(run_id, at(now_ms))], "run_id string, now timestamp")


def test_no_events_no_outage_in_progress(spark, nothing_folded) -> None:  # noqa: ANN001
    streams = nothing_folded.state.streams
    assert outages_in_progress(streams, _clock(spark, 0), STEP_MS).count() == 0


BACKING_OFF = [send(1, 0), ack(1, 2), send(2, 10), send(3, 20)]
IN_PROGRESS = MICRO_BATCHES.add("in_progress", BACKING_OFF)
RESUMED = MICRO_BATCHES.add("resumed", [*BACKING_OFF, ack(2, 300), ack(3, 301)])


def test_an_outage_is_in_progress_from_the_first_backoff_step_until_acks_resume(
    spark,  # noqa: ANN001
    folds,  # noqa: ANN001
) -> None:
    streams = folds(0, IN_PROGRESS).state.streams
    # the producer's latest event folded: its own clock
    assert [r.seen_until for r in streams.collect()] == [at(20)]
    # a run clock far later (a consumer's later file) is no evidence: the producer's
    # completions after 20 ms may be in its next file
    clock = _clock(spark, 10_000, IN_PROGRESS)
    assert outages_in_progress(streams, clock, STEP_MS).count() == 0

    def found(producer_ms: float | None) -> list[tuple]:
        seen = F.lit(None if producer_ms is None else at(producer_ms)).cast("timestamp")
        rows = outages_in_progress(
            streams.withColumn("seen_until", seen), _clock(spark, 110, IN_PROGRESS), STEP_MS
        ).collect()
        return [(r.kind, r.producer, r.started_at, r.explanation) for r in rows]

    assert found(109) == []
    # since the send that took in-flight from 0 to 1 (at 10), not the ack before it (at 2)
    in_progress = [
        (
            "outage_in_progress",
            "p1",
            at(10),
            "producer p1 has had 2 message(s) in flight and none completed for 100 ms so far "
            "(outage in progress)",
        )
    ]
    assert found(110) == in_progress
    assert found(None) == in_progress  # a state from before seen_until: the run's clock
    resumed = folds(0, RESUMED).state.streams
    assert outages_in_progress(resumed, _clock(spark, 900, RESUMED), STEP_MS).count() == 0


def _provisional(spark, *rows: tuple):  # noqa: ANN001, ANN202
    """(finding_id, kind, seq_from, started_ms, state) → PROVISIONAL rows of run r1."""
    full = [
        (fid, kind, "r1", "t", None if seq is None else "s1", -1, "p1", seq, seq, at(ms), 0, T0)
        + (state, None, None, None, None, "x", [], None)
        for fid, kind, seq, ms, state in rows
    ]
    return spark.createDataFrame(full, PROVISIONAL)


def _found(spark, *rows: tuple):  # noqa: ANN001, ANN202
    """(kind, seq, start_ms, end_ms, duration_ms, batch_id) in `as_provisional`'s shape."""
    full = [
        (kind, "r1", "t", None if seq is None else "s1", -1, "p1", seq, seq, at(start), at(end))
        + (duration, batch_id)
        for kind, seq, start, end, duration, batch_id in rows
    ]
    return spark.createDataFrame(full, SHAPE)


def test_open_findings_are_confirmed_withdrawn_or_left_open(spark) -> None:
    provisional = _provisional(
        spark,
        ("lost-10", "suspected_loss", 10, 0, OPEN),
        ("late-5", "suspected_loss", 5, 0, OPEN),
        ("arrived-7", "suspected_loss", 7, 0, OPEN),
        ("outage", "outage_in_progress", None, 400, OPEN),
        ("dup-3", "duplicated", 3, 0, OPEN),
        ("settled", "suspected_loss", 8, 0, WITHDRAWN),
    )
    confirming = _found(
        spark,
        ("suspected_loss", 10, 0, 0, None, "anomaly-lost"),
        ("outage_in_progress", None, 400, 800, 400.0, "outage-1"),
        ("suspected_loss", 8, 0, 0, None, "anomaly-8"),  # settled already: left alone
    )
    still_missing = _found(spark, ("suspected_loss", 5, 0, 0, None, "unseen-5"))

    def settled(final: bool) -> list[tuple]:
        rows = resolved(provisional, confirming, still_missing, F.lit(final), 3).collect()
        return sorted(
            (r.finding_id, r.state, r.closed_batch, r.duration_ms, r.resolved_by) for r in rows
        )

    assert settled(False) == [
        ("arrived-7", WITHDRAWN, 3, None, None),  # no longer missing: delivered after all
        ("lost-10", CONFIRMED, 3, None, "anomaly-lost"),
        ("outage", CONFIRMED, 3, 400.0, "outage-1"),  # acks resumed: the stretch holds it
    ]
    assert settled(True) == [
        ("arrived-7", WITHDRAWN, 3, None, None),
        ("dup-3", WITHDRAWN, 3, None, None),
        ("late-5", WITHDRAWN, 3, None, None),
        ("lost-10", CONFIRMED, 3, None, "anomaly-lost"),
        ("outage", CONFIRMED, 3, 400.0, "outage-1"),
    ]
    empty = provisional.limit(0)
    assert resolved(empty, confirming, still_missing, F.lit(True), 3).count() == 0


def test_an_outage_closed_before_it_was_seen_in_progress_is_recorded_confirmed(spark) -> None:
    def outage(outage_id: str, producer: str, start: float, end: float) -> tuple:
        return (outage_id, "r1", "t", -1, producer, at(start), at(end), float(end - start), 2, 3)

    closed = spark.createDataFrame(
        [
            row + ("x", [])
            for row in (
                outage("seen-in-progress", "p1", 10, 300),  # the open finding below starts in it
                outage("between-looks", "p1", 500, 800),
                outage("other-producer", "p2", 10, 300),
            )
        ],
        OUTAGES,
    )
    provisional = _provisional(spark, ("outage", "outage_in_progress", None, 120, OPEN))

    rows = seen_closed(closed, provisional, 4).collect()

    assert sorted(
        (r.producer, r.kind, r.state, r.started_at, r.closed_batch, r.duration_ms, r.resolved_by)
        for r in rows
    ) == [
        ("p1", "outage_in_progress", CONFIRMED, at(500), 4, 300.0, "between-looks"),
        ("p2", "outage_in_progress", CONFIRMED, at(10), 4, 290.0, "other-producer"),
    ]
    p1 = next(r for r in rows if r.producer == "p1")
    assert p1.explanation == (
        "producer p1 had 2 message(s) in flight and none completed for 300 ms "
        "(10:00:00.500 to 10:00:00.800): an outage that began and ended between two looks of "
        "the watch, confirmed as seen"
    )
    # the same id a look at it in progress would have given it: never raised twice
    as_open = opened(spark.createDataFrame([p1], PROVISIONAL), 4).first()
    assert as_open.finding_id == p1.finding_id
    assert seen_closed(closed.limit(0), provisional, 4).count() == 0


def test_provisional_findings_are_ranked_as_the_batch_kind_they_stand_for(spark) -> None:
    provisional = _provisional(
        spark,
        ("open-outage", "outage_in_progress", None, 400, OPEN),
        ("closed-outage", "outage_in_progress", None, 100, CONFIRMED),
        ("loss", "suspected_loss", 10, 200, OPEN),
        ("dup", "duplicated", 3, 50, OPEN),
        ("gone", "suspected_loss", 8, 0, WITHDRAWN),
    ).withColumn(
        "duration_ms", F.when(F.col("finding_id") == "closed-outage", 250.0).cast("double")
    )
    clock = _clock(spark, 2000)

    rows = as_findings(provisional, clock).collect()

    assert sorted((r.finding_id, r.kind, r.start, r.end) for r in rows) == [
        ("closed-outage", "outage", at(100), at(350)),  # where its stretch ended
        ("dup", "duplicated", at(50), at(50)),
        ("loss", "lost", at(200), at(200)),  # the batch `lost`'s window after it
        ("open-outage", "outage", at(400), at(2000)),  # in progress: up to the run's now
    ]
    # a run with no clock yet: an open outage spans its start only
    assert [r.end for r in as_findings(provisional, clock.limit(0)).collect()
            if r.finding_id == "open-outage"] == [at(400)]  # fmt: skip


def test_only_runs_folded_since_their_reconciliation_are_watched(spark) -> None:
    runs = spark.createDataFrame(
        [("new", at(1), 2), ("reconciled", at(2), 3), ("folded-again", at(3), 5)],
        "run_id string, now timestamp, folded_batch long",
    )
    reconciled = spark.createDataFrame(
        [("reconciled", 3), ("folded-again", 4)], "run_id string, reconciled_batch long"
    )

    watched = watched_runs(runs, reconciled).collect()

    assert sorted((r.run_id, r.now) for r in watched) == [("folded-again", at(3)), ("new", at(1))]


def test_a_confirmed_finding_takes_the_causes_of_the_batch_finding_that_confirmed_it(
    spark,  # noqa: ANN001
) -> None:
    cause = {"event_type": "bundle_unload_started", "ts": at(-10), "host": "b1", "reason": "r"}
    provisional = _provisional(
        spark,
        ("outage", "outage_in_progress", None, 400, CONFIRMED),
        ("loss", "suspected_loss", 10, 0, CONFIRMED),
        ("withdrawn", "suspected_loss", 5, 0, WITHDRAWN),
    ).withColumn(
        "resolved_by",
        F.when(F.col("finding_id") == "outage", "o1").when(F.col("finding_id") == "loss", "a1"),
    )
    outages = spark.createDataFrame(
        [("o1", "r1", "t", -1, "p1", at(400), at(800), 400.0, 2, 3, "x", [cause])], OUTAGES
    )
    anomaly = {f.name: None for f in ANOMALIES.fields} | {
        "anomaly_id": "a1", "run_id": "r1", "topic": "t", "partition": -1, "producer": "p1",
        "kind": "lost", "seq_from": 10, "seq_to": 10, "count": 1, "explanation": "x",
        "causes": [],
    }  # fmt: skip
    anomalies = spark.createDataFrame([anomaly], ANOMALIES)

    rows = batch_causes(provisional, anomalies, outages).collect()

    assert sorted((r.finding_id, [c.event_type for c in r.causes]) for r in rows) == [
        ("loss", []),
        ("outage", ["bundle_unload_started"]),
    ]
