"""Row-level rules for bronze, declared once and rendered both ways.

Each rule becomes a Great Expectations expectation (which gives the verdict and the observed
counts) and a Spark Column that is true on a violating row (which quarantines exactly those rows).
The gate checks that both agree, so the two renderings cannot drift apart silently.
"""

from __future__ import annotations

from dataclasses import dataclass

import great_expectations.expectations as gxe
from great_expectations.expectations.row_conditions import Column as GxColumn
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

    def expectation(self) -> gxe.Expectation:
        extra = {}
        if self.when is not None:
            extra["row_condition"] = GxColumn(self.when[0]) == self.when[1]
        meta = {"rule": self.name}
        if self.kind == "not_null":
            return gxe.ExpectColumnValuesToNotBeNull(column=self.column, meta=meta, **extra)
        if self.kind == "in_set":
            return gxe.ExpectColumnValuesToBeInSet(
                column=self.column, value_set=list(self.value), meta=meta, **extra
            )
        if self.kind == "at_least":
            return gxe.ExpectColumnValuesToBeBetween(
                column=self.column, min_value=self.value, meta=meta, **extra
            )
        if self.kind == "pair_at_least":
            return gxe.ExpectColumnPairValuesAToBeGreaterThanB(
                column_A=self.column,
                column_B=self.other,
                or_equal=True,
                ignore_row_if="either_value_is_missing",
                meta=meta,
                **extra,
            )
        raise ValueError(f"rule {self.name}: unknown kind {self.kind!r}")

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
    *_common(("receive", "end")),
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
