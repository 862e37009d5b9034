"""`pulsar-audit capture run --watch` through the real command line against a real Pulsar
standalone (issue 29, items 4 and 5): the trace files roll into the landing folder while the run
goes on, whole; the watch beside the run prints a micro-batch before the run is over; the
watch's final tables equal those of `analyze` over the same events written as one file (a
plain run); `report` works from what the watch wrote. Opt-in (`-m live_long`): many minutes."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from json_schema_check import validate
from pyspark.sql import functions as F

from jobs.analyze import analyze
from pulsar_audit.config import load_config
from pulsar_audit.delta_io import Lakehouse
from serve.report import write_report

pytestmark = [pytest.mark.pulsar, pytest.mark.live_long]

REPO = Path(__file__).resolve().parents[2]
# long enough that the watch (Spark's start, a first micro-batch: minutes on a loaded 2-core
# machine) shows a micro-batch while the run still goes on
MESSAGES, RATE = 2400, 8
WAIT_S = 3600
NOT_COMPARED = {"source_file", "line_number", "ingest_id", "ingested_at", "computed_at",
                "checked_at", "batch_id", "created_at"}  # fmt: skip


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class _Lines:
    """The command's stderr lines, each with when it came."""

    def __init__(self, stream) -> None:  # noqa: ANN001
        self.lines: list[tuple[float, str]] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:  # noqa: ANN001
        for line in stream:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def join(self) -> list[str]:
        self._thread.join(timeout=30)
        return [line for _, line in self.lines]


def _run_capture(standalone, out: Path, home: Path, log: Path, mid_run) -> tuple:  # noqa: ANN001
    """The command, polled: (its JSON result, its stderr lines, the trace files there before
    the run was over with their digests then, what `mid_run` returned: called once, when
    the first micro-batch was printed)."""
    command = [sys.executable, "-m", "jobs.cli", "capture", "run", "--workdir",
               standalone.workdir, "--messages", str(MESSAGES), "--rate", str(RATE),
               "--consumers", "1", "--roll-s", "1", "--out", str(out), "--watch",
               "--watch-home", str(home), "--json"]  # fmt: skip
    seen: dict[str, str] = {}
    called = None
    with log.open("w") as stdout:
        proc = subprocess.Popen(command, cwd=REPO, stdout=stdout, stderr=subprocess.PIPE, text=True)
        lines = _Lines(proc.stderr)
        try:
            deadline = time.monotonic() + WAIT_S
            while proc.poll() is None and time.monotonic() < deadline:
                over = any("run over" in line for _, line in lines.lines)
                if not over and not (out / "capture.json").exists():
                    for path in out.glob("trace-*.jsonl"):
                        seen.setdefault(path.name, _digest(path))
                if called is None and any(
                    line.startswith("watch | micro-batch") for _, line in lines.lines
                ):
                    called = {**mid_run(), "called_during_run": not over}
                time.sleep(0.5)
        finally:
            if proc.poll() is None:
                proc.kill()  # its watch child goes with the group the command kills
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
    return json.loads(log.read_text()), lines.join(), seen, called


def _processes_naming(folder: Path) -> list[str]:
    """The command lines of the running processes that name `folder`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes().decode(errors="replace").split("\0")
        except OSError:  # it ended meanwhile
            continue
        if any(str(folder) in word for word in words):
            found.append(" ".join(words))
    return found


def _plain_copy(out: Path, plain: Path) -> None:
    """The same events as one trace file (in the files' order), the logs and ZooKeeper
    capture as they are."""
    plain.mkdir()
    with (plain / "trace-all.jsonl").open("wb") as one:
        for path in sorted(out.glob("trace-*.jsonl")):
            one.write(path.read_bytes())
    for folder in ("logs", "zk"):
        if (out / folder).exists():
            shutil.copytree(out / folder, plain / folder)


def _rows(lakehouse: Lakehouse, table: str) -> list[tuple]:
    """A gold table's rows without lineage or timestamps of the job that wrote them."""
    frame = lakehouse.read(table)
    columns = [c for c in frame.columns if c not in NOT_COMPARED]
    return sorted(tuple(str(v) for v in row) for row in frame.select(*columns).collect())


def test_capture_run_with_watch_rolls_files_and_prints_micro_batches_live(
    request: pytest.FixtureRequest, standalone, tmp_path: Path
) -> None:
    out, home = tmp_path / "landing", tmp_path / "watch"

    def report_while_watching() -> dict:
        """`report` from what the watch has written so far (no gold for the run yet)."""
        [lakehouse] = home.glob("*/lakehouse")  # home/<run id>/lakehouse
        run_id = lakehouse.parent.name
        reader = Lakehouse(
            request.getfixturevalue("spark"), load_config("local", lakehouse=str(lakehouse))
        )
        written = write_report(reader.read, run_id, tmp_path / "mid-run.html")
        return {**written, "run_summary_rows": reader.read("run_summary").count()}

    result, stderr, seen, mid_run = _run_capture(
        standalone, out, home, tmp_path / "capture.json", report_while_watching
    )
    validate(result, "capture_run")
    run_id, watched = result["run_id"], result["watch"]
    print(f"\nreport while watching: {mid_run}")  # noqa: T201
    assert mid_run["bytes"] > 0 and mid_run["run_id"] == run_id

    # the files rolled in during the run, and each stayed as it was when it appeared
    assert len(seen) >= 3, seen
    assert {name: _digest(out / name) for name in seen} == seen
    assert not list(out.glob("*.open"))
    names = sorted(p.name for p in out.glob(f"trace-{run_id}-0*.jsonl"))
    assert names == [f"trace-{run_id}-{i:05d}.jsonl" for i in range(len(names))]

    # the watch printed a micro-batch before the run was over, and left cleanly: no process
    # of it is left
    over = next(i for i, line in enumerate(stderr) if line.startswith("run over"))
    print(f"files rolled in during the run: {len(seen)}; stderr until the run was over:")  # noqa: T201
    print("\n".join(stderr[: over + 1]))  # noqa: T201
    print({k: v for k, v in watched.items() if k != "result"})  # noqa: T201
    assert _processes_naming(home) == []
    assert any(line.startswith("watch | micro-batch ") for line in stderr[:over]), stderr
    assert watched["micro_batches_during_run"] >= 1
    assert watched["exit_code"] == 0, Path(watched["log"]).read_text()[-3000:]
    assert watched["result"]["runs"] == [run_id]
    assert [v["valid"] for v in watched["result"]["analyze"]["valid"]] == [True]

    # the watch's final tables are analyze's of the same events as one file
    spark = request.getfixturevalue("spark")  # not beside the watch's own Spark
    plain = tmp_path / "plain"
    _plain_copy(out, plain)
    by_watch = Lakehouse(spark, load_config("local", lakehouse=watched["lakehouse"]))
    by_analyze = Lakehouse(spark, load_config("local", lakehouse=str(tmp_path / "plain-lh")))
    analyze(by_analyze, by_analyze.config, plain)
    for table in ("run_summary", "anomalies", "outages"):
        assert _rows(by_watch, table) == _rows(by_analyze, table), table
    counts = by_watch.read("run_summary").select("sent", "acked", "received").first()
    assert tuple(counts) == (MESSAGES, MESSAGES, MESSAGES)
    assert by_watch.read("provisional").filter(F.col("state") == "open").count() == 0

    # report, from what the watch wrote
    report = write_report(by_watch.read, run_id, tmp_path / "report.html")
    assert report["bytes"] > 0 and run_id in (tmp_path / "report.html").read_text()
