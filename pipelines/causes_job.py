"""The correlation job: rank causes for every gold anomaly and outage from silver.infra_events."""

from __future__ import annotations

import logging
from collections.abc import Callable

from pyspark.sql import DataFrame

from pipelines.correlate import cause_rules, findings_of, rank_causes, with_causes
from pulsar_audit.config import Config
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.spark import side_by_side

log = logging.getLogger(__name__)


CAUSE_INPUTS = ("anomalies", "outages", "infra_events")
# the tables whose `causes` the correlation sets
CAUSE_OUTPUTS = ("anomalies", "outages")


def refresh_causes(lakehouse: Lakehouse, config: Config, changed: bool = False) -> bool:
    """Rank causes unless findings and infrastructure events are as they were; True if ranked.

    changed: the job has just recomputed findings or the timeline (no need to compare).
    """
    pipeline = config.pipeline

    def fingerprint() -> str:
        versions = sorted(lakehouse.versions(CAUSE_INPUTS).items())
        return f"{pipeline.cause_before_ms};{pipeline.cause_after_ms};{versions}"

    if not changed and lakehouse.stage_is_current("causes", fingerprint()):
        log.info("causes: findings and infrastructure events unchanged, causes kept")
        return False
    if not lakehouse.written("infra_events"):
        log.info("causes: no infrastructure timeline, every finding keeps an empty cause list")
        return False
    attach_causes(lakehouse, config)
    lakehouse.record_stage("causes", fingerprint)
    return True


def attach_causes(lakehouse: Lakehouse, config: Config) -> None:
    """Recompute `causes` of all findings; only rows whose causes changed are rewritten.

    Findings are blocks and stretches, not messages, so this stays small; running it again
    with the same inputs changes nothing.
    """
    anomalies = lakehouse.read("anomalies")
    outages = lakehouse.read("outages")
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
