"""The table-level metrics of a run from its earlier metrics and its new rows (issue 29).

`run_metrics` (checks/tables.py) is the rule: every metric is a sum, per run, over groups of
rows — a message (sends, orphan acks, receives never sent, unresolved producers), a client's
event_index (duplicates), the run's config events (conflicting configs), a single row
(quarantined records). Rows added to a run change only the groups they fall in, so

    metrics(earlier + new) = metrics(earlier) - run_metrics(touched) + run_metrics(touched + new)

where `touched` is the earlier rows of the groups the new rows fall in: read through a
semi-join of the earlier bronze with the new rows' keys (a narrow projection), not the run's
whole bronze. An earlier row a key brings in for one kind of group, whose other groups the new
rows do not touch, counts the same on both sides and cancels out.

A receive without its producer belongs to its topic's only producer (pulsar_audit/
attribution.py): both sides resolve it against all of the run's producers, and the form holds
only while the new rows bring no producer to a topic (`gains_a_producer`) — one that does
changes which producer the earlier receives belong to, and the run is judged whole.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checks.tables import TABLE_METRICS, run_metrics
from pulsar_audit.attribution import with_sole_producer

MESSAGE = ["run_id", "topic", "partition", "producer", "seq"]
EVENT_INDEX = ["run_id", "client", "event_index"]
BRONZE_KEY = ["source_file", "line_number"]


def gains_a_producer(producer: DataFrame, is_new: str) -> DataFrame:
    """(run_id, topic) where the rows flagged `is_new` bring a producer the earlier rows
    did not have."""
    clients = producer.select("run_id", "topic", "client", is_new)
    earlier = clients.filter(~F.col(is_new)).drop(is_new)
    return (
        clients.filter(F.col(is_new))
        .drop(is_new)
        .join(earlier, ["run_id", "topic", "client"], how="left_anti")
        .select("run_id", "topic")
        .distinct()
    )


def _touched(earlier: DataFrame, keys: list[tuple[DataFrame, list[str]]]) -> DataFrame:
    """The `earlier` rows that share a key with a new row: (the new rows' keys, its columns)."""
    parts = [earlier.join(new.select(*key).distinct(), key, how="left_semi") for new, key in keys]
    touched = parts[0]
    for part in parts[1:]:
        touched = touched.unionByName(part)
    return touched.dropDuplicates(BRONZE_KEY)


def metrics_with_new_rows(
    previous: DataFrame,
    producer: DataFrame,
    consumer: DataFrame,
    run: DataFrame,
    new_quarantine: DataFrame,
    is_new: str,
) -> DataFrame:
    """`run_metrics` of the runs' rows, from `previous` (run_id and every metric: the
    earlier rows' `run_metrics`) and the rows the boolean column `is_new` flags.

    producer, consumer, run: the runs' bronze rows, earlier and new (the earlier ones read
    only through the new rows' keys); new_quarantine: the new rows' quarantined records."""
    producers = producer.select("run_id", "topic", "client")  # the attribution's input
    sent = producer.withColumn("producer", F.col("client"))
    received = with_sole_producer(consumer, producers)
    config = run.filter(F.col("event") == "config")
    (earlier_p, new_p), (earlier_c, new_c), (earlier_r, new_r) = (
        (df.filter(~F.col(is_new)), df.filter(F.col(is_new))) for df in (sent, received, config)
    )
    messages = new_p.select(*MESSAGE).unionByName(
        new_c.filter(F.col("event") == "receive").select(*MESSAGE)
    )
    touched_p = _touched(earlier_p, [(new_p, EVENT_INDEX), (messages, MESSAGE)])
    touched_c = _touched(earlier_c, [(new_c, EVENT_INDEX), (messages, MESSAGE)])
    touched_r = _touched(earlier_r, [(new_r, ["run_id"])])
    touched_p, new_p = (df.drop("producer") for df in (touched_p, new_p))
    before = run_metrics(touched_p, touched_c, touched_r, new_quarantine.limit(0), producers)
    after = run_metrics(
        touched_p.unionByName(new_p),
        touched_c.unionByName(new_c),
        touched_r.unionByName(new_r),
        new_quarantine,
        producers,
    )
    changed = {
        m: F.coalesce(F.col(f"a.{m}"), F.lit(0)) - F.coalesce(F.col(f"b.{m}"), F.lit(0))
        for m in TABLE_METRICS
    }
    return (
        previous.alias("p")
        .join(after.alias("a"), "run_id", how="left")
        .join(before.alias("b"), "run_id", how="left")
        .select("run_id", *[(F.col(f"p.{m}") + changed[m]).cast("long").alias(m) for m in changed])
    )
