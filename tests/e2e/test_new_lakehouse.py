"""Commands on a new lakehouse that only `ingest` has written to: they create what they need."""

from __future__ import annotations

from pathlib import Path

from jobs.cli import main

BROKER_LOGS = Path(__file__).resolve().parents[2] / "examples" / "unload-run" / "logs" / "broker"


def test_pipeline_after_only_ingest_logs_creates_the_tables(spark, tmp_path: Path, capsys):
    lakehouse = ["--lakehouse", str(tmp_path / "lh")]
    assert main(["ingest", "logs", str(BROKER_LOGS), "--source", "broker", *lakehouse]) == 0
    assert not (tmp_path / "lh" / "gold" / "anomalies").exists()
    capsys.readouterr()

    assert main(["pipeline", *lakehouse]) == 0
    assert capsys.readouterr().out.strip() == "no run changed since the last computation"
    assert (tmp_path / "lh" / "gold" / "anomalies" / "_delta_log").is_dir()


def test_pipeline_table_checks_a_run_a_watch_left_unchecked(spark, tmp_path: Path, capsys):
    """A watch's micro-batches leave a run's table checks to its end; `pipeline` on that
    lakehouse judges them before the run's verdict, once."""
    import shutil

    from checks.tables import TABLE_METRICS
    from jobs.ingest import ingest_traces
    from pulsar_audit.config import load_config
    from pulsar_audit.delta_io import Lakehouse

    folder = tmp_path / "traces"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "traces", folder)
    lh = Lakehouse(spark, load_config("local", lakehouse=str(tmp_path / "lh")))
    ingest_traces(lh, folder, table_checks=False)

    def table_checks() -> int:
        return lh.read("check_results").filter("level = 'table' AND run_id = 'run-a'").count()

    assert table_checks() == 0
    assert main(["pipeline", "--lakehouse", str(tmp_path / "lh")]) == 0
    assert capsys.readouterr().out.strip() == "recomputed 1 run(s): run-a"
    assert table_checks() == len(TABLE_METRICS) + 3  # and a schema check per event table
