"""The Key_Shared subscription `sub-keyshared` of a scenario: its consumers, how the hash space
is split between them while they come and go, and the options that ask for it (no Spark).

Pulsar's Key_Shared dispatcher hashes each message's key into [0, 65536) and sends it to the
consumer whose hash range holds it:

- `auto_split` (Pulsar's default): the hash space is split evenly between the consumers
  present, in the order they subscribed — a join or a leave re-splits it;
- `sticky`: each consumer declares its range (`ranges`: the boundaries, 0 … 65536); they
  never change, so churn is a replacement: the joining consumer takes the leaving one's
  range, at the same point of the run (Pulsar refuses overlapping sticky ranges, and a range
  nobody holds is not dispatched).

Churn: `keyshared-<n+1>` joins after fraction `join` of the topic, `keyshared-1` leaves after
fraction `leave` (0: no join / no leave).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pulsar_audit.errors import UsageError

HASH_SPACE = 65_536  # Pulsar's sticky key hash range
SUBSCRIPTION = "sub-keyshared"
MODES = ("auto_split", "sticky")
BUGS = ("reorder",)  # apache/pulsar's Key_Shared ordering bugs around a joining consumer
FAILOVER_BUGS = ("overlap",)


def client(n: int) -> str:
    return f"keyshared-{n}"


@dataclass(frozen=True)
class KeyShared:
    """The subscription's shape; `assignment` gives who owns which hashes at any point."""

    consumers: int
    mode: str = "auto_split"
    ranges: tuple[int, ...] = ()  # sticky: boundaries 0 = b0 < b1 < … < bn = 65536
    join: float = 0.0
    leave: float = 0.0
    bug: str = ""

    @property
    def joiner(self) -> str:
        return client(self.consumers + 1) if self.join else ""

    @property
    def leaver(self) -> str:
        return client(1) if self.leave else ""

    @property
    def clients(self) -> tuple[str, ...]:
        """Every consumer of the subscription, in the order they subscribed."""
        joined = (self.joiner,) if self.joiner else ()
        return tuple(client(n) for n in range(1, self.consumers + 1)) + joined

    def boundaries(self) -> tuple[int, ...]:
        if self.mode == "sticky" and self.ranges:
            return self.ranges
        return even_split(self.consumers)

    def assignment(self, joined: bool, left: bool) -> list[tuple[int, int, str]]:
        """(low, high, consumer): hashes [low, high) per consumer, once the joiner joined
        (`joined`) and the leaver left (`left`) or not."""
        if self.mode == "sticky":  # fixed ranges; the joiner replaces the leaver
            names = [client(n) for n in range(1, self.consumers + 1)]
            if joined and self.joiner:
                names[0] = self.joiner
            bounds = self.boundaries()
        else:
            names = [c for c in self.clients if (joined or c != self.joiner)]
            names = [c for c in names if not (left and c == self.leaver)]
            bounds = even_split(len(names))
        return [(bounds[i], bounds[i + 1], name) for i, name in enumerate(names)]


def even_split(n: int) -> tuple[int, ...]:
    return tuple(HASH_SPACE * i // n for i in range(n + 1))


def parse_ranges(value: Any) -> tuple[int, ...]:
    """'0,20000,65536' or [0, 20000, 65536] → the boundaries (checked by `check`)."""
    if value in (None, "", ()):
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    try:
        return tuple(int(str(v).strip()) for v in items)
    except ValueError as exc:
        raise UsageError(f"key_shared ranges must be integers, got {value!r}") from exc


def flat_options(values: dict[str, Any]) -> dict[str, Any]:
    """The Scenario fields of the Key_Shared options, from the flat CLI names
    (key_shared_consumers, …) or a grid's nested `key_shared: {consumers, mode, ranges,
    churn: [join:F, leave:F], bug}`."""
    nested = values.get("key_shared") or {}
    if not isinstance(nested, dict):
        raise UsageError(f"key_shared must be a mapping (consumers, mode, churn…), got {nested!r}")
    churn: dict[str, float] = {}
    for entry in nested.get("churn") or []:
        pairs = entry.items() if isinstance(entry, dict) else [str(entry).split(":", 1)]
        for what, fraction in pairs:
            if what not in ("join", "leave") or what in churn:
                raise UsageError(
                    f"key_shared churn: expected one join:F and one leave:F, got {entry!r}"
                )
            churn[what] = float(fraction)

    def pick(flat: str, key: str, default: Any) -> Any:
        given = values.get(flat)
        return given if given is not None else nested.get(key, default)

    return {
        "key_shared_consumers": int(pick("key_shared_consumers", "consumers", 0)),
        "key_shared_mode": str(pick("key_shared_mode", "mode", "auto_split")),
        "key_shared_ranges": parse_ranges(pick("key_shared_ranges", "ranges", ())),
        "key_shared_join": float(pick("key_shared_join", "join", churn.get("join", 0.0))),
        "key_shared_leave": float(pick("key_shared_leave", "leave", churn.get("leave", 0.0))),
        "key_shared_bug": str(pick("key_shared_bug", "bug", "") or ""),
    }


def check(ks: KeyShared | None, keys: int, failover_crash: float, failover_bug: str) -> None:
    """Refuse a Key_Shared or Failover setup the model cannot run, naming the limit."""
    if failover_bug and failover_bug not in FAILOVER_BUGS:
        raise UsageError(f"failover_bug must be one of {', '.join(FAILOVER_BUGS)}")
    if failover_bug and not failover_crash:
        raise UsageError("failover_bug needs a Failover subscription (failover_crash > 0)")
    if keys < 0:
        raise UsageError(f"keys must be >= 0 (0: messages without keys), got {keys}")
    if ks is None:
        return
    if keys < 1:
        raise UsageError("a Key_Shared subscription needs message keys: keys >= 1")
    if ks.mode not in MODES:
        raise UsageError(f"key_shared mode must be one of {', '.join(MODES)}, got {ks.mode!r}")
    if ks.bug and ks.bug not in BUGS:
        raise UsageError(f"key_shared_bug must be one of {', '.join(BUGS)}, got {ks.bug!r}")
    if ks.bug and not ks.join:
        raise UsageError("key_shared_bug reorder needs a joining consumer (key_shared_join > 0)")
    for name, fraction in (("join", ks.join), ("leave", ks.leave)):
        if not 0 <= fraction < 1:
            raise UsageError(f"key_shared {name} must be 0 (none) or in (0, 1), got {fraction}")
    if ks.leave and ks.consumers < 2 and not ks.join:
        raise UsageError("key_shared: the last consumer cannot leave (2 consumers or a join)")
    if ks.mode == "sticky":
        _check_sticky(ks)


def _check_sticky(ks: KeyShared) -> None:
    bounds = ks.boundaries()
    if len(bounds) != ks.consumers + 1 or bounds[0] != 0 or bounds[-1] != HASH_SPACE:
        raise UsageError(
            f"sticky ranges: expected {ks.consumers + 1} boundaries from 0 to {HASH_SPACE} "
            f"(one range per consumer), got {list(bounds)}"
        )
    if any(low >= high for low, high in zip(bounds, bounds[1:], strict=False)):
        raise UsageError(f"sticky ranges must increase, got {list(bounds)}")
    if ks.join != ks.leave:
        raise UsageError(
            "sticky ranges never move: churn is a replacement (the joining consumer takes the "
            "leaving one's range), so key_shared_join must equal key_shared_leave"
        )
