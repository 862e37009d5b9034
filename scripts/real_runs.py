"""A labelled data set of real chaos runs: scenarios × E-Qw-Qa configs on a namespaced cluster.

    .venv/bin/python scripts/real_runs.py capture [--scenarios ...] [--configs ...] [--limit N]
    .venv/bin/python scripts/real_runs.py finish      # analyze every captured run, pack, manifest

`capture` starts one namespaced cluster (2 brokers, --bookies bookies, each process in its own
network namespace), runs every (scenario, config) of the grid against it, in round-robin order
so that a --limit keeps the grid's breadth, and keeps each run's folder (trace, broker, bookie
and client logs, ZooKeeper capture, capture.json) under --stage. `finish` runs `analyze --json`
once over the stage, then writes per run `<out>/<run_id>.tar.gz` (the trace sampled down to
--keep-events lines of each client if larger, the logs, the ZooKeeper capture and the run's
`summary.json` whole) and one manifest line per run in `<out>/manifest.jsonl`: scenario,
config, dedup, faults, Pulsar version, outcome.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from capture import chaos, cluster
from capture.admin import TopicName
from capture.harness import CaptureOptions, capture, new_run_id, parse_config
from capture.scenarios import NETNS_SESSION_MS
from pulsar_audit.paths import REPO_ROOT, cache_dir, pulsar_lib_dir

SCENARIOS = (
    "control",
    "isolate-broker-from-zk",
    "isolate-broker-from-zk+dedup",
    "kill-qw-bookies",
    "isolate-bookie-from-zk",
    "kill-bookie",
    "kill-broker",
    "kill-bookies:2",
    "partition-broker-from-bookies",
)
CONFIGS = ("2-2-1", "2-2-2", "3-2-2", "3-3-2", "3-3-3")
OUTCOME_FIELDS = ("sent", "acked", "nacked", "received", "lost", "unseen", "duplicated", "valid")


def pulsar_version() -> str:
    jars = sorted(pulsar_lib_dir().glob("org.apache.pulsar.pulsar-broker-[0-9]*.jar"))
    return jars[0].stem.rsplit("-", 1)[-1] if jars else "unknown"


def grid(scenarios: list[str], configs: list[str]) -> list[tuple[str, str]]:
    """Round-robin over scenarios: every scenario once per config before any repeats."""
    return [(s, c) for c, s in itertools.product(configs, scenarios)]


def capture_one(state, stage: Path, scenario: str, config: str, args) -> dict:  # noqa: ANN001
    name, dedup = scenario.removesuffix("+dedup"), scenario.endswith("+dedup")
    run_id = new_run_id(name.replace(":", ""))
    spec = None
    if name != "control":
        at = max(1, int(args.messages * args.fault_at))
        spec = chaos.ChaosSpec.parse(f"{name}@{at}", hold_s=args.hold_s)
    opts = CaptureOptions(
        service_url=state.service_url, admin_url=state.admin_url,
        topic=TopicName.parse(run_id).full, messages=args.messages, out=stage / run_id,
        config=parse_config(config), chaos=spec, deduplication=dedup,
        scenario=spec.label if spec else name, run_id=run_id, rate=args.rate,
    )  # fmt: skip
    started = time.monotonic()
    summary = capture(opts, state)
    return {"run_id": run_id, "wall_s": round(time.monotonic() - started, 1), **summary}


def captured(manifest: Path) -> set[tuple[str, str]]:
    """The (scenario, config) pairs the data set's manifest already holds ("+dedup" marked)."""
    if not manifest.exists():
        return set()
    rows = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
    return {(r["scenario"] + ("+dedup" if r["dedup"] else ""), r["config"]) for r in rows}


def cmd_capture(args: argparse.Namespace) -> None:
    stage = Path(args.stage)
    stage.mkdir(parents=True, exist_ok=True)
    workdir = Path(args.workdir)
    done = set() if args.repeat else captured(Path(args.out) / "manifest.jsonl")
    todo = [pair for pair in grid(args.scenarios, args.configs) if pair not in done]
    print(f"{len(done)} (scenario, config) pairs in the data set; {len(todo)} to go", flush=True)  # noqa: T201
    state = cluster.up(workdir, 2, args.bookies, netns=True, session_ms=NETNS_SESSION_MS)
    print(f"cluster up in {state.startup_s} s", flush=True)  # noqa: T201
    try:
        for scenario, config in todo[: args.limit]:
            try:
                result = capture_one(state, stage, scenario, config, args)
                line = f"{result['run_id']}: {result['acked']}/{result['messages']} acked"
                print(f"{line} in {result['wall_s']} s, chaos {result['chaos']}", flush=True)  # noqa: T201
            except Exception as exc:  # noqa: BLE001 - one failed run must not end the grid
                print(f"{scenario} {config}: FAILED {type(exc).__name__}: {exc}", flush=True)  # noqa: T201
            chaos._restart_dead(state)
    finally:
        cluster.down(workdir)


def _sampled(path: Path, keep: int) -> bytes:
    """The trace file, or its first `keep` lines per client when it is longer."""
    lines = path.read_bytes().splitlines(keepends=True)
    if len(lines) <= keep:
        return b"".join(lines)
    seen: dict[str, int] = {}
    kept = []
    for line in lines:
        client = json.loads(line).get("client", "")
        seen[client] = seen.get(client, 0) + 1
        if seen[client] <= keep:
            kept.append(line)
    return b"".join(kept)


def _pack(run_dir: Path, summary: dict, dest: Path, keep: int) -> None:
    with tarfile.open(dest, "w:gz") as tar:
        for path in sorted(run_dir.rglob("*")):
            if not path.is_file():
                continue
            arcname = f"{run_dir.name}/{path.relative_to(run_dir)}"
            data = (
                _sampled(path, keep) if path.suffix == ".jsonl" and path.parent == run_dir else None
            )
            if data is None:
                tar.add(path, arcname)
            else:
                info = tarfile.TarInfo(arcname)
                info.size, info.mtime = len(data), int(path.stat().st_mtime)
                tar.addfile(info, io.BytesIO(data))
        blob = json.dumps(summary, indent=1, default=str).encode()
        info = tarfile.TarInfo(f"{run_dir.name}/summary.json")
        info.size, info.mtime = len(blob), int(time.time())
        tar.addfile(info, io.BytesIO(blob))


def _faults(run_dir: Path) -> list[dict]:
    faults = []
    for path in run_dir.glob("*.jsonl"):
        with path.open() as handle:
            for line in handle:
                if '"event":"chaos"' in line:
                    event = json.loads(line)
                    faults.append({k: event.get(k) for k in ("ts", "action", "target", "phase")})
    return sorted(faults, key=lambda f: f["ts"])


def manifest_row(run_dir: Path, summary: dict, version: str) -> dict:
    config = json.loads((run_dir / "capture.json").read_text())
    setup = next(
        json.loads(line)
        for path in run_dir.glob("*.jsonl")
        for line in path.open()
        if '"event":"config"' in line
    )
    readers = [{k: row[k] for k in ("subscription", *OUTCOME_FIELDS)} for row in summary["runs"]]
    final = readers[-1] if readers else {}
    kinds = sorted({a["kind"] for a in summary["anomalies"]})
    return {
        "run_id": run_dir.name,
        "scenario": setup["scenario"],
        "config": f"{setup['ensemble_size']}-{setup['write_quorum']}-{setup['ack_quorum']}",
        "dedup": setup["deduplication"],
        "brokers": setup["brokers"],
        "bookies": setup["bookies"],
        "messages": setup["messages"],
        "netns": setup.get("netns", False),
        "pulsar_version": version,
        "faults": _faults(run_dir),
        "outcome": {
            "valid": final.get("valid"),
            "lost": final.get("lost"),
            "duplicated": final.get("duplicated"),
            "nacked": config.get("nacked"),
            "anomaly_kinds": kinds,
            "outages": len(summary["outages"]),
            "first_causes": sorted(
                {
                    (f["causes"] or [{}])[0].get("event_type") or "none"
                    for f in summary["anomalies"] + summary["outages"]
                }
            ),  # fmt: skip
        },
        "readers": readers,
        "archive": f"{run_dir.name}.tar.gz",
    }


def cmd_finish(args: argparse.Namespace) -> None:
    stage, out = Path(args.stage), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = sorted(p for p in stage.iterdir() if (p / "capture.json").exists())
    lakehouse = Path(args.lakehouse)
    result = subprocess.run(
        [str(Path(sys.executable).parent / "pulsar-audit"), "analyze", str(stage), "--json",
         "--lakehouse", str(lakehouse)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode not in (0, 1):
        raise SystemExit(f"analyze failed ({result.returncode}):\n{result.stderr[-3000:]}")
    analyzed = json.loads(result.stdout)
    version = pulsar_version()
    manifest_path = out / "manifest.jsonl"
    existing = {}
    if manifest_path.exists():
        for line in manifest_path.read_text().splitlines():
            row = json.loads(line)
            existing[row["run_id"]] = row
    for run_dir in runs:
        summary = {
            key: [r for r in analyzed[key] if r["run_id"] == run_dir.name]
            for key in ("runs", "outages", "anomalies")
        }
        _pack(run_dir, summary, out / f"{run_dir.name}.tar.gz", args.keep_events)
        existing[run_dir.name] = manifest_row(run_dir, summary, version)
    manifest_path.write_text(
        "".join(json.dumps(row, default=str) + "\n" for _, row in sorted(existing.items()))
    )
    print(f"{len(runs)} runs packed into {out}; manifest has {len(existing)} runs")  # noqa: T201


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    cap = sub.add_parser("capture", help="run the grid on a namespaced cluster")
    cap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS))
    cap.add_argument("--configs", nargs="+", default=list(CONFIGS))
    cap.add_argument("--limit", type=int, default=None, help="at most N runs")
    cap.add_argument("--bookies", type=int, default=3)
    cap.add_argument("--messages", type=int, default=1500)
    cap.add_argument("--rate", type=float, default=150.0)
    cap.add_argument("--fault-at", type=float, default=0.25)
    cap.add_argument("--hold-s", type=float, default=15.0)
    cap.add_argument("--workdir", default=str(cache_dir() / "pulsar" / "real-runs-cluster"))
    cap.add_argument(
        "--repeat", action="store_true", help="also the pairs the data set (--out) already holds"
    )
    fin = sub.add_parser("finish", help="analyze, pack and list every captured run")
    fin.add_argument("--keep-events", type=int, default=4000, help="trace lines per client")
    fin.add_argument("--lakehouse", default=str(cache_dir() / "real-runs-lakehouse"))
    for p in (cap, fin):
        p.add_argument("--stage", default=str(cache_dir() / "real-runs"))
        p.add_argument("--out", default=str(REPO_ROOT / "data" / "real-runs"))
    args = parser.parse_args()
    {"capture": cmd_capture, "finish": cmd_finish}[args.command](args)


if __name__ == "__main__":
    main()
