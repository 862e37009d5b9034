"""jobs/live_state.py:fold_batch on real Delta with tiny literal micro-batches: the live state
it writes from its packed checkpoint (every part in one commit), and the findings, closed
outages and ended runs it brings back in one collect, are what the batch detectors say; a
micro-batch replayed after its state was written is judged, not folded twice. (Default suite:
no streaming query.)

The two runs below are watched together, as the watch folds the runs it is writing: one
lakehouse, one micro-batch sequence (the `watched` fixture), each test reading its run."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pipeline_events import PIPELINE, ack, bronze, config, end, receive, send, subscribe
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from jobs.live_state import SETTLED, Judged, KeptState, fold_batch, judge, kept_run_configs
from pipelines.detect_outages import detect_outages
from pipelines.live_state import STATE_TABLES, state_part
from pulsar_audit.config import load_config
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.schemas import PROVISIONAL

TWO_BATCHES, INSIDE_ONE = "two_micro_batches", "begun_and_ended_inside_one"


def _of_run(run_id: str, events: list[dict]) -> list[dict]:
    return [{**e, "run_id": run_id} for e in events]


# an outage from the send at 10 (after the completion at 2) to the ack at 300
FIRST = [subscribe(0), send(1, 0), ack(1, 2), receive(1, 3), send(2, 10), send(3, 20)]
FIRST += [send(4, 250)]  # the run's clock at 250: 240 ms without a completion
SECOND = [ack(2, 300), ack(3, 301), ack(4, 302)]
SECOND += [receive(2, 303), receive(3, 304), receive(4, 305), end(400)]
FIRST, SECOND = _of_run(TWO_BATCHES, FIRST), _of_run(TWO_BATCHES, SECOND)
# an outage begun and ended in the first micro-batch, the run still going: not ended
INSIDE = [subscribe(0), send(1, 0), ack(1, 2), receive(1, 3), send(2, 10), ack(2, 300)]
INSIDE = _of_run(INSIDE_ONE, [*INSIDE, receive(2, 301), send(3, 310)])
TABLES = ("live_state", "provisional")


def _land(
    lakehouse: Lakehouse,
    events: list[dict],
    source_file: str,
    batch: int,
    with_run_events: bool = False,
) -> None:
    rows = bronze(lakehouse.spark, events, ingest_id=f"i{batch}")
    tables = [("producer_events", rows.producer_events), ("consumer_events", rows.consumer_events)]
    if with_run_events:
        tables.append(("run_events", rows.run_events))
    for table, df in tables:
        lakehouse.append(table, df.withColumn("source_file", F.lit(source_file)))


@dataclass(frozen=True)
class Watched:
    """The folds' results, and the versions of `TABLES` after each step."""

    lakehouse: Lakehouse
    first: Judged
    second: Judged
    replayed: Judged
    versions: dict[str, dict[str, int]]
    # the state the process kept after its second micro-batch, and the table then (sorted
    # rows); whether it was still taken as the table once another writer had committed
    kept: list
    table: list
    kept_after_another_writer: bool
    # the digits of the size Spark estimates for the kept state after each micro-batch
    estimates: list[int]
    # the provisional rows the two judgings of the first micro-batch returned (what the
    # alerts are raised from), and the table's rows of the runs after them
    judged_rows: list[list[Row]]
    provisional_after: list[Row]

    def read(self, step: str, table: str, run_id: str) -> DataFrame:
        """Run `run_id`'s rows of `table` (or of a part of the live state) as they stood after
        `step`."""
        if table in STATE_TABLES:
            at = self.versions[step]["live_state"]
            rows = state_part(self.lakehouse.read("live_state", at), table)
        else:
            rows = self.lakehouse.read(table, self.versions[step][table])
        return rows.filter(F.col("run_id") == run_id)


def _of(rows: list[Row], run_id: str) -> list[Row]:
    return [r for r in rows if r["run_id"] == run_id]


@pytest.fixture(scope="module")
def watched(spark, tmp_path_factory: pytest.TempPathFactory) -> Watched:  # noqa: ANN001
    """chunk-1 holds both runs' first micro-batch (folded, then judged twice), chunk-2 the
    second micro-batch of TWO_BATCHES (folded, then replayed)."""
    config = load_config("local", lakehouse=str(tmp_path_factory.mktemp("fold_batch")))
    lakehouse = Lakehouse(spark, config)
    lakehouse.create_all()
    _land(lakehouse, [*FIRST, *INSIDE], "chunk-1", 0)

    versions = {"before": lakehouse.versions(TABLES)}
    kept = KeptState()  # as one watch process keeps what it wrote
    first = fold_batch(lakehouse, config, ["chunk-1"], [TWO_BATCHES, INSIDE_ONE], 0, True, kept)
    kept.committed(lakehouse, first.state_rows)
    estimates = [_estimate_digits(kept.rows)]
    versions["first"] = lakehouse.versions(TABLES)
    judged_rows = [judge(lakehouse, first, 0, kept)]
    judged_rows.append(judge(lakehouse, first, 0, kept))  # judged again: still one row
    versions["judged"] = lakehouse.versions(TABLES)
    provisional_after = lakehouse.read("provisional").collect()

    _land(lakehouse, SECOND, "chunk-2", 1)
    # a process's later micro-batch is not looked up in the state; its replay (a restarted
    # process's first, nothing kept) is
    second = fold_batch(lakehouse, config, ["chunk-2"], [TWO_BATCHES], 1, False, kept)
    kept.committed(lakehouse, second.state_rows)
    estimates.append(_estimate_digits(kept.rows))
    versions["second"] = lakehouse.versions(TABLES)
    replayed = fold_batch(lakehouse, config, ["chunk-2"], [TWO_BATCHES], 1)
    versions["replayed"] = lakehouse.versions(TABLES)

    def rows(df: DataFrame) -> list:
        return sorted(map(str, df.collect()))

    in_memory, table = rows(kept.table(lakehouse)), rows(lakehouse.read("live_state"))
    lakehouse.overwrite("live_state", lakehouse.read("live_state"))  # another writer
    still = kept.table(lakehouse) is not None
    kept.release()
    return Watched(
        lakehouse,
        first,
        second,
        replayed,
        versions,
        in_memory,
        table,
        still,
        estimates,
        judged_rows,
        provisional_after,
    )


def _estimate_digits(df: DataFrame) -> int:
    return len(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))


def _seqs(df: DataFrame) -> list[int]:
    return sorted(r["seq"] for r in df.collect())


def test_two_micro_batches_then_a_replay(spark, watched: Watched) -> None:  # noqa: ANN001
    first, run = watched.first, TWO_BATCHES

    assert (first.runs, first.ended, _of(first.closed, run)) == ([run, INSIDE_ONE], [], [])
    assert [(r["kind"], r["first_seen_batch"]) for r in _of(first.found, run)] == [
        ("outage_in_progress", 0)
    ]
    assert _seqs(watched.read("first", "live_in_flight", run)) == [2, 3, 4]
    streams = watched.read("first", "live_streams", run).collect()
    assert [(r["in_flight"], r["last_rise"]) for r in streams] == [(3, FIRST[4]["ts"])]

    second = watched.second
    whole = bronze(spark, FIRST + SECOND).producer_events
    [batch_outage] = detect_outages(whole, PIPELINE).collect()
    [closed] = second.closed
    assert (closed["outage_id"], closed["duration_ms"]) == (
        batch_outage["outage_id"],
        batch_outage["duration_ms"],
    )
    assert second.ended == [run]
    assert second.found == []  # nothing in flight, nothing awaited any more
    assert watched.read("second", "live_in_flight", run).count() == 0
    assert watched.read("second", "live_awaiting", run).count() == 0
    live_runs = watched.read("second", "live_runs", run).collect()
    assert [(r["run_id"], r["folded_batch"]) for r in live_runs] == [(run, 1)]

    replayed = watched.replayed

    assert (replayed.ended, replayed.closed, replayed.found) == ([run], [], [])
    assert watched.read("replayed", "live_runs", run).first()["folded_batch"] == 1
    # each fold wrote every part of the state in one commit; judging and the replay wrote none
    steps = ("before", "first", "judged", "second", "replayed")
    state_versions = [watched.versions[s]["live_state"] for s in steps]
    v = state_versions[0]
    assert state_versions == [v, v + 1, v + 1, v + 2, v + 2]


def test_an_outage_begun_and_ended_inside_one_micro_batch_is_raised_confirmed(
    spark,  # noqa: ANN001
    watched: Watched,
) -> None:
    [batch_outage] = detect_outages(bronze(spark, INSIDE).producer_events, PIPELINE).collect()
    rows = watched.read("judged", "provisional", INSIDE_ONE).collect()
    assert [(r["kind"], r["state"], r["resolved_by"], r["duration_ms"]) for r in rows] == [
        ("outage_in_progress", "confirmed", batch_outage["outage_id"], batch_outage["duration_ms"])
    ]


def test_the_state_a_process_wrote_is_kept_while_the_table_is_at_its_version(
    watched: Watched,
) -> None:
    assert watched.kept == watched.table and len(watched.kept) > 0
    assert not watched.kept_after_another_writer
    # kept without the estimate of the fold that computed it (a product over its joins,
    # compounding micro-batch after micro-batch): Spark's default for a leaf, each time
    default = len(str(2**63 - 1))
    assert watched.estimates == [default, default]


def test_judging_returns_the_runs_provisional_rows_as_the_table_holds_them(
    watched: Watched,
) -> None:
    """The rows `judge` returns are what the micro-batch's alerts are raised from (without
    reading gold.provisional again): the first judging's are the rows it opened, the second's
    the same rows read back; both the table's findings, each once, equal to the table's rows
    in every column but the settled ones (as read before judging settled them)."""

    def unsettled(rows: list[Row]) -> dict[str, dict]:
        kept = [c for c in PROVISIONAL.fieldNames() if c not in SETTLED]
        return {r["finding_id"]: {c: r[c] for c in kept} for r in rows}

    table = unsettled(watched.provisional_after)
    assert sorted(r["kind"] for r in watched.provisional_after) == [
        "outage_in_progress",
        "outage_in_progress",
    ]  # one seen in progress, one closed between two looks
    for rows in watched.judged_rows:
        assert len(rows) == len(table)
        assert unsettled(rows) == table


def test_a_duplicate_is_explained_by_the_config_an_earlier_micro_batch_brought(
    spark,  # noqa: ANN001
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The run's config (deduplication on) came in the first micro-batch's file; the second
    micro-batch's duplicate is explained from it, read from the table once and then kept."""
    settings = load_config("local", lakehouse=str(tmp_path_factory.mktemp("dedup")))
    lakehouse = Lakehouse(spark, settings)
    lakehouse.create_all()
    run = "dedup_on"
    first = [config(True), subscribe(0), *[send(s, s) for s in (10, 11)]]
    retried = [ack(s, 30 + s, ledger=14, entry=s - 10) for s in (10, 11)]
    copies = [receive(10, 20, ledger=12, entry=5), receive(11, 21, ledger=12, entry=6)]
    copies += [receive(s, 40 + s, ledger=14, entry=s - 10) for s in (10, 11)]
    kept = kept_run_configs()
    found = []
    for batch, events in enumerate([first, [*retried, *copies]]):
        _land(lakehouse, _of_run(run, events), f"chunk-{batch}", batch, with_run_events=True)
        judged = fold_batch(
            lakehouse, settings, [f"chunk-{batch}"], [run], batch, batch == 0, None, kept
        )
        found.append([(r["kind"], r["explanation"]) for r in judged.found])
    assert found[0] == []
    [(kind, explanation)] = found[1]
    assert kind == "duplicated"
    assert "although deduplication is on for this run" in explanation
    assert kept.reads == 1  # the second micro-batch brought no run event: the rows kept
