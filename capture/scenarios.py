"""The chaos scenarios a capture runs on the local cluster: each one's cluster shape and
default E-Qw-Qa, the simulator's names for them, the consumer-side faults, and the pace of a
chaos run."""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class ChaosPlan:
    """What `chaos run` runs: the scenario's action and those added with --then, in order, and
    the cluster that can take them all."""

    label: str  # the run's scenario: the actions' names joined with "+"
    chaos: list[str]  # ACTION@ACK_COUNT, in the order they fire (none for control and the
    # consumer faults)
    brokers: int
    bookies: int
    config: str  # default E-Qw-Qa: that of the action needing the most bookies
    names: list[str]  # the scenarios' names, in order
    paced: bool  # production paced at RATE so that it spans the faults (not for unload alone)


def plan_chaos(scenario: str, fault_at: float, then: list[str], messages: int) -> ChaosPlan:
    """--scenario NAME at --fault-at, then each --then SCENARIO@FRACTION (a cluster action at a
    fraction of the messages acked, not before the one before it)."""
    name, count = parse_scenario(scenario)
    if then and (name == "control" or name in CONSUMER_FAULTS):
        raise UsageError(
            f"--then adds cluster actions to --scenario's: --scenario {scenario} has none "
            f"(control and the consumer faults {', '.join(CONSUMER_FAULTS)} take no --then; "
            "start with the first cluster action as --scenario)"
        )
    steps = [(name, count, fault_at)] + [_parse_then(text) for text in then]
    for (_, _, before), text, (_, _, at) in zip(steps, then, steps[1:], strict=False):
        if at < before:
            raise UsageError(
                f"--then {text}: the actions fire in the order given, so its FRACTION must not "
                f"be below the one before it ({before})"
            )
    shapes = [SCENARIOS[step_name] for step_name, _, _ in steps]
    most_bookies = max(range(len(shapes)), key=lambda i: (shapes[i][1], -i))
    labels = [_label(step_name, n) for step_name, n, _ in steps]
    acts = name != "control" and name not in CONSUMER_FAULTS
    return ChaosPlan(
        label="+".join(labels),
        chaos=[
            f"{label}@{max(1, int(messages * at))}"
            for label, (_, _, at) in zip(labels, steps, strict=True)
        ]
        if acts
        else [],
        brokers=max(shape[0] for shape in shapes),
        bookies=max(shape[1] for shape in shapes),
        config=shapes[most_bookies][2],
        names=[step_name for step_name, _, _ in steps],
        paced=any(step_name not in ("control", "unload") for step_name, _, _ in steps),
    )


def _label(name: str, count: int) -> str:
    return f"{name}:{count}" if name == "kill-bookies" else name


def _parse_then(text: str) -> tuple[str, int, float]:
    """SCENARIO@FRACTION → (name, count, fraction); only cluster actions."""
    head, _, fraction = text.rpartition("@")
    try:
        at = float(fraction)
    except ValueError:
        at = -1.0
    if not head or not 0 < at <= 1:
        raise UsageError(
            f"--then {text!r}: expected SCENARIO@FRACTION with 0 < FRACTION <= 1 "
            "(e.g. wipe-qw-bookies-disk@0.2)"
        )
    try:
        name, count = parse_scenario(head)
    except UsageError as exc:
        raise UsageError(f"--then {text!r}: {str(exc).partition(': ')[2]}") from None
    if name == "control" or name in CONSUMER_FAULTS:
        actions = sorted(n for n in SCENARIOS if n != "control" and n not in CONSUMER_FAULTS)
        raise UsageError(
            f"--then {text}: a further action must be a cluster action, one of "
            f"{', '.join(actions)}; control and the consumer faults "
            f"({', '.join(CONSUMER_FAULTS)}) are whole scenarios, for --scenario only"
        )
    return name, count, at
