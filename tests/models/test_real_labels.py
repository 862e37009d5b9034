"""The labels the evaluation gives the real runs with positives (issue 27: disk loss, kill-broker
at 3,000 msg/s), from gold.run_summary rows built from each run's readers as the data set's
manifest records them (what `analyze` put in gold for the run), through models.features."""

from __future__ import annotations

import json

from test_features import SCHEMAS, _row

from models.features import run_outcomes
from pulsar_audit.paths import REPO_ROOT
from pulsar_audit.schemas import RUN_SUMMARY

MANIFEST = REPO_ROOT / "data" / "real-runs" / "manifest.jsonl"
COUNTS = ("sent", "acked", "nacked", "received", "lost", "unseen", "duplicated", "poll_skip")
# (acked_loss, duplicates) per run: the runs of issue 27's items 1 and 2
EXPECTED = {
    # 2-2-1, the write quorum's disks wiped, no skip: the reader is stuck at the first lost
    # entry (received 0, unseen 3000): neither loss nor duplicates can be observed
    "capture-20261126T065409-283e": (None, None),
    # the same with --skip-lost-data: 1320 acked messages lost
    "capture-20261126T070812-8805": (True, False),
    "wipe-qw-bookies-disk-20261126T072216-1dea": (True, False),  # 3-3-2: 974 lost
    "wipe-qw-bookies-disk-20261126T073452-20a8": (True, False),  # 3-2-2: 945 lost
    # one disk of Qw = 2 wiped: a copy survives
    "capture-20261126T070046-5ae6": (False, False),
    "capture-20261126T071412-682a": (False, False),
    "wipe-bookie-disk-20261126T072932-f525": (False, False),
    # 3,000 msg/s without deduplication: 527, 120 (batching) and 2 duplicated
    "kill-broker-20261126T075916-66ee": (False, True),
    "kill-broker-20261126T080800-4242": (False, True),
    "isolate-broker-from-zk-20261126T082323-da7d": (False, True),
    "kill-broker-20261126T081740-662e": (False, False),  # with deduplication
}


def _manifest_runs() -> dict[str, dict]:
    runs = (json.loads(line) for line in MANIFEST.read_text().splitlines() if line.strip())
    return {r["run_id"]: r for r in runs if r["run_id"] in EXPECTED}


def _summary(run_id: str, subscription: str, valid: str, **counts: int) -> dict:
    """A gold.run_summary row: every count 0 but those given."""
    zeros = {f.name: 0 for f in RUN_SUMMARY.fields if f.dataType.typeName() == "long"}
    return _row(RUN_SUMMARY, run_id=run_id, topic="t", subscription=subscription, valid=valid,
                reasons=[], **{**zeros, **counts})  # fmt: skip


def _summary_rows(run: dict) -> list[dict]:
    return [
        _summary(
            run["run_id"],
            reader["subscription"],
            str(reader["valid"]).lower(),
            **{k: reader.get(k, 0) for k in COUNTS},
        )  # fmt: skip
        for reader in run["readers"]
    ]


def _outcomes(spark, rows: list[dict]) -> dict[str, tuple]:  # noqa: ANN001
    summary = spark.createDataFrame(rows, RUN_SUMMARY)
    none = [spark.createDataFrame([], SCHEMAS[t]) for t in ("anomalies", "outages")]
    return {
        r["run_id"]: (r["acked_loss"], r["duplicates"])
        for r in run_outcomes(summary, *none).collect()  # one row per run
    }


def test_no_summary_rows_no_labels(spark) -> None:
    assert _outcomes(spark, []) == {}


def test_a_run_whose_every_reader_stopped_short_cannot_tell_loss_nor_duplicates(spark) -> None:
    got = _outcomes(
        spark,
        [
            _summary("stuck", "a", "unknown", unseen=5),
            _summary("stuck-and-read", "a", "unknown", unseen=5),
            _summary("stuck-and-read", "b", "true"),
            _summary("stuck-saw-a-duplicate", "a", "unknown", unseen=5, duplicated=1),
            _summary("skipped", "a", "false", lost=3),
        ],
    )
    assert got == {
        "stuck": (None, None),
        "stuck-and-read": (False, False),
        "stuck-saw-a-duplicate": (None, True),
        "skipped": (True, False),
    }


def test_the_real_positives_of_issue_27_get_their_labels(spark) -> None:
    runs = _manifest_runs()
    assert sorted(runs) == sorted(EXPECTED)  # every run of the data set is there
    got = _outcomes(spark, [row for run in runs.values() for row in _summary_rows(run)])
    assert got == EXPECTED
    # its reader's verdict is unknown (the data set's `found` still says acked_loss false)
    assert runs["capture-20261126T065409-283e"]["readers"][0]["valid"] == "unknown"
