"""The few Pulsar admin REST calls the harness and the chaos actions need (requests, no SDK)."""

from __future__ import annotations

from dataclasses import dataclass

import requests

from pulsar_audit.errors import UsageError
from pulsar_audit.secrets import PulsarAuth, redact

TIMEOUT_S = 60
LATEST_ID = 2**63 - 1  # MessageId.latest: ledger and entry Long.MAX_VALUE


class AdminError(UsageError):
    """An admin call failed; the message names the call, the status and Pulsar's answer."""


@dataclass(frozen=True)
class TopicName:
    """persistent://tenant/namespace/local, parsed from a full or a short name."""

    tenant: str
    namespace: str
    local: str

    @classmethod
    def parse(cls, name: str) -> TopicName:
        """`t1` → public/default/t1; `tenant/ns/t1` and `persistent://tenant/ns/t1` as given."""
        rest = name.removeprefix("persistent://")
        parts = rest.split("/")
        if len(parts) == 1 and parts[0]:
            return cls("public", "default", parts[0])
        if len(parts) == 3 and all(parts):
            return cls(*parts)
        raise UsageError(
            f"topic {name!r}: expected NAME, TENANT/NS/NAME or persistent://TENANT/NS/NAME"
        )

    @property
    def full(self) -> str:
        return f"persistent://{self.tenant}/{self.namespace}/{self.local}"

    @property
    def ns_path(self) -> str:
        return f"{self.tenant}/{self.namespace}"

    @property
    def rest_path(self) -> str:
        return f"persistent/{self.tenant}/{self.namespace}/{self.local}"


class Admin:
    """Admin REST of one broker, e.g. Admin("http://127.0.0.1:8080")."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")
        self.session = requests.Session()
        auth = PulsarAuth.from_env()  # credentials only from the environment
        self.session.headers.update(auth.admin_headers())
        self.session.cert = auth.admin_cert()
        if auth.tls_trust_certs_file:
            self.session.verify = auth.tls_trust_certs_file

    def _call(self, method: str, path: str, body: object = None, ok: tuple = (200, 204)):
        try:
            response = self.session.request(
                method, f"{self.url}{path}", json=body, timeout=TIMEOUT_S
            )
        except requests.RequestException as exc:
            raise AdminError(redact(f"{method} {self.url}{path}: {exc}")) from exc
        if response.status_code not in ok:
            raise AdminError(
                redact(f"{method} {self.url}{path}: HTTP {response.status_code}: ")
                + redact(response.text[:300])
            )
        return response

    def set_persistence(self, topic: TopicName, ensemble: int, write: int, ack: int) -> None:
        """E/Qw/Qa for every ledger the namespace creates from now on."""
        body = {
            "bookkeeperEnsemble": ensemble,
            "bookkeeperWriteQuorum": write,
            "bookkeeperAckQuorum": ack,
            "managedLedgerMaxMarkDeleteRate": 0,
        }
        self._call("POST", f"/admin/v2/namespaces/{topic.ns_path}/persistence", body)

    def set_infinite_retention(self, topic: TopicName) -> None:
        """Keep every ledger: the read-back must see all that was acknowledged."""
        body = {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}
        self._call("POST", f"/admin/v2/namespaces/{topic.ns_path}/retention", body)

    def set_deduplication(self, topic: TopicName, enabled: bool) -> None:
        self._call("POST", f"/admin/v2/namespaces/{topic.ns_path}/deduplication", enabled)

    def create_subscription(self, topic: TopicName, subscription: str) -> None:
        """A durable subscription at the latest position, created (with the topic) by the admin
        API as `pulsar-admin topics create-subscription` does: no consumer connects."""
        latest = {"ledgerId": LATEST_ID, "entryId": LATEST_ID, "partitionIndex": -1}
        path = f"/admin/v2/{topic.rest_path}/subscription/{subscription}"
        self._call("PUT", path, latest)

    def bundle_of(self, topic: TopicName) -> str:
        """The namespace bundle range that holds the topic, e.g. 0x40000000_0x80000000."""
        return self._call("GET", f"/lookup/v2/topic/{topic.rest_path}/bundle").text.strip()

    def unload_bundle(self, topic: TopicName, bundle: str, destination: str | None = None) -> None:
        """Unload the bundle; with `destination` (a broker id, host:web-port; extensible load
        manager only) transfer it to that broker instead."""
        query = f"?destinationBroker={destination}" if destination else ""
        self._call("PUT", f"/admin/v2/namespaces/{topic.ns_path}/{bundle}/unload{query}")

    def owner_of(self, topic: TopicName) -> str:
        """The broker service URL that owns the topic now (pulsar://host:port)."""
        return self._call("GET", f"/lookup/v2/topic/{topic.rest_path}").json()["brokerUrl"]

    def topic_stats(self, topic: TopicName) -> dict:
        return self._call("GET", f"/admin/v2/{topic.rest_path}/stats").json()

    def ledgers(self, topic: TopicName) -> list[dict]:
        """The topic's ledgers (ledgerId, entries, ...) from its internal stats."""
        stats = self._call("GET", f"/admin/v2/{topic.rest_path}/internalStats").json()
        return stats.get("ledgers", [])

    def ledger_ensemble(self, topic: TopicName) -> list[str]:
        """Bookies (host:port) of the current ledger's ensemble, from the ledger metadata."""
        info = self._call("GET", f"/admin/v2/{topic.rest_path}/internal-info").json()
        ledger = info.get("ledgers", [{}])[-1].get("ledgerId")
        stats = self._call("GET", f"/admin/v2/{topic.rest_path}/internalStats?metadata=true").json()
        for entry in stats.get("ledgers", []):
            if entry.get("ledgerId") == ledger and entry.get("metadata"):
                return _ensemble_from_metadata(entry["metadata"])
        return []


def _ensemble_from_metadata(metadata: str) -> list[str]:
    """Bookie addresses of the last ensemble in a LedgerMetadata text dump."""
    start = metadata.rfind("[", 0, metadata.rfind("]") + 1)
    if start < 0:
        return []
    inside = metadata[start + 1 : metadata.find("]", start)]
    return [part.strip() for part in inside.split(",") if ":" in part]
