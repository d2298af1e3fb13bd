"""The memory block of a finding as rows: (item, value, source, note). Shared by all views."""
from __future__ import annotations

LABELS = {
    "total": "GPU memory", "weights": "weights", "draft_weights": "draft weights", "kv_pool": "KV cache pool",
    "mamba_state": "Mamba state pool", "spec_scratch": "spec-decoding scratch", "draft_kv": "draft KV",
    "cuda_graphs": "CUDA graphs", "headroom": "headroom (activations)", "free": "free",
}


def budget_rows(memory: dict) -> list[tuple[str, str, str, str]]:
    rows = []
    for item in memory.get("items") or []:
        gib = item.get("gib")
        value = "?" if gib is None else f"{gib:,.2f} GiB"
        name = item.get("label") or LABELS.get(item.get("name"), item.get("name", ""))
        rows.append((name, value, item.get("source", ""), item.get("note", "")))
    return rows


def chart_items(memory: dict) -> list[dict]:
    """Items for a stacked bar: parts that add up to the total, in display order."""
    parts = [i for i in memory.get("items") or [] if i.get("name") != "total" and (i.get("gib") or 0) > 0]
    total = next((i.get("gib") for i in memory.get("items") or [] if i.get("name") == "total"), None)
    return [{"label": i.get("label") or LABELS.get(i["name"], i["name"]), "gib": i["gib"], "item": i["name"],
             "source": i.get("source", "")} for i in parts] + ([{"label": "total", "gib": total, "item": "total"}] if total else [])
