"""Deliver alerts to one sink: a Pulsar topic, a webhook or a JSON-lines file.

Each `deliver_*` takes the alerts still pending at that sink (plain dicts, already small) and
returns one `Delivery` per alert. A sink that is down leaves its alerts "pending" with the
error, so the next send tries them again; a sink that refuses an alert for good (HTTP 4xx)
marks it "rejected".
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import requests

from pulsar_audit.config import Config, FileSinkConfig, PulsarSinkConfig, WebhookSinkConfig
from pulsar_audit.errors import ConfigError
from pulsar_audit.secrets import PulsarAuth, redact, secret_from_env

log = logging.getLogger(__name__)

PENDING, SENT, REJECTED = "pending", "sent", "rejected"
PAYLOAD_FIELDS = (
    "dedup_key",
    "kind",
    "severity",
    "run_id",
    "topic",
    "subscription",
    "finding_id",
    "title",
    "explanation",
    "causes",
    "first_ts",
    "created_at",
)
IDEMPOTENCY_HEADER = "Idempotency-Key"
SIGNATURE_HEADER = "X-Pulsar-Audit-Signature"
RETRYABLE_STATUS = {408, 425, 429}


@dataclass(frozen=True)
class Delivery:
    """One attempt series of one alert at one sink (the ALERT_DELIVERY struct)."""

    sink: str
    state: str
    attempts: int
    last_attempt_at: datetime | None
    sent_at: datetime | None
    error: str | None

    def as_row(self) -> dict[str, Any]:
        return {
            "sink": self.sink,
            "state": self.state,
            "attempts": self.attempts,
            "last_attempt_at": self.last_attempt_at,
            "sent_at": self.sent_at,
            "error": self.error,
        }


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC).isoformat() if value.tzinfo is None else value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def payload(alert: dict[str, Any]) -> bytes:
    """The alert's JSON body: the same bytes every time for the same alert."""
    body = {name: alert.get(name) for name in PAYLOAD_FIELDS}
    return json.dumps(body, default=_json_default, sort_keys=True).encode()


def sign(body: bytes, secret: str) -> str:
    """'sha256=<hex>' HMAC of the body, as a receiver recomputes it."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


# --------------------------------------------------------------------------- webhook


def _attempt(
    session: requests.Session, conf: WebhookSinkConfig, body: bytes, headers: dict[str, str]
) -> tuple[bool | None, str | None]:
    """(True, None) delivered; (None, error) worth retrying; (False, error) refused for good."""
    try:
        response = session.post(conf.url, data=body, headers=headers, timeout=conf.timeout_ms / 1e3)
    except requests.RequestException as exc:  # its text names the URL: kept redacted
        return None, redact(f"{type(exc).__name__}: {exc}")
    if 200 <= response.status_code < 300:
        return True, None
    error = f"HTTP {response.status_code} {response.reason}"
    if response.status_code >= 500 or response.status_code in RETRYABLE_STATUS:
        return None, error
    return False, error


def post_alert(
    session: requests.Session,
    name: str,
    conf: WebhookSinkConfig,
    alert: dict[str, Any],
    secret: str | None,
    sleep: Callable[[float], None] = time.sleep,
) -> Delivery:
    """POST one alert, retrying with exponential backoff; the give-up is kept in `error`."""
    body = payload(alert)
    headers = {"Content-Type": "application/json", IDEMPOTENCY_HEADER: alert["dedup_key"]}
    if secret is not None:
        headers[SIGNATURE_HEADER] = sign(body, secret)
    delay_ms = conf.backoff_initial_ms
    error = None
    for attempt in range(1, conf.max_attempts + 1):
        ok, error = _attempt(session, conf, body, headers)
        at = _now()
        if ok:
            return Delivery(name, SENT, attempt, at, at, None)
        if ok is False:
            return Delivery(name, REJECTED, attempt, at, None, error)
        if attempt < conf.max_attempts:
            sleep(delay_ms / 1e3)
            delay_ms = min(delay_ms * 2, conf.backoff_max_ms)
    return Delivery(
        name, PENDING, conf.max_attempts, at, None, f"gave up after {attempt} attempts: {error}"
    )


def deliver_webhook(
    name: str, conf: WebhookSinkConfig, alerts: list[dict[str, Any]]
) -> list[Delivery]:
    """POST each alert; once one gives up (the receiver is down), the rest wait for next time."""
    secret = None
    if conf.hmac_secret_env:
        secret = secret_from_env(conf.hmac_secret_env)
        if not secret:
            raise ConfigError(
                f"alert sink {name!r}: environment variable {conf.hmac_secret_env} "
                "(hmac_secret_env) is not set or empty"
            )
    results: list[Delivery] = []
    with requests.Session() as session:
        for alert in alerts:
            if results and results[-1].state == PENDING:
                results.append(_skipped(name, results[-1]))
                continue
            results.append(post_alert(session, name, conf, alert, secret))
    return results


def _skipped(name: str, gave_up: Delivery) -> Delivery:
    return Delivery(name, PENDING, 0, None, None, f"not tried: sink down ({gave_up.error})")


# --------------------------------------------------------------------------- pulsar


def deliver_pulsar(
    name: str, conf: PulsarSinkConfig, alerts: list[dict[str, Any]]
) -> list[Delivery]:
    """Send each alert as a JSON message keyed by its dedup key; a failure stops the batch."""
    import pulsar

    if not alerts:
        return []
    results: list[Delivery] = []
    client = None
    try:
        client = pulsar.Client(
            conf.service_url,
            **PulsarAuth.from_env().client_options(),
            operation_timeout_seconds=max(1, conf.send_timeout_ms // 1000),
            connection_timeout_ms=conf.send_timeout_ms,
            logger=logging.getLogger("pulsar.client"),
        )
        producer = client.create_producer(conf.topic, send_timeout_millis=conf.send_timeout_ms)
        for alert in alerts:
            producer.send(
                payload(alert),
                partition_key=alert["dedup_key"],
                properties={"dedup_key": alert["dedup_key"], "severity": alert["severity"]},
            )
            at = _now()
            results.append(Delivery(name, SENT, 1, at, at, None))
        producer.close()
    except Exception as exc:  # noqa: BLE001 - any client error leaves the rest pending
        error = redact(f"{type(exc).__name__}: {exc}")
        log.warning("alert sink %s: %s", name, error)
        at = _now()
        failed = Delivery(name, PENDING, 1, at, None, error)
        results += [failed] + [_skipped(name, failed)] * (len(alerts) - len(results) - 1)
    finally:
        if client is not None:
            client.close()
    return results


# --------------------------------------------------------------------------- file


def file_path(conf: FileSinkConfig, config: Config) -> Path:
    if "{lakehouse}" in conf.path:
        return Path(conf.path.replace("{lakehouse}", str(config.lakehouse_path)))
    return Path(conf.path).expanduser()


def deliver_file(name: str, path: Path, alerts: list[dict[str, Any]]) -> list[Delivery]:
    """Append each alert as one JSON line, skipping keys already in the file (crash-safe)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    present = set()
    if path.exists():
        with path.open() as lines:
            present = {json.loads(line)["dedup_key"] for line in lines if line.strip()}
    at = _now()
    with path.open("ab") as out:
        for alert in alerts:
            if alert["dedup_key"] not in present:
                out.write(payload(alert) + b"\n")
        out.flush()
        os.fsync(out.fileno())
    return [Delivery(name, SENT, 1, at, at, None) for _ in alerts]
