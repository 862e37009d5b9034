"""The per-stage profile reads Spark's event log and the Delta logs exactly: jobs, their time
with overlaps counted once, executor CPU, rows, and each commit in the stage that made it."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import yaml

from bench.profiling import profiling_conf_dir
from bench.stage_profile import OUTSIDE, event_log_file, profile, step_markdown, step_profile

INGEST, PIPELINE, TIMELINE = "ingest traces", "pipeline", "infrastructure timeline"
T0 = 1_800_000_000_000  # epoch ms; every time below is an offset from it


def job_start(job: int, at: int, spark_stage: int, stage: str | None, root: int | None) -> dict:
    properties = {"pulsar_audit.stage": stage} if stage else {"spark.app.id": "local-1"}
    if root is not None:
        properties["spark.sql.execution.root.id"] = str(root)
    return {
        "Event": "SparkListenerJobStart",
        "Job ID": job,
        "Submission Time": T0 + at,
        "Stage IDs": [spark_stage],
        "Properties": properties,
    }


def job_end(job: int, at: int) -> dict:
    return {"Event": "SparkListenerJobEnd", "Job ID": job, "Completion Time": T0 + at}


def task_end(spark_stage: int, **metrics: dict) -> dict:
    return {"Event": "SparkListenerTaskEnd", "Stage ID": spark_stage, "Task Metrics": metrics}


def execution(number: int, start: int, end: int, plan: str) -> list[dict]:
    """A root SQL execution's start and end events."""
    ui = "org.apache.spark.sql.execution.ui."
    return [
        {
            "Event": ui + "SparkListenerSQLExecutionStart",
            "executionId": number,
            "rootExecutionId": number,
            "physicalPlanDescription": plan,
            "time": T0 + start,
        },
        {"Event": ui + "SparkListenerSQLExecutionEnd", "executionId": number, "time": T0 + end},
    ]


def write_lines(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def commit(lakehouse: Path, table: str, version: int, at: int) -> None:
    write_lines(
        lakehouse / table / "_delta_log" / f"{version:020d}.json",
        [{"commitInfo": {"timestamp": T0 + at, "operation": "WRITE"}}, {"add": {"path": "p"}}],
    )


def stage_line(name: str, end: int, wall_s: float) -> str:
    """analyze's -v line at a stage's end, in local time as the logging module writes it."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime((T0 + end) // 1000))
    return f"{stamp},{(T0 + end) % 1000:03d} INFO jobs.analyze: stage {name}: {wall_s} s\n"


def events(lake: Path) -> list[dict]:
    ingest_write = f"Execute SaveIntoDataSourceCommand [replacewhere=x, path={lake}/bronze/t]"
    pipeline_merge = f"Execute MergeIntoCommand (1) Delta[version=0, file:{lake}/silver/s], (a)"
    # the timeline reads silver/s (a scan is no write) and writes gold/g
    timeline_write = (
        f"SaveIntoDataSourceCommand [path={lake}/gold/g], Overwrite"
        f" Scan parquet Location: PreparedDeltaFileIndex [file:{lake}/silver/s]"
    )
    start_ingest, end_ingest = execution(1, 1_900, 4_600, ingest_write)
    start_pipeline, end_pipeline = execution(2, 5_950, 6_750, pipeline_merge)
    start_timeline, end_timeline = execution(3, 6_050, 6_720, timeline_write)
    return [
        {"Event": "SparkListenerApplicationStart", "Timestamp": T0 + 1_000},
        job_start(0, 1_200, 0, None, None),  # the session's own job, before any stage
        job_end(0, 1_300),
        start_ingest,
        job_start(1, 2_000, 1, INGEST, 1),
        job_start(2, 2_500, 2, INGEST, 1),  # overlaps job 1 by 1.5 s: counted once
        task_end(1, **{"Executor CPU Time": 1_500_000_000, "Input Metrics": {"Records Read": 10}}),
        task_end(1, **{"Executor CPU Time": 300_000_000, "Input Metrics": {"Records Read": 5}}),
        task_end(
            2,
            **{
                "Executor CPU Time": 500_000_000,
                "Output Metrics": {"Records Written": 4, "Bytes Written": 3 * 2**20},
            },
        ),
        job_end(1, 4_000),
        job_end(2, 4_400),
        end_ingest,
        start_pipeline,
        job_start(3, 6_000, 3, PIPELINE, 2),
        start_timeline,
        job_start(4, 6_100, 4, TIMELINE, 3),
        task_end(
            3,
            **{
                "Executor CPU Time": 100_000_000,
                "Shuffle Write Metrics": {"Shuffle Bytes Written": 2**20},
            },
        ),
        job_end(3, 6_500),
        job_end(4, 6_600),  # ends after pipeline's last job, before pipeline's commit
        end_timeline,
        end_pipeline,
        {"Event": "SparkListenerApplicationEnd", "Timestamp": T0 + 9_000},
    ]


def test_an_empty_event_log_and_lakehouse_give_no_stages(tmp_path: Path) -> None:
    log = write_lines(tmp_path / "events" / "local-1", [])

    assert profile(log, tmp_path / "lakehouse") == []


def test_each_stage_gets_its_jobs_time_cpu_rows_and_commits(tmp_path: Path) -> None:
    lake = tmp_path / "lakehouse"
    log = write_lines(tmp_path / "events" / "local-1", events(lake))
    commit(lake, "bronze/t", 0, -500)  # an earlier run's, before the application: left out
    # no Spark command makes a new table's first commit: the stage then running says whose
    # (ingest's start, from its rounded wall, is 50 ms early: create tables ends first)
    commit(lake, "bronze/t", 1, 1_680)
    commit(lake, "bronze/t", 2, 4_500)  # inside ingest's write
    commit(lake, "gold/g", 1, 6_650)  # inside the timeline's write (and pipeline's merge)
    commit(lake, "silver/s", 1, 6_700)  # pipeline's merge; the timeline's job ended last
    commit(lake, "silver/s2", 1, 8_000)  # no command, no stage running
    stderr = tmp_path / "analyze.err"
    stderr.write_text(
        stage_line("create tables", 1_700, 0.6)
        + stage_line(INGEST, 4_700, 3.0)
        + stage_line(PIPELINE, 6_900, 1.0)
        + stage_line(TIMELINE, 6_950, 1.0)
    )

    rows = profile(log, lake, stderr)

    zero = {"jobs_s": 0.0, "cpu_s": 0.0, "records_read": 0, "records_written": 0}
    zero |= {"mb_written": 0.0, "shuffle_mb": 0.0}
    assert rows == [
        {**zero, "stage": "create tables", "wall_s": 0.6, "spark_jobs": 0, "delta_commits": 1},
        {**zero, "stage": OUTSIDE, "wall_s": None, "spark_jobs": 1, "jobs_s": 0.1}
        | {"delta_commits": 1},
        {
            "stage": INGEST,
            "wall_s": 3.0,
            "spark_jobs": 2,
            "jobs_s": 2.4,
            "cpu_s": 2.3,
            "records_read": 15,
            "records_written": 4,
            "mb_written": 3.0,
            "shuffle_mb": 0.0,
            "delta_commits": 1,
        },
        {**zero, "stage": PIPELINE, "wall_s": 1.0, "spark_jobs": 1, "jobs_s": 0.5}
        | {"cpu_s": 0.1, "shuffle_mb": 1.0, "delta_commits": 1},
        {**zero, "stage": TIMELINE, "wall_s": 1.0, "spark_jobs": 1, "jobs_s": 0.5}
        | {"delta_commits": 1},
    ]


def test_the_jobs_of_each_step_get_their_own_figures_and_untagged_jobs_none(
    tmp_path: Path,
) -> None:
    assert step_profile(write_lines(tmp_path / "none" / "local-1", events(tmp_path))) == []

    def tagged(job: int, at: int, spark_stage: int, step: str) -> dict:
        start = job_start(job, at, spark_stage, PIPELINE, None)
        start["Properties"]["pulsar_audit.step"] = step
        return start

    log = write_lines(
        tmp_path / "events" / "local-1",
        [
            tagged(1, 1_000, 1, "delivery"),
            tagged(2, 1_200, 2, "delivery"),  # overlaps job 1: counted once
            job_start(3, 1_300, 3, PIPELINE, None),  # the stage's, no step
            task_end(
                1, **{"Executor CPU Time": 2_000_000_000, "Input Metrics": {"Records Read": 7}}
            ),
            task_end(2, **{"Shuffle Write Metrics": {"Shuffle Bytes Written": 2**21}}),
            task_end(3, **{"Executor CPU Time": 9_000_000_000}),
            job_end(1, 2_000),
            job_end(2, 2_500),
            job_end(3, 2_600),
            tagged(4, 3_000, 4, "write delivery"),
            task_end(4, **{"Executor CPU Time": 500_000_000}),
            job_end(4, 3_400),
        ],
    )

    rows = step_profile(log)

    assert [(r["stage"], r["step"], r["spark_jobs"], r["jobs_s"], r["cpu_s"]) for r in rows] == [
        (PIPELINE, "delivery", 2, 1.5, 2.0),
        (PIPELINE, "write delivery", 1, 0.4, 0.5),
    ]
    assert (rows[0]["records_read"], rows[0]["shuffle_mb"]) == (7, 2.0)
    assert (
        step_markdown(rows).splitlines()[2] == "| pipeline | delivery | 2 | 1.5 | 2.0 | 7 | 2.0 |"
    )


def test_a_compressed_event_log_is_refused_with_the_setting_to_change(tmp_path: Path) -> None:
    rolling = tmp_path / "events" / "eventlog_v2_local-1"
    rolling.mkdir(parents=True)
    (rolling / "appstatus_local-1").write_text("")
    (rolling / "events_1_local-1.zstd").write_bytes(b"\x28\xb5\x2f\xfd\x00\x00")

    log = event_log_file(tmp_path / "events")

    assert log.name == "events_1_local-1.zstd"
    with pytest.raises(ValueError, match=r"compressed .* spark\.eventLog\.compress=false"):
        profile(log, tmp_path / "lakehouse")


def test_a_log_still_in_progress_is_taken_under_the_name_spark_renames_it_to(
    tmp_path: Path,
) -> None:
    events = tmp_path / "events"
    events.mkdir()
    writing = events / "local-1.inprogress"
    writing.write_text("{}\n")
    # the driver JVM stops after its job's process has exited, and renames its log then
    renamer = threading.Timer(0.5, writing.rename, args=(events / "local-1",))
    renamer.start()

    log = event_log_file(events)

    renamer.join()
    assert log == events / "local-1"


def test_a_log_never_renamed_is_taken_as_it_is(tmp_path: Path) -> None:
    events = tmp_path / "events"
    events.mkdir()
    (events / "local-1.inprogress").write_text("{}\n")

    assert event_log_file(events, settle_s=0.3) == events / "local-1.inprogress"


def test_the_profiling_conf_keeps_the_env_settings_and_adds_the_event_log(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    (conf / "pulsar").mkdir(parents=True)
    (conf / "pulsar" / "broker.conf").write_text("x=1\n")
    local = {"storage": "path", "spark": {"master": "local[*]", "conf": {"a.b": "c"}}}
    (conf / "local.yaml").write_text(yaml.safe_dump(local))
    events = tmp_path / "work" / "events" / "examples-new"

    copied = profiling_conf_dir(conf, tmp_path / "work" / "conf", "local", events)

    assert yaml.safe_load((copied / "local.yaml").read_text()) == {
        "storage": "path",
        "spark": {
            "master": "local[*]",
            "conf": {
                "a.b": "c",
                "spark.eventLog.enabled": "true",
                "spark.eventLog.dir": events.as_uri(),
                "spark.eventLog.compress": "false",
                "spark.eventLog.rolling.enabled": "false",
            },
        },
    }
    assert (copied / "pulsar" / "broker.conf").read_text() == "x=1\n"
    assert events.is_dir() and not any(events.iterdir())
    assert yaml.safe_load((conf / "local.yaml").read_text()) == local  # the original untouched
