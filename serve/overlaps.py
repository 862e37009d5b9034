"""Which finding blocks count the same messages as another kind (pulsar_audit.kinds
OVERLAPPING_KINDS): the `also_counted_as` of analyze, summary and message."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable
from typing import Any

from pulsar_audit.kinds import OVERLAPPING_KINDS

PAIRS = {frozenset(pair) for pair in OVERLAPPING_KINDS}
# A block's messages: one producer's seqs on one partition, seen by one subscription.
STREAM = ("run_id", "topic", "subscription", "partition", "producer")


def also_counted_as(block: dict[str, Any], others: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The seqs of `block` that a block of `others` of an overlapping kind counts too:
    [{"kind", "seq_from", "seq_to"}] (a block holds every seq of its range)."""
    found = []
    for other in others:
        if frozenset((block["kind"], other["kind"])) not in PAIRS:
            continue
        if any(block.get(key) != other.get(key) for key in STREAM):
            continue
        if None in (block["seq_from"], block["seq_to"], other["seq_from"], other["seq_to"]):
            continue
        low = max(block["seq_from"], other["seq_from"])
        high = min(block["seq_to"], other["seq_to"])
        if low <= high:
            found.append({"kind": other["kind"], "seq_from": low, "seq_to": high})
    return sorted(found, key=lambda o: (o["kind"], o["seq_from"]))


def with_overlaps(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`blocks` (anomaly rows; other findings, e.g. outages, pass through) each with
    `also_counted_as`. A block is compared only with the blocks of its stream and of a kind
    it pairs with whose ranges can reach it (an index per stream and kind, by seq): the
    summary of many runs holds tens of thousands of blocks."""
    index = _Index(b for b in blocks if "seq_from" in b)
    return [
        {**b, "also_counted_as": also_counted_as(b, index.near(b))} if "seq_from" in b else b
        for b in blocks
    ]


class _Index:
    """Blocks by (stream, kind), sorted by seq_from, with the running maximum of seq_to: the
    blocks whose range meets [seq_from, seq_to] are found without reading the others."""

    def __init__(self, blocks: Iterable[dict[str, Any]]) -> None:
        groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        blocks = list(blocks)
        self.position = {id(b): n for n, b in enumerate(blocks)}
        for b in blocks:
            if b["seq_from"] is not None and b["seq_to"] is not None:
                groups.setdefault((*_stream(b), b["kind"]), []).append(b)
        self.groups = {}
        for key, group in groups.items():
            group.sort(key=lambda b: b["seq_from"])
            reach = list(itertools.accumulate((b["seq_to"] for b in group), max))
            self.groups[key] = (group, [b["seq_from"] for b in group], reach)

    def near(self, block: dict[str, Any]) -> list[dict[str, Any]]:
        if block["seq_from"] is None or block["seq_to"] is None:
            return []
        kinds = {k for pair in PAIRS if block["kind"] in pair for k in pair} - {block["kind"]}
        found = []
        for kind in kinds:
            group, starts, reach = self.groups.get((*_stream(block), kind), ([], [], []))
            i = bisect.bisect_right(starts, block["seq_to"]) - 1
            while i >= 0 and reach[i] >= block["seq_from"]:
                found.append(group[i])
                i -= 1
        return sorted(found, key=lambda b: self.position[id(b)])  # in `blocks` order


def _stream(block: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(block.get(key) for key in STREAM)


def overlap_note(block: dict[str, Any]) -> str:
    """`also counted as lost (seq 50–52)` for a block that has overlaps, else ''."""
    parts = [
        f"{o['kind']} (seq {o['seq_from']}"
        + ("" if o["seq_to"] == o["seq_from"] else f"–{o['seq_to']}")
        + ")"
        for o in block.get("also_counted_as") or []
    ]
    if not parts:
        return ""
    return "also counted as " + ", ".join(parts) + " (docs/anomalies.md)"


def overlap_pairs(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each pair of kinds counting the same seqs of `blocks` once (`explain`):
    [{"kinds": [a, b], "subscription", "producer", "seq_from", "seq_to"}]."""
    pairs = []
    for block in blocks:
        for other in also_counted_as(block, blocks):
            if block["kind"] < other["kind"]:
                pairs.append(
                    {
                        "kinds": [block["kind"], other["kind"]],
                        "subscription": block.get("subscription"),
                        "producer": block.get("producer"),
                        "seq_from": other["seq_from"],
                        "seq_to": other["seq_to"],
                    }
                )
    return pairs
