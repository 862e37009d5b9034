"""What each consumer receives, in Spark: one row per delivery of a stored copy.

Consumers read after the producers finished, one after another (those that read with the
killed bookies down first), each in storage order (ledger, entry):

- `reader-1`: a Reader from the earliest message while the killed bookies are still down.
  It blocks at the first entry none of whose Qw bookies is up (read_next never returns), so it
  has no `end`. Killed bookies that restart (`bookie_restart_us`) are back before it reads.
- `consumer-1` on the exclusive subscription `sub-1`, after the killed bookies returned (when
  the scenario brings them back): it fails to ack one message in `redeliver_every`, which the
  broker redelivers later under the same MessageId with redelivery_count 1.
- `reader-early` (when `early_stop` > 0): stops after that fraction of the topic, no `end`.
- `reader-skip` (when `auto_skip`): a Reader served by a broker with
  autoSkipNonRecoverableData=true, which skips the unreadable entries: it reads to the end
  (acked messages lost to it) and its MessageIds jump over the hole (a poll skip).
- `sub-shared` (when `shared_crash` > 0): Shared, consumers shared-a and shared-b reading
  together; shared-b disconnects after that fraction of the topic (dispatch.py).
- `sub-failover` (when `failover_crash` > 0): Failover, active failover-a disconnects after that
  fraction and the standby failover-b takes over (dispatch.py).
- `sub-keyshared` (when `key_shared_consumers` > 0): Key_Shared, keyshared-1 … keyshared-n
  dispatched by the hash of each message's key, with a consumer joining and one leaving
  (key_shared.py, dispatch_keys.py).

The two-consumer subscriptions read like consumer-1 (after the killed bookies returned, when
they return) and block where it blocks; each of their consumers has an `end` when they do not.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from simulate import dispatch as D
from simulate import dispatch_keys as K
from simulate.backoff import mix_column
from simulate.plan import Plan, is_bookie_kill, keeps_copies, restarts_bookies
from simulate.scenario import Scenario

REDELIVERY_LAG = 20  # a redelivery arrives this many messages after the first delivery
# Every slot stays below the `end` event's index (trace.end_event), which leaves REDELIVERY_LAG
# positions after the last stored copy: the two-consumer subscriptions' lags fit in them.
assert D.REDISPATCH_LAG + D.UNACKED_WINDOW <= REDELIVERY_LAG
READ_STEP_US = 5
SUBSCRIPTION_TYPES = {
    "single": "Exclusive",
    "shared": "Shared",
    "failover": "Failover",
    "key_shared": "Key_Shared",
}


@dataclass(frozen=True)
class Consumer:
    name: str
    subscription: str
    bookies_down: tuple[str, ...]
    redeliver: bool = False
    stop_fraction: float = 0.0  # 0: reads until blocked or the end
    skip_unreadable: bool = False  # autoSkipNonRecoverableData: skips unreadable entries
    # "shared" | "failover": `name` and `leaves` share the subscription; "key_shared": `clients`
    mode: str = "single"
    crash_fraction: float = 0.0  # `leaves` disconnects after this fraction
    leaves: str = ""  # the consumer that disconnects (shared-b, failover-a, keyshared-1)
    join_fraction: float = 0.0  # key_shared: a consumer joins after this fraction
    clients: tuple[str, ...] = ()  # key_shared: every consumer of the subscription

    @property
    def members(self) -> tuple[str, ...]:
        """The trace's clients of this subscription: the one that leaves first."""
        if self.clients:
            return self.clients
        return (self.leaves, self.name) if self.leaves else (self.name,)

    @property
    def subscription_type(self) -> str:
        """As trace format v1.1 names it: a Reader and sub-1 are Exclusive."""
        return SUBSCRIPTION_TYPES[self.mode]


def consumers(plan: Plan) -> list[Consumer]:
    """The run's consumers in the order they read: those that read while the killed bookies
    are down first, then (when the bookies return) the others."""
    s = plan.scenario
    after = () if plan.returned else tuple(plan.killed)
    # restarted bookies are back before anyone reads (empty after a wipe: their copies lost)
    first = () if keeps_copies(s) else tuple(plan.killed)
    found = [Consumer("reader-1", "reader-1", first)]
    if s.auto_skip:
        found.append(Consumer("reader-skip", "reader-skip", first, skip_unreadable=True))
    found.append(Consumer("consumer-1", "sub-1", after, redeliver=s.redeliver_every > 0))
    if s.early_stop > 0:
        found.append(Consumer("reader-early", "reader-early", after, stop_fraction=s.early_stop))
    two_consumer_subscriptions = (
        ("shared", s.shared_crash, D.SHARED_STAYS, D.SHARED_SUBSCRIPTION, D.SHARED_LEAVES),
        ("failover", s.failover_crash, D.FAILOVER_TAKES_OVER, D.FAILOVER_SUBSCRIPTION,
         D.FAILOVER_LEAVES),
    )  # fmt: skip
    for mode, fraction, stays, subscription, leaves in two_consumer_subscriptions:
        if fraction > 0:
            found.append(
                Consumer(
                    stays, subscription, after, mode=mode, crash_fraction=fraction, leaves=leaves
                )
            )
    if ks := s.key_shared:
        found.append(
            Consumer(
                ks.clients[-1],
                K.SUBSCRIPTION,
                after,
                mode="key_shared",
                crash_fraction=ks.leave,
                leaves=ks.leaver,
                join_fraction=ks.join,
                clients=ks.clients,
            )
        )
    return found


def with_bookies_return(plan: Plan) -> Plan:
    """Set the bookie fault's `end_us` when its killed bookies return (with their data): half a
    second before the first consumer that reads with them up, after those that read without."""
    if not plan.returned or restarts_bookies(plan.scenario):  # a restart set its own end
        return plan
    first_up = next(n for n, c in enumerate(consumers(plan)) if not c.bookies_down)
    for fault in plan.faults:
        if is_bookie_kill(fault["action"]):
            fault["end_us"] = read_start_us(plan, first_up) - 500_000
    return plan


def unreadable(plan: Plan, down: tuple[str, ...]) -> list[tuple[int, int, int, list[int]]]:
    """(ledger_index, first_entry, end_entry, residues): entries (entry mod E in residues) none
    of whose Qw bookies is up. Entry e of a fragment is on ensemble[(e + j) mod E], j < Qw.
    Ledgers made after the fault (once restarted bookies are back) hold none of the lost
    copies."""
    s = plan.scenario
    found = []
    for f in (f for f in plan.fragments if f.ledger <= plan.fault_ledger):
        bad = [
            res
            for res in range(s.ensemble)
            if all(f.ensemble[(res + j) % s.ensemble] in down for j in range(s.write_quorum))
        ]
        if bad:
            found.append((f.ledger, f.first_entry, f.end_entry, bad))
    return found


def is_unreadable(plan: Plan, down: tuple[str, ...], copy: Column) -> Column:
    condition = F.lit(False)
    for ledger, first, end, residues in unreadable(plan, down):
        entry = copy["entry_id"]
        condition = condition | (
            (copy["ledger_index"] == ledger)
            & (entry >= first)
            & (entry < end)
            & (entry % plan.scenario.ensemble).isin(residues)
        )
    return condition


def stored_copies(messages: DataFrame) -> DataFrame:
    """One row per stored copy: stream, seq, ledger_id, entry_id, ledger_index, pos."""
    return messages.select("stream", "seq", F.explode("copies").alias("copy")).select(
        "stream", "seq", "copy.*"
    )


def block_positions(copies: DataFrame, plan: Plan, found: list[Consumer]) -> DataFrame:
    """(stream, stored, stop_<n>, crash_<n>, join_<n> per consumer n): where each consumer
    stops, where the one that leaves a several-consumer subscription disconnects and where
    one joins (never after the stop); one row per stream."""
    fields = F.struct(*[F.col(c) for c in copies.columns])
    firsts = [
        F.min(F.when(is_unreadable(plan, c.bookies_down, fields), F.col("pos"))).alias(f"bad_{n}")
        for n, c in enumerate(found)
    ]
    stored = copies.groupBy("stream").agg(F.count("*").alias("stored"), *firsts)
    stops = []
    for n, c in enumerate(found):
        stop = (
            F.col("stored") if c.skip_unreadable else F.coalesce(F.col(f"bad_{n}"), F.col("stored"))
        )
        if c.stop_fraction:
            stop = F.least(stop, F.floor(F.col("stored") * F.lit(c.stop_fraction)))
        stops.append(stop.cast("long").alias(f"stop_{n}"))
        for name, fraction in (("crash", c.crash_fraction), ("join", c.join_fraction)):
            at = F.least(stop, F.floor(F.col("stored") * F.lit(fraction)))
            stops.append((at if fraction else stop).cast("long").alias(f"{name}_{n}"))
    return stored.select("stream", "stored", *stops)


def deliveries(copies: DataFrame, plan: Plan, consumer: Consumer, stops: DataFrame) -> DataFrame:
    """stream, seq, ledger_id, entry_id, consumer, slot (the consumer's order),
    redelivery_count.

    stops: (stream, stop_pos, crash_pos, join_pos) — the subscription receives the copies
    before stop_pos; in a several-consumer one, `consumer.leaves` disconnects at crash_pos
    (and a Key_Shared consumer joins at join_pos)."""
    s = plan.scenario
    got = copies.join(F.broadcast(stops), ["stream"], how="inner").filter(
        F.col("pos") < F.col("stop_pos")
    )
    if consumer.mode == "shared":
        return D.shared_deliveries(got, consumer.name, consumer.leaves)
    if consumer.mode == "failover":
        overlap = failover_overlap(s) if s.failover_bug else 0
        return D.failover_deliveries(got, consumer.name, consumer.leaves, overlap)
    if consumer.mode == "key_shared" and (ks := s.key_shared):
        return K.key_shared_deliveries(got, ks, s.keys)
    if consumer.skip_unreadable:
        fields = F.struct(*[F.col(c) for c in copies.columns])
        got = got.filter(~is_unreadable(plan, consumer.bookies_down, fields))
    first = got.select(
        "stream",
        "seq",
        "ledger_id",
        "entry_id",
        F.lit(consumer.name).alias("consumer"),
        (F.col("pos") * 2).alias("slot"),
        F.lit(0).alias("redelivery_count"),
    )
    if not consumer.redeliver:
        return first
    again = (mix_column(s.seed + 1, F.col("stream"), F.col("seq")) % s.redeliver_every) == 7
    second = got.filter(again).select(
        "stream",
        "seq",
        "ledger_id",
        "entry_id",
        F.lit(consumer.name).alias("consumer"),
        ((F.col("pos") + REDELIVERY_LAG) * 2 + 1).alias("slot"),
        F.lit(1).alias("redelivery_count"),
    )
    return first.unionByName(second)


def span_bound_us(s: Scenario) -> tuple[int, int]:
    """(before, after): every event of the run falls in [t0_us − before, t0_us + after].

    From the scenario alone (no plan), so a sweep can place runs before simulating them: the
    reconnect is bounded by twice the latest availability (the metadata session, for a killed
    owner) plus a minute, and the reads follow read_start_us with at most four one-consumer
    subscriptions plus the shared, failover and key_shared ones when the scenario has them."""
    before = 2 * s.session_timeout_us + 71_000_000  # config line, ZooKeeper snapshot, startup
    reconnect = s.messages * s.interval_us + 2 * s.session_timeout_us + 60_000_000
    writes_end = reconnect + 2 * s.messages * s.interval_us + 2 * s.send_timeout_us + 60_000_000
    slots = (2 * (s.messages * 2 + REDELIVERY_LAG) + 4) * s.streams
    readings = 4 + (s.shared_crash > 0) + (s.failover_crash > 0) + (s.key_shared_consumers > 0)
    return before, writes_end + readings * (slots * READ_STEP_US + 1_000_000)


def read_start_us(plan: Plan, consumer_index: int) -> int:
    """Consumers read one after another, after the last possible producer event."""
    s = plan.scenario
    slots = (2 * (s.messages * 2 + REDELIVERY_LAG) + 4) * s.streams
    reconnected = max([s.t0_us, *(p.t_reconnect for p in plan.streams)])
    writes_end = reconnected + 2 * s.messages * s.interval_us + 2 * s.send_timeout_us + 60_000_000
    return writes_end + consumer_index * (slots * READ_STEP_US + 1_000_000)


def failover_overlap(s: Scenario) -> int:
    """The entries the old active consumer still gets after the standby took over
    (failover_bug overlap): dispatch.FAILOVER_OVERLAP_US of reading."""
    return max(1, D.FAILOVER_OVERLAP_US // (2 * READ_STEP_US * s.streams))
