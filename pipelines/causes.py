"""The correlation job: rank causes for every gold anomaly and outage from silver.infra_events."""

from __future__ import annotations

import logging

from pipelines.correlate import cause_rules, findings_of, rank_causes, with_causes
from pulsar_audit.config import Config
from pulsar_audit.delta_io import Lakehouse

log = logging.getLogger(__name__)


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
    try:
        for table, key, df in (
            ("anomalies", "anomaly_id", anomalies),
            ("outages", "outage_id", outages),
        ):
            lakehouse.update_changed(table, with_causes(df, ranked, key), ["causes"])
        log.info("causes: ranked for %d findings", ranked.count())
    finally:
        ranked.unpersist()
