"""`report` regenerated from what a watch has written (issue 29, item 5): a run not yet
reconciled has bronze events and gold.provisional rows but no gold verdict; its page lists the
provisional findings (state, kind, run, where, explanation), and a run without any has no such
section. Real Delta tables in a lakehouse of the test's own, written with the product's
schemas."""

from __future__ import annotations

from datetime import datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from json_schema_check import validate
from report_probe import cli_report

from pulsar_audit.config import load_config
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.local_frames import local_frame
from pulsar_audit.schemas import PRODUCER_EVENTS, PROVISIONAL
from serve.report import write_report

T0 = datetime(2026, 11, 26, 20, 0, 0)
TOPIC = "persistent://public/default/live"


class _Cells(HTMLParser):
    """The text of each row (header included) of the table with id `table_id`."""

    def __init__(self, table_id: str) -> None:
        super().__init__()
        self.table_id, self.inside, self.rows = table_id, False, []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table" and ("id", self.table_id) in attrs:
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("td", "th"):
            self.rows[-1].append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.inside = False

    def handle_data(self, data: str) -> None:
        if self.inside and self.rows and self.rows[-1]:
            self.rows[-1][-1] += data


def _events(run_id: str) -> list[dict]:
    lineage = {"source_file": f"/landing/{run_id}.jsonl", "ingest_id": "i1", "ingested_at": T0}
    base = {"run_id": run_id, "topic": TOPIC, "partition": -1, "client": "p1", **lineage}
    return [
        {**base, "event": "send", "seq": 1, "ts": T0, "event_index": 0, "line_number": 1},
        {**base, "event": "ack", "seq": 1, "ts": T0 + timedelta(milliseconds=5),
         "event_index": 1, "ledger_id": 7, "entry_id": 0, "line_number": 2},
    ]  # fmt: skip


def _finding(finding_id: str, kind: str, batch: int, state: str, **over: object) -> dict:
    row = {
        "finding_id": finding_id, "kind": kind, "run_id": "live-1", "topic": TOPIC,
        "subscription": "s1", "partition": -1, "producer": "p1", "seq_from": 5, "seq_to": 6,
        "started_at": T0, "first_seen_batch": batch, "first_seen_at": T0, "state": state,
        "explanation": f"{kind} explained",
    }  # fmt: skip
    return {**row, **over}


@pytest.fixture(scope="module")
def watched(spark, tmp_path_factory: pytest.TempPathFactory) -> Lakehouse:
    """A lakehouse as a watch leaves it mid-run: bronze events, gold.provisional, no gold."""
    root = tmp_path_factory.mktemp("watched")
    lakehouse = Lakehouse(spark, load_config("local", lakehouse=str(root / "lh")))
    events = _events("live-1") + _events("quiet")
    lakehouse.append("producer_events", local_frame(spark, events, PRODUCER_EVENTS))
    findings = [
        _finding("f-loss", "suspected_loss", 2, "open"),
        _finding("f-out", "outage_in_progress", 1, "confirmed", subscription=None,
                 seq_from=None, seq_to=None, duration_ms=1500.0, resolved_by="o-1"),
        _finding("f-other", "suspected_loss", 0, "open", run_id="other"),
    ]  # fmt: skip
    lakehouse.append("provisional", local_frame(spark, findings, PROVISIONAL))
    return lakehouse


def test_the_report_of_a_watched_run_lists_its_provisional_findings(watched, tmp_path: Path):
    root = watched.config.lakehouse_path
    out, result = cli_report(watched.spark, root, "live-1", tmp_path / "live.html")
    validate(result, "report")
    assert (result["verdict"], result["provisional"]) == ("unknown", 2)
    page = out.read_text()
    cells = _Cells("provisional")
    cells.feed(page)
    head, *rows = cells.rows
    assert head[:5] == ["state", "kind", "run_id", "where", "seqs"]
    assert head[-1] == "explanation"
    assert [(r[0], r[1], r[2], r[3], r[4], r[-1]) for r in rows] == [
        ("confirmed", "outage_in_progress", "live-1", "producer p1, partition -1", "",
         "outage_in_progress explained"),
        ("open", "suspected_loss", "live-1", "subscription s1, producer p1, partition -1",
         "5–6", "suspected_loss explained"),
    ]  # fmt: skip
    assert "<h2>Provisional findings</h2>" in page


def test_a_run_no_watch_raised_anything_about_has_no_provisional_section(watched, tmp_path: Path):
    result = write_report(watched.read, "quiet", tmp_path / "quiet.html")
    assert result["provisional"] == 0
    page = (tmp_path / "quiet.html").read_text()
    assert "Provisional findings" not in page and 'id="provisional"' not in page


def test_the_live_view_reads_the_findings_beside_the_rates_the_fold_computed(watched) -> None:
    """`watch`'s view after micro-batch 2 of run live-1: the rates its fold brought, the
    finding counts of gold.provisional, the findings the micro-batch opened, no alert yet;
    another run's findings are not shown."""
    from serve.live_view import read_view

    rates = [("live-1", 3, 0, 10.0, None)]  # sends, deliveries, and their rates
    view = read_view(watched, 2, 1, ["live-1"], rates)
    assert (view["micro_batch"], view["files"], view["alerts"]) == (2, 1, [])
    assert view["runs"] == [
        {"run_id": "live-1", "sends_per_s": 10.0, "deliveries_per_s": None,
         "open_outages": 0, "suspected_losses": 1, "other_open": 0, "confirmed": 1,
         "withdrawn": 0},
    ]  # fmt: skip
    assert [(f["kind"], f["state"], f["first_cause"]) for f in view["findings"]] == [
        ("suspected_loss", "open", None)
    ]
    # a run the micro-batch had no events of is shown with its counts, without rates
    [quiet] = read_view(watched, 3, 0, ["live-1"], [])["runs"]
    assert (quiet["sends_per_s"], quiet["suspected_losses"], quiet["confirmed"]) == (None, 1, 1)
