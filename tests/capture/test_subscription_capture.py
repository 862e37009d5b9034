"""Subscription types and keys captured from a real Pulsar standalone (trace format v1.1):
every subscribe and receive says its subscription type, keyed messages carry their keys on
send, ack and receive, and live consumers of one subscription behave as their type promises."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from json_schema_check import validate
from pulsar_traces import capture_opts, trace_events

from capture.harness import capture

pytestmark = pytest.mark.pulsar


def _by_client(events: list[dict]) -> dict[str, list[dict]]:
    found = defaultdict(list)
    for event in events:
        found[event["client"]].append(event)
    return found


def _assert_contiguous_event_index(out: Path) -> None:
    """Each consumer's events (over all its processes) are numbered 0..n-1, once each."""
    events = [e for name in ("subscribe", "receive", "end") for e in trace_events(out, name)]
    for client, mine in _by_client(events).items():
        indices = sorted(e["event_index"] for e in mine)
        assert indices == list(range(len(mine))), client


def test_reader_records_exclusive_and_the_keys_from_the_cli(standalone, tmp_path, capsys):
    """`capture run --keys 7 --ordering-keys 3`: a Reader's events say Exclusive; every
    send, ack and receive of seq s carries key-<s mod 7> and okey-<s mod 3>."""
    from jobs.cli import main

    out = tmp_path / "keys"
    argv = ["capture", "run", "--service-url", standalone.service_url, "--admin-url"]
    argv += [standalone.admin_url, "--topic", "keys", "--messages", "200", "--keys", "7"]
    capsys.readouterr()
    assert main([*argv, "--ordering-keys", "3", "--out", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    validate(result, "capture_run")
    assert (result["acked"], result["consume"]["received"]) == (200, 200)

    [subscribe] = trace_events(out, "subscribe")
    assert subscribe["subscription_type"] == "Exclusive"
    for name in ("send", "ack", "receive"):
        events = trace_events(out, name)
        assert len(events) == 200, name
        for event in events:
            seq = event["seq"]
            assert (event["key"], event["ordering_key"]) == (f"key-{seq % 7}", f"okey-{seq % 3}")
    assert {e["subscription_type"] for e in trace_events(out, "receive")} == {"Exclusive"}
    [config] = trace_events(out, "config")
    assert (config["keys"], config["ordering_keys"]) == (7, 3)


def test_key_shared_three_consumers_each_key_to_one_consumer(standalone, tmp_path) -> None:
    """Three live Key_Shared consumers (processes), 50 keys, no churn: all three receive,
    each key goes to exactly one of them, every message exactly once, then all three end."""
    out = tmp_path / "key-shared"
    opts = capture_opts(
        standalone, out, topic="key-shared", messages=600, subscription_type="Key_Shared",
        consumers=3, keys=50,
    )  # fmt: skip
    summary = capture(opts, standalone)
    consume = summary["consume"]
    assert (summary["acked"], consume["received"], consume["reached_end"]) == (600, 600, True)

    receives = trace_events(out, "receive")
    assert Counter(e["seq"] for e in receives) == dict.fromkeys(range(600), 1)
    consumers = {e["client"] for e in receives}
    assert len(consumers) == 3 and all(c.startswith(consume["name"]) for c in consumers)
    served_by = defaultdict(set)
    for event in receives:
        assert event["key"] == f"key-{event['seq'] % 50}"
        assert (event["subscription_type"], event["subscription"]) == (
            "Key_Shared",
            consume["name"],
        )
        served_by[event["key"]].add(event["client"])
    assert len(served_by) == 50
    assert {key: len(clients) for key, clients in served_by.items()} == dict.fromkeys(served_by, 1)

    subscribes, ends = trace_events(out, "subscribe"), trace_events(out, "end")
    assert sorted(e["client"] for e in subscribes) == sorted(e["client"] for e in ends)
    assert {e["client"] for e in subscribes} == consumers
    assert {e["subscription_type"] for e in subscribes} == {"Key_Shared"}
    # every subscribe precedes the first send: they all consumed while the producer sent
    first_send = min(e["ts"] for e in trace_events(out, "send"))
    assert max(e["ts"] for e in subscribes) < first_send
    _assert_contiguous_event_index(out)
    assert summary["events"] == sum(1 for path in out.glob("*.jsonl") for _ in path.open())


def test_shared_nacks_are_redelivered_once(standalone, tmp_path) -> None:
    """Two Shared consumers, no keys, --nack-every 10: each message whose seq is a multiple
    of 10 is received with redelivery count 0 and negatively acknowledged, then received
    again with a count >= 1 and acknowledged; every other message is received once."""
    out = tmp_path / "shared-nack"
    opts = capture_opts(
        standalone, out, topic="shared-nack", messages=200, subscription_type="Shared",
        consumers=2, nack_every=10,
    )  # fmt: skip
    summary = capture(opts, standalone)
    assert summary["consume"]["reached_end"] is True
    assert summary["consume"]["nacked"] == 20

    receives = trace_events(out, "receive")
    assert all("key" not in e and "ordering_key" not in e for e in receives)
    assert {e["subscription_type"] for e in receives} == {"Shared"}
    by_seq = defaultdict(list)
    for event in receives:
        by_seq[event["seq"]].append(event)
    assert sorted(by_seq) == list(range(200))
    for seq, got in by_seq.items():
        if seq % 10:
            assert len(got) == 1 and "negative_ack" not in got[0], got
        else:
            first, again = got
            assert (first["redelivery_count"], first["negative_ack"]) == (0, True)
            assert again["redelivery_count"] >= 1 and "negative_ack" not in again


def test_failover_two_consumers_one_active(standalone, tmp_path) -> None:
    """Two live Failover consumers without churn: one receives everything, both end."""
    out = tmp_path / "failover"
    opts = capture_opts(
        standalone, out, topic="failover", messages=200, subscription_type="Failover",
        consumers=2,
    )  # fmt: skip
    capture(opts, standalone)
    receives = trace_events(out, "receive")
    assert len(receives) == 200 and len({e["client"] for e in receives}) == 1
    assert {e["subscription_type"] for e in trace_events(out, "subscribe")} == {"Failover"}
    assert len(trace_events(out, "end")) == 2


def test_failover_churn_closes_the_active_consumer(standalone, tmp_path) -> None:
    """Failover, 2 consumers, --consumer-churn close: the active consumer closes at 30 % of
    the acks (the standby takes over), c3 joins at 50 %, the closed one comes back at 70 %
    under its name; the run still reaches its end with every message received."""
    out = tmp_path / "failover-churn"
    opts = capture_opts(
        standalone, out, topic="failover-churn", messages=400, rate=50.0,
        subscription_type="Failover", consumers=2, consumer_churn="close",
    )  # fmt: skip
    summary = capture(opts, standalone)
    assert [step.get("error") for step in summary["churn"]["steps"]] == [None] * 3
    receives = trace_events(out, "receive")
    assert {e["seq"] for e in receives} == set(range(400))
    [closed, joined, back] = trace_events(out, "chaos")
    assert (closed["action"], closed["phase"], back["phase"]) == ("close-consumer", "start", "end")
    assert back["target"] == closed["target"] and joined["action"] == "join-consumer"
    # the closed consumer was the active one: alone to receive before it closed (if at all:
    # at 200 msg/s nothing had arrived 0.6 s in, the broker holding a Failover subscription's
    # dispatch after a consumer change); then the standby (the other first consumer) took over
    before = {e["client"] for e in receives if e["ts"] < closed["ts"]}
    assert before <= {closed["target"]}
    [standby] = {e["client"] for e in trace_events(out, "subscribe")} - {
        closed["target"],
        joined["target"],
    }
    assert any(e["client"] == standby for e in receives if e["ts"] > closed["ts"])
    assert sorted(e["client"] for e in trace_events(out, "end")) == sorted(
        {e["client"] for e in trace_events(out, "subscribe")}
    )
    _assert_contiguous_event_index(out)


# long tier; in the default run: the Key_Shared capture above and
# tests/pipelines/test_subscription_types.py
@pytest.mark.slow
@pytest.mark.long
def test_key_shared_consumer_crash_end_to_end(standalone, tmp_path, config, capsys) -> None:
    """`chaos run --scenario consumer-crash` (3 Key_Shared consumers, 50 keys): consumer 1
    is killed (SIGKILL) at 30 % of the acks, consumer 4 joins at 50 %, consumer 1 comes back
    at 70 %; nothing is lost, and `analyze` judges the run as Key_Shared."""
    from jobs.cli import main

    out = tmp_path / "crash"
    argv = ["chaos", "run", "--scenario", "consumer-crash", "--workdir", standalone.workdir]
    argv += ["--messages", "600", "--rate", "200", "--out", str(out)]
    capsys.readouterr()
    assert main([*argv, "--lakehouse", str(config.lakehouse_path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    validate(result, "chaos_run")
    consume = result["capture"]["consume"]
    assert consume["reached_end"] is True

    chaos = [(e["action"], e["phase"], e["target"]) for e in trace_events(out, "chaos")]
    first, fourth = f"{consume['name']}-c1", f"{consume['name']}-c4"
    assert chaos == [
        ("kill-consumer", "start", first),
        ("join-consumer", "start", fourth),
        ("kill-consumer", "end", first),
    ]
    subscribes = Counter(e["client"] for e in trace_events(out, "subscribe"))
    assert subscribes[first] == 2 and len(subscribes) == 4
    assert len(trace_events(out, "end")) == 4  # the restarted c1 and the newcomer c4 too
    received = {e["seq"] for e in trace_events(out, "receive")}
    assert received == set(range(600))
    _assert_contiguous_event_index(out)

    [run] = result["runs"]
    assert (run["subscription_type"], run["unchecked"]) == ("Key_Shared", [])
    assert (run["sent"], run["acked"], run["received"]) == (600, 600, 600)
    assert (run["lost"], run["unseen"]) == (0, 0)


def test_a_paced_consumer_lags_while_the_producer_sends_then_drains(standalone, tmp_path):
    """--consume-rate 20: while 600 messages are sent at 200/s (3 s) the live consumer
    receives about 20 a second (at most a second's worth more); told to drain once
    production is over, it receives the other ~520 at full speed (paced: 26 s), then `end`."""
    out = tmp_path / "paced"
    opts = capture_opts(
        standalone, out, topic="paced", messages=600, rate=200.0, consumers=1,
        consume_rate=20.0,
    )  # fmt: skip
    summary = capture(opts, standalone)
    assert summary["consume"]["reached_end"] is True
    [subscribed] = trace_events(out, "subscribe")
    last_ack = max(e["ts"] for e in trace_events(out, "ack"))
    receives = sorted(e["ts"] for e in trace_events(out, "receive"))
    assert len(receives) == 600
    during = [ts for ts in receives if ts <= last_ack]
    allowed = 1 + 20 * ((last_ack - subscribed["ts"]) / 1000 + 1.0)
    assert 0 < len(during) <= allowed, (len(during), allowed)
    assert len(during) < 300  # unpaced, it would have kept up with the producer
    assert (receives[-1] - last_ack) / 1000 < 13.0
    [config] = trace_events(out, "config")
    assert config["consume_rate"] == 20.0
