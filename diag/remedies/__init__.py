"""Remedy helpers that rules name (`remedy = [...]`): they read the facts and the matched
lines, do the arithmetic (through diag.memory) and fill in fixes, numbers and texts.

A helper returns None, or False when on closer reading the rule does not apply.
Flag names are written as in the newest catalog; rank.py spells them for the user's version.
The helpers live in one module per concern; importing this package registers them all.
"""
from __future__ import annotations

import math
import re

from .. import flags as F
from ..numbers import to_float
from .. import phase as P
from ..rules_v1 import Context

REMEDIES: dict = {}
GIB = 1 << 30


def remedy(fn):
    REMEDIES[fn.__name__] = fn
    return fn


def _version(facts) -> str | None:
    v = facts.version
    if v.exact:
        return v.exact
    return facts.catalog.versions[-1] if facts.catalog else None


def _oom(ctx: Context):
    return ctx.facts.ooms[0] if ctx.facts.ooms else None


def _gpu_text(oom_event) -> str:
    if oom_event is None:
        return ""
    d = oom_event.data
    if d.get("total_gib") is None:
        return ""
    gpu = f"GPU {d['gpu']}" if d.get("gpu") is not None else "the GPU"
    held = d.get("this_process_gib")
    if held is None and len(d.get("processes") or []) == 1:
        held = d["processes"][0]["used_gib"]
    parts = [f" on {gpu} ({d['total_gib']:.2f} GiB"]
    if held is not None:
        parts.append(f", {held:.2f} GiB already held by the server")
    if d.get("tried_gib") is not None:
        parts.append(f", {_size(d['tried_gib'])} more requested with {_size(d.get('free_gib') or 0)} free")
    return "".join(parts) + ")"


def _size(gib: float) -> str:
    return f"{gib:.2f} GiB" if gib >= 1 else f"{gib * 1024:.0f} MiB"


def _deployment(facts, version: str | None = None):
    from .. import memory as M
    total_mib, where = None, None
    if facts.gpus:
        total_mib = next((g.get("memory_total_mib") for g in facts.gpus if g.get("memory_total_mib")), None)
        where = "nvidia-smi" if total_mib is not None else None
    if total_mib is None and facts.gpu_total_gib:
        total_mib, where = int(round(facts.gpu_total_gib * 1024)), "log"
    return M.Deployment.from_flags(facts.flags, version or _version(facts), model=facts.model, gpu=facts.gpu,
                                   gpu_total_mib=total_mib, env=facts.env, gpu_total_source=where)


def _readings(facts):
    from .. import memory as M
    r = dict(facts.readings)
    oom = facts.ooms[0].event.data if facts.ooms else {}
    r.setdefault("oom_total_gib", oom.get("total_gib"))
    r.setdefault("oom_free_gib", oom.get("free_gib"))
    r.setdefault("oom_tried_gib", oom.get("tried_gib"))
    held = oom.get("this_process_gib")
    if held is None and len(oom.get("processes") or []) == 1:
        held = oom["processes"][0]["used_gib"]
    r.setdefault("oom_process_gib", held)
    for e in facts.events:
        msg = e.data.get("message", "") or ""
        if m := re.search(r"mem_fraction_static=([\d.]+)", msg):
            r.setdefault("mem_fraction_static", to_float(m[1]))
        if m := re.search(r"Raise --mem-fraction-static above ([\d.]+) \(minimum viable = 1 - available/pre = ([\d.]+)\)", msg):
            r.setdefault("suggested_fraction", to_float(m[1]))
            r.setdefault("min_viable_fraction", to_float(m[2]))
        if m := re.search(r"total_rest_memory=([\d.]+) GB, mamba_cache_per_req=([\d.]+) MB", msg):
            r.setdefault("mamba_total_rest_gib", to_float(m[1]))
            r.setdefault("mamba_per_req_mib", to_float(m[2]))
    known = {k: v for k, v in r.items() if v is not None and k in M.Readings.__dataclass_fields__}
    return M.Readings(**known)


def _budget(ctx: Context):
    """(deployment, budget) or (None, None) when the memory model cannot run on these facts.

    When the log only narrows the SGLang version to a range, the versions' sizing rules can
    differ; for a failure, the newest version whose arithmetic reproduces it is used.
    """
    cached = ctx.values.get("_budget")
    if cached is not None:
        return cached
    try:
        from .. import memory as M
    except ImportError:
        ctx.values["_budget"] = (None, None)
        return None, None
    facts = ctx.facts
    readings = _readings(facts)
    candidates = [facts.version.exact] if facts.version.exact else list(reversed(facts.catalog.versions))
    failure = ctx.rule.category.startswith("oom.")
    chosen = None
    for v in candidates:
        dep = _deployment(facts, v)
        b = M.budget(dep, readings)
        chosen = chosen or (dep, b)
        if not failure or b.fits is False:
            chosen = (dep, b)
            if len(candidates) > 1:
                ctx.finding.confidence_notes.append(
                    f"memory arithmetic of SGLang {v}: the log narrows the version to {facts.version.describe()}, "
                    + ("and this is the newest of them whose sizing reproduces the failure" if failure else "the newest of them"))
            break
    ctx.values["_budget"] = chosen
    return chosen


def _memory_json(b) -> dict:
    j = b.to_json()
    keep = {k: v for k, v in j.items() if v not in (None, [], {}, 0.0) or k in ("fits",)}
    keep["items"] = [i for i in j["items"] if i.get("gib") is not None]
    return keep


def _budget_sentence(b) -> str:
    if b is None:
        return ""
    parts = []
    if b.gpu_total_gib:
        parts.append(f"{b.gpu_total_gib:.1f} GiB GPU")
    if b.weights_gib is not None:
        parts.append(f"weights {b.weights_gib:.1f} GiB")
    if b.draft_weights_gib:
        parts.append(f"draft {b.draft_weights_gib:.1f} GiB")
    if b.hybrid_mamba and b.max_mamba_cache_size is not None and b.mamba_bytes_per_slot:
        parts.append(f"Mamba state {b.max_mamba_cache_size} slots × {b.mamba_bytes_per_slot / 2**20:.1f} MiB = {b.mamba_state_gib:.1f} GiB")
    if b.spec_scratch_gib:
        parts.append(f"speculative Mamba scratch {b.spec_scratch_gib:.1f} GiB")
    if b.kv_pool_gib is not None and b.max_total_num_tokens is not None:
        parts.append(f"KV cache {b.max_total_num_tokens:,} tokens × {b.kv_bytes_per_token or 0:,.0f} B = {b.kv_pool_gib:.1f} GiB")
    if b.mem_fraction_static is not None and b.pre_load_free_gib:
        auto = " (automatic)" if b.mem_fraction_static_auto else ""
        parts.append(f"static budget {b.mem_fraction_static:.3f}{auto} × {b.pre_load_free_gib:.1f} GiB free = {b.static_budget_gib or 0:.1f} GiB")
    if b.headroom_gib is not None:
        parts.append(f"headroom {b.headroom_gib:.1f} GiB")
    if not parts:
        return ""
    text = "Per GPU: " + "; ".join(parts) + "."
    if b.problems:
        text += " " + b.problems[0].rstrip(".") + "."
    return text


def _smaller_batches(ctx: Context, kind: str, why: str, option: int = 1, requests_default: int = 64) -> None:
    """Halve what a batch may hold: the prefill chunk and admitted requests, or the decode batch."""
    facts = ctx.facts
    if kind != "decode":
        chunk = _int(facts.flag("--chunked-prefill-size"))
        ctx.add_fix("--chunked-prefill-size", max(512, chunk // 2) if chunk and chunk > 0 else 4096,
                    f"{why}: smaller prefill chunks", option=option)
    ctx.add_fix("--max-running-requests", _half(facts, "--max-running-requests", "max_running_requests", requests_default),
                f"{why}: fewer requests at once", option=option)


def _add_options(ctx: Context, options, start: int = 1) -> None:
    from ..rules.fixlib import option_text
    n = start
    for opt in options:
        texts = option_text("memory", opt.kind, opt.values)
        if not opt.changes and not texts.notes:
            continue
        if opt.fits is False and opt.changes:
            continue
        ctx.finding.options.append({"option": n, "title": texts.title, "cost": opt.cost, "arithmetic": texts.arithmetic,
                                    "fits": opt.fits})
        for fx in opt.changes:
            action = fx.get("action", "set")
            ctx.add_fix(flag=fx["flag"], value=fx.get("value"), why=texts.whys.get(fx["flag"], ""), option=n, action=action)
        for o in texts.notes:
            note = f"option {n}: {o}"
            if note not in ctx.finding.fix_other:
                ctx.finding.fix_other.append(note)
        n += 1


def _int(v) -> int | None:
    f = to_float(v)
    return None if f is None else int(f)


def _current_mfs(ctx: Context, b) -> float | None:
    if b is not None and b.mem_fraction_static:
        return b.mem_fraction_static
    return to_float(ctx.facts.flag("--mem-fraction-static"))


def _lower_mfs(mfs: float | None) -> str:
    return f"{max(0.5, mfs - 0.05):.2f}" if mfs else "0.80"


def _raise_mfs(mfs: float | None) -> str:
    if mfs is None:
        return "0.90"
    if mfs < 0.6:
        return "0.85"
    return f"{min(0.95, mfs + 0.05):.2f}"


def _half(facts, flag: str, reading: str, default: int) -> int:
    v = _int(facts.flag(flag)) or _int(facts.readings.get(reading))
    return max(1, v // 2) if v else default


def _float(v) -> float | None:
    return to_float(v)


from . import env_fixes, flag_fixes, memory_fixes, runtime_fixes  # noqa: E402,F401  (register the helpers)
