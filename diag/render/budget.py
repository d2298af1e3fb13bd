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
        rows.append((LABELS.get(item.get("item"), item.get("item", "")), value, item.get("source", ""), item.get("note", "")))
    for key, value in memory.get("derived", {}).items():
        if value is None:
            continue
        label = key.replace("_", " ")
        shown = f"{value:,.3f}" if isinstance(value, float) and value < 10 else (f"{value:,.0f}" if isinstance(value, (int, float)) else str(value))
        rows.append((label, shown, "", ""))
    return rows


def chart_items(memory: dict) -> list[dict]:
    """Items for a stacked bar: parts that add up to the total, in display order."""
    parts = [i for i in memory.get("items") or [] if i.get("item") != "total" and (i.get("gib") or 0) > 0]
    total = next((i.get("gib") for i in memory.get("items") or [] if i.get("item") == "total"), None)
    return [{"label": LABELS.get(i["item"], i["item"]), "gib": i["gib"], "item": i["item"], "source": i.get("source", "")}
            for i in parts] + ([{"label": "total", "gib": total, "item": "total"}] if total else [])
