"""The correctness suite: `analyze` on one small simulated run per scenario must report exactly
the truth file's counts, anomaly blocks and outages.

The default run simulates and checks DEFAULT_RUNS, one per kind of finding (a clean run with
reordered callbacks, an unload's outage, duplicates from a failover retry with Shared and
Failover consumers, acked loss, Key_Shared's ordering bug, Failover's overlap); the long tier
(`-m long`, PULSAR_AUDIT_LONG_TESTS=1) runs the whole SUITE and checks its coverage."""

from __future__ import annotations

import pytest
from agreement import disagreements
from opt_in import long_tier_on

from jobs.analyze import analyze
from pulsar_audit.delta_io import Lakehouse
from simulate.run import simulate_run
from simulate.scenario import scenario_from

SMALL = {"messages": 1000, "entries_per_ledger": 300}
KEY_SHARED_CHURN = {"consumers": 3, "mode": "auto_split", "churn": ["join:0.3", "leave:0.6"]}
# run_id → simulate options; each exercises one protocol path.
SUITE = {
    "control": {
        "scenario": "control",
        "config": "2-2-2",
        "early_stop": 0.5,
        "callback_reorder_every": 250,
    },
    "unload": {"scenario": "unload", "seed": 3},
    "transfer": {"scenario": "transfer"},
    "kill-broker": {"scenario": "kill-broker", "ack_return_us": 1500},
    # with a Shared and a Failover subscription whose consumers leave inside / before the
    # duplicated block, so a rewritten copy can reach a consumer that never got the first
    "isolate-broker": {
        "scenario": "isolate-broker",
        "ack_return_us": 1500,
        "shared_crash": 0.8,
        "failover_crash": 0.45,
    },
    "isolate-broker-dedup": {"scenario": "isolate-broker", "ack_return_us": 1500, "dedup": True},
    "kill-bookie": {"scenario": "kill-bookie", "config": "2-2-1"},
    "isolate-bookie": {"scenario": "isolate-bookie"},
    "kill-bookies": {"scenario": "kill-bookies:2", "config": "3-3-1", "bookies": 5},
    "kill-qw-bookies": {"scenario": "kill-qw-bookies", "bookies": 5, "auto_skip": True},
    "partitioned-unload": {"scenario": "unload", "partitions": 2, "seed": 4},
    # as the real data set's cluster: isolated owner on Pulsar 4.0's default policy; bookies
    # restarted 12 s after the kill (10 s sessions), fewer than E left meanwhile: a stall
    "isolate-broker-reconnect": {
        "scenario": "isolate-broker",
        "ack_return_us": 1500,
        "session_expired": "reconnect",
    },
    "kill-bookies-restart": {
        "scenario": "kill-bookies:2",
        "config": "2-2-2",
        "bookie_restart_ms": 12_000,
        "session_timeout_ms": 10_000,
    },
    "kill-qw-bookies-stall": {
        "scenario": "kill-qw-bookies",
        "config": "2-2-2",
        "bookie_restart_ms": 12_000,
        "session_timeout_ms": 10_000,
    },
    # issue 27's disk loss: the write quorum killed, wiped and restarted empty 12 s later
    "wipe-qw-bookies-disk": {
        "scenario": "wipe-qw-bookies-disk",
        "config": "2-2-1",
        "bookie_restart_ms": 12_000,
        "session_timeout_ms": 10_000,
        "auto_skip": True,
    },
    "partition-broker-from-bookies": {"scenario": "partition-broker-from-bookies"},
    # the subscription types (docs/subscription-types.md): Key_Shared with a consumer joining
    # and one leaving, dispatched correctly; the same with apache/pulsar's ordering bug on the
    # join, on two partitions; Failover whose old active consumer keeps receiving for 2 ms
    "key-shared": {"scenario": "control", "keys": 16, "key_shared": KEY_SHARED_CHURN},
    "key-shared-reorder": {
        "scenario": "control",
        "partitions": 2,
        "keys": 16,
        "key_shared": {**KEY_SHARED_CHURN, "bug": "reorder"},
    },
    "failover-overlap": {
        "scenario": "control",
        "failover_crash": 0.45,
        "failover_bug": "overlap",
    },
}
DEFAULT_RUNS = (
    "control",
    "unload",
    "isolate-broker",
    "kill-qw-bookies",
    "key-shared-reorder",
    "failover-overlap",
)


@pytest.fixture(scope="module")
def simulated(spark, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):
    """The suite's runs (all of them in the long tier) simulated under one folder, then one
    `analyze` over all of them."""
    from pulsar_audit.config import load_config

    root = tmp_path_factory.mktemp("simulated")
    config = load_config("local", lakehouse=str(root / "lakehouse"))
    lakehouse = Lakehouse(spark, config)
    lakehouse.create_all()
    truths = {}
    chosen = SUITE if long_tier_on(request.config) else {r: SUITE[r] for r in DEFAULT_RUNS}
    for run_id, options in chosen.items():
        scenario = scenario_from({**SMALL, **options, "run_id": f"suite-{run_id}"})
        truths[run_id] = simulate_run(
            spark,
            scenario,
            root / "runs" / run_id,
            config.pipeline.outage_threshold_ms,
            list(config.pipeline.backoff_ladder_ms),
            stuck_key_ms=config.pipeline.stuck_key_ms,
        )
    report = analyze(lakehouse, config, root / "runs")
    return truths, report


@pytest.mark.parametrize(
    "run_id", [r if r in DEFAULT_RUNS else pytest.param(r, marks=pytest.mark.long) for r in SUITE]
)
def test_analyze_agrees_with_the_truth(simulated, run_id: str):
    truths, report = simulated
    found = disagreements(report, truths[run_id])
    assert found == [], "\n".join(found)


@pytest.mark.long
def test_the_suite_covers_the_protocol_paths(simulated):
    """The truth itself has the shapes each scenario is for (so agreement is not vacuous)."""
    truths, _ = simulated

    def total(run_id: str, kind: str, subscription: str = "reader-1") -> int:
        return sum(
            a["count"]
            for a in truths[run_id]["anomalies"]
            if a["kind"] == kind and a["subscription"] == subscription
        )

    assert truths["unload"]["outages"] and not truths["transfer"]["outages"]
    assert total("isolate-broker", "duplicated") > 0
    assert total("isolate-broker-dedup", "duplicated") == 0
    assert total("kill-broker", "unacked_received") > 0
    assert truths["kill-broker"]["runs"][0]["nacked"] > 0
    assert total("kill-qw-bookies", "unseen") > 0
    assert total("kill-qw-bookies", "unseen", "sub-1") == 0
    assert total("control", "unseen", "reader-early") > 0
    assert total("kill-qw-bookies", "lost", "reader-skip") > 0  # read past the lost fragment
    assert total("kill-qw-bookies", "poll_skip", "reader-skip") > 0
    # the control run's acks are recorded out of order (callback_reorder_every): no
    # non-monotonic send, since each later send still got a higher MessageId (issue 26)
    assert total("control", "nonmonotonic_send", None) == 0
    lost = [(t, r["subscription"]) for t, x in truths.items() for r in x["runs"] if r["lost"]]
    assert lost == [("kill-qw-bookies", "reader-skip"), ("wipe-qw-bookies-disk", "reader-skip")]
    # the wiped bookies came back empty: sub-1, which reads after they returned, is stuck too
    assert total("wipe-qw-bookies-disk", "unseen", "sub-1") > 0
    shared = {r["subscription"]: r for r in truths["isolate-broker"]["runs"]}
    # each of shared-b's unacked ones, after a higher seq: information on a Shared subscription
    assert shared["sub-shared"]["shared_reordered"] >= 10
    assert shared["sub-shared"]["out_of_order"] == 0
    assert shared["sub-shared"]["valid"] != "false"
    assert shared["sub-shared"]["redelivered"] == 10  # to shared-a, under the same MessageIds
    assert shared["sub-shared"]["poll_skip"] == 0  # splitting the entries is no skip
    # the real data set's shapes: a clean close on session loss duplicates nothing; fewer than
    # E bookies left stalls the producer until the restarted bookies serve (18 s real), or
    # until every send timed out when they return only later (kill-qw-bookies, 30 s real);
    # a broker cut off from its bookies writes again about 6 s after the heal (26 s real)
    assert total("isolate-broker-reconnect", "duplicated") == 0
    assert truths["isolate-broker-reconnect"]["outages"]
    stalls = ("kill-bookies-restart", "kill-qw-bookies-stall", "partition-broker-from-bookies")
    longest = {k: max(o["duration_ms"] for o in truths[k]["outages"]) for k in stalls}
    assert 17_500 <= longest["kill-bookies-restart"] <= 18_500
    assert longest["kill-qw-bookies-stall"] >= 29_000
    assert 25_500 <= longest["partition-broker-from-bookies"] <= 26_500
    stalled = truths["kill-qw-bookies-stall"]["runs"][0]
    assert stalled["nacked"] > 0 and total("kill-qw-bookies-stall", "unseen") > 0
    assert not any(r["nacked"] for r in truths["kill-bookies-restart"]["runs"])
    assert shared["sub-failover"]["redelivered"] == 10
    assert shared["sub-failover"]["failover_overlap"] == 0  # takes over after the other left
    assert shared["sub-failover"]["received"] == shared["sub-1"]["received"]
    recovery = truths["kill-bookie"]["plan"]["autorecovery"]
    assert recovery and not any(r["re_replicable"] for r in recovery)  # Qa = 1 after a loss


@pytest.mark.long
def test_the_suite_covers_the_subscription_types(simulated):
    """Key_Shared clean and with the injected bug, Failover with two active consumers."""
    truths, _ = simulated

    def run(run_id: str, subscription: str) -> dict:
        return next(r for r in truths[run_id]["runs"] if r["subscription"] == subscription)

    key_kinds = ("key_out_of_order", "key_overlap", "stuck_key")
    clean = run("key-shared", "sub-keyshared")
    assert [clean[k] for k in key_kinds] == [0, 0, 0] and clean["valid"] == "true"
    assert clean["redelivered"] == 10  # keyshared-1's unacked tail, to its keys' new owners
    assert clean["received"] == clean["sent"]
    buggy = run("key-shared-reorder", "sub-keyshared")
    assert buggy["key_out_of_order"] > 0 and buggy["key_overlap"] == 0
    assert buggy["valid"] == "false"
    overlap = run("failover-overlap", "sub-failover")
    # 2 ms of reading (200 entries) after the leave, the standby active from 5 entries on:
    # 195 deliveries to each between two of the other's
    assert overlap["failover_overlap"] == 390 and overlap["valid"] == "false"
    assert {c["subscription_type"] for c in truths["key-shared"]["consumers"]} == {
        "Exclusive",
        "Key_Shared",
    }
