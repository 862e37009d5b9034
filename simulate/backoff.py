"""The client's reconnect backoff and the per-message latency jitter, shared by driver and Spark.

The jitter is an integer hash of (seed, stream, seq), written once in Python and once as a
Spark Column, so the driver can evaluate it at the few messages around a fault while Spark
evaluates it for every message, with identical results.
"""

from __future__ import annotations

import random

from pyspark.sql import Column
from pyspark.sql import functions as F

HASH_MULTIPLIER = 2_654_435_761  # Knuth's multiplicative hash
HASH_MODULUS = 2**32
INITIAL_BACKOFF_US = 100_000
MAX_BACKOFF_US = 60_000_000


def mix(seed: int, stream: int, seq: int) -> int:
    """A deterministic 32-bit hash of a message."""
    return (seq * HASH_MULTIPLIER + stream * 40_503 + seed * 97) % HASH_MODULUS


def mix_column(seed: int, stream: Column, seq: Column) -> Column:
    """`mix` as a Spark Column (long arithmetic, no overflow below 3·10⁹ messages)."""
    return F.pmod(
        seq * F.lit(HASH_MULTIPLIER) + stream * F.lit(40_503) + F.lit(seed * 97),
        F.lit(HASH_MODULUS),
    )


def jitter_span(interval_us: int) -> int:
    """Latency jitter stays below one send interval, so acks stay in send order."""
    return max(1, interval_us * 9 // 10)


def latency(seed: int, stream: int, seq: int, latency_us: int, interval_us: int) -> int:
    return latency_us + mix(seed, stream, seq) % jitter_span(interval_us)


def latency_column(
    seed: int, stream: Column, seq: Column, latency_us: int, interval_us: int
) -> Column:
    return F.lit(latency_us) + mix_column(seed, stream, seq) % F.lit(jitter_span(interval_us))


def reconnect_after(rng: random.Random, available_after_us: int) -> tuple[int, list[int]]:
    """(microseconds until the successful attempt, the delays tried): the client retries on
    its backoff until the first attempt at or after the topic is available again."""
    delays: list[int] = []
    waited = 0
    current = INITIAL_BACKOFF_US
    while waited < available_after_us:
        delay = current - rng.randrange(current // 10)
        delays.append(delay)
        waited += delay
        current = min(current * 2, MAX_BACKOFF_US)
    return waited, delays
