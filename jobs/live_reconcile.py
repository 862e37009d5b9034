"""`watch`'s reconciliation of ended runs, outside its micro-batches (issue 29).

A micro-batch that folds a run's last `end` only records it: the state it commits holds
every traced consumer of the run with `has_end`, and `live_runs.folded_batch` the micro-batch.
Reconciling — the run's full pipeline (`analyze`'s, pipelines/runs_job.py), then each open
provisional finding of it confirmed by the batch finding that is the same finding or
withdrawn — costs what `analyze` costs for the run, so it runs after the micro-batch has
returned and its alerts are out: between micro-batches on the watch's own thread, and on
leaving (jobs/live.py). A run reconciled is noted in `live_reconciled` with the micro-batch it
was reconciled up to; an ended run folded since is pending again. A watch killed after the
end was committed and before the note finds the run pending when it starts again: the
pipeline and the settling are idempotent (only open findings are settled), and the alerts
keep their own exactly-once bookkeeping.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from pyspark.sql import functions as F

from jobs.live_state import record_settled
from pipelines import live
from pipelines.causes_job import CAUSES_CHANGED
from pipelines.live_state import ended, state_part
from pipelines.runs_job import read_bronze
from pipelines.silver import subscriptions
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.local_frames import local_frame
from pulsar_audit.schemas import LIVE_RECONCILED

log = logging.getLogger(__name__)


def ended_runs(lakehouse: Lakehouse, runs: list[str]) -> list[str]:
    """Those of `runs` whose every traced consumer has written its `end` event (in bronze)."""
    if not runs:
        return []
    bronze = read_bronze(lakehouse, runs)
    done = live.ended_runs(subscriptions(bronze.consumer_events, bronze.producer_events))
    return sorted(row["run_id"] for row in done.collect())


def pending_runs(lakehouse: Lakehouse) -> dict[str, int]:
    """{run: the micro-batch that last folded it} of the runs the live state has ended and
    that were not reconciled since (a few runs: collected)."""
    state = lakehouse.read("live_state")
    done = live.ended_runs(ended(state_part(state, "live_consumers")))
    reconciled = lakehouse.read("live_reconciled").select("run_id", "reconciled_batch")
    pending = (
        state_part(state, "live_runs")
        .join(done, on="run_id", how="inner")
        .join(reconciled, on="run_id", how="left")
        .filter(
            F.col("reconciled_batch").isNull() | (F.col("reconciled_batch") < F.col("folded_batch"))
        )
    )
    return {row["run_id"]: row["folded_batch"] for row in pending.collect()}


def settle(lakehouse: Lakehouse, closing: dict[str, int], final: list[str]) -> None:
    """Confirm or withdraw the open provisional findings of the runs of `closing` ({run: the
    micro-batch to close them in}) against gold as it is; those of the `final` runs are all
    settled (the run is over). A confirmed finding then carries the causes of the batch
    finding that confirmed it."""
    for batch_id in sorted(set(closing.values())):
        runs = [run for run, closed_in in closing.items() if closed_in == batch_id]
        of_runs = F.col("run_id").isin(runs)
        anomalies = lakehouse.read("anomalies").filter(of_runs)
        outages = lakehouse.read("outages").filter(of_runs)
        updates = live.resolved(
            lakehouse.read("provisional").filter(of_runs),
            live.batch_findings(anomalies, outages),
            live.as_provisional(anomalies, live.STILL_MISSING),
            F.col("run_id").isin(final),
            batch_id,
        ).collect()
        record_settled(lakehouse, updates)
        causes = live.batch_causes(
            lakehouse.read("provisional").filter(of_runs), anomalies, outages
        ).withColumn("causes_batch", F.lit(batch_id).cast("long"))
        lakehouse.update_changed("provisional", causes, CAUSES_CHANGED, compared=["causes"])


def record_reconciled(lakehouse: Lakehouse, runs: dict[str, int]) -> None:
    """Note `runs` ({run: micro-batch}) reconciled up to that micro-batch."""
    if runs:  # runs: a short list
        at = datetime.now(UTC).replace(tzinfo=None)
        rows = [(run, batch, at) for run, batch in sorted(runs.items())]
        lakehouse.merge("live_reconciled", local_frame(lakehouse.spark, rows, LIVE_RECONCILED))
