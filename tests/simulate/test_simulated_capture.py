"""What a simulated capture holds besides the trace: each run on days of its own, the
namespace's policies znode, and a fault's end as the harness records it."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.sql import functions as F
from trace_lines import parse_lines

from ingest.zk_ingest import ingest_zk
from models.features import run_faults
from models.score import cluster_settings
from pulsar_audit.errors import UsageError
from simulate import consumers as C
from simulate.infra import write_infra
from simulate.plan import build_plan
from simulate.scenario import DAY_US, T0_US, Scenario, scenario_from, validate
from simulate.story import tell
from simulate.sweep import combinations, load_grid, place, run_days, run_sweep
from simulate.trace import run_events

EXAMPLE_GRID = Path(__file__).resolve().parents[2] / "examples" / "simulate-grid.yaml"


def test_a_run_starts_on_a_day_picked_from_its_seed_and_run_id():
    first = Scenario("unload", "r1", seed=1)
    assert first.t0_us == Scenario("unload", "r1", seed=1).t0_us  # deterministic
    assert first.t0_us % DAY_US == 10 * 3_600_000_000  # 10:00 UTC of its day
    assert first.t0_us >= T0_US
    others = {Scenario("unload", "r1", seed=2).t0_us, Scenario("unload", "r2", seed=1).t0_us}
    assert first.t0_us not in others
    assert Scenario("unload", "r1", t0_us=T0_US).t0_us == T0_US  # given, kept
    plan = build_plan(first)
    assert plan.owners[0]["from_us"] == first.t0_us - 1_000_000
    assert plan.faults[0]["effect_us"] - first.t0_us == 1000 * 1000 + 500  # seq 1000, mid-send


def test_no_two_runs_of_the_example_sweep_share_a_day():
    taken: set[int] = set()
    spans = []
    for n, values in enumerate(combinations(load_grid(EXAMPLE_GRID))):
        try:
            scenario = validate(scenario_from({**values, "run_id": f"sweep-{n:05d}"}))
        except UsageError:
            continue
        spans.append(run_days(place(scenario, taken)))
    spans.sort(key=lambda days: days.start)
    assert len(spans) == 210  # 216 combinations, 6 refused
    pairs = zip(spans, spans[1:], strict=False)
    assert all(later.start > earlier.stop for earlier, later in pairs)  # a whole day between


def _times(folder: Path) -> list[datetime]:
    """Every timestamp the run's files hold: trace lines, logs, the ZooKeeper capture."""
    found = []
    for file in folder.glob("*.jsonl.gz"):
        with gzip.open(file, "rt") as lines:
            found += [datetime.fromtimestamp(json.loads(x)["ts"] / 1000, UTC) for x in lines]
    for line in (folder / "cluster.zk.jsonl").read_text().splitlines():
        found.append(datetime.fromisoformat(json.loads(line)["ts"]))
    for log in folder.glob("logs/*/*.log"):
        for line in log.read_text().splitlines():
            stamp = line[:23].replace(",", ".").replace(" ", "T")
            found.append(datetime.fromisoformat(stamp).replace(tzinfo=UTC))
    return found


def test_two_runs_of_a_sweep_do_not_overlap_in_time(spark, tmp_path: Path):
    """Both runs asked to start at the same instant: the sweep moves the second whole days on,
    and every line either run wrote lies on its own days, a day or more from the other's."""
    grid = tmp_path / "grid.yaml"
    grid.write_text(
        "scenario: [unload, isolate-broker]\nmessages: 50\nentries_per_ledger: 20\n"
        f"ack_return_us: 1500\nsession_timeout_ms: 2000\nt0_us: {T0_US}\n"
    )
    out = tmp_path / "sweep"
    assert run_sweep(spark, grid, out, 100, [100, 300, 700])["done"] == 2
    runs = json.loads((out / "manifest.json").read_text())["runs"]
    assert runs[0]["t0_us"] == T0_US and runs[1]["t0_us"] > T0_US + DAY_US
    spans = []
    for run in runs:
        times = _times(out / run["folder"])
        scenario = scenario_from({**run["values"], "t0_us": run["t0_us"]})
        days = run_days(scenario)
        assert {t.timestamp() // 86_400 for t in times} <= set(days)  # the bound holds
        spans.append((min(times), max(times)))
    (_, first_end), (second_start, _) = sorted(spans)
    assert second_start - first_end > timedelta(days=1)


def test_the_capture_holds_the_namespace_policies_risk_score_reads(lakehouse, tmp_path: Path):
    scenario = Scenario("control", "pol", 3, 2, 2, bookies=4, brokers=2, dedup=True)
    plan = build_plan(scenario)
    story = tell(plan)
    capture = tmp_path / "capture"
    write_infra(plan, story.lines, story.zk, capture)
    rows = [json.loads(x) for x in (capture / "cluster.zk.jsonl").read_text().splitlines()]
    policy = next(r for r in rows if r["path"] == "/admin/policies/public/default")
    assert policy["op"] == "snapshot" and policy["capture_id"] == "simulated-pol"
    assert policy["data"].startswith('{"auth_policies":{"namespace_auth":{}')  # Pulsar's order
    assert json.loads(policy["data"])["persistence"] == {
        "bookkeeperEnsemble": 3,
        "bookkeeperWriteQuorum": 2,
        "bookkeeperAckQuorum": 2,
        "managedLedgerMaxMarkDeleteRate": 0.0,
    }
    assert ingest_zk(lakehouse, capture).accepted == len(rows)
    settings = [r.asDict() for r in cluster_settings(lakehouse.read("zk_changes")).collect()]
    assert settings == [
        {
            "cluster": "zk-0.pol:2181",
            "namespace": "public/default",
            "ensemble_size": 3,
            "write_quorum": 2,
            "ack_quorum": 2,
            "deduplication": True,
            "bookies": 4,
            "brokers": 2,
        }
    ]


def _chaos(plan) -> list[dict]:  # noqa: ANN001
    return [
        {k: e[k] for k in ("action", "target", "phase", "ts")}
        for e in run_events(plan)
        if e["event"] == "chaos"
    ]


def test_a_fault_that_is_undone_has_an_end_like_the_harness_records():
    isolated = build_plan(scenario_from({"scenario": "isolate-broker", "run_id": "i"}))
    t_fault, owner = isolated.faults[0]["effect_us"], isolated.owners[0]["broker"]
    start = t_fault - 30_000_000  # cut a session timeout before the session expired
    assert _chaos(isolated) == [
        {"action": "isolate-broker-from-zk", "target": owner, "phase": "start",
         "ts": start / 1000},
        {"action": "isolate-broker-from-zk", "target": owner, "phase": "end",
         "ts": (t_fault + 5_000_000) / 1000},
    ]  # fmt: skip
    bookie = build_plan(scenario_from({"scenario": "isolate-bookie", "run_id": "b"}))
    ends = [e for e in _chaos(bookie) if e["phase"] == "end"]
    assert [e["ts"] * 1000 - bookie.faults[0]["ts_us"] for e in ends] == [35_000_000]
    for name in ("unload", "transfer", "kill-broker", "kill-bookie"):  # never undone here
        plan = C.with_bookies_return(build_plan(scenario_from({"scenario": name, "run_id": "x"})))
        assert [e["phase"] for e in _chaos(plan)] == ["start"]


def test_killed_bookies_return_between_the_reads_with_and_without_them():
    values = {"scenario": "kill-qw-bookies", "bookies": 5, "auto_skip": True, "run_id": "q"}
    plan = C.with_bookies_return(build_plan(scenario_from(values)))
    readers = [c.name for c in C.consumers(plan)]
    assert readers == ["reader-1", "reader-skip", "consumer-1"]  # with the bookies down first
    start, end = _chaos(plan)
    assert (start["phase"], end["phase"], end["target"]) == ("start", "end", start["target"])
    back = end["ts"] * 1000
    # after reader-skip's last line, before consumer-1's first (1 s apart)
    assert C.read_start_us(plan, 2) - 1_000_000 < back < C.read_start_us(plan, 2)
    registered = [
        row["path"]
        for row in tell(plan).zk
        if row["op"] == "create" and row["path"].startswith("/ledgers/available/")
        and datetime.fromisoformat(row["ts"]).timestamp() * 1e6 > back - 1000  # ms stamps
    ]  # fmt: skip
    assert sorted(registered) == sorted(
        f"/ledgers/available/{b}:3181" for b in start["target"].split(",")
    )


def test_risk_features_read_the_simulated_fault_ends(spark):
    """models/features.run_faults takes a fault's duration from its start and end lines."""
    lines = []
    for run, scenario in (("iso", "isolate-broker"), ("qw", "kill-qw-bookies")):
        plan = C.with_bookies_return(
            build_plan(scenario_from({"scenario": scenario, "bookies": 5, "run_id": run}))
        )
        lines += [(f"/{run}/t.jsonl", n, json.dumps(e)) for n, e in enumerate(run_events(plan))]
    events = parse_lines(spark.createDataFrame(lines, "source_file string, line_number long, "
                                               "value string"))  # fmt: skip
    assert events.filter(F.col("reason").isNotNull()).count() == 0
    ends = spark.createDataFrame([("iso", None), ("qw", None)], "run_id string, last_ts timestamp")
    faults = {r.run_id: r for r in run_faults(events, ends).collect()}
    assert faults["iso"].fault_duration_s == 35.0
    assert not faults["iso"].bookies_restarted
    assert faults["qw"].bookies_restarted and faults["qw"].fault_duration_s > 60
    assert (faults["qw"].fault_kind, faults["qw"].fault_bookies) == ("kill-bookie", 2)


def test_chaos_events_name_what_the_harness_names():
    """capture/chaos.py: unload and transfer name the bundle (transfer its brokers too);
    bookie kills are recorded under their ChaosSpec label."""

    def start(values: dict) -> dict:  # noqa: ANN001
        plan = build_plan(scenario_from({"run_id": "h", "bookies": 5, **values}))
        return next(e for e in run_events(plan) if e["event"] == "chaos")

    unload = start({"scenario": "unload"})
    assert (unload["target"], unload["bundle"]) == (
        "public/default/0x00000000_0x40000000",
        "0x00000000_0x40000000",
    )
    plan = build_plan(scenario_from({"run_id": "h", "scenario": "transfer"}))
    transfer = start({"scenario": "transfer"})
    assert transfer["target"] == unload["target"]
    assert (transfer["from"], transfer["to"]) == (
        plan.owners[0]["broker"],
        plan.owners[1]["broker"],
    )
    killed = build_plan(scenario_from({"run_id": "h", "scenario": "kill-broker"}))
    assert start({"scenario": "kill-broker"})["target"] == killed.owners[0]["broker"]
    actions = [
        start({"scenario": name, "config": config})["action"]
        for name, config in (
            ("kill-bookie", "2-2-1"),
            ("kill-bookies:2", "3-3-1"),
            ("kill-qw-bookies", "2-2-1"),
        )
    ]
    assert actions == ["kill-bookie", "kill-bookies:2", "kill-qw-bookies"]


def test_each_runs_capture_names_a_zookeeper_of_its_own(tmp_path: Path):
    """`risk score` keeps the newest capture per ensemble: a sweep's runs are clusters of
    their own, so each capture names its own ensemble."""
    names = set()
    for run in ("r1", "r2"):
        plan = build_plan(Scenario("control", run))
        write_infra(plan, tell(plan).lines, tell(plan).zk, tmp_path / run)
        rows = (tmp_path / run / "cluster.zk.jsonl").read_text().splitlines()
        names |= {json.loads(row)["zookeeper"] for row in rows}
    assert names == {"zk-0.r1:2181", "zk-0.r2:2181"}
