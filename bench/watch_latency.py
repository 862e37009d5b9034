"""From the trace line that proves a finding to its alert at a webhook: issue 29's latency target.

    .venv/bin/python -m bench.watch_latency [--scenario 'kill-qw-bookies --auto-skip'
        --scenario 'unload --seed 3'] [--messages 2000] [--rate 5000] [--roll-s 1] [--trigger-s 1]
        [--trace DIR] [--workdir DIR] [--cold]

Each --scenario is simulated (`pulsar-audit simulate run`, with its truth; default: kill-qw-
bookies with a reader that skips unreadable data, for its loss, and unload with seed 3, for its
outage of over 100 ms; seed 1's is shorter) unless --trace gives a folder of trace files. Then
`pulsar-audit watch LANDING -v` starts as a child process (its own lakehouse and checkpoint
under the workdir, a config whose one alert sink is a webhook to an HTTP server this script
runs in a thread); once its query has started, the trace's lines are written into LANDING at
their recorded pace (or scaled so that the traced messages arrive at --rate per second; several
runs one after the other), through capture/spool.py's rolling Spool (`….jsonl.open`, fsync,
renamed whole every --roll-s seconds), the wall time of each line's write recorded. Each
alert's arrival is timed against the moment its finding became provable in the replay
(bench/latency_rules.py says how, per kind). Prints the latency table, the micro-batches (each
with its gap after the one before: the watch's view of that one, the query's bookkeeping, any
wait for a file) and the watch's lag at the end: how long after the last file was renamed
into LANDING the micro-batch that took it ended, and how long after its start the watch's query
started (its warm-up, jobs/live_warm.py, runs before it; --cold: without). Exit 1 if no alert
arrived.
Figures depend on the machine's load: print `uptime` beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from bench.latency_rules import (
    due_offsets,
    gaps_before,
    latency_table,
    provable_ts,
    read_trace,
    replay,
    send_rate,
    ts_ms,
    written_at,
)
from capture.spool import Spool
from pulsar_audit.config import CONF_DIR_VAR, default_conf_dir

CLI = [sys.executable, "-m", "jobs.cli"]
BATCH_LINE = re.compile(r"stage micro-batch (\d+): (\d+) file\(s\): ([\d.]+) s")
START_WAIT_S = 300


class Receiver:
    """A webhook receiver in a thread: each POST's arrival wall time and JSON body."""

    def __init__(self) -> None:
        received: list[tuple[float, dict[str, Any]]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                received.append((time.time(), json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.received = received
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class WatchChild:
    """`pulsar-audit watch LANDING -v` in its own process group; its stderr lines timed."""

    def __init__(self, work: Path, conf: Path, trigger_s: float):
        self.checkpoint = work / "checkpoint"
        command = [*CLI, "watch", str(work / "landing"), "-v", "--trigger-s", str(trigger_s)]
        command += ["--lakehouse", str(work / "lakehouse"), "--checkpoint", str(self.checkpoint)]
        env = {**os.environ, CONF_DIR_VAR: str(conf), "PULSAR_AUDIT_ENV": "local"}
        self.log = (work / "watch.log").open("w")
        self.began = time.monotonic()
        self.ready_s: float | None = None  # from its start to its query's (a warm-up included)
        self.out = (work / "watch.out").open("w")
        self.process = subprocess.Popen(
            command,
            env=env,
            stderr=subprocess.PIPE,
            stdout=self.out,
            text=True,
            start_new_session=True,  # its group: the stop takes its JVM too
        )
        self.batches: list[tuple[float, int, int, float]] = []  # (ended, id, files, s)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self.log.write(line)
            found = BATCH_LINE.search(line)
            if found:
                batch, files, seconds = found.groups()
                self.batches.append((time.time(), int(batch), int(files), float(seconds)))

    def wait_started(self) -> None:
        deadline = time.monotonic() + START_WAIT_S
        while not (self.checkpoint / "metadata").exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the watch did not start: see {self.log.name}")
            time.sleep(0.5)
        self.ready_s = time.monotonic() - self.began

    def files_taken(self) -> int:
        return sum(files for _, _, files, _ in self.batches)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 30 s (leaving runs an analyze: not measured here)."""
        for sig, grace in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
            if self.process.poll() is None:
                os.killpg(self.process.pid, sig)
                try:
                    self.process.wait(grace)
                except subprocess.TimeoutExpired:
                    continue
        self.reader.join(5)
        self.log.close()
        self.out.close()


def webhook_conf(folder: Path, url: str, warm_up: bool = True) -> tuple[Path, dict[str, Any]]:
    """conf/local.yaml with one webhook sink (and `watch.warm_up` as given): the folder and
    the config's pipeline section."""
    raw = yaml.safe_load((default_conf_dir() / "local.yaml").read_text())
    raw["alerts"]["sinks"] = [{"name": "bench", "webhook": {"url": url, "max_attempts": 2}}]
    raw["watch"] = {**(raw.get("watch") or {}), "warm_up": warm_up}
    folder.mkdir(parents=True)
    (folder / "local.yaml").write_text(yaml.safe_dump(raw))
    return folder, raw["pipeline"]


def simulated(work: Path, scenarios: list[str], messages: int) -> list[Path]:
    folders = []
    for number, words in enumerate(scenarios):
        scenario, *more = words.split()
        out = work / f"trace-{number}-{scenario}"
        command = [*CLI, "simulate", "run", "--scenario", scenario, "--messages", str(messages)]
        command += [*more, "--out", str(out), "--no-gzip", "--run-id", f"lat-{number}-{scenario}"]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed: {done.stderr[-2000:]}")
        folders.append(out)
    return folders


def schedule(traces: list[Path], rate: float | None) -> tuple[list[dict], list[float]]:
    """Every run's lines and their offsets, the runs one after the other (1 s apart)."""
    lines, offsets, start = [], [], 0.0
    for trace in traces:
        events = read_trace(trace)
        run_offsets = due_offsets([ts_ms(e["ts"]) for e in events], rate, send_rate(events))
        lines += events
        offsets += [start + o for o in run_offsets]
        start = (offsets[-1] + 1.0) if offsets else start
    return lines, offsets


def timed_alerts(
    lines: list[dict], written: list[float], received: list, pipeline: dict
) -> dict[str, list[float | None]]:
    """Per kind, each alert's seconds from its provable moment to its arrival (None: no rule)."""
    by_run: dict[str, list[int]] = {}
    for index, event in enumerate(lines):
        by_run.setdefault(event["run_id"], []).append(index)
    out: dict[str, list[float | None]] = {}
    for arrived, alert in received:
        indices = by_run.get(alert.get("run_id"), [])
        events = [lines[i] for i in indices]
        proof = provable_ts(
            alert, events, pipeline["backoff_ladder_ms"][0], pipeline["suspected_loss_ms"]
        )
        at = None
        if proof is not None:
            at = written_at([ts_ms(e["ts"]) for e in events], [written[i] for i in indices], proof)
        out.setdefault(alert["kind"], []).append(None if at is None else arrived - at)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--scenario",
        action="append",
        help="a simulated run: the scenario and more `simulate run` options, e.g. "
        "'kill-qw-bookies --auto-skip' (default: that run and 'unload --seed 3')",
    )
    parser.add_argument("--messages", type=int, default=2000, help="per simulated run")
    parser.add_argument("--rate", type=float, help="traced messages/s (default: recorded pace)")
    parser.add_argument("--roll-s", type=float, default=1.0)
    parser.add_argument("--trigger-s", type=float, default=1.0)
    parser.add_argument("--settle-s", type=float, default=60.0, help="wait for alerts after")
    parser.add_argument("--trace", action="append", help="a trace folder instead of simulating")
    parser.add_argument("--workdir", default="/tmp/pulsar-audit-bench-latency")
    parser.add_argument(
        "--cold", action="store_true", help="the watch without its warm-up (watch.warm_up false)"
    )
    args = parser.parse_args(argv)
    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    scenarios = args.scenario or ["kill-qw-bookies --auto-skip", "unload --seed 3"]
    traces = [Path(t) for t in args.trace] if args.trace else None
    traces = traces or simulated(work, scenarios, args.messages)
    lines, offsets = schedule(traces, args.rate)
    print(f"{len(lines):,} trace lines over {offsets[-1]:.1f} s of replay from {traces}")

    receiver = Receiver()
    conf, pipeline = webhook_conf(work / "conf", receiver.url, warm_up=not args.cold)
    (work / "landing").mkdir()
    child = WatchChild(work, conf, args.trigger_s)
    try:
        child.wait_started()
        with Spool(work / "landing", prefix="bench", roll_s=args.roll_s) as spool:
            written = replay(lines, offsets, spool.write, time.monotonic, time.sleep, time.time)
        landed_at, segments = time.time(), len(spool.segments)
        deadline = time.monotonic() + args.settle_s
        while child.files_taken() < segments and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(min(10.0, max(0.0, deadline - time.monotonic())))  # the last alerts
    finally:
        child.stop()
        receiver.close()
    report(lines, written, receiver.received, pipeline, child, landed_at, segments)
    return 0 if receiver.received else 1


def report(lines, written, received, pipeline, child, landed_at, segments) -> None:  # noqa: ANN001
    print(latency_table(timed_alerts(lines, written, received, pipeline)))
    taken = child.files_taken()
    last = next((b for b in child.batches if b[2] and _cumulative(child, b) >= segments), None)
    lag = f"{last[0] - landed_at:.1f} s" if last else f"not reached ({taken}/{segments} files)"
    print(f"the watch's query started {child.ready_s:.1f} s after the watch (its warm-up in it)")
    print(
        f"{len(child.batches)} micro-batches took {taken} of {segments} files; lag at the end "
        f"(last file renamed in → the micro-batch that took it ended): {lag}"
    )
    for arrived, alert in received:
        print(
            f"  alert {alert['kind']} ({alert.get('title')}): arrived {arrived - landed_at:+.1f} s"
        )
    for (ended, batch, files, seconds), gap in zip(
        child.batches, gaps_before(child.batches), strict=True
    ):
        before = "" if gap is None else f", {gap:.1f} s after the one before"
        print(
            f"  micro-batch {batch}: {files} file(s), {seconds:.1f} s{before}, "
            f"ended {ended - landed_at:+.1f} s from the last file"
        )


def _cumulative(child: WatchChild, upto: tuple) -> int:
    return sum(b[2] for b in child.batches[: child.batches.index(upto) + 1])


if __name__ == "__main__":
    sys.exit(main())
