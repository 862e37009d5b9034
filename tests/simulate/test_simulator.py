"""The simulator's own model: parsing, refusals, the backoff ladder, determinism, the trace."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from pulsar_audit.errors import UsageError
from simulate.backoff import latency, mix, mix_column, reconnect_after
from simulate.plan import build_plan
from simulate.run import simulate_run
from simulate.scenario import Scenario, parse_config, parse_scenario, validate


def test_parse_config_and_scenario():
    assert parse_config("3-2-2") == (3, 2, 2)
    assert parse_scenario("kill-bookies:2") == ("kill-bookies", 2)
    assert parse_scenario("unload") == ("unload", 1)
    for bad in ("2-3-1", "2-2", "a-b-c", "0-0-0"):
        with pytest.raises(UsageError, match="E-Qw-Qa|E >= Qw"):
            parse_config(bad)
    with pytest.raises(UsageError, match="unknown scenario"):
        parse_scenario("kill-everything")
    with pytest.raises(UsageError, match="needs a count"):
        parse_scenario("kill-bookies:x")


def test_refuses_what_the_model_cannot_run():
    with pytest.raises(UsageError, match="fewer than E=2"):
        validate(Scenario("kill-qw-bookies", "r", bookies=3))
    with pytest.raises(UsageError, match="at least 2 brokers"):
        validate(Scenario("unload", "r", brokers=1))
    assert validate(Scenario("kill-qw-bookies", "r", bookies=4)).name == "kill-qw-bookies"


def test_backoff_clusters_near_the_ladder():
    """Attempts at 100·2^k cut by up to 10 %: cumulative waits just under 100/300/700/1500 ms."""
    rng = random.Random(7)
    for available, ceiling in ((0, 0), (50_000, 100_000), (150_000, 300_000), (650_000, 700_000)):
        waited, delays = reconnect_after(rng, available)
        assert waited <= ceiling
        assert waited >= available
        assert waited >= ceiling * 0.9
        assert all(d <= 100_000 * 2**k for k, d in enumerate(delays))


def test_plan_is_deterministic_for_a_seed():
    a = build_plan(Scenario("kill-broker", "r", seed=5)).as_dict()
    b = build_plan(Scenario("kill-broker", "r", seed=5)).as_dict()
    c = build_plan(Scenario("kill-broker", "r", seed=6)).as_dict()
    assert a == b
    assert a != c


def test_kill_broker_times_out_the_pending_window():
    """Reconnect after the 30 s session expires → the pending window times out (30 s)."""
    plan = build_plan(Scenario("kill-broker", "r", messages=4000, ack_return_us=1500))
    stream = plan.streams[0]
    assert stream.t_reconnect - stream.t_fault > 30_000_000
    assert stream.pre > stream.resent  # some of the pre-reconnect sends timed out
    assert stream.new_lo == stream.a + stream.pre - stream.resent  # timed-out ones are not stored


def test_jitter_is_the_same_on_driver_and_spark(spark):
    from pyspark.sql import functions as F

    rows = spark.range(0, 50).select(mix_column(3, F.lit(1), F.col("id")).alias("h")).collect()
    assert [r.h for r in rows] == [mix(3, 1, seq) for seq in range(50)]
    assert 2000 <= latency(3, 1, 7, 2000, 1000) < 2900


def _lines(folder: Path) -> list[str]:
    found = []
    for file in sorted(folder.glob("*.jsonl.gz")):
        with gzip.open(file, "rt") as lines:
            found.extend(lines)
    return sorted(found)


def test_same_seed_same_run(spark, tmp_path: Path):
    scenario = Scenario(
        "isolate-broker",
        "det",
        messages=300,
        session_timeout_us=1_000_000,
        ack_return_us=1500,
        redeliver_every=50,
    )
    first = simulate_run(spark, scenario, tmp_path / "a")
    second = simulate_run(spark, scenario, tmp_path / "b")
    assert _lines(tmp_path / "a") == _lines(tmp_path / "b")
    assert first["runs"] == second["runs"]
    assert first["anomalies"] == second["anomalies"]
    events = [json.loads(line) for line in _lines(tmp_path / "a")]
    sends = [e for e in events if e["event"] == "send"]
    assert len(sends) == 300
    assert {e["event"] for e in events} == {
        "config", "chaos", "send", "ack", "receive", "end", "subscribe",
    }  # fmt: skip
    duplicated = sum(
        a["count"]
        for a in first["anomalies"]
        if a["kind"] == "duplicated" and a["subscription"] == "reader-1"
    )
    assert duplicated == first["plan"]["streams"][0]["written"] > 0


def test_a_wiped_write_quorum_restarts_empty(spark, tmp_path: Path):
    """As the real data set's wipe-qw-bookies-disk on 2-2-1 with 3 bookies (issue 27): the
    write quorum is killed, its disks wiped, and it restarts 12 s later registered but empty.
    The ledger written before the wipe is gone for every reader: the skipping reader loses it
    (acked loss), the others stay stuck at its first entry and, as the harness's readers,
    still show in the trace (their `subscribe` line) with nothing received: unknown."""
    with pytest.raises(UsageError, match="restarts empty"):
        validate(Scenario("wipe-qw-bookies-disk", "no-restart"))
    wipe = Scenario(
        "wipe-qw-bookies-disk", "wipe", ensemble=2, write_quorum=2, ack_quorum=1, bookies=3,
        brokers=1, messages=300, session_timeout_us=10_000_000, bookie_restart_us=12_000_000,
        auto_skip=True, ack_return_us=1500, redeliver_every=0,
    )  # fmt: skip
    truth = simulate_run(spark, wipe, tmp_path)
    ledger0 = truth["plan"]["streams"][0]["a"] + truth["plan"]["streams"][0]["written"]
    assert ledger0 == 148  # sent and stored before the wipe, all acked
    got = {
        r["subscription"]: (r["acked"], r["received"], r["lost"], r["unseen"], r["valid"])
        for r in truth["runs"]
    }
    assert got == {
        "reader-skip": (300, 300 - 148, 148, 0, "false"),
        "reader-1": (300, 0, 0, 300, "unknown"),
        "sub-1": (300, 0, 0, 300, "unknown"),
    }
    chaos = [(f["action"], f["end_us"] - f["effect_us"]) for f in truth["faults"]]
    assert chaos == [("wipe-qw-bookies-disk", 12_000_000)]
    assert not truth["plan"]["killed_bookies_return"]  # back, but without their copies
