"""The benchmark's reference checkers agree, and its generator injects every anomaly kind."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("duckdb", reason="the bench extra is not installed: pip install -e '.[bench]'")

from bench import dict_check, duckdb_check  # noqa: E402
from bench.counts import differences, totals  # noqa: E402
from bench.generate import PARTITIONED_TOPIC, PLAIN_TOPIC, generate  # noqa: E402

MESSAGES = 2_000


@pytest.fixture(scope="module")
def traces(spark, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench") / "traces"
    generate(spark, out, MESSAGES, seed=11)
    return out


def test_duckdb_and_dict_checkers_agree_on_every_count(traces: Path) -> None:
    by_duckdb = duckdb_check.check(traces)
    by_dict = dict_check.check(traces)

    assert differences(by_duckdb, by_dict) == []
    assert by_duckdb["records"] == by_dict["records"] > 3 * MESSAGES
    keys = [(r["topic"], r["subscription"]) for r in by_duckdb["runs"]]
    assert keys == [(PLAIN_TOPIC, "sub-a"), (PLAIN_TOPIC, "sub-b"), (PARTITIONED_TOPIC, "sub-a")]


def test_generator_injects_every_anomaly_kind(traces: Path) -> None:
    report = duckdb_check.check(traces)
    counts = totals(report)

    kinds = ["nacked", "lost", "unseen", "duplicated", "redelivered", "out_of_order"]
    assert [k for k in [*kinds, "unacked_received", "outages"] if counts[k] == 0] == []
    # Only cb1 (sub-b) has no `end`: sub-b's misses are unseen, sub-a's are lost.
    by_subscription = {r["subscription"]: r for r in report["runs"] if r["topic"] == PLAIN_TOPIC}
    assert by_subscription["sub-b"]["lost"] == 0 < by_subscription["sub-b"]["unseen"]
    assert by_subscription["sub-a"]["unseen"] == 0 < by_subscription["sub-a"]["lost"]


def test_generator_is_deterministic_for_a_seed(spark, traces: Path, tmp_path: Path) -> None:
    again = generate(spark, tmp_path / "again", MESSAGES, seed=11)

    assert [p.read_bytes() for p in again] == [(traces / p.name).read_bytes() for p in again]
