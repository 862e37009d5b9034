"""serve.overlaps: which blocks count the same messages as a block of another kind."""

from __future__ import annotations

import random

from serve.overlaps import also_counted_as, with_overlaps

STREAM = {"run_id": "r", "topic": "t", "subscription": "s", "partition": 0, "producer": "p"}


def _block(kind: str, seq_from: int | None, seq_to: int | None, **stream: object) -> dict:
    return {**STREAM, **stream, "kind": kind, "seq_from": seq_from, "seq_to": seq_to}


def test_a_poll_skip_overlaps_lost_and_unseen_of_its_own_stream_only() -> None:
    blocks = [
        _block("lost", 50, 52),
        {"kind": "outage", "duration_ms": 113},
        _block("poll_skip", 48, 51),
        _block("poll_skip", 52, 60, partition=1),  # another partition: never
        _block("duplicated", 49, 50),  # not a kind poll_skip pairs with
        _block("unseen", 40, 48),
        _block("poll_skip", None, None),  # no range: overlaps nothing
    ]
    out = with_overlaps(blocks)
    assert out[1] == {"kind": "outage", "duration_ms": 113}
    assert out[0]["also_counted_as"] == [{"kind": "poll_skip", "seq_from": 50, "seq_to": 51}]
    assert out[2]["also_counted_as"] == [
        {"kind": "lost", "seq_from": 50, "seq_to": 51},
        {"kind": "unseen", "seq_from": 48, "seq_to": 48},
    ]
    assert [o["also_counted_as"] for o in out[3:]] == [
        [],
        [],
        [{"kind": "poll_skip", "seq_from": 48, "seq_to": 48}],
        [],
    ]


def test_the_index_finds_what_comparing_every_pair_finds() -> None:
    rng = random.Random(7)
    kinds = ("lost", "unseen", "out_of_order", "nonmonotonic_poll", "poll_skip", "duplicated")
    blocks = [
        _block(rng.choice(kinds), i // 3, i // 3 + rng.randint(0, 40), partition=rng.randint(0, 1))
        for i in range(3000)
    ]
    out = with_overlaps(blocks)
    overlapping = sum(bool(o["also_counted_as"]) for o in out)
    assert overlapping > 300  # the case is not vacuous
    assert [o["also_counted_as"] for o in out] == [also_counted_as(b, blocks) for b in blocks]
