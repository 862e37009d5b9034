"""The chaos scenarios a capture runs on the local cluster: each one's cluster shape and
default E-Qw-Qa, the simulator's names for them, the consumer-side faults, and the pace of a
chaos run."""

from __future__ import annotations

from pulsar_audit.errors import UsageError

SCENARIOS = {  # scenario → (brokers, bookies, default E-Qw-Qa)
    "control": (2, 3, "2-2-2"),
    "unload": (1, 1, "1-1-1"),
    "kill-broker": (2, 3, "2-2-2"),
    "kill-bookie": (2, 3, "2-2-2"),
    "kill-bookies": (2, 5, "3-3-2"),
    "kill-qw-bookies": (2, 3, "2-2-1"),
    "isolate-broker-from-zk": (2, 3, "2-2-2"),
    "isolate-bookie-from-zk": (2, 3, "2-2-2"),
    "partition-broker-from-bookies": (2, 3, "2-2-2"),
    "lossy-broker-bookies": (2, 3, "2-2-2"),
    "consumer-crash": (1, 1, "1-1-1"),
    "nack-redelivery": (1, 1, "1-1-1"),
    # disk loss: one broker (the broker is not the fault); a spare bookie beside the ensemble
    "wipe-bookie-disk": (1, 4, "3-2-2"),
    "wipe-qw-bookies-disk": (1, 3, "2-2-1"),
    # the two bookies of E = Qw = Qa = 2 one after the other, the third there to copy to
    "wipe-qw-bookies-disk-in-turn": (1, 3, "2-2-2"),
}
# Scenarios whose fault is on the consumers' side (no action on the cluster): what each sets
# unless given, and the live consumers they run with unless given (issue 26 item 4).
CONSUMER_FAULTS = {
    "consumer-crash": {"consumer_churn": "kill"},
    "nack-redelivery": {"nack_every": 10},
}
# Who reads the topic back after production (`--consumer`): a Reader, a new subscription, or
# one the admin API created at the latest position before the first send (apache/pulsar#18236:
# a broker killed before that cursor's position reached ZooKeeper recovered it one entry on).
CONSUMERS = ("reader", "subscription", "pre-created")
PRE_CREATED = "pre-created"
# How a live consumer leaves (`--consumer-churn`): SIGKILL, or a clean close; `rolling`: every
# consumer in turn closes and comes straight back, as in a rolling restart of the consuming
# application (apache/pulsar#23307: Key_Shared ordering lost in such a restart before PIP-379).
CHURN_MODES = ("kill", "close", "rolling")
LIVE_DEFAULTS = {"consumers": 3, "subscription_type": "Key_Shared", "keys": 50}
# The simulator's names for the same scenarios (simulate/scenario.py).
ALIASES = {"isolate-broker": "isolate-broker-from-zk", "isolate-bookie": "isolate-bookie-from-zk"}
# Brokers' ZooKeeper session timeout on a namespaced cluster: short, so that a run that
# isolates a process outlives its session within seconds (Pulsar's default is 30 s).
NETNS_SESSION_MS = 10_000
RATE = 250.0  # sends per second of chaos runs, so that production spans the fault


def parse_scenario(text: str) -> tuple[str, int]:
    """NAME or kill-bookies:N (the simulator's names too) → (name, count)."""
    name, _, count = text.partition(":")
    name = ALIASES.get(name, name)
    if name not in SCENARIOS or (count and (name != "kill-bookies" or not count.isdigit())):
        raise UsageError(
            f"--scenario {text!r}: expected one of {', '.join(sorted(SCENARIOS))} "
            "(kill-bookies:N with a count)"
        )
    return name, int(count or 2)
