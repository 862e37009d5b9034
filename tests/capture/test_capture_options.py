"""The harness's subscription options, message keys and a restarted consumer's event numbering
(no cluster)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from capture.consumer_process import next_event_index
from capture.consumer_worker import next_receive_at, receiver_queue
from capture.harness import CaptureOptions, _config_fields
from capture.live import LiveOptions, churn_steps, rolling_marks
from capture.produce import message_keys
from pulsar_audit.errors import UsageError


def _opts(**kwargs) -> CaptureOptions:  # noqa: ANN003
    return CaptureOptions(
        service_url="pulsar://x", admin_url="http://x", topic="t", messages=10, out=Path("."),
        **kwargs,
    )  # fmt: skip


def test_options_refuse_what_the_subscription_cannot_do() -> None:
    refused = {
        "a Reader is an Exclusive subscription": {"subscription_type": "Shared"},
        "expected one of Exclusive, Failover, Shared, Key_Shared": {"subscription_type": "Key"},
        "an Exclusive subscription takes one consumer": {"consumers": 2},
        "--nack-every needs live consumers": {"nack_every": 3, "consumer": "subscription"},
        "--consumer-churn needs live consumers": {"consumer_churn": "kill"},
        "--consume-rate needs live consumers": {"consume_rate": 20.0},
        "--consume-rate -1.0: expected messages/s > 0": {"consumers": 1, "consume_rate": -1.0},
        "--consume-rate nan: expected": {"consumers": 1, "consume_rate": float("nan")},
        "--keys and --ordering-keys take a count": {"keys": -1},
        "--consumer-churn one of kill, close": {"consumers": 1, "consumer_churn": "crash"},
        "--batching with Key_Shared": {
            "batching": True,
            "subscription_type": "Key_Shared",
            "consumers": 3,
        },
        "expected one of reader, subscription, pre-created": {"consumer": "durable"},
        "--consumer pre-created reads after production": {
            "consumer": "pre-created",
            "subscription_type": "Key_Shared",
            "consumers": 3,
        },
    }
    for message, kwargs in refused.items():
        with pytest.raises(UsageError, match=message):
            _opts(**kwargs).check()
    # accepted: a Reader (Exclusive), one Shared consumer reading back, live Key_Shared consumers
    _opts().check()
    _opts(consumer="subscription", subscription_type="Shared").check()
    _opts(subscription_type="Key_Shared", consumers=3, nack_every=5, consumer_churn="close").check()
    _opts(batching=True, deduplication=True).check()
    _opts(consumer="pre-created").check()  # apache/pulsar#18236: one Exclusive consumer after
    _opts(consumers=1, consume_rate=20.0).check()


def test_batching_is_off_unless_asked_and_lands_in_the_run_config() -> None:
    assert _config_fields(_opts(), None)["batching"] is False
    assert _config_fields(_opts(batching=True), None)["batching"] is True


def test_chaos_run_passes_batching_to_the_harness(capsys: pytest.CaptureFixture) -> None:
    """The CLI flag reaches the options' check, which refuses it before any cluster starts."""
    from jobs.cli import main

    argv = ["chaos", "run", "--scenario", "kill-broker", "--subscription-type", "Key_Shared",
            "--consumers", "3", "--workdir", "/nonexistent/pa-h4"]  # fmt: skip
    assert main([*argv, "--batching"]) == 2
    assert "--batching with Key_Shared" in capsys.readouterr().err


def test_consume_rate_lands_in_the_run_config_and_is_refused_without_live_consumers(
    capsys: pytest.CaptureFixture,
) -> None:
    assert _config_fields(_opts(), None)["consume_rate"] is None
    assert _config_fields(_opts(consumers=1, consume_rate=20.0), None)["consume_rate"] == 20.0
    from jobs.cli import main

    argv = ["chaos", "run", "--scenario", "wipe-qw-bookies-disk", "--consume-rate", "20",
            "--workdir", "/nonexistent/pa-h1"]  # fmt: skip
    assert main(argv) == 2
    assert "--consume-rate needs live consumers (--consumers N)" in capsys.readouterr().err
    assert main([*argv, "--consumers", "1", "--dry-run"]) == 0


def test_a_paced_consumer_receives_at_its_rate_with_a_second_of_credit_at_most() -> None:
    """next_receive_at: 1/rate apart while it keeps up; after 5 s with nothing to read, 11
    receives at once (the one due, and a second's worth at 10/s), then 1/rate apart again."""
    due, times = 0.0, []
    for _ in range(5):  # each receive as soon as it is allowed
        times.append(due)
        due = next_receive_at(due, due, 10.0)
    assert times == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4])
    burst, now = 0, 5.4  # nothing came until 5.4 s, then the messages come as fast as allowed
    while due <= now + 1e-9:
        due = next_receive_at(due, now, 10.0)
        burst += 1
    assert burst == 11
    assert due == pytest.approx(now + 0.1)


def test_a_paced_consumer_fetches_a_second_s_worth_ahead() -> None:
    assert [receiver_queue(rate) for rate in (0.0, 0.2, 10.0, 12.5, 5000.0)] == [
        1000, 1, 10, 13, 1000
    ]  # fmt: skip


def test_a_consumer_process_stops_pacing_on_drain_then_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker's stdin: `drain` lifts the pacing and keeps it running, `end` ends it."""
    import io

    from capture.consumer_worker import _Command

    read, write = os.pipe()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.FileIO(read, "r")))
    command = _Command()
    with os.fdopen(write, "w") as commands:
        commands.write("drain\n")
        commands.flush()
        assert command.draining.wait(10)
        assert not command.given.is_set()
        commands.write("end\n")
    assert command.given.wait(10) and command.value == "end"


def test_message_keys_cycle_through_the_keys() -> None:
    assert message_keys(7, 0, 0) == {"key": None, "ordering_key": None}
    assert message_keys(7, 5, 0) == {"key": "key-2", "ordering_key": None}
    assert message_keys(7, 5, 3) == {"key": "key-2", "ordering_key": "okey-1"}
    assert [message_keys(seq, 2, 0)["key"] for seq in range(4)] == ["key-0", "key-1"] * 2


def test_a_restarted_consumer_numbers_its_events_on(tmp_path: Path) -> None:
    """event_index is unique per client: the restarted process of consumer c1 starts after
    the last event its killed process wrote (c10's files are another consumer's)."""
    assert next_event_index(tmp_path, "r1", "sub-c1") == 0

    def write(name: str, indices: list[int]) -> None:
        lines = [json.dumps({"event": "receive", "event_index": i}) for i in indices]
        (tmp_path / f"trace-r1-{name}-00000.jsonl").write_text("\n".join(lines) + "\n")

    write("sub-c1.0", [0, 1, 2, 3])
    write("sub-c10.0", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    assert next_event_index(tmp_path, "r1", "sub-c1") == 4
    write("sub-c1.1", [4, 5])
    assert next_event_index(tmp_path, "r1", "sub-c1") == 6


def test_chaos_run_takes_a_pre_created_subscription_and_refuses_it_with_live_consumers(
    capsys: pytest.CaptureFixture,
) -> None:
    """`--consumer pre-created` is a choice of the CLI; with live consumers it is refused before
    any cluster starts (exit 2), naming the conflict."""
    from jobs.cli import main

    argv = ["chaos", "run", "--scenario", "kill-broker", "--consumer", "pre-created",
            "--workdir", "/nonexistent/pa-h1"]  # fmt: skip
    assert main([*argv, "--dry-run"]) == 0
    assert main([*argv, "--consumers", "2", "--subscription-type", "Shared"]) == 2
    assert "--consumer pre-created reads after production" in capsys.readouterr().err


class _RecordingLive:
    """Stands in for LiveConsumers' bookkeeping only (no process): what a step asks of it."""

    def __init__(self, consumers: int) -> None:
        self.opts = LiveOptions(consumers, "Key_Shared", churn="rolling")
        self.calls: list[tuple] = []

    def name_of(self, number: int) -> str:
        return f"audit-x-c{number}"

    def leave(self, name: str, how: str) -> None:
        self.calls.append(("leave", name, how))

    def come_back(self, name: str) -> dict:
        self.calls.append(("come_back", name))
        return {"pid": 7, "incarnation": 1}


def test_rolling_churn_restarts_every_consumer_once_in_turn() -> None:
    """apache/pulsar#23307's rolling restart: consumer i closes and comes straight back at
    20 %..80 % of the acks, evenly spread, each reported as a restart-consumer start and end."""
    assert rolling_marks(3, 1000) == [200, 500, 800]
    assert rolling_marks(1, 1000) == [200]
    assert rolling_marks(4, 10) == [2, 4, 6, 8]
    live, events = _RecordingLive(3), []
    steps = churn_steps(live, "rolling", 1000, lambda *event: events.append(event))
    assert [(mark, step.__name__) for mark, step in steps] == [
        (200, "restart"), (500, "restart"), (800, "restart")
    ]  # fmt: skip
    steps[1][1](503)
    assert live.calls == [("leave", "audit-x-c2", "close"), ("come_back", "audit-x-c2")]
    assert events == [
        ("restart-consumer", "audit-x-c2", {"ack_count": 503, "phase": "start"}),
        ("restart-consumer", "audit-x-c2",
         {"ack_count": 503, "phase": "end", "restarted": True, "pid": 7, "incarnation": 1}),
    ]  # fmt: skip
    _opts(subscription_type="Key_Shared", consumers=3, consumer_churn="rolling").check()


def test_several_chaos_actions_land_in_the_run_config_and_their_restores_run_last_first() -> None:
    from capture.chaos import ChaosSpec
    from capture.harness import _restore

    one, two = ChaosSpec("unload", 10), ChaosSpec("kill-qw-bookies", 20)
    assert _opts(chaos=one).chaos_actions == (one,)
    assert _config_fields(_opts(chaos=one), None)["chaos"] == "unload@10"
    assert _config_fields(_opts(chaos=(one, two)), None)["chaos"] == "unload@10,kill-qw-bookies@20"
    assert _opts().chaos_actions == () and _config_fields(_opts(), None)["chaos"] is None

    done: list[str] = []

    def step(name: str):  # noqa: ANN202
        def restore() -> None:
            done.append(name)

        restore.rest = lambda: done.append(f"{name} rest")  # type: ignore[attr-defined]
        return restore

    outcomes = [{"action": "a", "restore": step("a")}, {"action": "b"},
                {"action": "c", "restore": step("c")}]  # fmt: skip
    restore = _restore(outcomes)
    assert all("restore" not in outcome for outcome in outcomes)  # out of the summary
    restore()
    restore.rest()
    assert done == ["c", "a", "c rest", "a rest"]
    single = step("s")
    assert _restore({"action": "s", "restore": single}) is single
    assert _restore(None) is None and _restore([{"action": "u"}]) is None
