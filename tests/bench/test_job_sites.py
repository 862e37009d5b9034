"""bench/job_sites.py: a Spark job started from this repository's code carries the line that
started it; the table sums the jobs of the micro-batches after the first by that site."""

from __future__ import annotations

import sys
from pathlib import Path

from test_stage_profile import job_end, job_start, stage_line, write_lines

from bench.job_sites import SITE_PROPERTY, UNKNOWN, install, site, site_table

BATCH_0, BATCH_1, BATCH_2 = (f"micro-batch {n}: 1 file(s)" for n in range(3))


def _job(job: int, start: int, end: int, where: str | None) -> list[dict]:
    started = job_start(job, start, job, None, None)
    if where:
        started["Properties"][SITE_PROPERTY] = where
    return [started, job_end(job, end)]


def test_site_names_the_innermost_frames_of_the_repository() -> None:
    def inner():
        return site(sys._getframe(0), frames=2)

    where = inner()

    assert where.startswith("tests/bench/test_job_sites.py:")
    first, second = where.split(" < ")
    assert first.endswith(":inner")
    assert second.endswith(":test_site_names_the_innermost_frames_of_the_repository")
    assert site(sys._getframe(0), root="/nowhere/") == UNKNOWN


def test_a_job_carries_the_line_that_started_it(spark) -> None:
    context = spark.sparkContext
    uninstall = install()
    try:
        line = sys._getframe(0).f_lineno + 1
        spark.range(3).localCheckpoint(eager=True)  # the job: the last call tagged
    finally:
        uninstall()
    tagged = context.getLocalProperty(SITE_PROPERTY)  # as the job's submission found it
    context.setLocalProperty(SITE_PROPERTY, None)

    innermost = tagged.split(" < ")[0]
    assert innermost == (
        f"tests/bench/test_job_sites.py:{line}:test_a_job_carries_the_line_that_started_it"
    )


def test_the_table_sums_jobs_after_the_first_micro_batch_by_site(tmp_path: Path) -> None:
    fold, ingest = "jobs/live_state.py:182:keep", "ingest/skeleton.py:348:_ingest_batch"
    log = write_lines(
        tmp_path / "events" / "local-1",
        [
            *_job(1, 1_100, 1_900, fold),  # micro-batch 0: left out (the JVM's warming)
            *_job(2, 3_100, 3_300, ingest),
            *_job(3, 3_300, 3_500, fold),
            *_job(4, 3_600, 3_700, fold),
            *_job(5, 5_100, 5_500, fold),
            *_job(6, 5_600, 5_700, None),  # no site: a job started outside Python's calls
            *_job(7, 9_000, 9_100, fold),  # after the last micro-batch: left out
        ],
    )
    stderr = tmp_path / "watch.err"
    stderr.write_text(
        stage_line(BATCH_0, 2_000, 1.0)
        + stage_line(BATCH_1, 4_000, 1.0)
        + stage_line(BATCH_2, 6_000, 1.0)
    )

    rows = [tuple(r.values()) for r in site_table(log, stderr)]

    # site, Spark jobs per micro-batch, their seconds per micro-batch (two micro-batches)
    assert rows == [(fold, 1.5, 0.35), (ingest, 0.5, 0.1), (UNKNOWN, 0.5, 0.05)]
