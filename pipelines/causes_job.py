"""The correlation job: rank causes for gold anomalies and outages from silver.infra_events.

Every finding's causes are ranked when the timeline, the settings or the ranking's code
changed, or when the causes were not current before the job (a new lakehouse; a job killed
between its pipeline and its correlation, whose next job ranks everything again). Otherwise
only the findings of the runs the job recomputed can have new causes, and only they are
ranked (`causes_scope`): a late file of one run costs the ranking of that run, not of the
whole lakehouse. Another job writing findings or the timeline beside it (a `watch`'s
reconciliation, a concurrent pipeline) makes the job rank everything
(`CausesBefore.alone_since`), and a ranking is recorded as current only if no other job wrote
them until its own commits were done (`CausesBefore.fingerprint_after`).
"""

from __future__ import annotations

import hashlib
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines import correlate, live
from pipelines.correlate import cause_rules, findings_of, rank_causes, with_causes
from pipelines.live_state import state_part
from pulsar_audit.config import Config
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.spark import side_by_side

log = logging.getLogger(__name__)


CAUSE_INPUTS = ("anomalies", "outages", "infra_events")
# the tables whose `causes` the correlation sets
CAUSE_OUTPUTS = ("anomalies", "outages")
# what a provisional finding's new causes set: them, and the micro-batch that changed them
CAUSES_CHANGED = ["causes", "causes_batch"]


# The ranking's own code (rules, windows, order): a change of it ranks every finding again.
# (read through its loader: on a Spark cluster's driver the package is a zip, pulsar_audit/spark.py)
RANKING_CODE = hashlib.sha256(inspect.getsource(correlate).encode()).hexdigest()[:16]
# Recorded instead of a fingerprint when another job wrote findings or the timeline while this
# one ranked: matches no lakehouse, so the next job ranks every finding.
NOT_CURRENT = "not current: another job wrote findings or the timeline during the ranking"


def causes_fingerprint(
    lakehouse: Lakehouse, config: Config, versions: dict[str, int] | None = None
) -> str:
    """What every finding's causes are ranked from: the findings' and the timeline's table
    versions (`versions`, else as they are now), the correlation's settings and code."""
    pipeline = config.pipeline
    versions = lakehouse.versions(CAUSE_INPUTS) if versions is None else versions
    settings = f"{pipeline.cause_before_ms};{pipeline.cause_after_ms};{RANKING_CODE}"
    return f"{settings};{sorted(versions.items())}"


def causes_current(lakehouse: Lakehouse, config: Config) -> bool:
    """Whether every finding's causes are ranked from the lakehouse as it is now."""
    return lakehouse.stage_is_current("causes", causes_fingerprint(lakehouse, config))


@dataclass(frozen=True)
class CausesBefore:
    """What a job saw of the causes' inputs before recomputing anything: whether every
    finding's causes were current, the inputs' committed versions and its own commits then."""

    current: bool
    versions: dict[str, int]
    own: dict[str, int]

    @classmethod
    def seen(cls, lakehouse: Lakehouse, config: Config) -> CausesBefore:
        versions = lakehouse.committed_versions(CAUSE_INPUTS)
        own = lakehouse.commit_counts(CAUSE_INPUTS)
        fingerprint = causes_fingerprint(lakehouse, config, versions)
        return cls(lakehouse.stage_is_current("causes", fingerprint), versions, own)

    def alone_since(self, lakehouse: Lakehouse, now: dict[str, int] | None = None) -> bool:
        """Whether the inputs moved only by this job's own commits since (another job's
        pipeline may have replaced findings it has not ranked yet, or never will).

        now: the committed versions, read by the caller before this call.
        """
        now = lakehouse.committed_versions(CAUSE_INPUTS) if now is None else now
        own = lakehouse.commit_counts(CAUSE_INPUTS)
        return all(now[t] - self.versions[t] == own[t] - self.own[t] for t in CAUSE_INPUTS)

    def fingerprint_after(self, lakehouse: Lakehouse, config: Config) -> str:
        """The fingerprint a ranking records once its job has committed: the versions then,
        or NOT_CURRENT when another job wrote the inputs since the job's first look."""
        now = lakehouse.committed_versions(CAUSE_INPUTS)
        if not self.alone_since(lakehouse, now):
            log.info("causes: another job wrote findings or the timeline meanwhile")
            return NOT_CURRENT
        return causes_fingerprint(lakehouse, config, now)


def causes_scope(current_before: bool, rebuilt: bool, recomputed: list[str]) -> list[str] | None:
    """The runs whose findings a job must rank (None: every finding).

    current_before: the causes were current before the job recomputed anything, and no other
    job has written findings or the timeline since; rebuilt: the job rebuilt the
    infrastructure timeline; recomputed: the runs whose findings it replaced. Then the other
    runs' findings and everything they are ranked from are as they were.
    """
    return list(recomputed) if current_before and not rebuilt else None


def refresh_causes(
    lakehouse: Lakehouse,
    config: Config,
    changed: bool = False,
    runs: list[str] | None = None,
    before: CausesBefore | None = None,
) -> bool:
    """Rank causes unless findings and infrastructure events are as they were; True if ranked.

    changed: the job has just recomputed findings or the timeline (no need to compare).
    runs: rank only these runs' findings (`causes_scope`); None: every finding.
    before: what the job saw before recomputing: the ranking is recorded as current only if
    no other job wrote the inputs since (else the next job ranks every finding).
    """
    if not changed and causes_current(lakehouse, config):
        log.info("causes: findings and infrastructure events unchanged, causes kept")
        return False
    if not lakehouse.written("infra_events"):
        log.info("causes: no infrastructure timeline, every finding keeps an empty cause list")
        return False
    attach_causes(lakehouse, config, runs)
    if before is None:
        lakehouse.record_stage("causes", lambda: causes_fingerprint(lakehouse, config))
    else:
        lakehouse.record_stage("causes", lambda: before.fingerprint_after(lakehouse, config))
    return True


def attach_causes(lakehouse: Lakehouse, config: Config, runs: list[str] | None = None) -> None:
    """Recompute `causes` of all findings (or of `runs`' findings); only rows whose causes
    changed are rewritten.

    Findings are blocks and stretches, not messages, so this stays small; running it again
    with the same inputs changes nothing.
    """
    anomalies = lakehouse.read("anomalies")
    outages = lakehouse.read("outages")
    if runs is not None:
        log.info("causes: ranking the findings of %d recomputed run(s) only", len(runs))
        anomalies = anomalies.filter(F.col("run_id").isin(runs))
        outages = outages.filter(F.col("run_id").isin(runs))
    ranked = rank_causes(
        findings_of(anomalies, outages),
        lakehouse.read("infra_events"),
        cause_rules(lakehouse.spark),
        config.pipeline.cause_before_ms,
        config.pipeline.cause_after_ms,
    ).persist()

    def update(table: str, key: str, df: DataFrame) -> Callable[[], None]:
        changed = with_causes(df, ranked, key)
        return lambda: lakehouse.update_changed(table, changed, ["causes"])

    try:  # two tables: their updates side by side
        side_by_side(
            update("anomalies", "anomaly_id", anomalies), update("outages", "outage_id", outages)
        )
    finally:
        ranked.unpersist()


def attach_provisional_causes(lakehouse: Lakehouse, config: Config, batch_id: int) -> bool:
    """Rank the causes of the open and confirmed provisional findings of the runs `watch`
    still watches (`live.ranked_live`) from the infrastructure timeline as it is now, by the
    same rules and windows as the batch findings'; only rows whose causes changed are
    rewritten, with `causes_batch` micro-batch `batch_id`. False (nothing ranked) while no
    log or ZooKeeper change was ever taken in.

    Findings, not messages: a few rows per run, so this stays small at any trace size."""
    if not lakehouse.written("infra_events"):
        return False
    state = lakehouse.read("live_state")
    watched = live.watched_runs(state_part(state, "live_runs"), lakehouse.read("live_reconciled"))
    rows = live.ranked_live(lakehouse.read("provisional"), watched)
    ranked = rank_causes(
        live.as_findings(rows, watched, state_part(state, "live_streams")),
        lakehouse.read("infra_events"),
        cause_rules(lakehouse.spark),
        config.pipeline.cause_before_ms,
        config.pipeline.cause_after_ms,
    )
    changed = with_causes(rows, ranked, "finding_id").withColumn(
        "causes_batch", F.lit(batch_id).cast("long")
    )
    lakehouse.update_changed("provisional", changed, CAUSES_CHANGED, compared=["causes"])
    return True
