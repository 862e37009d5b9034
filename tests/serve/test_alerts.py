"""Alerts: which findings raise one (tiny literal frames), and the sinks' exactly-once delivery
to a real HTTP receiver and a JSON-lines file, across re-runs and a receiver outage."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from pathlib import Path

import pytest
from gold_rows import anomaly, config_event, frames, outage, risk, summary, write_gold
from werkzeug import Response

from pulsar_audit.config import (
    AlertsConfig,
    FileSinkConfig,
    SinkConfig,
    WebhookSinkConfig,
    load_config,
)
from pulsar_audit.errors import ConfigError
from pulsar_audit.local_frames import local_frame
from pulsar_audit.schemas import ALERTS, PROVISIONAL
from serve.alert_job import alert_rows, pending_at, raise_and_send
from serve.alerts import alerts_for_provisional, candidate_alerts
from serve.sinks import IDEMPOTENCY_HEADER, SIGNATURE_HEADER, sign

SECRET_ENV = "PULSAR_AUDIT_TEST_HOOK_SECRET"
SETTINGS = AlertsConfig(outage_threshold_ms=1000, risk_threshold=0.5)
T0 = datetime(2026, 11, 28, 0, 0, 0)


def _alerts(spark, **inputs) -> list[tuple]:  # noqa: ANN001
    df = candidate_alerts(*frames(spark, **inputs), SETTINGS)
    assert df.schema.simpleString() == ALERTS.simpleString()
    return sorted((r.kind, r.severity, r.run_id, r.finding_id, r.title) for r in df.collect())


def test_no_findings_raise_no_alerts(spark) -> None:
    assert _alerts(spark) == []
    assert _alerts(spark, summaries=[summary()], outages=[outage(duration_ms=999.9)]) == []


def test_verdicts_false_is_critical_unknown_a_warning_true_nothing(spark) -> None:
    rows = [
        summary(subscription="ok"),
        summary(subscription="bad", valid="false", lost=2, reasons=["lost=2"]),
        summary(subscription="maybe", valid="unknown", reasons=[]),
    ]
    df = candidate_alerts(*frames(spark, summaries=rows), SETTINGS)
    got = {r.subscription: (r.severity, r.explanation) for r in df.collect()}
    assert got == {
        "bad": ("critical", "valid=false (sent 10, acked 10, received 10): lost=2"),
        "maybe": ("warning", "valid=unknown (sent 10, acked 10, received 10): no reason recorded"),
    }


def test_loss_alerts_but_unseen_does_not(spark) -> None:
    got = _alerts(spark, anomalies=[anomaly(), anomaly(anomaly_id="u", kind="unseen")])
    assert got == [
        ("lost", "critical", "r1", "a-lost-1", "run r1: 3 acked message(s) lost (seq 5–7 from p1)")
    ]


def test_duplicates_alert_only_when_the_run_had_deduplication_on(spark) -> None:
    duplicated = [
        anomaly(anomaly_id="d1", kind="duplicated", run_id="r1"),
        anomaly(anomaly_id="d2", kind="duplicated", run_id="r2", seq_from=9, seq_to=9, count=1),
        anomaly(anomaly_id="d3", kind="duplicated", run_id="r3"),
    ]
    events = [config_event("r1", False), config_event("r2", True), config_event("r3", None)]
    got = _alerts(spark, anomalies=duplicated, run_events=events)
    assert got == [
        (
            "duplicated",
            "critical",
            "r2",
            "d2",
            "run r2: 1 message(s) stored twice with deduplication on (seq 9 from p1)",
        )
    ]


def test_outages_from_the_threshold_up_and_their_causes_kept(spark) -> None:
    rows = [outage(outage_id="short", duration_ms=999.0), outage(outage_id="long")]
    df = candidate_alerts(*frames(spark, outages=rows), SETTINGS)
    [alert] = df.collect()
    assert (alert.finding_id, alert.severity, alert.subscription) == ("long", "warning", None)
    assert alert.title == "run r1: producer p1 stalled for 1500 ms"
    assert [c.reason for c in alert.causes] == ["bundle unloaded 20 ms before"]


def test_a_provisional_finding_is_alerted_with_the_causes_ranked_by_then(spark) -> None:
    unload = {"event_type": "bundle_unload_started", "ts": T0, "host": "b1", "reason": "r"}
    base = {
        "kind": "outage_in_progress", "run_id": "r1", "topic": "t", "partition": -1,
        "producer": "p1", "first_seen_batch": 0, "first_seen_at": T0, "state": "open",
        "explanation": "x",
    }  # fmt: skip
    rows = [
        {**base, "finding_id": "ranked", "causes": [unload]},
        {**base, "finding_id": "older-table", "causes": None},  # never ranked
    ]
    alerts = alerts_for_provisional(local_frame(spark, rows, PROVISIONAL)).collect()
    causes = {a.finding_id: [c.event_type for c in a.causes] for a in alerts}
    assert causes == {"ranked": ["bundle_unload_started"], "older-table": []}


def test_risky_configs_from_the_threshold_up(spark) -> None:
    rows = [risk(), risk(ensemble_size=3, write_quorum=3, ack_quorum=2, risk=0.49)]
    df = candidate_alerts(*frames(spark, risks=rows), SETTINGS)
    [alert] = df.collect()
    assert alert.title == (
        "namespace public/default (E=2 Qw=2 Qa=1): autorecovery_impossible risk 0.70 under "
        "kill-bookies:1"
    )
    assert alert.explanation.startswith("Qa = 1: after 1 bookie of this ensemble is lost")
    assert alert.explanation.endswith(
        "model pulsar-audit-config-risk version 3 (threshold 0.50), 8 training run(s) with this "
        "setting and fault, 5 with autorecovery_impossible"
    )
    assert alert.run_id is None


def test_dedup_keys_are_stable_and_change_with_the_verdict(spark) -> None:
    def keys(valid: str) -> set[str]:
        rows = [summary(valid=valid, reasons=["x"])]
        return {r.dedup_key for r in candidate_alerts(*frames(spark, summaries=rows), SETTINGS)
                .collect()}  # fmt: skip

    assert keys("false") == keys("false")
    assert keys("false") != keys("unknown")


def test_sink_config_fails_on_unknown_keys_and_on_two_kinds(tmp_path: Path) -> None:
    base = (Path(__file__).parents[2] / "conf" / "local.yaml").read_text()
    base = base.replace("  sinks: []\n", "")
    cases = {
        "unknown": "  sinks:\n  - name: w\n    webhook: {url: 'http://x', retries: 3}\n",
        "two": "  sinks:\n  - name: w\n    webhook: {url: 'http://x'}\n    file: {path: a}\n",
    }
    expected = {
        "unknown": r"unknown keys \['retries'\]",
        "two": r"expected exactly one of \['pulsar', 'webhook', 'file'\]",
    }
    for env, sinks in cases.items():
        (tmp_path / f"{env}.yaml").write_text(base + sinks)
        with pytest.raises(ConfigError, match=expected[env]):
            load_config(env, conf_dir=tmp_path)
    (tmp_path / "good.yaml").write_text(
        base + "  sinks:\n  - name: w\n    webhook: {url: 'http://x', hmac_secret_env: S}\n"
    )
    [sink] = load_config("good", conf_dir=tmp_path).alerts.sinks
    assert (sink.kind, sink.webhook.hmac_secret_env, sink.webhook.max_attempts) == (
        "webhook",
        "S",
        5,
    )


# --------------------------------------------------------------------------- delivery


def _with_sinks(config, *sinks: SinkConfig):  # noqa: ANN001, ANN202
    return dataclasses.replace(config, alerts=dataclasses.replace(SETTINGS, sinks=list(sinks)))


def _webhook(url: str, attempts: int = 4) -> SinkConfig:
    conf = WebhookSinkConfig(
        url=url,
        max_attempts=attempts,
        backoff_initial_ms=20,
        backoff_max_ms=80,
        timeout_ms=2000,
        hmac_secret_env=SECRET_ENV,
    )
    return SinkConfig(name="hook", webhook=conf)


def test_pending_at_a_sink_is_what_it_has_not_taken_or_refused_oldest_first() -> None:
    """The alerts a sink still owes, in the order a table read sorted by created_at, first_ts
    (nulls first) and dedup_key gives; done elsewhere is not done here."""
    at = datetime(2026, 1, 1, 12, 0, 0)
    later = datetime(2026, 1, 1, 12, 0, 5)

    def alert(key: str, created: datetime, first_ts: datetime | None, *done: tuple) -> dict:
        deliveries = [{"sink": sink, "state": state} for sink, state in done]
        return {
            "dedup_key": key,
            "created_at": created,
            "first_ts": first_ts,
            "deliveries": deliveries,
        }

    alerts = [
        alert("e", later, None),
        alert("d", at, later),
        alert("c", at, at, ("hook", "pending")),
        alert("b", at, None, ("other", "sent")),
        alert("a", at, at, ("hook", "sent")),
        alert("f", at, at, ("hook", "rejected")),
        alert("a2", at, at),
    ]
    assert [a["dedup_key"] for a in pending_at(alerts, "hook")] == ["b", "a2", "c", "d", "e"]
    assert [a["dedup_key"] for a in pending_at(alerts, "other")] == ["a", "a2", "c", "f", "d", "e"]


def _gold_with_two_findings(lakehouse) -> None:  # noqa: ANN001
    write_gold(
        lakehouse,
        summaries=[summary(valid="false", lost=3, reasons=["lost=3"])],
        anomalies=[anomaly()],
    )


def _delivered(httpserver) -> list[dict]:  # noqa: ANN001
    """Requests the receiver answered 2xx, with their key, body and signature."""
    return [
        {
            "key": request.headers[IDEMPOTENCY_HEADER],
            "body": request.get_data(),
            "signature": request.headers.get(SIGNATURE_HEADER),
        }
        for request, response in httpserver.log
        if response.status_code == 200
    ]


def _states(lakehouse, sink: str) -> dict[str, tuple]:  # noqa: ANN001
    out = {}
    for alert in alert_rows(lakehouse):
        [d] = [d for d in alert["deliveries"] if d["sink"] == sink]
        out[alert["kind"]] = (d["state"], d["attempts"], d["error"])
    return out


def test_webhook_retries_then_delivers_each_alert_exactly_once_across_runs_and_an_outage(
    lakehouse, config, httpserver, monkeypatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, "s3cret")
    config = _with_sinks(config, _webhook(httpserver.url_for("/hook")))
    _gold_with_two_findings(lakehouse)
    # The receiver fails the first two attempts, then accepts everything.
    for _ in range(2):
        httpserver.expect_oneshot_request("/hook", method="POST").respond_with_data(
            "busy", status=503
        )
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")

    first = raise_and_send(lakehouse, config)
    assert first == {"raised": 2, "sinks": {"hook": {"sent": 2, "pending": 0, "rejected": 0}}}
    delivered = _delivered(httpserver)
    assert len(delivered) == 2 and len(httpserver.log) == 4
    assert {d["key"] for d in delivered} == {a["dedup_key"] for a in alert_rows(lakehouse)}
    for d in delivered:
        assert d["signature"] == sign(d["body"], "s3cret")
        assert json.loads(d["body"])["dedup_key"] == d["key"]
    states = _states(lakehouse, "hook")
    assert sorted(s[:2] for s in states.values()) == [("sent", 1), ("sent", 3)]

    # A second run raises and sends nothing.
    assert raise_and_send(lakehouse, config) == {
        "raised": 0,
        "sinks": {"hook": {"sent": 0, "pending": 0, "rejected": 0}},
    }
    assert len(httpserver.log) == 4

    # A new finding while the receiver is down: the give-up is recorded, the alert pending.
    write_gold(lakehouse, outages=[outage()])
    httpserver.clear_all_handlers()
    httpserver.expect_request("/hook", method="POST").respond_with_data("down", status=503)
    third = raise_and_send(lakehouse, config)
    assert third == {"raised": 1, "sinks": {"hook": {"sent": 0, "pending": 1, "rejected": 0}}}
    assert _states(lakehouse, "hook")["outage"] == (
        "pending",
        4,
        "gave up after 4 attempts: HTTP 503 SERVICE UNAVAILABLE",
    )

    # Back up: the next run delivers only the pending alert.
    httpserver.clear_all_handlers()
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    fourth = raise_and_send(lakehouse, config)
    assert fourth["sinks"]["hook"] == {"sent": 1, "pending": 0, "rejected": 0}
    delivered = _delivered(httpserver)
    assert len(delivered) == 3
    assert len({d["key"] for d in delivered}) == 3
    assert _states(lakehouse, "hook")["outage"] == ("sent", 5, None)


def test_webhook_refusal_is_recorded_and_not_retried(lakehouse, config, httpserver) -> None:
    sink = dataclasses.replace(
        _webhook(httpserver.url_for("/hook")),
        webhook=dataclasses.replace(_webhook("").webhook, url=httpserver.url_for("/hook"),
                                    hmac_secret_env=None),
    )  # fmt: skip
    config = _with_sinks(config, sink)
    write_gold(lakehouse, anomalies=[anomaly()])
    httpserver.expect_request("/hook").respond_with_response(Response("bad schema", status=422))
    assert raise_and_send(lakehouse, config)["sinks"]["hook"]["rejected"] == 1
    assert raise_and_send(lakehouse, config)["sinks"]["hook"]["rejected"] == 0
    assert len(httpserver.log) == 1
    assert _states(lakehouse, "hook")["lost"] == ("rejected", 1, "HTTP 422 UNPROCESSABLE ENTITY")


def test_unset_hmac_secret_is_a_config_error_naming_the_variable(
    lakehouse, config, monkeypatch
) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)
    config = _with_sinks(config, _webhook("http://127.0.0.1:9/hook"))
    write_gold(lakehouse, anomalies=[anomaly()])
    with pytest.raises(ConfigError, match=SECRET_ENV):
        raise_and_send(lakehouse, config)


def test_file_sink_and_a_down_webhook_each_keep_their_own_state(lakehouse, config) -> None:
    out = Path(config.lakehouse_path) / "alerts" / "alerts.jsonl"
    sinks = [
        SinkConfig(name="file", file=FileSinkConfig(path="{lakehouse}/alerts/alerts.jsonl")),
        # Nothing listens on port 9: the receiver is down.
        SinkConfig(
            name="down",
            webhook=WebhookSinkConfig(
                url="http://127.0.0.1:9/hook", max_attempts=2, backoff_initial_ms=10, timeout_ms=500
            ),
        ),  # fmt: skip
    ]
    config = _with_sinks(config, *sinks)
    _gold_with_two_findings(lakehouse)
    first = raise_and_send(lakehouse, config)
    assert first["sinks"]["file"] == {"sent": 2, "pending": 0, "rejected": 0}
    # The first alert gives up; the second is not tried against a sink known to be down.
    assert first["sinks"]["down"] == {"sent": 0, "pending": 2, "rejected": 0}
    second = raise_and_send(lakehouse, config)
    assert second["sinks"]["file"]["sent"] == 0
    assert second["sinks"]["down"]["pending"] == 2
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(line["kind"] for line in lines) == ["lost", "run_not_valid"]
    down = _states(lakehouse, "down")
    assert {state for state, _, _ in down.values()} == {"pending"}
    assert sorted(attempts for _, attempts, _ in down.values()) == [0, 4]
    # `alerts list --pending`: not yet done at some sink (the down one), none once only the
    # file sink is configured
    pending = alert_rows(lakehouse, pending_only=True, config=config)
    assert sorted(a["kind"] for a in pending) == ["lost", "run_not_valid"]
    only_file = _with_sinks(config, sinks[0])
    assert alert_rows(lakehouse, pending_only=True, config=only_file) == []
