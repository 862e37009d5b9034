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
