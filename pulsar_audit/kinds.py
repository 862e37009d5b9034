"""The anomaly kinds and a run's counts, by name (no Spark: the benchmark's reference checkers
read them too); pulsar_audit/schemas.py holds the tables these name columns of."""

# The kinds of trace format v1.1 and the subscription types' promises
# (docs/subscription-types.md).
SUBSCRIPTION_TYPE_KINDS = (
    "nonmonotonic_poll",
    "inconsistent_message_id",
    "shared_reordered",
    "failover_overlap",
    "key_out_of_order",
    "key_overlap",
    "stuck_key",
)
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
    *SUBSCRIPTION_TYPE_KINDS,
)
# Kinds seen by a producer or in storage, not by a subscription: counted for every
# subscription of the topic.
PRODUCER_KINDS = ("nonmonotonic_send", "inconsistent_message_id")
# Kinds that make a verdict false (the others are information).
VIOLATION_KINDS = (
    "lost",
    "out_of_order",
    "poll_skip",
    "nonmonotonic_send",
    "nonmonotonic_poll",
    "inconsistent_message_id",
    "failover_overlap",
    "key_out_of_order",
    "key_overlap",
    "stuck_key",
)
# Subscription types (trace format v1.1), as Pulsar's client APIs name them.
SUBSCRIPTION_TYPES = ("Exclusive", "Failover", "Shared", "Key_Shared")
# The per-run message counts of gold.run_summary, in column order (analyze --json, truth.json).
RUN_COUNTS = ("sent", "acked", "nacked", "received", *ANOMALY_KINDS)
# Kinds that count one message twice, by design (docs/anomalies.md, "Where one fact shows under
# two kinds"): a poll skip is a consumer jumping over a stored message; if the subscription
# never got it, it is also lost (or unseen); if the consumer got it later, that late delivery
# is also out_of_order (a lower seq of its producer) or nonmonotonic_poll (another producer's).
# The poll skip says which consumer jumped; the other kind what became of the message. The
# output marks each such pair ("also counted as").
OVERLAPPING_KINDS = (
    ("poll_skip", "lost"),
    ("poll_skip", "unseen"),
    ("poll_skip", "out_of_order"),
    ("poll_skip", "nonmonotonic_poll"),
)
