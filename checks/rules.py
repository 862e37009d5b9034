"""Row-level rules for bronze, declared once.

Each rule is a Spark Column that is true on a violating row: the ingest evaluates every rule in
its one pass, quarantines exactly the violating rows, and counts them per (run, rule); Great
Expectations then judges those counts (checks/gate.py), so the verdict and the quarantine come
from the same predicate.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F


@dataclass(frozen=True)
class Rule:
    """One expectation on single rows: `kind` is not_null | in_set | at_least | pair_at_least.

    when: optional (column, value) — the rule applies only to rows where column == value.
    """

    name: str
    kind: str
    column: str
    value: object = None
    other: str | None = None
    when: tuple[str, str] | None = None
    explain: str = ""

    def violation(self) -> Column:
        """True on a row that breaks the rule (null-safe: never null)."""
        col = F.col(self.column)
        if self.kind == "not_null":
            broken = col.isNull()
        elif self.kind == "in_set":
            broken = col.isNotNull() & ~col.isin(*self.value)
        elif self.kind == "at_least":
            broken = col.isNotNull() & (col < F.lit(self.value))
        else:
            other = F.col(self.other)
            broken = col.isNotNull() & other.isNotNull() & (col < other)
        if self.when is not None:
            broken = broken & (F.col(self.when[0]) == F.lit(self.when[1]))
        return F.coalesce(broken, F.lit(False))

    def reason(self) -> str:
        return f"{self.name}: {self.explain}"


def _common(events: tuple[str, ...]) -> list[Rule]:
    return [
        *[
            Rule(f"{c}_not_null", "not_null", c, explain=f"{c} is required")
            for c in ("run_id", "topic", "client", "event", "ts")
        ],
        Rule("event_in_set", "in_set", "event", events, explain=f"event must be one of {events}"),
    ]


PRODUCER_RULES = [
    *_common(("send", "ack", "nack")),
    Rule(
        "partition_at_least_minus_one",
        "at_least",
        "partition",
        -1,
        explain="partition must be >= -1 (-1: not partitioned)",
    ),
    Rule(
        "ack_has_ledger_id",
        "not_null",
        "ledger_id",
        when=("event", "ack"),
        explain="an ack must carry the MessageId's ledger_id",
    ),
    Rule(
        "ack_has_entry_id",
        "not_null",
        "entry_id",
        when=("event", "ack"),
        explain="an ack must carry the MessageId's entry_id",
    ),
    Rule(
        "ledger_id_at_least_minus_one",
        "at_least",
        "ledger_id",
        -1,
        explain="ledger_id must be >= -1 (-1: not stored, deduplicated by the broker)",
    ),
    Rule(
        "entry_id_at_least_minus_one", "at_least", "entry_id", -1, explain="entry_id must be >= -1"
    ),
    Rule(
        "batch_index_at_least_minus_one",
        "at_least",
        "batch_index",
        -1,
        explain="batch_index must be >= -1 (-1: not batched)",
    ),
]

CONSUMER_RULES = [
    *_common(("subscribe", "receive", "end")),
    Rule(
        "partition_at_least_minus_one",
        "at_least",
        "partition",
        -1,
        explain="partition must be >= -1 (-1: not partitioned)",
    ),
    Rule(
        "receive_has_subscription",
        "not_null",
        "subscription",
        when=("event", "receive"),
        explain="a receive must name its subscription (or the Reader's name)",
    ),
    Rule(
        "receive_has_ledger_id",
        "not_null",
        "ledger_id",
        when=("event", "receive"),
        explain="a receive must carry the MessageId's ledger_id",
    ),
    Rule(
        "receive_has_entry_id",
        "not_null",
        "entry_id",
        when=("event", "receive"),
        explain="a receive must carry the MessageId's entry_id",
    ),
    Rule(
        "ledger_id_at_least_zero",
        "at_least",
        "ledger_id",
        0,
        explain="a delivered message's ledger_id must be >= 0",
    ),
    Rule(
        "entry_id_at_least_zero",
        "at_least",
        "entry_id",
        0,
        explain="a delivered message's entry_id must be >= 0",
    ),
    Rule(
        "batch_index_at_least_minus_one",
        "at_least",
        "batch_index",
        -1,
        explain="batch_index must be >= -1 (-1: not batched)",
    ),
    Rule(
        "redelivery_count_at_least_zero",
        "at_least",
        "redelivery_count",
        0,
        explain="redelivery_count must be >= 0",
    ),
]

RUN_RULES = [
    *_common(("config", "chaos")),
    *[
        Rule(f"{c}_at_least_one", "at_least", c, 1, explain=f"{c} must be >= 1")
        for c in ("ensemble_size", "write_quorum", "ack_quorum", "brokers", "bookies")
    ],
    Rule(
        "ensemble_at_least_write_quorum",
        "pair_at_least",
        "ensemble_size",
        other="write_quorum",
        when=("event", "config"),
        explain="E must be >= Qw",
    ),
    Rule(
        "write_quorum_at_least_ack_quorum",
        "pair_at_least",
        "write_quorum",
        other="ack_quorum",
        when=("event", "config"),
        explain="Qw must be >= Qa",
    ),
    Rule(
        "chaos_has_action",
        "not_null",
        "action",
        when=("event", "chaos"),
        explain="a chaos event must name its action",
    ),
]

ROW_RULES: dict[str, list[Rule]] = {
    "producer_events": PRODUCER_RULES,
    "consumer_events": CONSUMER_RULES,
    "run_events": RUN_RULES,
}
