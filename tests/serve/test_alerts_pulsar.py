"""Alerts reach a real Pulsar topic exactly once across two runs and a sink outage."""

from __future__ import annotations

import dataclasses
import json
import socket

import pulsar
import pytest
from gold_rows import anomaly, outage, summary, write_gold

from pulsar_audit.config import AlertsConfig, PulsarSinkConfig, SinkConfig
from serve.alert_job import alert_rows, raise_and_send

pytestmark = pytest.mark.pulsar

TOPIC = "persistent://public/default/pulsar-audit-alerts-test"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(config, service_url: str):  # noqa: ANN001, ANN202
    sink = SinkConfig(
        name="ops",
        pulsar=PulsarSinkConfig(service_url=service_url, topic=TOPIC, send_timeout_ms=3000),
    )
    return dataclasses.replace(config, alerts=AlertsConfig(sinks=[sink]))


def _read_all(service_url: str) -> list[pulsar.Message]:
    client = pulsar.Client(service_url, operation_timeout_seconds=10)
    try:
        reader = client.create_reader(TOPIC, pulsar.MessageId.earliest)
        messages = []
        while reader.has_message_available():
            messages.append(reader.read_next(timeout_millis=5000))
        return messages
    finally:
        client.close()


def test_alerts_reach_a_pulsar_topic_once_across_runs_and_an_outage(
    standalone, lakehouse, config
) -> None:
    up = _config(config, standalone.service_url)
    write_gold(
        lakehouse,
        summaries=[summary(valid="false", lost=3, reasons=["lost=3"])],
        anomalies=[anomaly()],
    )
    assert raise_and_send(lakehouse, up)["sinks"]["ops"] == {"sent": 2, "pending": 0,
                                                             "rejected": 0}  # fmt: skip
    assert raise_and_send(lakehouse, up)["sinks"]["ops"]["sent"] == 0

    # A new finding while the sink is unreachable stays pending with the error.
    write_gold(lakehouse, outages=[outage()])
    down = _config(config, f"pulsar://127.0.0.1:{_closed_port()}")
    assert raise_and_send(lakehouse, down)["sinks"]["ops"] == {"sent": 0, "pending": 1,
                                                               "rejected": 0}  # fmt: skip
    [pending] = [a for a in alert_rows(lakehouse) if a["kind"] == "outage"]
    [state] = pending["deliveries"]
    assert state["state"] == "pending" and state["error"]

    assert raise_and_send(lakehouse, up)["sinks"]["ops"]["sent"] == 1
    assert raise_and_send(lakehouse, up)["sinks"]["ops"]["sent"] == 0

    messages = _read_all(standalone.service_url)
    keys = [m.partition_key() for m in messages]
    alerts = {a["dedup_key"]: a for a in alert_rows(lakehouse)}
    assert sorted(keys) == sorted(alerts)  # each alert once, nothing else
    for message in messages:
        body = json.loads(message.data())
        assert body["dedup_key"] == message.partition_key()
        assert message.properties()["severity"] == alerts[body["dedup_key"]]["severity"]
    assert {json.loads(m.data())["kind"] for m in messages} == {"run_not_valid", "lost", "outage"}
