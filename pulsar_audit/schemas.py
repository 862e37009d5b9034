"""The contract: one declared schema per Delta table, and where each table lives.

Bronze is never schema-inferred; silver and gold transforms end in a `select` of exactly
these columns (`conform` checks it).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_audit.kinds import ANOMALY_KINDS, SUBSCRIPTION_TYPE_KINDS


def _f(name: str, dtype: T.DataType, nullable: bool = True) -> T.StructField:
    return T.StructField(name, dtype, nullable)


_STR, _LONG, _INT, _BOOL, _TS, _DBL = (
    T.StringType(),
    T.LongType(),
    T.IntegerType(),
    T.BooleanType(),
    T.TimestampType(),
    T.DoubleType(),
)
_EXTRA = T.MapType(T.StringType(), T.StringType())

# Lineage carried by every bronze row: where it came from and which ingest wrote it.
LINEAGE_FIELDS = [
    _f("source_file", _STR, False),
    _f("line_number", _LONG, False),
    _f("ingest_id", _STR, False),
    _f("ingested_at", _TS, False),
]

# ----------------------------------------------------------------------------- bronze

# One producer-side trace event (send, ack or nack) of one message.
PRODUCER_EVENTS = T.StructType(
    [
        _f("run_id", _STR, False),
        _f("topic", _STR, False),
        _f("partition", _INT, False),
        _f("client", _STR, False),
        _f("event", _STR, False),
        _f("ts", _TS, False),
        _f("event_index", _LONG),
        _f("seq", _LONG),
        _f("ledger_id", _LONG),
        _f("entry_id", _LONG),
        _f("batch_index", _INT),
        _f("error", _STR),
        _f("key", _STR),  # trace format v1.1: the message's key, and its ordering key when set
        _f("ordering_key", _STR),
        _f("extra", _EXTRA),
        *LINEAGE_FIELDS,
    ]
)

# One consumer-side trace event: a delivery (receive) or the consumer reaching the end (end).
CONSUMER_EVENTS = T.StructType(
    [
        _f("run_id", _STR, False),
        _f("topic", _STR, False),
        _f("partition", _INT, False),
        _f("client", _STR, False),
        _f("event", _STR, False),
        _f("ts", _TS, False),
        _f("event_index", _LONG),
        _f("subscription", _STR),
        _f("producer", _STR),
        _f("seq", _LONG),
        _f("ledger_id", _LONG),
        _f("entry_id", _LONG),
        _f("batch_index", _INT),
        _f("redelivery_count", _INT),
        # trace format v1.1: Exclusive, Failover, Shared or Key_Shared; the message's keys
        _f("subscription_type", _STR),
        _f("key", _STR),
        _f("ordering_key", _STR),
        _f("extra", _EXTRA),
        *LINEAGE_FIELDS,
    ]
)

# One run-level event: the run's setup (config) or a fault injected into it (chaos).
RUN_EVENTS = T.StructType(
    [
        _f("run_id", _STR, False),
        _f("topic", _STR, False),
        _f("client", _STR, False),
        _f("event", _STR, False),
        _f("ts", _TS, False),
        _f("event_index", _LONG),
        _f("ensemble_size", _INT),
        _f("write_quorum", _INT),
        _f("ack_quorum", _INT),
        _f("brokers", _INT),
        _f("bookies", _INT),
        _f("deduplication", _BOOL),
        _f("scenario", _STR),
        _f("action", _STR),
        _f("target", _STR),
        _f("extra", _EXTRA),
        *LINEAGE_FIELDS,
    ]
)


def _columnar(*tables: T.StructType) -> T.StructType:
    """Every field the event tables take from a trace record, each once and nullable, with
    `role` (which routes a record to its table) and `extra` last."""
    lineage = {f.name for f in LINEAGE_FIELDS}
    fields: dict[str, T.StructField] = {}
    for table in tables:
        for field in table.fields:
            if field.name not in lineage and field.name != "extra":
                fields.setdefault(field.name, _f(field.name, field.dataType))
            if field.name == "topic":  # as a record is written: run_id, topic, role, ...
                fields.setdefault("role", _f("role", _STR))
    return T.StructType([*fields.values(), _f("extra", _EXTRA)])


# Trace format v1, columnar form (docs/trace-format.md): one row per record, every field of
# every role as a typed column (absent: null), the fields the format does not document in
# `extra` as their JSON text. A file may leave out any column; it may hold no other.
TRACE_COLUMNAR = _columnar(PRODUCER_EVENTS, CONSUMER_EVENTS, RUN_EVENTS)

# One line (or multi-line entry) of a broker, bookie or client log, parsed or kept raw.
# parse_error of a line that is no log entry (application output between the log lines):
NOT_A_LOG_ENTRY = "not a log entry"
LOG_LINES = T.StructType(
    [
        _f("source", _STR, False),
        _f("host", _STR, False),
        _f("ts", _TS),
        _f("level", _STR),
        _f("thread", _STR),
        _f("logger", _STR),
        _f("message", _STR),
        _f("raw", _STR, False),
        _f("parse_error", _STR),
        *LINEAGE_FIELDS,
    ]
)

# One observed create / change / delete of a ZooKeeper node under Pulsar's metadata paths.
ZK_CHANGES = T.StructType(
    [
        _f("ts", _TS, False),
        _f("zookeeper", _STR, False),
        _f("path", _STR, False),
        _f("op", _STR, False),
        _f("version", _INT),
        _f("ephemeral_owner", _LONG),
        _f("data", _STR),
        _f("decoded", _STR),
        _f("capture_id", _STR, False),
        *LINEAGE_FIELDS,
    ]
)

# One input record refused by a parser or a row-level check, with why and where it came from.
QUARANTINE = T.StructType(
    [
        _f("target_table", _STR, False),
        _f("run_id", _STR),
        _f("source_file", _STR, False),
        _f("line_number", _LONG, False),
        _f("raw", _STR),
        _f("reason", _STR, False),
        _f("check", _STR, False),
        _f("ingest_id", _STR, False),
        _f("quarantined_at", _TS, False),
    ]
)

# One expectation evaluated on one run's rows of one bronze table.
CHECK_RESULTS = T.StructType(
    [
        _f("run_id", _STR, False),
        _f("table", _STR, False),
        _f("expectation", _STR, False),
        _f("column", _STR),
        _f("level", _STR, False),
        _f("success", _BOOL, False),
        _f("observed_value", _STR),
        _f("unexpected_count", _LONG),
        _f("ingest_id", _STR, False),
        _f("checked_at", _TS, False),
    ]
)

# One input file taken in by an ingest, so that the same file (path + content hash) is skipped.
INGESTED_FILES = T.StructType(
    [
        _f("kind", _STR, False),
        _f("path", _STR, False),
        _f("content_hash", _STR, False),
        _f("size_bytes", _LONG, False),
        _f("records", _LONG, False),
        _f("accepted", _LONG, False),
        _f("quarantined", _LONG, False),
        _f("ingest_id", _STR, False),
        _f("ingested_at", _TS, False),
    ]
)

# The rows one ingested file gave one table for one run: what the pipeline's change detection
# and forensics read instead of scanning the events.
RUN_FILES = T.StructType(
    [
        _f("run_id", _STR, False),
        _f("table", _STR, False),
        _f("source_file", _STR, False),
        _f("rows", _LONG, False),
        _f("ingest_id", _STR, False),
        _f("ingested_at", _TS, False),
    ]
)

# ----------------------------------------------------------------------------- silver

MESSAGE_ID = T.StructType([_f("ledger_id", _LONG), _f("entry_id", _LONG), _f("batch_index", _INT)])
SUBSCRIPTION_DELIVERIES = T.StructType(
    [
        _f("subscription", _STR),
        _f("deliveries", _LONG),
        _f("first_ts", _TS),
        _f("last_ts", _TS),
    ]
)

# One message (run, topic, partition, producer, seq): its send, ack or nack, copies, deliveries.
MESSAGE_HISTORY = T.StructType(
    [
        _f("run_id", _STR, False),
        _f("topic", _STR, False),
        _f("partition", _INT, False),
        _f("producer", _STR, False),
        _f("seq", _LONG, False),
        _f("sent", _BOOL, False),
        _f("send_ts", _TS),
        _f("acked", _BOOL, False),
        _f("ack_ts", _TS),
        _f("ack_latency_ms", _DBL),
        _f("ack_id", MESSAGE_ID),
        _f("nacked", _BOOL, False),
        _f("nack_ts", _TS),
        _f("nack_error", _STR),
        _f("copies", T.ArrayType(MESSAGE_ID, False), False),
        _f("subscriptions", T.ArrayType(SUBSCRIPTION_DELIVERIES, False), False),
        # the ordering key when the message has one, else its key (what Key_Shared dispatches
        # by), from its send, else from a delivery; null: the trace gives none
        _f("key", _STR),
    ]
)

# One delivery of a message to a consumer, numbered in that consumer's own order.
DELIVERY = T.StructType(
    [
        _f("run_id", _STR, False),
        _f("topic", _STR, False),
        _f("partition", _INT, False),
        _f("subscription", _STR, False),
        _f("consumer", _STR, False),
        _f("producer", _STR, False),
        _f("seq", _LONG, False),
        _f("ts", _TS, False),
        _f("delivery_index", _LONG, False),
        _f("ledger_id", _LONG),
        _f("entry_id", _LONG),
        _f("batch_index", _INT),
        _f("redelivery_count", _INT, False),
        _f("key", _STR),  # as in message_history, from this receive
    ]
)

# One infrastructure happening (unload, ownership change, ledger recovery, bookie loss, ...);
# clock: reference (the clients' clock), corrected (offset estimated) or uncorrected.
INFRA_EVENTS = T.StructType(
    [
        _f("event_id", _STR, False),
        _f("ts", _TS, False),
        _f("corrected_ts", _TS, False),
        _f("clock", _STR, False),
        _f("host", _STR, False),
        _f("source", _STR, False),
        _f("event_type", _STR, False),
        _f("topic", _STR),
        _f("bundle", _STR),
        _f("ledger_id", _LONG),
        _f("bookie", _STR),
        _f("detail", _STR),
        _f("raw", _STR),
        _f("source_file", _STR),
        _f("line_number", _LONG),
    ]
)

# One host's clock offset from the clients' clock, estimated from events seen on both sides.
CLOCK_OFFSETS = T.StructType(
    [
        _f("host", _STR, False),
        _f("offset_ms", _DBL, False),
        _f("matches", _LONG, False),
        _f("spread_ms", _DBL, False),
        _f("pairings", _STR, False),
    ]
)

# Bookkeeping for incremental runs: the bronze fingerprint a run's silver/gold were built from.
RUN_STATE = T.StructType(
    [
        _f("run_id", _STR, False),
        _f("input_fingerprint", _STR, False),
        _f("computed_at", _TS, False),
    ]
)

# Bookkeeping for whole-lakehouse stages (infrastructure timeline, causes): the versions of the
# tables a stage last read, so that it is skipped while they have not changed.
STAGE_STATE = T.StructType(
    [
        _f("stage", _STR, False),
        _f("input_fingerprint", _STR, False),
        _f("computed_at", _TS, False),
    ]
)

# ----------------------------------------------------------------------------- gold

# Nested fields stay nullable: Delta enforces no NOT NULL inside arrays.
CAUSE = T.StructType([_f("event_type", _STR), _f("ts", _TS), _f("host", _STR), _f("reason", _STR)])

# One anomaly, or one contiguous block of anomalies of one kind, with a plain explanation.
ANOMALIES = T.StructType(
    [
        _f("anomaly_id", _STR, False),
        _f("run_id", _STR, False),
        _f("topic", _STR, False),
        _f("subscription", _STR),
        _f("partition", _INT, False),
        _f("producer", _STR, False),
        _f("kind", _STR, False),
        _f("seq_from", _LONG, False),
        _f("seq_to", _LONG, False),
        _f("count", _LONG, False),
        _f("first_ts", _TS),
        _f("last_ts", _TS),
        _f("explanation", _STR, False),
        _f("causes", T.ArrayType(CAUSE, False), False),
    ]
)

# One stretch where a producer had messages in flight and none completed.
OUTAGES = T.StructType(
    [
        _f("outage_id", _STR, False),
        _f("run_id", _STR, False),
        _f("topic", _STR, False),
        _f("partition", _INT, False),
        _f("producer", _STR, False),
        _f("start", _TS, False),
        _f("end", _TS, False),
        _f("duration_ms", _DBL, False),
        _f("in_flight", _LONG, False),
        _f("backoff_step", _INT, False),
        _f("explanation", _STR, False),
        _f("causes", T.ArrayType(CAUSE, False), False),
    ]
)


# One verdict per (run, topic, subscription): the counts and valid = true / false / unknown.
RUN_SUMMARY = T.StructType(
    [
        _f("run_id", _STR, False),
        _f("topic", _STR, False),
        _f("subscription", _STR, False),
        _f("subscription_type", _STR),  # null: the trace names none (or several)
        _f("sent", _LONG, False),
        _f("acked", _LONG, False),
        _f("nacked", _LONG, False),
        _f("received", _LONG, False),
        # a v1.1 kind's count is null in a row judged before the kind existed (a lakehouse
        # written by an older pulsar-audit)
        *[_f(kind, _LONG, kind in SUBSCRIPTION_TYPE_KINDS) for kind in ANOMALY_KINDS],
        _f("outages", _LONG, False),
        _f("unattributed", _LONG, False),
        _f("valid", _STR, False),
        _f("reasons", T.ArrayType(_STR, False), False),
        # the promises of the subscription's type that this trace could not check, and why
        _f("unchecked", T.ArrayType(_STR, False)),
    ]
)

# Risk labels of a run (gold.run_features) and of a scored setting (gold.config_risk), in order.
RISK_LABELS = (
    "acked_loss",
    "unreadable",
    "duplicates",
    "outage_1s",
    "autorecovery_impossible",
)

# One analyzed run as the config-risk models see it: its settings and the faults injected into
# it (features, from bronze.run_events and silver) and what went wrong (labels, from
# gold.run_summary, gold.anomalies, gold.outages and the infrastructure timeline; a null label:
# the run's data cannot tell).
RUN_FEATURES = T.StructType(
    [
        _f("run_id", _STR, False),
        _f("source", _STR, False),
        _f("scenario", _STR),
        _f("ensemble_size", _INT),
        _f("write_quorum", _INT),
        _f("ack_quorum", _INT),
        _f("bookies", _INT),
        _f("brokers", _INT),
        _f("striping", _BOOL),
        _f("deduplication", _BOOL),
        _f("batching", _BOOL, False),
        _f("in_flight_max", _LONG, False),
        _f("partitions", _INT, False),
        _f("fault_kind", _STR, False),
        _f("fault_bookies", _INT, False),
        _f("fault_brokers", _INT, False),
        _f("bookies_left", _INT),
        _f("brokers_left", _INT),
        _f("data_survived", _BOOL),
        _f("fault_duration_s", _DBL, False),
        *[_f(label, _BOOL) for label in RISK_LABELS],
        _f("computed_at", _TS, False),
    ]
)

# One namespace's persistence setting (E/Qw/Qa, as its ZooKeeper policy holds it) with the
# bookies available in its cluster (the ZooKeeper ensemble captured), under one fault, scored
# for one risk label by the champion model (or by the rules baseline when no model was
# promoted), with what drives the score in words.
CONFIG_RISK = T.StructType(
    [
        _f("cluster", _STR, False),
        _f("namespace", _STR, False),
        _f("policy_source", _STR, False),
        _f("ensemble_size", _INT, False),
        _f("write_quorum", _INT, False),
        _f("ack_quorum", _INT, False),
        _f("bookies_available", _INT, False),
        _f("fault", _STR, False),
        _f("label", _STR, False),
        _f("risk", _DBL, False),
        _f("baseline_risk", _DBL, False),
        _f("explanation", _STR, False),
        _f("drivers", T.ArrayType(_STR, False), False),
        _f("runs", _LONG, False),
        _f("failed_runs", _LONG, False),
        _f("model_name", _STR, False),
        _f("model_version", _STR, False),
        _f("scored_at", _TS, False),
    ]
)

# Where one alert stands with one sink: pending (not yet delivered: retried on the next send),
# sent, or rejected (the sink refused it for good); give-ups are kept in `error`.
ALERT_DELIVERY = T.StructType(
    [
        _f("sink", _STR),
        _f("state", _STR),
        _f("attempts", _INT),
        _f("last_attempt_at", _TS),
        _f("sent_at", _TS),
        _f("error", _STR),
    ]
)

# One alert: a finding that matters (invalid run, acked loss, duplicates under deduplication,
# long outage, risky config), raised once per dedup key, with its state at each sink.
ALERTS = T.StructType(
    [
        _f("dedup_key", _STR, False),
        _f("kind", _STR, False),
        _f("severity", _STR, False),
        _f("run_id", _STR),
        _f("topic", _STR),
        _f("subscription", _STR),
        _f("finding_id", _STR),
        _f("title", _STR, False),
        _f("explanation", _STR, False),
        _f("causes", T.ArrayType(CAUSE, False), False),
        _f("first_ts", _TS),
        _f("created_at", _TS, False),
        _f("deliveries", T.ArrayType(ALERT_DELIVERY, False), False),
    ]
)


# One provisional finding of `watch` (issue 29), seen while a run is still being written: open
# when a micro-batch first shows it, then confirmed by a batch finding (resolved_by: its
# anomaly_id or outage_id) or withdrawn; times: started_at in the trace's clock, the rest wall.
# causes: ranked as the batch finding's are (pipelines/correlate.py) from the infrastructure
# timeline the watch has taken in so far, re-ranked while the run is watched (null: a row of
# an older table, never ranked); causes_batch: the micro-batch that last changed them.
PROVISIONAL = T.StructType(
    [
        _f("finding_id", _STR, False),
        _f("kind", _STR, False),
        _f("run_id", _STR, False),
        _f("topic", _STR, False),
        _f("subscription", _STR),
        _f("partition", _INT, False),
        _f("producer", _STR, False),
        _f("seq_from", _LONG),
        _f("seq_to", _LONG),
        _f("started_at", _TS),
        _f("first_seen_batch", _LONG, False),
        _f("first_seen_at", _TS, False),
        _f("state", _STR, False),
        _f("closed_batch", _LONG),
        _f("closed_at", _TS),
        _f("duration_ms", _DBL),
        _f("resolved_by", _STR),
        _f("explanation", _STR, False),
        _f("causes", T.ArrayType(CAUSE, False)),
        _f("causes_batch", _LONG),
    ]
)


# ----------------------------------------------------------------- live state (watch)
# What `watch` keeps open between micro-batches (pipelines/live_state.py): a row per open
# item, so a table holds what is open in the runs being written, not their messages.

# A message's place in its producer's own order (pipelines/common.py EVENT_ORDER).
EVENT_ORDER_STRUCT = T.StructType(
    [_f("ts", _TS), _f("event_index", _LONG), _f("source_file", _STR), _f("line_number", _LONG)]
)

# One message sent and not yet completed (acked or nacked); delivered_to: the subscriptions
# that got it already (a consumer can receive it before its producer sees the ack). sent_at
# null: delivered before a micro-batch brought its send (the consumer's file came first).
LIVE_IN_FLIGHT = T.StructType(
    [
        _f("run_id", _STR, False),
        _f("topic", _STR, False),
        _f("partition", _INT, False),
        _f("producer", _STR, False),
        _f("seq", _LONG, False),
        _f("sent_at", EVENT_ORDER_STRUCT),
        _f("delivered_to", T.ArrayType(_STR), False),
    ]
)

# One producer (and partition) seen so far: its messages in flight (0: none), its latest
# completion and the send that took it from 0 to 1 (where an outage would start); seen_until:
# its latest event folded (what is known of it: its later events are in files not taken yet);
# sent_upto: the highest seq it has sent (a delivery of a seq at or below it whose message is
# not in flight was completed before, or never sent in the trace: nothing to wait for).
LIVE_STREAMS = T.StructType(
    [
        _f("run_id", _STR, False),
        _f("topic", _STR, False),
        _f("partition", _INT, False),
        _f("producer", _STR, False),
        _f("in_flight", _LONG, False),
        _f("last_completion", _TS),
        _f("last_rise", _TS),
        _f("seen_until", _TS),
        _f("sent_upto", _LONG),
    ]
)

# One acked message a subscription has not got yet; passed_at: when the subscription first
# got a later seq of the same producer and partition (null: not yet).
LIVE_AWAITING = T.StructType(
    [
        _f("run_id", _STR, False),
        _f("topic", _STR, False),
        _f("subscription", _STR, False),
        _f("partition", _INT, False),
        _f("producer", _STR, False),
        _f("seq", _LONG, False),
        _f("first_ts", _TS),
        _f("ack_ts", _TS),
        _f("passed_at", _TS),
    ]
)

# One subscription's delivered frontier per producer and partition: its highest seq, and when
# that seq was first delivered.
LIVE_FRONTIER = T.StructType(
    [
        _f("run_id", _STR, False),
        _f("topic", _STR, False),
        _f("subscription", _STR, False),
        _f("partition", _INT, False),
        _f("producer", _STR, False),
        _f("max_seq", _LONG, False),
        _f("max_seq_ts", _TS, False),
    ]
)

# One traced consumer of a subscription, and whether it has written its `end`.
LIVE_CONSUMERS = T.StructType(
    [
        _f("run_id", _STR, False),
        _f("topic", _STR, False),
        _f("consumer", _STR, False),
        _f("subscription", _STR, False),
        _f("has_end", _BOOL, False),
    ]
)

# One run being watched: its clock (the latest event of any client) and the last micro-batch
# folded into the state (a micro-batch replayed after a crash is not folded twice).
LIVE_RUNS = T.StructType(
    [
        _f("run_id", _STR, False),
        _f("now", _TS, False),
        _f("folded_batch", _LONG, False),
    ]
)


# One ended run `watch` has reconciled (its full pipeline, its open findings settled) outside
# its micro-batches (jobs/live_reconcile.py): up to which folded micro-batch. An ended run
# folded since (live_runs.folded_batch higher) is to be reconciled again.
LIVE_RECONCILED = T.StructType(
    [
        _f("run_id", _STR, False),
        _f("reconciled_batch", _LONG, False),
        _f("reconciled_at", _TS, False),
    ]
)


# The parts of `watch`'s live state, each of its schema above.
LIVE_STATE_PARTS = {
    "live_in_flight": LIVE_IN_FLIGHT,
    "live_streams": LIVE_STREAMS,
    "live_awaiting": LIVE_AWAITING,
    "live_frontier": LIVE_FRONTIER,
    "live_consumers": LIVE_CONSUMERS,
    "live_runs": LIVE_RUNS,
}
# The name of the part a row of silver.live_state (or of a packed frame) belongs to.
PART = "_part"


def _loosened(schema: T.StructType) -> T.StructType:
    return T.StructType([_f(f.name, f.dataType) for f in schema.fields])


# `watch`'s live state, one table: a row per row of a part, the part's name beside one struct
# column per part (the layout of pulsar_audit/packed.py), null in the other parts' rows. One
# Delta commit writes a micro-batch's whole state, so a watch killed while committing finds
# the state as it was before the micro-batch or after it, never some parts folded and not the
# others. The parts' own contracts (NOT NULL included) hold where they are computed
# (`pipelines/live_state.py`, conformed to the schemas above); stored, their fields are
# nullable.
LIVE_STATE = T.StructType(
    [_f(PART, _STR, False)]
    + [_f(name, _loosened(schema)) for name, schema in LIVE_STATE_PARTS.items()]
)


# The table property that names the columns Delta keeps per-file statistics of (min, max, null
# count) for data skipping. Without it Delta keeps them for the first 32 columns, which costs
# each write an expression per column and statistic; evaluated without generated code (the
# small-input session, the tests) that is quadratic in their number per row: 24,000 rows of 30
# columns took 7.3 CPU s with every column's statistics, 1.3 with three (docs/performance.md).
STATS_COLUMNS_PROPERTY = "delta.dataSkippingStatsColumns"


@dataclass(frozen=True)
class TableSpec:
    layer: str
    name: str
    schema: T.StructType
    key: tuple[str, ...] = ()
    filtered: tuple[str, ...] = ()  # other columns reads filter on, or replaces match on

    def stats_columns(self) -> tuple[str, ...]:
        """The columns queries and merges filter on: `run_id` (every per-run read) when the
        table has it, then the natural key (every merge's join), then `filtered`."""
        names = set(self.schema.fieldNames())
        first = ("run_id",) if "run_id" in names else ()
        return tuple(dict.fromkeys(first + self.key + self.filtered))

    def properties(self) -> dict[str, str]:
        """The table properties a new table is created with."""
        columns = self.stats_columns()
        return {STATS_COLUMNS_PROPERTY: ",".join(f"`{c}`" for c in columns)} if columns else {}


TABLES: dict[str, TableSpec] = {
    spec.name: spec
    for spec in [
        TableSpec("bronze", "producer_events", PRODUCER_EVENTS, ("source_file", "line_number")),
        TableSpec("bronze", "consumer_events", CONSUMER_EVENTS, ("source_file", "line_number")),
        TableSpec("bronze", "run_events", RUN_EVENTS, ("source_file", "line_number")),
        TableSpec("bronze", "broker_log", LOG_LINES, ("source_file", "line_number")),
        TableSpec("bronze", "bookie_log", LOG_LINES, ("source_file", "line_number")),
        TableSpec("bronze", "client_log", LOG_LINES, ("source_file", "line_number")),
        TableSpec("bronze", "zk_changes", ZK_CHANGES, ("source_file", "line_number")),
        TableSpec(
            "bronze",
            "quarantine",
            QUARANTINE,
            ("target_table", "source_file", "line_number", "check"),
        ),
        TableSpec(
            "bronze",
            "check_results",
            CHECK_RESULTS,
            ("run_id", "table", "expectation", "column"),
            # a batch's row-check verdicts are replaced by its ingest id: new ones, appended
            filtered=("ingest_id", "level"),
        ),
        TableSpec("bronze", "ingested_files", INGESTED_FILES, ("kind", "path", "content_hash")),
        TableSpec("bronze", "run_files", RUN_FILES, ("run_id", "table", "source_file")),
        TableSpec(
            "silver",
            "message_history",
            MESSAGE_HISTORY,
            ("run_id", "topic", "partition", "producer", "seq"),
        ),
        TableSpec(
            "silver",
            "delivery",
            DELIVERY,
            ("run_id", "topic", "partition", "consumer", "delivery_index"),
        ),
        TableSpec("silver", "infra_events", INFRA_EVENTS, ("event_id",)),
        TableSpec("silver", "clock_offsets", CLOCK_OFFSETS, ("host",)),
        TableSpec("silver", "run_state", RUN_STATE, ("run_id",)),
        TableSpec("silver", "stage_state", STAGE_STATE, ("stage",)),
        TableSpec("gold", "anomalies", ANOMALIES, ("anomaly_id",)),
        TableSpec("gold", "outages", OUTAGES, ("outage_id",)),
        TableSpec("gold", "run_summary", RUN_SUMMARY, ("run_id", "topic", "subscription")),
        TableSpec("gold", "run_features", RUN_FEATURES, ("run_id",)),
        TableSpec("gold", "config_risk", CONFIG_RISK, ("cluster", "namespace", "fault", "label")),
        TableSpec("gold", "alerts", ALERTS, ("dedup_key",)),
        TableSpec("gold", "provisional", PROVISIONAL, ("finding_id",)),
        # no key (rows of six kinds); each part is read by its name
        TableSpec("silver", "live_state", LIVE_STATE, filtered=(PART,)),
        TableSpec("silver", "live_reconciled", LIVE_RECONCILED, ("run_id",)),
    ]
}


# Tables no pulsar-audit creates any more, still read where a lakehouse of an older version
# may hold them: the live state's parts, six tables until session 33 (`watch` carries their
# rows into silver.live_state once: jobs/live_state.py:carry_over_state).
RETIRED_TABLES: dict[str, TableSpec] = {
    name: TableSpec("silver", name, schema) for name, schema in LIVE_STATE_PARTS.items()
}


def conform(df: DataFrame, schema: T.StructType) -> DataFrame:
    """Select exactly `schema`'s columns, cast to its types; fail naming missing columns."""
    missing = [f.name for f in schema.fields if f.name not in df.columns]
    if missing:
        raise ValueError(f"missing columns {missing}; present columns are {df.columns}")
    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])
