"""`watch` attaches causes live (issue 29, Build 2): on real Spark Structured Streaming and real
Delta, the broker's log of an unload lands in the landing folder after the trace chunk that
shows the outage in progress; the micro-batch that takes the log rebuilds the infrastructure
timeline and ranks the open finding's causes from it, while the run still goes on. Once the
run ends and is reconciled, the confirmed finding carries the batch outage's causes.
Opt-in (`-m live_long`): three watches, each a few micro-batches and an `analyze`."""

from __future__ import annotations

from pathlib import Path

import pytest
from live_trace import (
    OUTAGE_START_MS,
    RUN,
    UNLOAD_STARTED_AT_MS,
    write_broker_log,
    write_chunk,
)
from pyspark.sql import functions as F

from jobs.live import WatchOptions, watch

pytestmark = pytest.mark.live_long


def _outage(result: dict) -> dict:
    [outage] = [r for r in result["provisional"] if r["kind"] == "outage_in_progress"]
    return outage


def _types(causes: list | None) -> list[str]:
    return [c["event_type"] for c in causes or []]


def test_an_open_outage_gains_its_cause_when_the_broker_s_log_arrives(
    lakehouse, config, tmp_path: Path
) -> None:
    landing, checkpoint = tmp_path / "landing", str(tmp_path / "checkpoint")
    options = WatchOptions(checkpoint=checkpoint, once=True, max_files=1)
    write_chunk(landing, 1)

    first = watch(lakehouse, config, landing, options)
    outage = _outage(first)
    assert (outage["state"], outage["causes"]) == ("open", [])  # no log yet: no cause

    write_broker_log(landing)
    second = watch(lakehouse, config, landing, options)

    assert (second["batches"], second["files"], second["runs"]) == (1, 1, [RUN])
    outage = _outage(second)
    assert outage["state"] == "open"  # the run goes on: the cause came while it is open
    assert outage["causes_batch"] == 1  # the micro-batch that took the log (the second)
    assert _types(outage["causes"])[:1] == ["bundle_unload_started"]
    [unload] = [c for c in outage["causes"] if c["event_type"] == "bundle_unload_started"]
    assert unload["host"] == "standalone"
    assert f"{OUTAGE_START_MS - UNLOAD_STARTED_AT_MS} ms before it began" in unload["reason"]

    write_chunk(landing, 2)
    write_chunk(landing, 3)
    third = watch(lakehouse, config, landing, options)

    outage = _outage(third)
    assert outage["state"] == "confirmed"
    [batch] = (
        lakehouse.read("outages").filter(F.col("outage_id") == outage["resolved_by"]).collect()
    )
    # reconciled: the cause of the batch outage, ranked from the whole run
    assert [c.asDict() for c in batch.causes] == [c.asDict() for c in outage["causes"]]
    assert "bundle_unload_started" in _types(outage["causes"])
