"""The anomaly kinds and a run's counts, by name (no Spark: the benchmark's reference checkers
read them too); pulsar_audit/schemas.py holds the tables these name columns of."""

# Every kind of gold.anomalies, in gold.run_summary's column order (one detector each, in
# pipelines/; which of them make a run invalid: pipelines/verdict.py).
ANOMALY_KINDS = (
    "lost",
    "unseen",
    "unacked_received",
    "duplicated",
    "redelivered",
    "out_of_order",
    "poll_skip",
    "nonmonotonic_send",
)
# Kinds seen by a producer, not a subscription: counted for every subscription of the topic.
PRODUCER_KINDS = ("nonmonotonic_send",)
# The per-run message counts of gold.run_summary, in column order (analyze --json, truth.json).
RUN_COUNTS = ("sent", "acked", "nacked", "received", *ANOMALY_KINDS)
