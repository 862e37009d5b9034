"""What a simulated capture holds besides the trace: each run on days of its own, the
namespace's policies znode."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ingest.simulate.cli import scenario_from
from ingest.simulate.infra import write_infra
from ingest.simulate.plan import build_plan
from ingest.simulate.scenario import DAY_US, T0_US, Scenario, validate
from ingest.simulate.story import tell
from ingest.simulate.sweep import combinations, load_grid, place, run_days, run_sweep
from ingest.zk_ingest import ingest_zk
from models.score import cluster_settings
from pulsar_audit.errors import UsageError

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
            "cluster": "zk-0:2181",
            "namespace": "public/default",
            "ensemble_size": 3,
            "write_quorum": 2,
            "ack_quorum": 2,
            "deduplication": True,
            "bookies": 4,
            "brokers": 2,
        }
    ]
