"""Checks: row rules agree between GX and Spark; table-level metrics name the failing runs."""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import functions as F

from checks.gate import judge_rows, per_run_counts, violated_rules, violation_counts
from checks.rules import ROW_RULES
from checks.tables import TABLE_METRICS, check_runs, run_metrics
from ingest.trace_format import ROLE_TABLE
from pulsar_audit.schemas import CONSUMER_EVENTS, PRODUCER_EVENTS, QUARANTINE, RUN_EVENTS

AT = datetime(2025, 3, 4, 10, 15, 30)
LINEAGE = ("f.jsonl", 1, "ingest-1", AT)


def _frame(spark, schema, rows: list[dict]):
    """Rows by column name (absent: null) in `schema`: the tests name only what they use."""
    full = [tuple(r.get(f.name) for f in schema.fields) for r in rows]
    return spark.createDataFrame(full, schema)


def producer(spark, rows):
    """rows: (run_id, client, event, seq, ledger_id, event_index)"""
    full = [
        {
            "run_id": r, "topic": "t", "partition": -1, "client": c, "event": e, "ts": AT,
            "event_index": ei, "seq": s, "ledger_id": lid,
            "entry_id": None if lid is None else 0, "extra": {}, "source_file": "f",
            "line_number": n, "ingest_id": "i", "ingested_at": AT,
        }
        for n, (r, c, e, s, lid, ei) in enumerate(rows)
    ]  # fmt: skip
    return _frame(spark, PRODUCER_EVENTS, full)


def consumer(spark, rows):
    """rows: (run_id, client, event, producer, seq, event_index)"""
    full = [
        {
            "run_id": r, "topic": "t", "partition": -1, "client": c, "event": e, "ts": AT,
            "event_index": ei, "subscription": "sub", "producer": p, "seq": s, "ledger_id": 1,
            "entry_id": 0, "batch_index": -1, "redelivery_count": 0, "extra": {},
            "source_file": "f", "line_number": n, "ingest_id": "i", "ingested_at": AT,
        }
        for n, (r, c, e, p, s, ei) in enumerate(rows)
    ]  # fmt: skip
    return _frame(spark, CONSUMER_EVENTS, full)


def runs(spark, rows=()):
    return spark.createDataFrame(list(rows), RUN_EVENTS)


def _gate(spark, df):
    """Stage `df` (producer rows) as the ingest does: violations per row, counts per run."""
    flagged = df.withColumn(
        "_violated", violated_rules(F.lit("producer_events"), ["producer_events"])
    ).localCheckpoint()
    counts = (
        flagged.withColumn("role", F.lit("producer"))
        .groupBy("run_id", "role")
        .agg(*violation_counts(F.lit(True)))
        .collect()
    )
    results = judge_rows(spark, per_run_counts(counts, ROLE_TABLE), "i", AT)
    return flagged, results


def test_gate_on_empty_batch_passes_nothing_and_quarantines_nothing(spark):
    flagged, results = _gate(spark, producer(spark, []))
    assert flagged.count() == 0
    assert results.count() == 0


def test_gate_quarantines_exactly_the_rows_gx_counts(spark):
    rows = [
        ("r1", "p", "send", 1, None, 0),
        ("r1", "p", "ack", 1, 12, 1),
        ("r1", "p", "ack", 2, None, 2),
        ("r2", "p", "ack", 3, -2, 0),
    ]
    flagged, results = _gate(spark, producer(spark, rows))
    bad = F.size("_violated") > 0
    got = sorted((r.line_number, ",".join(r._violated)) for r in flagged.filter(bad).collect())
    assert got == [(2, "ack_has_ledger_id,ack_has_entry_id"), (3, "ledger_id_at_least_minus_one")]
    assert flagged.filter(~bad).count() == 2
    checked = results.collect()
    per_run = {(r.run_id, r.expectation): r.unexpected_count for r in checked if not r.success}
    assert per_run == {
        ("r1", "ack_has_ledger_id"): 1,
        ("r1", "ack_has_entry_id"): 1,
        ("r2", "ledger_id_at_least_minus_one"): 1,
    }
    # every rule of the table is judged for both runs, at row level
    assert len(checked) == 2 * len(ROW_RULES["producer_events"])
    assert {r.level for r in checked} == {"row"}


def test_rule_names_split_back_from_the_joined_list():
    # violated_rules joins the names with "," and splits them again (generated code, where
    # array_compact's lambda has none), as quarantine.check joins them
    names = [rule.name for rules in ROW_RULES.values() for rule in rules]
    assert names and all("," not in name and name for name in names)


def test_the_rules_expression_has_generated_code(spark):
    # an expression without generated code (a lambda: array_compact's rewrite) puts the whole
    # projection of every record on Spark's interpreted path
    flagged = producer(spark, [("r1", "p", "ack", 1, None, 0)]).withColumn(
        "_violated", violated_rules(F.lit("producer_events"), ["producer_events"])
    )
    fallback = spark._jvm.java.lang.Class.forName(
        "org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback"
    )
    plan = flagged._jdf.queryExecution().optimizedPlan()
    stack = [plan.expressions().apply(i) for i in range(plan.expressions().size())]
    seen, without = 0, []
    while stack:
        node = stack.pop()
        seen += 1
        if fallback.isInstance(node):
            without.append(node.prettyName())
        stack.extend(node.children().apply(i) for i in range(node.children().size()))
    assert seen > 20 and without == []


def _metrics(spark, prod, cons, quarantine_rows=()):
    quarantine = spark.createDataFrame(list(quarantine_rows), QUARANTINE)
    return {
        r.run_id: r.asDict() for r in run_metrics(prod, cons, runs(spark), quarantine).collect()
    }


def test_metrics_of_a_clean_run_are_all_zero_but_sends(spark):
    prod = producer(spark, [("r1", "p", "send", 1, None, 0), ("r1", "p", "ack", 1, 5, 1)])
    cons = consumer(spark, [("r1", "c", "receive", None, 1, 0), ("r1", "c", "end", None, None, 1)])
    got = _metrics(spark, prod, cons)["r1"]
    assert got == {"run_id": "r1", **{m: 0 for m in TABLE_METRICS}, "sends": 1}


def test_metrics_find_orphans_unsent_receives_repeated_indexes_and_unresolved(spark):
    prod = producer(
        spark,
        [
            ("r1", "p", "send", 1, None, 0),
            ("r1", "p", "ack", 9, 5, 0),
            ("r2", "p", "send", 1, None, 0),
            ("r2", "q", "send", 1, None, 0),
        ],
    )
    cons = consumer(
        spark,
        [
            ("r1", "c", "receive", "p", 7, 0),
            ("r1", "c", "receive", None, 1, 0),
            ("r2", "c", "receive", None, 1, 0),
        ],
    )
    quarantined = [("consumer_events", "r2", "f", 9, "{}", "bad", "x", "i", AT)]
    got = _metrics(spark, prod, cons, quarantined)
    assert {k: v for k, v in got["r1"].items() if v and k != "run_id"} == {
        "sends": 1,
        "orphan_acks": 1,
        "duplicate_producer_event_index": 1,
        "receives_never_sent": 1,
        "duplicate_consumer_event_index": 1,
    }
    assert {k: v for k, v in got["r2"].items() if v and k != "run_id"} == {
        "sends": 2,
        "unresolved_producer": 1,
        "quarantined_consumer_records": 1,
    }


def test_check_runs_fails_only_the_broken_run(spark):
    prod = producer(spark, [("ok", "p", "send", 1, None, 0), ("bad", "p", "ack", 1, 5, 0)])
    quarantine = spark.createDataFrame([], QUARANTINE)
    metrics = run_metrics(prod, consumer(spark, []), runs(spark), quarantine)
    results = check_runs(spark, metrics, {"producer_events": True}, "i", AT).collect()
    failed = sorted((r.run_id, r.expectation) for r in results if not r.success)
    assert failed == [("bad", "orphan_acks"), ("bad", "sends")]
    assert {r.level for r in results} == {"table"}
    assert len(results) == 2 * (len(TABLE_METRICS) + 1)
