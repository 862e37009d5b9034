"""The benchmark: pulsar-audit analyze against DuckDB SQL and an in-memory dict checker.

    .venv/bin/python -m bench.run --sizes 1e4,1e5,1e6,2e6 [--with-1e7] [--with-1e8] [--workdir DIR]
    .venv/bin/python -m bench.run --sizes '' --with-1e8 --skip-fixed --in-steps --workdir DIR

For each size: simulate the trace once (bench/simulated.py: two chaos runs of the simulator,
with their ground truth), then time each checker as a whole process from a cold start,
sampling the peak RSS of its process tree: (a) `pulsar-audit analyze DIR --json` on a new
lakehouse, (b) bench/duckdb_check.py, (c) bench/dict_check.py. All three must agree on every
count, and with the simulator's truth; a disagreement (or a failed checker) exits 1 with the
differences. Once per invocation, the fixed costs against a bare local Spark session with
Delta. Prints tables; writes WORKDIR/results.json. See bench/README.md.

--in-steps: for a size whose analyze outlasts a session (10^8 here: hours), the trace is
generated resumably and analyze runs as its steps, each its own measured process (`ingest
traces`, `pipeline --run` per run, then `analyze`, which finds nothing new and prints the
counts); each step, DuckDB and the dict checker are recorded in WORKDIR/steps/SIZE.json once
they end well, and the same command run again skips them, keeping the lakehouse.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import psutil

from bench.counts import differences, from_analyze, totals
from bench.measure import Measured, run_measured, skipped
from bench.profiling import profiling_conf_dir
from bench.simulated import from_truth, simulated_messages, truth_folder
from bench.stage_profile import event_log_file, markdown, profile, step_markdown, step_profile
from pulsar_audit.config import CONF_DIR_VAR, DEFAULT_ENV, ENV_VAR, default_conf_dir
from pulsar_audit.jvm_archive import ARCHIVE_ENV

REPO = Path(__file__).resolve().parent.parent
PYTHON = str(REPO / ".venv" / "bin" / "python")
CLI = str(REPO / ".venv" / "bin" / "pulsar-audit")
PRODUCT_DIRS = (
    "pulsar_audit",
    "ingest",
    "checks",
    "pipelines",
    "serve",
    "jobs",
    "simulate",
    "conf",
)

# A second subscription of the examples' synthetic run that received seq 51, then ended: the
# small increment the fixed costs add to the examples' lakehouse (one run recomputed).
LATE_RECEIVE = {
    "run_id": "synthetic-faults",
    "topic": "persistent://public/default/orders",
    "role": "consumer",
    "client": "late-1",
    "partition": -1,
    "subscription": "late",
}
LATE_RECORDS = 2


def write_late_receive(folder: Path) -> Path:
    """`folder` with one trace file of LATE_RECORDS records for the examples' synthetic run."""
    receive = {"event": "receive", "seq": 51, "producer": "p1", "ledger_id": 10, "entry_id": 51}
    records = [
        {**LATE_RECEIVE, **receive, "ts": 1_741_082_409_000, "event_index": 0},
        {**LATE_RECEIVE, "event": "end", "ts": 1_741_082_409_100, "event_index": 1},
    ]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "late-reader.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def _size(text: str) -> tuple[str, int]:
    return text.strip(), int(float(text))


def _commit() -> dict[str, Any]:
    """The commit measured, and whether the product's code differed from it (work in progress)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, check=False
        ).stdout.strip()

    changed = git("status", "--porcelain", "--", *PRODUCT_DIRS)
    return {"commit": git("rev-parse", "HEAD"), "product_code_modified": bool(changed)}


class Bench:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.work = Path(args.workdir).resolve()
        self.results: dict[str, Any] = {
            "command": " ".join(sys.argv),
            **_commit(),
            "machine": {
                "cpus": os.cpu_count(),
                "memory_gb": round(psutil.virtual_memory().total / 1e9, 1),
                "load_at_start": os.getloadavg(),
                "python": platform.python_version(),
            },
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "fixed": {},
            "sizes": [],
        }
        self.failures: list[str] = []
        self.profiles: dict[str, list[dict[str, Any]]] = {}  # analyze's name → stage rows
        self.step_profiles: dict[str, list[dict[str, Any]]] = {}  # analyze's name → step rows
        self.analyze_steps: dict[str, list[dict[str, Any]]] = {}  # --in-steps: name → steps
        self.attempts: dict[tuple[str, str], int] = {}  # --in-steps: (label, step) → attempts

    # ------------------------------------------------------------------ helpers

    def measure(self, name: str, command: list[str], **limits: Any) -> Measured:
        print(f"  {name}: {' '.join(command)}", flush=True)
        result = run_measured(name, command, self.work / "logs", REPO, **limits)
        print(
            f"    {result.status}, {result.wall_s:.1f} s ({result.cpu_s:.1f} CPU s), "
            f"{result.peak_rss_gb:.2f} GB RSS, "
            f"{result.peak_pss_gb:.2f} GB PSS",
            flush=True,
        )
        if result.status not in ("ok",) and not result.status.startswith("skipped"):
            self.failures.append(f"{name}: {result.status} (exit {result.exit_code})")
        return result

    def record(self, m: Measured) -> dict[str, Any]:
        """What results.json keeps of a process: no stdout/stderr, the stage profile if any."""
        kept = {k: v for k, v in m.as_dict().items() if k not in ("stdout", "stderr")}
        if m.name in self.analyze_steps:
            kept["steps"] = self.analyze_steps[m.name]
        if m.name not in self.profiles:
            return kept
        steps = {"step_profile": self.step_profiles[m.name]} if m.name in self.step_profiles else {}
        return {**kept, "stage_profile": self.profiles[m.name], **steps}

    def fresh(self, path: Path) -> Path:
        shutil.rmtree(path, ignore_errors=True)
        return path

    def generate(
        self,
        label: str,
        folder: Path,
        messages: int,
        seed: int,
        prefix: str,
        form: str = "jsonl",
    ) -> dict:
        """Generate once: an existing trace with the same parameters is reused."""
        manifest = folder / "bench-manifest.json"
        wanted = {
            "generator": "simulator",
            "messages": messages,
            "seed": seed,
            "prefix": prefix,
            "gzip": self.args.gzip,
        }
        if form == "columnar":
            wanted = {**wanted, "gzip": False, "form": form}
        if manifest.exists() and json.loads(manifest.read_text()) == wanted:
            print(f"  generate {label}: reusing {folder}", flush=True)
            return {"generate_s": None, "reused": True}
        command = [PYTHON, "-m", "bench.simulated", "--messages", str(messages)]
        command += ["--seed", str(seed), "--out", str(folder), "--prefix", prefix]
        if self.args.in_steps:  # keep the runs a stopped generation finished
            command += ["--resume"]
        else:
            self.fresh(folder)
        if form == "columnar":
            command += ["--columnar"]
        elif self.args.gzip:
            command += ["--gzip"]
        result = self.measure(f"generate-{label}", command)
        if result.status != "ok":
            raise SystemExit(f"generating {label} failed:\n{result.stderr}")
        manifest.write_text(json.dumps(wanted))
        return {"generate_s": result.wall_s, "reused": False}

    def analyze(self, name: str, traces: Path, lakehouse: Path) -> Measured:
        command = [CLI, "analyze", str(traces), "--json", "--lakehouse", str(lakehouse)]
        if not self.args.profile:
            return self.measure(name, command, timeout_s=self.args.timeout)
        # --profile: a copy of the conf whose Spark writes its event log; -v logs stage walls
        events = self.work / "events" / name
        env = os.environ.get(ENV_VAR) or DEFAULT_ENV
        conf = profiling_conf_dir(default_conf_dir(), self.work / "conf" / name, env, events)
        result = self.measure(
            name, [*command, "-v"], timeout_s=self.args.timeout, env={CONF_DIR_VAR: str(conf)}
        )
        if result.status == "ok" and not any(events.iterdir()):
            print("    no stage profile: no Spark session started (nothing new)", flush=True)
            return result
        try:
            log = event_log_file(events)
            rows = profile(log, lakehouse, self.work / "logs" / f"{name}.err")
            steps = step_profile(log)
        except (OSError, ValueError) as exc:
            print(f"    no stage profile: {exc}", flush=True)
            self.failures.append(f"{name}: no stage profile ({exc})")
            return result
        self.profiles[name] = rows
        print("    " + markdown(rows).replace("\n", "\n    "), flush=True)
        if steps:  # the tables the pipeline computes and writes, each on its own
            self.step_profiles[name] = steps
            print("    " + step_markdown(steps).replace("\n", "\n    "), flush=True)
        return result

    def steps_file(self, label: str) -> Path:
        return self.work / "steps" / f"{label}.json"

    def once(self, label: str, step: str, run: Callable[[], Measured]) -> Measured:
        """With --in-steps, `run` measured once: its record is kept in WORKDIR/steps/LABEL.json
        when it ends well and reused by a later invocation; an attempt that did not (stopped
        with the session, failed) stays in the record's `earlier`. Without, just `run`."""
        if not self.args.in_steps:
            return run()
        path = self.steps_file(label)
        state = json.loads(path.read_text()) if path.exists() else {}
        record = state.get(step, {})
        commit = self.results["commit"]
        if record.get("status") == "ok":
            print(f"  {label} {step}: recorded in {path}, reused", flush=True)
            if record.get("commit") != commit:
                print(f"    (measured at commit {str(record.get('commit'))[:12]})", flush=True)
            self.attempts[(label, step)] = 1 + len(record.get("earlier", []))
            return Measured(**{f.name: record[f.name] for f in fields(Measured)})
        earlier = record.pop("earlier", [])
        earlier += [record] if record else []
        self.attempts[(label, step)] = 1 + len(earlier)
        path.parent.mkdir(parents=True, exist_ok=True)
        # an attempt stopped from outside leaves its start recorded
        started = {"name": step, "status": "started", "at": time.time(), "commit": commit}
        _write_json(path, {**state, step: {**started, "earlier": earlier}})
        m = run()
        kept = {k: v for k, v in m.as_dict().items() if m.status == "ok" or k != "stdout"}
        _write_json(path, {**state, step: {**kept, "commit": commit, "earlier": earlier}})
        return m

    def analyze_in_steps(self, name: str, label: str, traces: Path, lakehouse: Path) -> Measured:
        """`analyze` of `traces` as its steps, each measured and recorded (`once`): the ingest
        (which itself commits batch by batch), each run's pipeline, then `analyze`, which finds
        nothing new and prints the counts. The whole: the steps' walls and CPU summed, the
        largest peak RSS, the last step's output."""
        lake = str(lakehouse)
        runs = sorted(p.name for p in truth_folder(traces).iterdir() if p.is_dir())
        steps = [("ingest", [CLI, "ingest", "traces", str(traces), "--lakehouse", lake])]
        for run in runs:
            steps += [(f"pipeline-{run}", [CLI, "pipeline", "--run", run, "--lakehouse", lake])]
        steps += [("analyze", [CLI, "analyze", str(traces), "--json", "--lakehouse", lake])]
        done: list[Measured] = []
        timeout = self.args.timeout
        for step, command in steps:
            done.append(
                self.once(
                    label,
                    step,
                    lambda s=step, c=command: self.measure(f"{name}-{s}", c, timeout_s=timeout),
                )
            )
            if done[-1].status != "ok":
                break
        self.analyze_steps[name] = [
            {
                **{k: v for k, v in m.as_dict().items() if k not in ("stdout", "stderr")},
                "attempts": self.attempts.get((label, step), 1),
            }
            for m, (step, _) in zip(done, steps, strict=False)
        ]
        last = done[-1]
        ok = last.status == "ok"
        stdout = self.with_ingested(traces, lakehouse, last.stdout) if ok else last.stdout
        return Measured(
            name,
            [" ".join(c) for _, c in steps],
            round(sum(m.wall_s for m in done), 2),
            max(m.peak_rss_gb for m in done),
            max(m.peak_pss_gb for m in done),
            round(sum(m.cpu_s for m in done), 1),
            last.exit_code,
            last.status,  # the first step that did not end well, or the last one's "ok"
            stdout,
            last.stderr,
        )

    def with_ingested(self, traces: Path, lakehouse: Path, analyzed: str) -> str:
        """The last step's `analyze --json` (which found nothing new) with the ingest's counts
        of `traces`' files, from bronze.ingested_files: a resumed ingest reports only its own
        batches. Counted again each time (one query), not part of the steps' time."""
        query = (  # per folder, so that no path is written into the query
            "SELECT regexp_extract(path, '^(.*)/[^/]*$', 1) AS folder, count(*) AS files, "
            "sum(records) AS records, sum(accepted) AS accepted, "
            "sum(quarantined) AS quarantined FROM bronze.ingested_files "
            "WHERE kind = 'trace' GROUP BY 1"
        )
        command = [CLI, "sql", query, "--json", "--limit", "100000", "--lakehouse", str(lakehouse)]
        counted = self.measure(f"records-{traces.name}", command)
        if counted.status != "ok":  # a failure already; the records then differ
            return analyzed
        result = json.loads(analyzed)
        rows = json.loads(counted.stdout)["rows"]
        (row,) = [r for r in rows if r["folder"] == str(traces.resolve())] or [{}]
        counts = ("files", "records", "accepted", "quarantined")
        result["ingest"] = {k: int(row.get(k) or 0) for k in counts}
        return json.dumps(result)

    # ------------------------------------------------------------------ stages

    def fixed_costs(self) -> None:
        print("fixed costs", flush=True)
        scratch = self.work / "fixed"
        # the reference is a plain session: the product's class-data archive is not given to it
        # (pulsar_audit/jvm_archive.py); the same session with the archive is printed beside it
        bare_command = [PYTHON, "-m", "bench.bare_spark", str(self.fresh(scratch / "bare"))]
        bare = self.measure("bare-spark", bare_command, env={ARCHIVE_ENV: "off"})
        archived = self.measure("bare-spark-archive", bare_command)
        init_lake = self.fresh(scratch / "init")
        init = self.measure("init", [CLI, "init", "--json", "--lakehouse", str(init_lake)])
        examples_lake = self.fresh(scratch / "examples")
        examples = self.analyze("examples-new", REPO / "examples", examples_lake)
        rerun = self.analyze("examples-rerun", REPO / "examples", examples_lake)
        # after the rerun, which answers from the receipt only while examples/ was the last input
        late = write_late_receive(self.fresh(scratch / "increment"))
        increment = self.analyze("examples-increment", late, examples_lake)
        fixed = {
            "bare_spark": bare,
            "bare_spark_archive": archived,
            "init": init,
            "examples_new": examples,
            "rerun": rerun,
            "examples_increment": increment,
        }
        self.results["fixed"] = {
            name: {**self.record(m), "vs_bare": _ratio(m.wall_s, bare.wall_s)}
            for name, m in fixed.items()
        }
        self.results["fixed"]["examples_increment"]["vs_examples_new"] = _ratio(
            increment.wall_s, examples.wall_s
        )

    def size(self, size: str, messages: int, form: str = "jsonl") -> dict[str, Any]:
        label = size if form == "jsonl" else f"{size}-{form}"
        print(f"size {label} ({messages:,} messages, {form})", flush=True)
        traces = self.work / "traces" / label
        entry: dict[str, Any] = {"size": label, "messages": messages, "form": form}
        generated = self.generate(label, traces, messages, self.args.seed, "bench", form)
        entry.update(generated)
        entry["messages"] = simulated_messages(messages)  # N rounded to whole partitions
        entry["trace_bytes"] = sum(
            p.stat().st_size for p in traces.iterdir() if p.name.startswith("trace-")
        )
        lakehouse = self.work / "lakehouses" / label
        # kept only for steps recorded on this very trace (its manifest reused); anything else
        # starts anew, the increment's steps with it
        if not (self.args.in_steps and generated["reused"] and self.steps_file(label).exists()):
            self.fresh(lakehouse)
            for stale in (label, f"{label}-inc"):
                self.steps_file(stale).unlink(missing_ok=True)
        name = f"analyze-{label}"
        analyze = (
            self.analyze_in_steps(name, label, traces, lakehouse)
            if self.args.in_steps
            else self.analyze(name, traces, lakehouse)
        )
        duckdb = [PYTHON, "-m", "bench.duckdb_check", str(traces), "--threads", "2"]
        timeout = self.args.timeout
        runs: dict[str, Measured] = {
            "analyze": analyze,
            "duckdb": self.once(
                label, "duckdb", lambda: self.measure(f"duckdb-{label}", duckdb, timeout_s=timeout)
            ),
        }
        if messages > self.args.dict_max_messages:
            runs["dict"] = skipped(
                f"dict-{label}", [], f"over --dict-max-messages {self.args.dict_max_messages:,}"
            )
        else:
            dict_check = [PYTHON, "-m", "bench.dict_check", str(traces)]
            cap = self.args.dict_rss_cap_gb
            runs["dict"] = self.once(
                label,
                "dict",
                lambda: self.measure(
                    f"dict-{label}", dict_check, rss_cap_gb=cap, timeout_s=timeout
                ),
            )
        entry["checkers"] = {name: self.record(m) for name, m in runs.items()}
        entry.update(self.compare(label, runs, from_truth(traces)))
        walls = {n: m.wall_s for n, m in runs.items() if m.status == "ok"}
        entry["ratios"] = {
            "analyze_vs_duckdb": _ratio(walls.get("analyze"), walls.get("duckdb")),
            "dict_vs_analyze": _ratio(walls.get("dict"), walls.get("analyze")),
        }
        entry["lakehouse"] = str(lakehouse)
        return entry

    def compare(
        self, label: str, runs: dict[str, Measured], truth: dict[str, Any]
    ) -> dict[str, Any]:
        """Every count of every checker that finished, and the simulator's truth, against
        DuckDB's."""
        reports = {}
        for name, m in runs.items():
            if m.status != "ok":
                continue
            parsed = json.loads(m.stdout)
            reports[name] = from_analyze(parsed) if name == "analyze" else parsed
            if name == "analyze":
                quarantined = parsed["ingest"].get("quarantined", 0)
                if quarantined:
                    self.failures.append(f"analyze-{label}: {quarantined} records quarantined")
        records = {name: r["records"] for name, r in reports.items()}
        reports["truth"] = truth
        diffs: list[str] = []
        if "duckdb" in reports:
            for name in ("analyze", "dict", "truth"):
                if name in reports:
                    diffs += differences(reports[name], reports["duckdb"])
        if len(set(records.values())) > 1:
            diffs.append(f"records differ: {records}")
        if diffs:
            self.failures.append(f"size {label}: {len(diffs)} disagreement(s)")
        counts = totals(reports["duckdb"]) if "duckdb" in reports else {}
        # a checker skipped on purpose (the dict checker above its memory limit) is not a
        # disagreement; one that failed is
        failed = [
            n for n, m in runs.items() if m.status != "ok" and not m.status.startswith("skipped")
        ]
        return {
            "records": max(records.values(), default=0),
            "agree": not diffs and not failed and len(reports) >= 3,
            "compared": sorted(reports),
            "differences": diffs,
            "totals": counts,
        }

    def increment(self, label: str, messages: int, lakehouse: Path, full_wall: float) -> None:
        """One new run of 1 % of `messages` added to the lakehouse holding the size's run."""
        inc_label = f"{label}-inc"
        print(f"increment: a run of {messages // 100:,} messages into {lakehouse}", flush=True)
        traces = self.work / "traces" / inc_label
        generated = self.generate(inc_label, traces, messages // 100, self.args.seed + 1, "inc")
        if not generated["reused"]:  # steps recorded on another trace of the increment
            self.steps_file(inc_label).unlink(missing_ok=True)
        added = self.once(
            inc_label, "analyze", lambda: self.analyze(f"analyze-{inc_label}", traces, lakehouse)
        )
        duckdb = [PYTHON, "-m", "bench.duckdb_check", str(traces)]
        duck = self.once(inc_label, "duckdb", lambda: self.measure(f"duckdb-{inc_label}", duckdb))
        diffs = []
        if added.status == "ok" and duck.status == "ok":
            product = from_analyze(json.loads(added.stdout))
            product["runs"] = [r for r in product["runs"] if r["run_id"].startswith("inc-")]
            product["outages"] = [o for o in product["outages"] if o["run_id"].startswith("inc-")]
            duck_report = json.loads(duck.stdout)
            diffs = differences(product, duck_report) + differences(from_truth(traces), duck_report)
            if diffs:
                self.failures.append(f"increment {inc_label}: {len(diffs)} disagreement(s)")
        self.results["increment"] = {
            "size": label,
            "messages": messages // 100,
            **generated,
            "analyze": self.record(added),
            "attempts": self.attempts.get((inc_label, "analyze"), 1),
            "vs_full_run": _ratio(added.wall_s, full_wall),
            "differences": diffs,
        }

    def run(self) -> int:
        self.work.mkdir(parents=True, exist_ok=True)
        if not self.args.skip_fixed:
            self.fixed_costs()
        sizes, increment_on = size_plan(self.args)
        for label, messages, size_forms in sizes:
            for form in size_forms:
                self.results["sizes"].append(self.size(label, messages, form))
                self.write()
            # the size's first form: the increment's base
            entry = self.results["sizes"][-len(size_forms)]
            # onto a lakehouse whose analyze ended well only (a failed one is half built)
            if label == increment_on and entry["checkers"]["analyze"]["status"] == "ok":
                full = entry["checkers"]["analyze"]["wall_s"]
                self.increment(label, messages, Path(entry["lakehouse"]), full)
                self.write()
        self.results["failures"] = self.failures
        self.results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.write()
        print()
        print(render(self.results))
        return 1 if self.failures else 0

    def write(self) -> None:
        (self.work / "results.json").write_text(json.dumps(self.results, indent=1) + "\n")


def _write_json(path: Path, value: Any) -> None:
    """`value` as JSON in `path`, whole or not at all (a stop mid-write leaves the old file)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(value, indent=1) + "\n")
    partial.replace(path)


def size_plan(args: argparse.Namespace) -> tuple[list[tuple[str, int, list[str]]], str | None]:
    """The sizes to run, each with its trace forms, and the size the 1 % increment follows."""
    forms = [f.strip() for f in args.forms.split(",") if f.strip()]
    sizes = [(*_size(s), forms) for s in args.sizes.split(",") if s.strip()]
    if args.with_1e7:
        sizes.append(("1e7", 10_000_000, forms))
    if args.with_1e8:  # the columnar form only: 10^8 as JSONL is ~130 GB of text
        sizes.append((*BIGGEST, ["columnar"]))
    default_increment = BIGGEST[0] if args.with_1e8 else "1e7" if args.with_1e7 else None
    return sizes, args.increment_on or default_increment


# issue 24's largest size (`--with-1e8`) and the peak RSS (whole process tree) it must stay under
BIGGEST = ("1e8", 100_000_000)
BIGGEST_RSS_GB = 8.0


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 4) if a and b else None


def render(results: dict[str, Any]) -> str:
    """The printed tables (also in docs/performance.md's format)."""
    lines = [
        f"commit {results['commit'][:12]}"
        + (" (product code modified in the work tree)" if results["product_code_modified"] else ""),
        "",
        "| size | records | checker | wall s | CPU s | peak RSS GB | peak PSS GB | messages/s "
        "| status |",
        "|---|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for entry in results["sizes"]:
        for name, m in entry["checkers"].items():
            rate = f"{entry['messages'] / m['wall_s']:,.0f}" if m["wall_s"] else ""
            lines.append(
                f"| {entry['size']} | {entry['records']:,} | {name} | {m['wall_s']:.1f} "
                f"| {m.get('cpu_s', 0):.1f} | {m['peak_rss_gb']:.2f} "
                f"| {m.get('peak_pss_gb', 0):.2f} | {rate} | {m['status']} |"
            )
    lines += ["", "| size | analyze/duckdb | dict/analyze | all agree |", "|---|---:|---:|---|"]
    for entry in results["sizes"]:
        r = entry["ratios"]
        lines.append(
            f"| {entry['size']} | {_fmt(r['analyze_vs_duckdb'])} | {_fmt(r['dict_vs_analyze'])} "
            f"| {'yes' if entry['agree'] else 'NO'} ({', '.join(entry.get('compared', []))}) |"
        )
    lines += _forms(results)
    if results.get("fixed"):
        lines += [
            "",
            "| fixed cost | wall s | CPU s | peak RSS GB | peak PSS GB | × bare Spark |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for name, m in results["fixed"].items():
            lines.append(
                f"| {name} | {m['wall_s']:.1f} | {m.get('cpu_s', 0):.1f} "
                f"| {m['peak_rss_gb']:.2f} | {m.get('peak_pss_gb', 0):.2f} | {_fmt(m['vs_bare'])} |"
            )
    small = results.get("fixed", {}).get("examples_increment", {})
    if small.get("vs_examples_new") is not None:
        lines += [
            "",
            f"examples_increment: {LATE_RECORDS} records added to the examples' lakehouse cost "
            f"{_fmt(small['vs_examples_new'])} × its whole analyze (examples_new)",
        ]
    lines += _biggest(results)
    lines += _steps(results)
    if results.get("increment"):
        inc = results["increment"]
        lines += [
            "",
            f"increment: a {inc['messages']:,}-message run added to the {inc['size']} lakehouse: "
            f"{inc['analyze']['wall_s']:.1f} s = {_fmt(inc['vs_full_run'])} × the full run",
        ]
        if inc.get("attempts", 1) > 1:
            lines.append(
                f"  (resumed: attempt {inc['attempts']}; what the stopped attempts committed is "
                "not in the figure, which is therefore too low)"
            )
    lines += _profiles(results)
    for failure in results.get("failures", []):
        lines.append(f"FAILED: {failure}")
    for entry in results["sizes"]:
        for diff in entry["differences"][:50]:
            lines.append(f"  {entry['size']}: {diff}")
    return "\n".join(lines)


def _forms(results: dict[str, Any]) -> list[str]:
    """Per size run in both forms: analyze's and DuckDB's wall on the columnar form over
    their wall on JSONL (issue 24's target for analyze: at most 0.5)."""
    by_size: dict[str, dict[str, dict[str, Any]]] = {}
    for entry in results["sizes"]:
        size = entry["size"].removesuffix(f"-{entry.get('form', 'jsonl')}")
        by_size.setdefault(size, {})[entry.get("form", "jsonl")] = entry
    pairs = {s: f for s, f in by_size.items() if {"jsonl", "columnar"} <= f.keys()}
    if not pairs:
        return []
    lines = [
        "",
        "| size | analyze JSONL s | analyze columnar s | columnar/JSONL | DuckDB columnar/JSONL "
        "| trace MB JSONL / columnar |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for size, forms in pairs.items():
        walls = {
            form: {n: m["wall_s"] for n, m in e["checkers"].items() if m["status"] == "ok"}
            for form, e in forms.items()
        }
        j, c = walls["jsonl"], walls["columnar"]
        mb = [forms[f].get("trace_bytes", 0) / 1e6 for f in ("jsonl", "columnar")]
        lines.append(
            f"| {size} | {_fmt(j.get('analyze'))} | {_fmt(c.get('analyze'))} "
            f"| {_fmt(_ratio(c.get('analyze'), j.get('analyze')))} "
            f"| {_fmt(_ratio(c.get('duckdb'), j.get('duckdb')))} | {mb[0]:,.1f} / {mb[1]:,.1f} |"
        )
    return lines


def _biggest(results: dict[str, Any]) -> list[str]:
    """For runs of 10^8 messages or more: analyze's peak RSS against issue 24's bound."""
    lines = []
    for entry in results["sizes"]:
        m = entry["checkers"]["analyze"]
        if entry["messages"] < BIGGEST[1] or m["status"] != "ok":
            continue
        within = "within" if m["peak_rss_gb"] <= BIGGEST_RSS_GB else "OVER"
        lines += [
            "",
            f"{entry['size']}: analyze's peak RSS (process tree) {m['peak_rss_gb']:.2f} GB, "
            f"{within} the {BIGGEST_RSS_GB:g} GB bound",
        ]
    return lines


def _steps(results: dict[str, Any]) -> list[str]:
    """Per analyze run in steps (--in-steps): each step's process, and which were attempted
    before (stopped with a session: the ingest's committed batches are not redone, so its
    figure leaves them out)."""
    lines = []
    for entry in results["sizes"]:
        steps = entry["checkers"]["analyze"].get("steps")
        if not steps:
            continue
        lines += [
            "",
            f"steps of analyze-{entry['size']}:",
            "| step | wall s | CPU s | peak RSS GB | status | attempts |",
            "|---|---:|---:|---:|---|---:|",
        ]
        lines += [
            f"| {m['name']} | {m['wall_s']:.1f} | {m['cpu_s']:.1f} | {m['peak_rss_gb']:.2f} "
            f"| {m['status']} | {m.get('attempts', 1)} |"
            for m in steps
        ]
        resumed = [m["name"] for m in steps if m.get("attempts", 1) > 1]
        if resumed:
            lines.append(
                f"resumed after a stop: {', '.join(resumed)}: each figure is its last attempt "
                "(an ingest's batches committed before it, and a stopped pipeline's work, are "
                "left out)"
            )
    return lines


def _profiles(results: dict[str, Any]) -> list[str]:
    """The per-stage table of every analyze run with --profile."""
    measured = [m for e in results["sizes"] for m in e["checkers"].values()]
    measured += [results["increment"]["analyze"]] if results.get("increment") else []
    measured += list(results.get("fixed", {}).values())
    lines = []
    for m in measured:
        if m.get("stage_profile"):
            lines += ["", f"stages of {m['name']} (Spark event log):", markdown(m["stage_profile"])]
        if m.get("step_profile"):
            lines += ["", f"steps of {m['name']}:", step_markdown(m["step_profile"])]
    return lines


def _fmt(x: float | None) -> str:
    return "" if x is None else f"{x:.3g}"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1e4,1e5,1e6,2e6", help="messages, comma-separated")
    parser.add_argument("--with-1e7", action="store_true", help="add 1e7 and the 1 %% increment")
    parser.add_argument(
        "--with-1e8",
        action="store_true",
        help="add 1e8 in the columnar form only, its 1 %% increment (instead of 1e7's) and "
        "analyze's peak RSS against 8 GB (hours on 2 cores; ~7 GB of Parquet)",
    )
    parser.add_argument("--workdir", default="/tmp/pulsar-audit-bench")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--gzip", action="store_true", help="generate *.jsonl.gz")
    parser.add_argument(
        "--forms",
        default="jsonl",
        help="trace forms per size, comma-separated: jsonl, columnar (Parquet); e.g. "
        "jsonl,columnar runs every size in both, each with DuckDB and the dict checker",
    )
    parser.add_argument("--skip-fixed", action="store_true", help="skip the fixed-cost timings")
    parser.add_argument(
        "--increment-on",
        metavar="SIZE",
        help="add the 1 %% run after this size (default: 1e8 with --with-1e8, else 1e7 with "
        "--with-1e7)",
    )
    parser.add_argument("--dict-max-messages", type=float, default=4e6)
    parser.add_argument("--dict-rss-cap-gb", type=float, default=16.0)
    parser.add_argument("--timeout", type=float, help="kill any one checker after this many s")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="write each analyze's Spark event log and print its per-stage table",
    )
    parser.add_argument(
        "--in-steps",
        action="store_true",
        help="generate resumably; run each size's analyze as measured steps (ingest, each "
        "run's pipeline, analyze) recorded in WORKDIR/steps/ and skipped when run again: "
        "for 1e8, which outlasts a session (--timeout then applies to each step)",
    )
    args = parser.parse_args(argv)
    if args.in_steps and args.profile:
        parser.error("--in-steps takes no --profile: a step's process is not an analyze")
    return args


def main(argv: list[str] | None = None) -> int:
    return Bench(parse_args(argv)).run()


if __name__ == "__main__":
    sys.exit(main())
