"""The memory block of a finding as rows: (item, value, source, note). Shared by all views."""
from __future__ import annotations

LABELS = {
    "total": "GPU memory", "weights": "weights", "draft_weights": "draft weights", "kv_pool": "KV cache pool",
    "mamba_state": "Mamba state pool", "spec_scratch": "spec-decoding scratch", "draft_kv": "draft KV",
    "cuda_graphs": "CUDA graphs", "headroom": "headroom (activations)", "free": "free",
}
SOURCE_WORDS = {"model-catalog": "model catalog", "gpu-catalog": "GPU catalog", "flag-catalog": "flag catalog",
                "launch-command": "launch command", "default": "SGLang default"}


def source_text(item: dict) -> str:
    """Where a number came from, short: `log line 18`, `nvidia-smi`, `model catalog`, `formula`, …"""
    source = item.get("source", "")
    at = item.get("at") or []
    if source == "log" and at:
        where = ", ".join(str(a["line"]) if a.get("input", 0) == 0 else f"{a['input']}:{a['line']}" for a in at)
        return f"log line{'s' if len(at) > 1 else ''} {where}"
    if source == "launch-command" and at:
        return f"launch command (line {at[0]['line']})"
    return SOURCE_WORDS.get(source, source)


def budget_rows(memory: dict) -> list[tuple[str, str, str, str]]:
    rows = []
    for item in memory.get("items") or []:
        gib = item.get("gib")
        value = "?" if gib is None else f"{gib:,.2f} GiB"
        name = item.get("label") or LABELS.get(item.get("name"), item.get("name", ""))
        rows.append((name, value, source_text(item), item.get("note", "")))
    return rows


def chart_items(memory: dict) -> list[dict]:
    """Items for a stacked bar: parts that add up to the total, in display order."""
    parts = [i for i in memory.get("items") or [] if i.get("name") != "total" and (i.get("gib") or 0) > 0]
    total = next((i.get("gib") for i in memory.get("items") or [] if i.get("name") == "total"), None)
    return [{"label": i.get("label") or LABELS.get(i["name"], i["name"]), "gib": i["gib"], "item": i["name"],
             "source": source_text(i)} for i in parts] + ([{"label": "total", "gib": total, "item": "total"}] if total else [])
