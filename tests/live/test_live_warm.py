"""jobs/live_warm.py's pure parts: the made-up run a watch warms up on (each finding the warm-up
must raise placed where its micro-batch sees it), whether a landing folder holds input yet,
and which watches warm up."""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from jobs.cli import build_parser
from jobs.commands.watch import watch_config
from jobs.live_warm import (
    BUNDLE,
    LOST,
    MESSAGES,
    OUTAGE_FROM,
    REDELIVERED,
    T0_MS,
    broker_log_lines,
    has_input,
    warm_up_events,
    warms_up,
    write_warm_up_run,
)
from pipelines.log_patterns import PATTERNS
from pulsar_audit.config import Config, WatchConfig


def test_the_made_up_run_loses_one_acked_message_and_redelivers_one() -> None:
    events = warm_up_events()
    counts = Counter(e["event"] for e in events)
    assert counts == {"config": 1, "send": MESSAGES, "ack": MESSAGES, "receive": MESSAGES}
    received = Counter(e["seq"] for e in events if e["event"] == "receive")
    assert LOST not in received
    assert received[REDELIVERED] == 2
    assert set(received.values()) == {1, 2}
    # each client's events numbered in order from 0
    for role in ("producer", "consumer"):
        indexes = [e["event_index"] for e in events if e["role"] == role]
        assert indexes == list(range(len(indexes)))


def test_each_micro_batch_of_the_warm_up_sees_its_part_of_the_run(
    tmp_path: Path, config: Config
) -> None:
    landing = tmp_path / "landing"
    batches = write_warm_up_run(landing)
    traces = [landing / f"trace-pulsar-audit-warm-up-{n:05d}.jsonl" for n in range(3)]
    log = landing / "logs" / "broker" / "standalone.00000.log"
    zk = [landing / f"cluster.{n:05d}.zk.jsonl" for n in (1, 2)]
    assert batches == [[traces[0]], [traces[1], log, zk[0]], [traces[2], zk[1]]]
    # the bundle's ownership node: owned, deleted by the unload, owned again
    ops = [json.loads(line)["op"] for f in zk for line in f.read_text().splitlines()]
    assert ops == ["create", "delete", "create"]
    chunks = [[json.loads(line) for line in f.read_text().splitlines()] for f in traces]
    assert sum(map(len, chunks)) == len(warm_up_events())
    acked = [{e["seq"] for e in chunk if e["event"] == "ack"} for chunk in chunks]
    sent = [{e["seq"] for e in chunk if e["event"] == "send"} for chunk in chunks]
    # the second micro-batch: sends from OUTAGE_FROM on, none of them acked yet (an outage in
    # progress); the lost message acked in the first, later ones delivered since
    assert OUTAGE_FROM in sent[1]
    assert not {s for s in sent[1] if s >= OUTAGE_FROM} & acked[1]
    assert LOST in acked[0]
    later = min(e["ts"] for e in chunks[0] if e["event"] == "receive" and e["seq"] > LOST)
    assert max(e["ts"] for e in chunks[1]) - later > config.pipeline.suspected_loss_ms
    # the third: the outage closed
    assert {s for s in sent[1] if s >= OUTAGE_FROM} <= acked[2]


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ([], False),
        (["bench-00001.jsonl.open", "logs/client/client.log.live"], False),
        (["_spark_metadata/0.jsonl", ".hidden/trace.jsonl", "_x.jsonl"], False),
        (["trace-r-00000.jsonl.gz"], True),
        (["logs/broker/standalone.log"], True),
        (["cluster.zk.jsonl"], True),
    ],
)
def test_a_landing_folder_holds_input_once_a_file_the_watch_takes_is_there(
    tmp_path: Path, files: list[str], expected: bool
) -> None:
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}\n")
    assert has_input(str(tmp_path)) is expected
    assert has_input(f"file:{tmp_path}") is expected


def test_a_folder_not_on_this_machine_is_taken_to_hold_input() -> None:
    assert has_input("s3a://bucket/landing") is True


def test_only_a_local_watch_of_tables_as_paths_warms_up(config: Config) -> None:
    assert warms_up(config) is True
    off = dataclasses.replace(config, watch=WatchConfig(warm_up=False))
    assert warms_up(off) is False
    cluster = dataclasses.replace(
        config, spark=dataclasses.replace(config.spark, master="spark://host:7077")
    )
    assert warms_up(cluster) is False
    assert warms_up(dataclasses.replace(config, storage="catalog")) is False


def test_the_broker_log_asks_for_the_unload_just_before_the_acks_stop(config: Config) -> None:
    lines = broker_log_lines()
    requested = [p for p in PATTERNS if p.event_type == "bundle_unload_requested"]
    unload = next(line for line in lines if "Unloading namespace bundle" in line)
    message = unload.split(" - ", 1)[1]
    assert any(re.search(p.message, message) for p in requested)
    assert unload.endswith(BUNDLE)
    stamp = datetime.strptime(unload.split(" ")[0], "%Y-%m-%dT%H:%M:%S,%f%z")
    stop = T0_MS + OUTAGE_FROM * 5  # the send after which no ack comes
    assert 0 < stop - stamp.timestamp() * 1000 <= config.pipeline.cause_before_ms


@pytest.mark.parametrize(("flag", "warm_up"), [([], True), (["--no-warm-up"], False)])
def test_no_warm_up_on_the_command_line_turns_it_off(
    config: Config, flag: list[str], warm_up: bool
) -> None:
    args = build_parser().parse_args(["watch", "landing", *flag])
    assert warms_up(watch_config(config, args)) is warm_up
