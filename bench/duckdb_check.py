"""Reference checker in DuckDB SQL: the per-run counts of `pulsar-audit analyze`, from the JSONL.

    .venv/bin/python -m bench.duckdb_check TRACE_DIR [--threads 2] [--memory-limit 8GB]

Prints one JSON report (bench/counts.py). Each query restates one product definition
(pipelines/silver.py, detectors.py, detect_duplicated.py, detect_outages.py,
verdict.py); the comment above it names the one it follows. Bad lines are not handled: the
benchmark's traces have none.
One difference in tie-breaking: the product orders a client's events by (ts, event_index,
source_file, line_number); DuckDB's JSON reader gives no line number, so ties in (ts,
event_index, file) stay unbroken. A trace with a unique event_index per client has none.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

from bench.counts import RUN_COUNTS, report, trace_files

COLUMNS = {
    "run_id": "VARCHAR",
    "topic": "VARCHAR",
    "role": "VARCHAR",
    "client": "VARCHAR",
    "event": "VARCHAR",
    "ts": "VARCHAR",
    "seq": "BIGINT",
    "partition": "INTEGER",
    "event_index": "BIGINT",
    "ledger_id": "BIGINT",
    "entry_id": "BIGINT",
    "batch_index": "INTEGER",
    "subscription": "VARCHAR",
    "producer": "VARCHAR",
    "redelivery_count": "INTEGER",
    "subscription_type": "VARCHAR",
}
# Spark sorts nulls first in ascending order; every ORDER BY here follows it.
ORDER = "ts_us, event_index NULLS FIRST, file"

# Typed events with the format's defaults (ingest/trace_format.py: parse_ts, with_defaults).
EVENTS = """
CREATE TEMP TABLE ev AS
SELECT run_id, topic, role, client, event, seq, event_index, filename AS file,
       coalesce(partition, -1) AS partition,
       CASE WHEN regexp_full_match(ts, '[0-9]{1,16}(\\.[0-9]{1,17})?([eE][+]?[0-9]{1,2})?')
            THEN round(CAST(ts AS DECIMAL(38, 6)) * 1000)::BIGINT
            ELSE epoch_us(CAST(upper(ts) AS TIMESTAMPTZ)) END AS ts_us,
       ledger_id, entry_id,
       CASE WHEN ledger_id IS NOT NULL THEN coalesce(batch_index, -1) END AS batch_index,
       subscription, producer, coalesce(redelivery_count, 0) AS redelivery_count,
       subscription_type
FROM read_json($files, format = 'newline_delimited', columns = $columns, filename = true)
"""
# The columnar form (Parquet): the same columns, ts already a timestamp.
COLUMNAR_EVENTS = """
CREATE TEMP TABLE ev AS
SELECT run_id, topic, role, client, event, seq, event_index, filename AS file,
       coalesce(partition, -1) AS partition, epoch_us(ts) AS ts_us,
       ledger_id, entry_id,
       CASE WHEN ledger_id IS NOT NULL THEN coalesce(batch_index, -1) END AS batch_index,
       subscription, producer, coalesce(redelivery_count, 0) AS redelivery_count,
       subscription_type
FROM read_parquet($files, filename = true, union_by_name = true)
"""

STEPS = [
    # pulsar_audit.attribution + silver.resolve_receives + build_delivery: attributed receives only.
    """
    CREATE TEMP TABLE delivery AS
    WITH sole AS (
        SELECT run_id, topic, min(client) AS sole_producer FROM ev
        WHERE role = 'producer' GROUP BY run_id, topic HAVING count(DISTINCT client) = 1
    )
    SELECT r.run_id, r.topic, r.partition, coalesce(r.subscription, r.client) AS subscription,
           r.client AS consumer, coalesce(r.producer, s.sole_producer) AS producer, r.seq,
           r.ts_us, r.event_index, r.file, r.ledger_id, r.entry_id, r.batch_index,
           r.subscription_type
    FROM ev r LEFT JOIN sole s ON r.run_id = s.run_id AND r.topic = s.topic
    WHERE r.role = 'consumer' AND r.event = 'receive'
      AND coalesce(r.producer, s.sole_producer) IS NOT NULL
    """,
    # silver._producer_side: one row per message the producer saw.
    """
    CREATE TEMP TABLE produced AS
    SELECT run_id, topic, partition, client AS producer, seq,
           bool_or(event = 'send') AS sent, bool_or(event = 'ack') AS acked,
           bool_or(event = 'nack') AS has_nack
    FROM ev WHERE role = 'producer' AND seq IS NOT NULL
    GROUP BY run_id, topic, partition, client, seq
    """,
    # detectors.delivered_messages: (message, subscription) pairs delivered at least once.
    """
    CREATE TEMP TABLE delivered AS
    SELECT DISTINCT run_id, topic, partition, producer, seq, subscription FROM delivery
    """,
    # silver.build_message_history `copies`: distinct acked and delivered MessageIds.
    """
    CREATE TEMP TABLE stored_again AS
    SELECT run_id, topic, partition, producer, seq FROM (
        SELECT run_id, topic, partition, client AS producer, seq, ledger_id, entry_id, batch_index
        FROM ev WHERE role = 'producer' AND event = 'ack' AND ledger_id IS NOT NULL
        UNION
        SELECT run_id, topic, partition, producer, seq, ledger_id, entry_id, batch_index
        FROM delivery
    ) GROUP BY run_id, topic, partition, producer, seq HAVING count(*) >= 2
    """,
    # silver.consumer_status + subscriptions (with the untraced "" subscription).
    """
    CREATE TEMP TABLE subs AS
    WITH subscribed AS (
        SELECT DISTINCT run_id, topic, client AS consumer,
               coalesce(subscription, client) AS subscription
        FROM ev WHERE role = 'consumer' AND event IN ('receive', 'subscribe')
    ), ended AS (
        SELECT run_id, topic, client AS consumer, min(subscription) AS end_subscription
        FROM ev WHERE role = 'consumer' AND event = 'end' GROUP BY run_id, topic, client
    ), status AS (
        SELECT coalesce(s.run_id, e.run_id) AS run_id, coalesce(s.topic, e.topic) AS topic,
               coalesce(s.subscription, e.end_subscription, s.consumer, e.consumer)
                   AS subscription,
               e.consumer IS NOT NULL AS has_end
        FROM subscribed s FULL JOIN ended e
          ON s.run_id = e.run_id AND s.topic = e.topic AND s.consumer = e.consumer
    ), traced AS (
        SELECT run_id, topic, subscription, bool_and(has_end) AS all_ended
        FROM status GROUP BY run_id, topic, subscription
    )
    SELECT * FROM traced
    UNION ALL
    SELECT DISTINCT p.run_id, p.topic, '' AS subscription, false AS all_ended
    FROM ev p WHERE p.role = 'producer'
      AND NOT EXISTS (SELECT 1 FROM traced t WHERE t.run_id = p.run_id AND t.topic = p.topic)
    """,
]

# Each gives (run_id, topic, subscription, <count>...) for the counts it names.
COUNT_QUERIES = {
    # verdict._counts: received = distinct (partition, producer, seq) per subscription.
    "received": """
        SELECT run_id, topic, subscription, count(*) AS received
        FROM (SELECT DISTINCT run_id, topic, subscription, partition, producer, seq FROM delivery)
        GROUP BY ALL
    """,
    # detectors.lost_or_unseen: acked, not delivered to the subscription.
    "missing": """
        SELECT s.run_id, s.topic, s.subscription,
               count(*) FILTER (WHERE s.all_ended) AS lost,
               count(*) FILTER (WHERE NOT s.all_ended) AS unseen
        FROM produced m JOIN subs s ON m.run_id = s.run_id AND m.topic = s.topic
        ANTI JOIN delivered d
          ON d.run_id = m.run_id AND d.topic = m.topic AND d.partition = m.partition
         AND d.producer = m.producer AND d.seq = m.seq AND d.subscription = s.subscription
        WHERE m.acked
        GROUP BY ALL
    """,
    # duplicates.detect_duplicated: delivered messages with >= 2 stored copies.
    "duplicated": """
        SELECT d.run_id, d.topic, d.subscription, count(*) AS duplicated
        FROM delivered d SEMI JOIN stored_again c
          ON d.run_id = c.run_id AND d.topic = c.topic AND d.partition = c.partition
         AND d.producer = c.producer AND d.seq = c.seq
        GROUP BY ALL
    """,
    # detectors.redelivered: (message, MessageId) pairs delivered more than once.
    "redelivered": """
        SELECT run_id, topic, subscription, count(*) AS redelivered FROM (
            SELECT run_id, topic, subscription, partition, producer, seq
            FROM delivery
            GROUP BY run_id, topic, partition, producer, seq, subscription,
                     ledger_id, entry_id, batch_index
            HAVING count(*) > 1
        ) GROUP BY ALL
    """,
    # detect_walk.detect_consumer_walk: a first receipt with a lower seq than the previous
    # delivery from that producer, in the consumer's own order (silver.build_delivery), on a
    # subscription whose type promises that order (not Shared or Key_Shared); on a Shared
    # one, the same walk is shared_reordered.
    "out_of_order,shared_reordered": f"""
        WITH numbered AS (
            SELECT *, row_number() OVER (
                PARTITION BY run_id, topic, partition, consumer ORDER BY {ORDER}) AS idx
            FROM delivery
        ), walked AS (
            SELECT run_id, topic, subscription, subscription_type, seq, idx,
                   lag(seq) OVER (PARTITION BY run_id, topic, partition, consumer, producer
                                  ORDER BY idx) AS previous_seq,
                   min(idx) OVER (PARTITION BY run_id, topic, partition, consumer, producer, seq)
                       AS first_idx
            FROM numbered
        )
        SELECT run_id, topic, subscription,
               count(*) FILTER (WHERE coalesce(subscription_type, '') NOT IN
                                ('Shared', 'Key_Shared')) AS out_of_order,
               count(*) FILTER (WHERE subscription_type = 'Shared') AS shared_reordered
        FROM walked
        WHERE seq < previous_seq AND idx = first_idx
        GROUP BY run_id, topic, subscription
    """,
    # detectors.unacked_received: delivered, never acked to the producer.
    "unacked_received": """
        SELECT d.run_id, d.topic, d.subscription, count(*) AS unacked_received
        FROM delivered d LEFT JOIN produced m
          ON d.run_id = m.run_id AND d.topic = m.topic AND d.partition = m.partition
         AND d.producer = m.producer AND d.seq = m.seq
        WHERE NOT coalesce(m.acked, false)
        GROUP BY ALL
    """,
}

# verdict._counts: sent, acked, nacked per topic (nacked: a nack and no ack).
PER_TOPIC = """
    SELECT run_id, topic, count(*) FILTER (WHERE sent) AS sent,
           count(*) FILTER (WHERE acked) AS acked,
           count(*) FILTER (WHERE has_nack AND NOT acked) AS nacked
    FROM produced GROUP BY ALL
"""

# outages.in_flight_changes + detect_outages: +1 at a message's first send, −1 at its first
# completion (moved to its send when ordered before it); for each completion, the stretch since
# the later of the previous completion and the last send that took in-flight from 0 to 1.
OUTAGES = f"""
    WITH ordered AS (
        SELECT run_id, topic, partition, client AS producer, seq, event, ts_us, event_index, file,
               row_number() OVER (PARTITION BY run_id, topic, partition, client
                                  ORDER BY {ORDER}) AS pos
        FROM ev WHERE role = 'producer' AND seq IS NOT NULL
    ), per_message AS (
        SELECT run_id, topic, partition, producer, seq,
               min(pos) FILTER (WHERE event = 'send') AS sent_pos,
               arg_min(ts_us, pos) FILTER (WHERE event = 'send') AS sent_ts,
               min(pos) FILTER (WHERE event IN ('ack', 'nack')) AS done_pos,
               arg_min(ts_us, pos) FILTER (WHERE event IN ('ack', 'nack')) AS done_ts
        FROM ordered GROUP BY ALL
    ), changes AS (
        SELECT run_id, topic, partition, producer, sent_pos AS pos, sent_ts AS ts_us, 1 AS delta
        FROM per_message WHERE sent_pos IS NOT NULL
        UNION ALL
        SELECT run_id, topic, partition, producer, greatest(sent_pos, done_pos),
               CASE WHEN done_pos > sent_pos THEN done_ts ELSE sent_ts END, -1
        FROM per_message WHERE sent_pos IS NOT NULL AND done_pos IS NOT NULL
    ), counted AS (
        SELECT *, sum(delta) OVER (PARTITION BY run_id, topic, partition, producer
                                   ORDER BY pos, delta DESC
                                   ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS in_flight
        FROM changes
    ), stretches AS (
        SELECT run_id, topic, delta, ts_us,
               max(CASE WHEN delta = -1 THEN ts_us END) OVER w AS last_completion,
               max(CASE WHEN delta = 1 AND in_flight = 1 THEN ts_us END) OVER w AS last_rise
        FROM counted
        WINDOW w AS (PARTITION BY run_id, topic, partition, producer ORDER BY pos, delta DESC
                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
    )
    SELECT run_id, topic, count(*) AS outages FROM stretches
    WHERE delta = -1
      AND (ts_us - greatest(last_completion, last_rise)) / 1000.0 >= $threshold_ms
    GROUP BY ALL
"""


def _rows(con: duckdb.DuckDBPyConnection, query: str, **params: Any) -> list[dict[str, Any]]:
    cursor = con.execute(query, params) if params else con.execute(query)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def check(
    root: str | Path,
    threads: int = 2,
    memory_limit: str | None = None,
    outage_threshold_ms: float = 100,
) -> dict[str, Any]:
    """The report for the traces under `root` (see bench/counts.py)."""
    files = [str(p) for p in trace_files(root)]
    with tempfile.TemporaryDirectory(prefix="duckdb-check-") as spill:
        settings = {"threads": threads, "temp_directory": spill}
        if memory_limit:
            settings["memory_limit"] = memory_limit
        con = duckdb.connect(config=settings)
        if files and all(f.endswith(".parquet") for f in files):
            con.execute(COLUMNAR_EVENTS, {"files": files})
        elif any(f.endswith(".parquet") for f in files):
            raise SystemExit("duckdb_check: one form per folder (JSONL or Parquet), not both")
        else:
            con.execute(EVENTS, {"files": files, "columns": COLUMNS})
        for step in STEPS:
            con.execute(step)
        records = con.execute("SELECT count(*) FROM ev").fetchone()[0]
        key = ("run_id", "topic", "subscription")
        runs = {tuple(r[k] for k in key): dict(r) for r in _rows(con, "SELECT * FROM subs")}
        per_topic = {(r["run_id"], r["topic"]): r for r in _rows(con, PER_TOPIC)}
        for row in runs.values():
            topic = per_topic.get((row["run_id"], row["topic"]), {})
            row.update({c: topic.get(c, 0) for c in ("sent", "acked", "nacked")})
        for query in COUNT_QUERIES.values():
            for r in _rows(con, query):
                # Every delivery's subscription is in subs; no count can land outside it.
                runs[tuple(r[k] for k in key)].update({c: r[c] for c in RUN_COUNTS if c in r})
        outages = {
            (r["run_id"], r["topic"]): r["outages"]
            for r in _rows(con, OUTAGES, threshold_ms=outage_threshold_ms)
        }
        con.close()
    return report("duckdb", records, list(runs.values()), outages)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("path", help="a trace folder (or file), as given to analyze")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--memory-limit", help="DuckDB memory_limit, e.g. 8GB (spills beyond)")
    parser.add_argument("--outage-threshold-ms", type=float, default=100)
    args = parser.parse_args(argv)
    started = time.monotonic()
    result = check(args.path, args.threads, args.memory_limit, args.outage_threshold_ms)
    result["seconds"] = round(time.monotonic() - started, 3)
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
