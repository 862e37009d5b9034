"""`logs unmatched`: the log lines no pattern recognizes, grouped into templates by Drain3.

Spark first groups the unmatched rows by their text with numbers masked
(serve.recognition.unmatched_forms), so only distinct forms reach Drain3, each with its
count; Drain3 then merges forms that differ in a few tokens (names, ids) into one template.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from drain3 import TemplateMiner
from drain3.masking import MaskingInstruction
from drain3.template_miner_config import TemplateMinerConfig

from pulsar_audit.delta_io import Lakehouse
from serve.recognition import recognized_by_source, unmatched_rows

DEFAULT_TOP = 20
# what varies inside one kind of line, beyond the numbers Spark already masked
_MASKS = [
    (r"(?:non-)?persistent://[^\s\],}\"]+", "topic"),
    (r"\b[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}\b", "uuid"),
    (r"/?(?:<n>|[\w.-]+):<n>", "address"),
]


def _miner() -> TemplateMiner:
    config = TemplateMinerConfig()
    config.profiling_enabled = False
    config.drain_sim_th = 0.5
    config.masking_instructions = [MaskingInstruction(p, name) for p, name in _MASKS]
    return TemplateMiner(config=config)


def mine_templates(forms: Iterable[dict[str, Any]], top: int = DEFAULT_TOP) -> list[dict]:
    """Forms (source, logger, form, count, example) → the `top` templates per source.

    Each template: source, template (logger first), count (lines), example (one real line).
    """
    miners: dict[str, TemplateMiner] = {}
    found: dict[tuple[str, int], dict[str, Any]] = {}
    for form in forms:
        miner = miners.setdefault(form["source"], _miner())
        result = miner.add_log_message(f"{form['logger']} {form['form']}")
        key = (form["source"], int(result["cluster_id"]))
        entry = found.setdefault(key, {"count": 0, "example": form["example"]})
        entry["count"] += form["count"]
    templates = [
        {
            "source": source,
            "template": miners[source].drain.id_to_cluster[cluster_id].get_template(),
            "count": entry["count"],
            "example": entry["example"],
        }
        for (source, cluster_id), entry in found.items()
    ]
    templates.sort(key=lambda t: (-t["count"], t["source"], t["template"]))
    per_source: dict[str, int] = {}
    kept = []
    for template in templates:
        per_source[template["source"]] = per_source.get(template["source"], 0) + 1
        if per_source[template["source"]] <= top:
            kept.append(template)
    return kept


def unmatched_report(
    lakehouse: Lakehouse, sources: list[str] | None = None, top: int = DEFAULT_TOP
) -> dict[str, Any]:
    """{"sources": recognized counts per source, "templates": the top unmatched templates}."""
    return {
        "sources": recognized_by_source(lakehouse, sources),
        "templates": mine_templates(unmatched_rows(lakehouse, sources), top),
    }
