"""Bronze → silver → gold as pure DataFrame transforms (no I/O): what the job and tests run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame

from pipelines.detect_duplicated import run_deduplication
from pipelines.detect_keys import consumer_joins
from pipelines.detect_outages import detect_outages
from pipelines.detectors import EVERY_CHECK, detect_anomalies
from pipelines.silver import (
    count_unattributed,
    resolve_receives,
    subscriptions,
)
from pipelines.verdict import summarize
from pulsar_audit.config import PipelineConfig


@dataclass(frozen=True)
class Bronze:
    """The bronze tables the pipeline reads (already checked by `checks/`)."""

    producer_events: DataFrame
    consumer_events: DataFrame
    run_events: DataFrame
    check_results: DataFrame


@dataclass(frozen=True)
class Silver:
    message_history: DataFrame
    delivery: DataFrame


@dataclass(frozen=True)
class Shared:
    """Frames that several steps read, derived once per pipeline run (the job persists them)."""

    receives: DataFrame
    subscriptions: DataFrame
    deduplication: DataFrame

    def persist(self) -> Shared:
        return Shared(*(df.persist() for df in self.frames()))

    def unpersist(self) -> None:
        for df in self.frames():
            df.unpersist()

    def frames(self) -> tuple[DataFrame, ...]:
        return (self.receives, self.subscriptions, self.deduplication)


def shared_frames(bronze: Bronze) -> Shared:
    """Resolved receives, subscriptions and each run's deduplication setting."""
    return Shared(
        resolve_receives(bronze.consumer_events, bronze.producer_events),
        subscriptions(bronze.consumer_events, bronze.producer_events),
        run_deduplication(bronze.run_events),
    )


def build_findings(
    bronze: Bronze,
    shared: Shared,
    silver: Silver,
    pipeline: PipelineConfig,
    checks: frozenset[str] = EVERY_CHECK,
    keep: Callable[[DataFrame], DataFrame] = lambda df: df,
) -> tuple[DataFrame, DataFrame]:
    """gold.anomalies and gold.outages (detectors leave `causes` empty for correlation).

    checks: the typed checks to build (`pipelines.detectors.typed_checks`); keep: how the
    job keeps the detectors' shared intermediate frames (`detect_anomalies`)."""
    anomalies = detect_anomalies(
        silver.message_history,
        silver.delivery,
        shared.subscriptions,
        shared.deduplication,
        consumer_joins(bronze.consumer_events),
        pipeline,
        checks,
        keep,
    )
    return anomalies, detect_outages(bronze.producer_events, pipeline)


def build_summary(
    bronze: Bronze, shared: Shared, silver: Silver, anomalies: DataFrame, outages: DataFrame
) -> DataFrame:
    """gold.run_summary from silver, the findings and bronze's run config and checks."""
    return summarize(
        silver.message_history,
        anomalies,
        outages,
        shared.subscriptions,
        count_unattributed(shared.receives),
        shared.deduplication,
        bronze.check_results,
    )
