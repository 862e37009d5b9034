"""The one place tests read docs/json-output.schema.json and run a command for its --json."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "docs" / "json-output.schema.json"
SCHEMA = json.loads(SCHEMA_PATH.read_text())


def validate(output: dict, command: str) -> None:
    """Raise unless `output` is valid for `command` (its $defs name)."""
    jsonschema.validate(output, {**SCHEMA, "$ref": f"#/$defs/{command}"})


def cli_json(capsys, *argv: str, code: int = 0) -> dict:  # noqa: ANN001
    """`pulsar-audit ARGV --json` in this process: its stdout as JSON ({} unless `code` is 0)."""
    from jobs.cli import main

    capsys.readouterr()
    assert main([*argv, "--json"]) == code
    return json.loads(capsys.readouterr().out) if code == 0 else {}
