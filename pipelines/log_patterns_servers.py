"""Broker forms of older versions (2.10-3.3) the main table's 4.0 forms do not cover.

Read from the sources (`source`): Pulsar 2.10.1 (a full copy of the 2.10.1 tree and history)
and the 3.0 / 4.0 / 4.2 branch bases compared in the reference (pulsar-log-facts.md). 2.11 and
3.3 sit between versions whose texts are the same, so the same forms apply to them. Most
texts did not change from 2.10 to 4.2; those rows of the main table say "3.0-4.2" and were
also found, unchanged, in 2.10.1.
"""

from __future__ import annotations

from pipelines.log_pattern_types import ML, SERVER, TOPIC, LogPattern, cls

P = LogPattern
PROXY = "pulsar pulsar-proxy/src/main/java/org/apache/pulsar/proxy/server"
ML_IMPL = "pulsar managed-ledger/src/main/java/org/apache/bookkeeper/mledger/impl/ManagedLedgerImpl"

# fmt: off
SERVER_VERSION_PATTERNS: list[LogPattern] = [
    P("ledger_closed", SERVER, cls("ManagedLedgerImpl"),
      rf"^\[{ML}\] Creating a new ledger after closed\s*$",
      "2.10-3.3: rollover or after a write failure, the closed ledger's id is not in the text",
      f"{ML_IMPL} 2.10.1 L1661; reference 3.0 L1746"),
    P("managed_ledger_fenced", SERVER, cls("ManagedLedgerImpl"),
      rf"^\[{ML}\] Failed to update ledger list\. z-node version mismatch\. "
      r"Closing managed ledger", "2.10-4.2: another broker owns the topic",
      f"{ML_IMPL} 2.10.1 L1524; reference L1795@4.2"),
    # ---- proxy (bin/pulsar proxy: the broker's log4j2 layout; ingest it as --source broker)
    P("proxy_connection_closed", SERVER, cls("ProxyConnection"),
      r"^\[(?P<remote>[^\]]+)\] Connection closed", "proxy 2.10: a client's connection ended",
      f"{PROXY}/ProxyConnection.java 2.10.1 L177"),
    P("proxy_broker_unreachable", SERVER, cls("DirectProxyHandler"),
      r"^\[(?P<connection>.*?)\] Establishing connection to (?P<broker>\S+) \((?P<target>[^)]*)\) "
      r"failed\. Closing inbound channel", "proxy 2.10",
      f"{PROXY}/DirectProxyHandler.java 2.10.1 L209"),
    P("proxy_broker_unreachable", SERVER, cls("ProxyConnection"),
      r"^\[(?P<remote>[^\]]+)\] Target broker '(?P<broker>[^']+)' isn't available",
      "proxy 2.10", f"{PROXY}/ProxyConnection.java 2.10.1 L294"),
    P("proxy_lookup_failed", SERVER, cls("LookupProxyHandler"),
      rf"^\[(?P<remote>[^\]]+)\] Failed to lookup topic {TOPIC}: (?P<reason>.*)",
      "proxy 2.10", f"{PROXY}/LookupProxyHandler.java 2.10.1 L152"),
]
# fmt: on
