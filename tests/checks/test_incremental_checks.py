"""checks/incremental.py: a run's table metrics from its earlier metrics and a new file's rows
are the whole-run `run_metrics`, on literal rows whose keys are in the earlier file (a send
answering a new ack, an earlier ack a new send answers, an event_index and a config repeated
across the files)."""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import functions as F

from checks.incremental import gains_a_producer, metrics_with_new_rows
from checks.tables import TABLE_METRICS, run_metrics
from pulsar_audit.schemas import CONSUMER_EVENTS, PRODUCER_EVENTS, QUARANTINE, RUN_EVENTS

AT = datetime(2025, 3, 4, 10, 15, 30)
EARLIER, NEW = "chunk-1", "chunk-2"


def _frame(spark, schema, rows: list[dict]):  # noqa: ANN001, ANN202
    lineage = {"topic": "t", "partition": -1, "ts": AT, "ingest_id": "i", "ingested_at": AT}
    full = [{**lineage, "line_number": n, **r} for n, r in enumerate(rows)]
    return spark.createDataFrame(
        [tuple(r.get(f.name) for f in schema.fields) for r in full], schema
    )


def _events(spark, schema, columns: str, rows, **fixed):  # noqa: ANN001, ANN202
    """Run r1's rows: the values of `columns` (space-separated) each, and `fixed`."""
    names = columns.split()
    full = [{"run_id": "r1", **fixed, **dict(zip(names, r, strict=True))} for r in rows]
    return _frame(spark, schema, full)


def producer(spark, rows):  # noqa: ANN001, ANN201
    return _events(spark, PRODUCER_EVENTS, "source_file client event seq event_index", rows)


def consumer(spark, rows):  # noqa: ANN001, ANN201
    columns = "source_file event producer seq event_index"
    return _events(spark, CONSUMER_EVENTS, columns, rows, client="c1", subscription="s")


def configs(spark, rows):  # noqa: ANN001, ANN201
    columns = "source_file deduplication"
    return _events(spark, RUN_EVENTS, columns, rows, client="h", event="config")


# (file, client, event, seq, event_index)
PRODUCED = [
    (EARLIER, "p", "send", 1, 0),
    (EARLIER, "p", "send", 2, 1),
    (EARLIER, "p", "ack", 4, 2),  # an orphan until the new file's send of seq 4
    (NEW, "p", "ack", 1, 3),  # its send is in the earlier file: no orphan
    (NEW, "p", "ack", 9, 4),  # an orphan
    (NEW, "p", "send", 4, 2),  # event_index 2 again (the earlier ack's)
]
# (file, event, producer, seq, event_index) of consumer c1
CONSUMED = [
    (EARLIER, "receive", None, 1, 0),  # the topic's only producer: p
    (NEW, "receive", None, 2, 1),
    (NEW, "receive", "p", 7, 2),  # never sent
    (NEW, "receive", "p", 1, 0),  # event_index 0 again
]
CONFIGS = [(EARLIER, False), (NEW, True)]  # the new file's config disagrees with the earlier


def test_metrics_from_the_earlier_ones_and_the_new_rows_are_the_whole_runs(spark) -> None:  # noqa: ANN001
    prod, cons, runs = producer(spark, PRODUCED), consumer(spark, CONSUMED), configs(spark, CONFIGS)
    quarantine = spark.createDataFrame(
        [("consumer_events", "r1", NEW, 9, "{}", "bad", "x", "i", AT)], QUARANTINE
    )
    earlier = F.col("source_file") == EARLIER
    previous = run_metrics(
        prod.filter(earlier), cons.filter(earlier), runs.filter(earlier), quarantine.limit(0)
    )
    flagged = [df.withColumn("_new", ~earlier) for df in (prod, cons, runs)]

    incremental = metrics_with_new_rows(previous, *flagged, quarantine, "_new").collect()
    whole = run_metrics(prod, cons, runs, quarantine).collect()

    assert [r.asDict() for r in incremental] == [r.asDict() for r in whole]
    assert {m: v for m, v in whole[0].asDict().items() if v and m in TABLE_METRICS} == {
        "sends": 3,
        "orphan_acks": 1,
        "receives_never_sent": 1,
        "duplicate_producer_event_index": 1,
        "duplicate_consumer_event_index": 1,
        "quarantined_consumer_records": 1,
        "conflicting_configs": 1,
    }
    assert previous.first()["orphan_acks"] == 1  # the earlier ack of seq 4, answered since


def test_a_new_producer_on_a_topic_is_found(spark) -> None:  # noqa: ANN001
    rows = [(EARLIER, "p", "send", 1, 0), (NEW, "p", "send", 2, 1), (NEW, "q", "send", 1, 0)]
    empty = producer(spark, []).withColumn("_new", F.lit(True))
    flagged = producer(spark, rows).withColumn("_new", F.col("source_file") == NEW)

    assert gains_a_producer(empty, "_new").count() == 0
    assert [tuple(r) for r in gains_a_producer(flagged, "_new").collect()] == [("r1", "t")]
