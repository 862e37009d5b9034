"""bench/watch_profile.py: each Spark job goes to the micro-batch (or the leaving analyze) whose
`-v` stage run holds its submission, under its own stage; a stage run in every micro-batch is
counted in each apart; a job outside every window is left out."""

from __future__ import annotations

from pathlib import Path

from test_stage_profile import job_end, job_start, stage_line, task_end, write_lines

from bench.watch_profile import WHOLE, batch_profile

INGEST, FOLD = "ingest traces", "live state"
BATCH_0, BATCH_1 = "micro-batch 0: 1 file(s)", "micro-batch 1: 1 file(s)"


def _job(job: int, start: int, end: int, stage: str, cpu_s: float = 0.0) -> list[dict]:
    cpu = {"Executor CPU Time": int(cpu_s * 1e9)}
    return [job_start(job, start, job, stage, None), task_end(job, **cpu), job_end(job, end)]


def test_no_micro_batch_gives_no_rows(tmp_path: Path) -> None:
    log = write_lines(tmp_path / "events" / "local-1", _job(1, 100, 200, INGEST))
    stderr = tmp_path / "watch.err"
    stderr.write_text(stage_line("create tables", 50, 0.0))

    assert batch_profile(log, stderr) == []


def test_each_micro_batch_gets_its_own_stages_jobs_and_cpu(tmp_path: Path) -> None:
    log = write_lines(
        tmp_path / "events" / "local-1",
        [
            *_job(0, 500, 600, "create tables"),  # before the first micro-batch: left out
            *_job(1, 1_100, 1_500, INGEST, 1.0),
            *_job(2, 1_400, 1_900, INGEST, 0.5),  # overlaps job 1: 0.8 s of jobs
            *_job(3, 2_100, 2_800, FOLD, 2.0),
            *_job(4, 2_880, 2_980, BATCH_0),  # the micro-batch's own, in no inner stage
            *_job(5, 3_100, 3_300, INGEST, 0.3),
            *_job(6, 4_100, 4_200, "pipeline", 0.1),  # inside the leaving analyze
        ],
    )
    stderr = tmp_path / "watch.err"
    stderr.write_text(
        stage_line(INGEST, 2_000, 1.0)
        + stage_line(FOLD, 2_850, 0.8)
        + stage_line(BATCH_0, 3_000, 2.0)
        + stage_line(INGEST, 3_400, 0.3)
        + stage_line(BATCH_1, 3_500, 0.4)
        + stage_line("pipeline", 4_300, 0.2)
        + stage_line("analyze", 4_400, 0.4)
    )

    rows = [tuple(r.values()) for r in batch_profile(log, stderr)]

    # window, stage, wall s, Spark jobs, jobs s, executor CPU s
    assert rows == [
        ("micro-batch 0", WHOLE, 2.0, 4, 1.6, 3.5),
        ("micro-batch 0", INGEST, 1.0, 2, 0.8, 1.5),
        ("micro-batch 0", FOLD, 0.8, 1, 0.7, 2.0),
        ("micro-batch 0", "(in no inner stage)", None, 1, 0.1, 0.0),
        ("micro-batch 1", WHOLE, 0.4, 1, 0.2, 0.3),
        ("micro-batch 1", INGEST, 0.3, 1, 0.2, 0.3),
        ("analyze", WHOLE, 0.4, 1, 0.1, 0.1),
        ("analyze", "pipeline", 0.2, 1, 0.1, 0.1),
    ]
