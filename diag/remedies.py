"""Remedy helpers that rules name (`remedy = [...]`): they read the facts and the matched
lines, do the arithmetic (through diag.memory) and fill in fixes, numbers and texts.

A helper returns None, or False when on closer reading the rule does not apply.
Flag names are written as in the newest catalog; rank.py spells them for the user's version.
"""
from __future__ import annotations

import math
import re

from . import flags as F
from . import phase as P
from .rules import Context

REMEDIES: dict = {}
GIB = 1 << 30


def remedy(fn):
    REMEDIES[fn.__name__] = fn
    return fn


# -- shared pieces ---------------------------------------------------------------------

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
    from . import memory as M
    total_mib = None
    if facts.gpus:
        total_mib = next((g.get("memory_total_mib") for g in facts.gpus if g.get("memory_total_mib")), None)
    if total_mib is None and facts.gpu_total_gib:
        total_mib = int(round(facts.gpu_total_gib * 1024))
    return M.Deployment.from_flags(facts.flags, version or _version(facts), model=facts.model, gpu=facts.gpu,
                                   gpu_total_mib=total_mib, env=facts.env)


def _readings(facts):
    from . import memory as M
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
            r.setdefault("mem_fraction_static", float(m[1]))
        if m := re.search(r"Raise --mem-fraction-static above ([\d.]+) \(minimum viable = 1 - available/pre = ([\d.]+)\)", msg):
            r.setdefault("suggested_fraction", float(m[1]))
            r.setdefault("min_viable_fraction", float(m[2]))
        if m := re.search(r"total_rest_memory=([\d.]+) GB, mamba_cache_per_req=([\d.]+) MB", msg):
            r.setdefault("mamba_total_rest_gib", float(m[1]))
            r.setdefault("mamba_per_req_mib", float(m[2]))
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
        from . import memory as M
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


def _add_options(ctx: Context, options, start: int = 1) -> None:
    n = start
    for opt in options:
        if not opt.fixes and not opt.other:
            continue
        if opt.fits is False and opt.fixes:
            continue
        ctx.finding.options.append({"option": n, "title": opt.title, "cost": opt.cost, "arithmetic": opt.arithmetic,
                                    "fits": opt.fits})
        for fx in opt.fixes:
            action = fx.get("action", "set")
            ctx.add_fix(flag=fx["flag"], value=fx.get("value"), why=fx.get("why", ""), option=n, action=action)
        for o in opt.other:
            note = f"option {n}: {o}"
            if note not in ctx.finding.fix_other:
                ctx.finding.fix_other.append(note)
        n += 1


# -- memory ---------------------------------------------------------------------------

GOAL = {"weights": "weights", "kv_pool": "kv_pool", "mamba": "mamba", "cuda_graph": "cuda_graph", "draft": "speculative",
        "prefill": "prefill", "warmup": "prefill", "decode": "decode", "multimodal": "prefill", "dist_init": "kv_pool"}


@remedy
def oom_memory(ctx: Context):
    """Budget, phase text and ranked options for an OOM (or a pool refusal)."""
    facts = ctx.facts
    oi = _oom(ctx)
    phase = oi.phase if oi else ({"oom.kv_pool": "kv_pool", "oom.mamba_state": "mamba"}.get(ctx.rule.category))
    if ctx.rule.category == "oom.mamba_state":
        phase = "mamba"
    if oi:
        ctx.finding.confidence = min(ctx.finding.confidence, max(oi.confidence, 0.3)) if oi.basis in ("numbers", "none") else ctx.finding.confidence
        for n in oi.notes:
            ctx.finding.confidence_notes.append(f"step inferred from {oi.basis}: {n}" if oi.basis in ("numbers", "milestones") else n)
        ctx.evidence(oi.event, role="trigger")
        if oi.basis == "milestones":
            ms = [m for m in facts.milestones if m.line <= oi.event.line][-2:]
            for m in ms:
                ctx.evidence(m, role="context")
    ctx.values["phase_text"] = P.DESCRIBE.get(phase, "") if phase else ""
    ctx.values["gpu_text"] = _gpu_text(oi.event if oi else None)
    dep, b = _budget(ctx)
    if b is not None:
        ctx.finding.memory = _memory_json(b)
        ctx.values["budget_sentence"] = _budget_sentence(b)
        from . import memory as M
        goal = GOAL.get(phase or "", "prefill")
        if ctx.rule.category == "oom.kv_pool" and b.goals and b.goals[0] == "mamba":
            _to_mamba(ctx, b)
            goal, phase = "mamba", "mamba"
        elif b.goals and goal not in b.goals and phase in ("kv_pool", None) and b.goals[0] in ("weights",):
            goal = b.goals[0]
        opts = M.options_for(goal, dep, b)
        if not opts and b.goals:
            opts = M.all_options(dep, b)
        _add_options(ctx, opts)
        if phase in ("prefill", "decode", "warmup", "multimodal", "cuda_graph", "draft", None):
            _shortfall_option(ctx, b, oi)
    if not ctx.finding.fix:
        _fallback_fixes(ctx, phase, b)
    if phase == "mamba":
        ctx.values["mamba_sentence"] = _mamba_sentence(ctx, b)
    return None


def _shortfall_option(ctx: Context, b, oi) -> None:
    """A runtime/graph OOM says how much was missing: lower the fraction by that much (and a margin)."""
    if oi is None or any(f.flag == "--mem-fraction-static" for f in ctx.finding.fix):
        return
    d = oi.event.data
    tried, free = d.get("tried_gib"), d.get("free_gib")
    mfs, pre = b.mem_fraction_static, b.pre_load_free_gib or d.get("total_gib")
    if tried is None or free is None or not mfs or not pre:
        return
    missing = max(0.0, tried - free) + 1.0  # what was missing, plus 1 GiB for the next allocation
    new = math.floor((mfs - missing / pre) * 100) / 100
    if new < 0.5:
        return
    n = max([o["option"] for o in ctx.finding.options] + [0]) + 1
    ctx.add_fix("--mem-fraction-static", f"{new:.2f}",
                f"the failed allocation lacked {max(0.0, tried - free):.2f} GiB; {mfs:.3f} → {new:.2f} leaves "
                f"{(mfs - new) * pre:.1f} GiB more outside the static pool (the KV pool shrinks by as much)", option=n)
    ctx.finding.options.append({"option": n, "title": f"more headroom: --mem-fraction-static {new:.2f}", "cost": 1,
                                "arithmetic": f"({mfs:.3f} - {new:.2f}) x {pre:.1f} GiB = {(mfs - new) * pre:.1f} GiB ≥ "
                                              f"{tried:.2f} GiB requested - {free:.2f} GiB free"})


def _to_mamba(ctx: Context, b) -> None:
    """A KV-pool refusal whose arithmetic shows the Mamba state (and spec scratch) took the budget."""
    f = ctx.finding
    f.category = "oom.mamba_state"
    f.title = "The Mamba state (and its speculative-decoding scratch) leaves no room for the KV cache"
    f.summary = ("SGLang refused to start with 'Not enough memory', but its own sizing rules for this model show why: "
                 "the per-request Mamba state (and, with speculative decoding, its per-draft-token scratch) takes the budget, "
                 "so the Mamba side is what must shrink. {budget_sentence}")
    f.confidence_notes.append("the refusal message names --mem-fraction-static, but SGLang's own sizing rules for this model put the "
                              "blame on the Mamba state pool")


def _fallback_fixes(ctx: Context, phase: str | None, b) -> None:
    """Fixes when the arithmetic lacks inputs: directions from the phase, values from what is known."""
    facts = ctx.facts
    mfs = _current_mfs(ctx, b)
    oom = _oom(ctx)
    d = oom.event.data if oom else {}
    if phase == "weights":
        tp = _int(facts.flag("--tp-size")) or 1
        ctx.add_fix("--tp-size", tp * 2, f"split the weights over {tp * 2} GPUs (each then holds about half of what failed to fit)", option=1)
        ctx.finding.options.append({"option": 1, "title": f"TP={tp * 2}", "cost": 3})
        ctx.finding.fix_other.append("Or serve a quantized checkpoint (FP8 halves BF16 weights; AWQ/GPTQ 4-bit quarters them), or a GPU with more memory. "
                                     "--mem-fraction-static cannot help: the weights come first.")
        if d.get("total_gib") and d.get("this_process_gib"):
            ctx.values["budget_sentence"] = (f"The server held {d['this_process_gib']:.2f} of {d['total_gib']:.2f} GiB when "
                                             f"{_size(d.get('tried_gib') or 0)} more was requested: the weights of one rank exceed the GPU.")
    elif phase in ("kv_pool", "dist_init"):
        new = _raise_mfs(mfs)
        ctx.add_fix("--mem-fraction-static", new, "give the static pools a larger share of the free memory", option=1)
        ctx.add_fix("--kv-cache-dtype", "fp8_e4m3", "halve the KV bytes per token", option=2)
        ctx.finding.options.extend([{"option": 1, "title": "larger static budget", "cost": 1},
                                    {"option": 2, "title": "fp8 KV cache", "cost": 2}])
    elif phase == "cuda_graph":
        new = _lower_mfs(mfs)
        ctx.add_fix("--mem-fraction-static", new, "leave more memory outside the static pool for CUDA graphs and start-up buffers", option=1)
        ctx.add_fix("--cuda-graph-max-bs", 16 if not facts.flag("--cuda-graph-max-bs") else max(1, _int(facts.flag("--cuda-graph-max-bs")) // 2),
                    "capture fewer/smaller decode graphs", option=2)
        ctx.finding.options.extend([{"option": 1, "title": "more headroom", "cost": 1}, {"option": 2, "title": "smaller CUDA graphs", "cost": 2}])
    elif phase in ("prefill", "warmup", "multimodal", None):
        chunk = _int(facts.flag("--chunked-prefill-size"))
        ctx.add_fix("--chunked-prefill-size", max(512, chunk // 2) if chunk and chunk > 0 else 4096,
                    "smaller prefill chunks need less activation memory", option=1)
        ctx.add_fix("--max-prefill-tokens", max(1024, chunk // 2) if chunk and chunk > 0 else 8192,
                    "cap the new tokens of one prefill batch", option=1)
        ctx.add_fix("--mem-fraction-static", _lower_mfs(mfs), "leave more headroom outside the static pool", option=2)
        ctx.finding.options.extend([{"option": 1, "title": "smaller prefill batches", "cost": 1},
                                    {"option": 2, "title": "more headroom", "cost": 2}])
    elif phase == "decode":
        mrr = _int(facts.flag("--max-running-requests")) or _int(facts.readings.get("max_running_requests"))
        ctx.add_fix("--max-running-requests", max(1, mrr // 2) if mrr else 64, "fewer requests decode at once", option=1)
        ctx.add_fix("--mem-fraction-static", _lower_mfs(mfs), "leave more headroom outside the static pool", option=2)
        ctx.finding.options.extend([{"option": 1, "title": "fewer running requests", "cost": 2},
                                    {"option": 2, "title": "more headroom", "cost": 2}])
    elif phase == "draft":
        dt = _int(facts.flag("--speculative-num-draft-tokens"))
        ctx.add_fix("--speculative-num-draft-tokens", max(2, dt // 2) if dt else 2, "smaller verify buffers and scratch", option=1)
        ctx.add_fix("--mem-fraction-static", _lower_mfs(mfs), "leave room outside the static pool for the draft model", option=2)
        ctx.finding.options.extend([{"option": 1, "title": "fewer draft tokens", "cost": 2}, {"option": 2, "title": "more headroom", "cost": 2}])
    elif phase == "mamba":
        mrr = _int(facts.flag("--max-running-requests"))
        ctx.add_fix("--max-running-requests", max(1, mrr // 2) if mrr else 16, "each running request pins 3-5 Mamba slots", option=1)
        ctx.add_fix("--mamba-ssm-dtype", "bfloat16", "halve the SSM state per slot", option=2)
        ctx.finding.options.extend([{"option": 1, "title": "fewer running requests", "cost": 2}, {"option": 2, "title": "bf16 SSM state", "cost": 2}])


def _int(v) -> int | None:
    try:
        return int(float(v))
    except (TypeError, ValueError):
        return None


def _current_mfs(ctx: Context, b) -> float | None:
    if b is not None and b.mem_fraction_static:
        return b.mem_fraction_static
    v = ctx.facts.flag("--mem-fraction-static")
    try:
        return float(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def _lower_mfs(mfs: float | None) -> str:
    return f"{max(0.5, mfs - 0.05):.2f}" if mfs else "0.80"


def _raise_mfs(mfs: float | None) -> str:
    if mfs is None:
        return "0.90"
    if mfs < 0.6:
        return "0.85"
    return f"{min(0.95, mfs + 0.05):.2f}"


def _mamba_sentence(ctx: Context, b) -> str:
    msg = " ".join(h.text for h in ctx.hits[:1])
    if "too small to serve any requests" in msg:
        head = "The Mamba state cache cannot hold even one running request's slots."
    elif "Not enough space for mamba" in msg:
        head = "At run time a request found no free Mamba state slot (slots are per request, not per token)."
    elif "Not enough GPU memory for hybrid" in msg:
        head = "SGLang computed a Mamba state cache of zero slots: nothing is left for the per-request recurrent state."
    else:
        head = "The Mamba/linear-attention state pool did not fit."
    if b is not None and b.mamba_bytes_per_slot and b.mamba_ratios:
        ratios = ", ".join(f"{k} {v}" for k, v in b.mamba_ratios.items())
        head += (f" Each slot is {b.mamba_bytes_per_slot / 2**20:.1f} MiB; a running request holds {b.mamba_slots_per_request or '?'} "
                 f"slot(s) under {b.mamba_strategy or 'the current strategy'} (by strategy: {ratios}).")
    return head


@remedy
def kv_pool_refused(ctx: Context):
    """The 'Not enough memory' refusals: quote the printed fraction, say when it is suspiciously low."""
    facts = ctx.facts
    text = " ".join(h.text for h in ctx.hits)
    m = re.search(r"mem_fraction_static=([\d.]+)", text)
    if m:
        mfs = float(m[1])
        ctx.values["mfs_text"] = f" (--mem-fraction-static was {mfs:g})"
        if mfs < 0.5:
            ctx.finding.confidence_notes.append(
                f"{mfs:g} is far below SGLang's own defaults (about 0.8-0.9 on GPUs of 40 GiB and more): it was probably set by a "
                "wrapper or launcher, not computed by SGLang for this GPU; raising it is the fix here, unlike for runtime OOMs")
    m2 = re.search(r"Raise --mem-fraction-static above ([\d.]+) \(minimum viable = 1 - available/pre = ([\d.]+)\)", text)
    if m2:
        ctx.values["mfs_text"] = ctx.values.get("mfs_text", "") + f"; SGLang says the weights alone take {float(m2[2]):.3f} of the free memory"
    return None


@remedy
def kv_exhausted(ctx: Context):
    kind = (ctx.values.get("batch_kind") or "prefill").lower()
    ctx.values["batch_kind"] = kind
    if kind == "decode":
        ctx.finding.category = "oom.runtime_decode"
    msg = next((e.data.get("message", "") for e in ctx.facts.of_kind("exception") if "out of memory. Try to lower" in e.data.get("message", "")), "")
    want = re.search(r"Try to allocate (\d+) tokens", msg)
    have = re.search(r"Ava[il]+able tokens: (\d+)", msg) or re.search(r"available_size\(\)=(\d+)", msg)
    page = _int(ctx.facts.flag("--page-size")) or 1
    if want and have and int(have[1]) >= int(want[1]):
        # enough free tokens, yet the allocation failed: the allocator hands out whole pages
        ctx.finding.summary += (f" {int(have[1]):,} tokens were free and only {int(want[1]):,} were needed: the allocator works in whole "
                                f"pages{f' of {page} tokens' if page > 1 else ''}, and each running request needs a page of its own, "
                                "so a large --page-size exhausts the pool long before the tokens run out.")
        ctx.add_fix("--page-size", 1 if page <= 16 else page // 4, "smaller pages waste fewer tokens per request", option=1)
        ctx.finding.options.append({"option": 1, "title": "smaller KV pages", "cost": 1})
        return None
    if kind == "decode":
        ctx.add_fix("--max-running-requests", _half(ctx.facts, "--max-running-requests", "max_running_requests", 64),
                    "fewer running requests need fewer KV slots per step", option=1)
    else:
        chunk = _int(ctx.facts.flag("--chunked-prefill-size")) or 8192
        ctx.add_fix("--chunked-prefill-size", max(512, chunk // 2), "smaller prefill chunks need fewer free KV slots at once", option=1)
        ctx.add_fix("--max-running-requests", _half(ctx.facts, "--max-running-requests", "max_running_requests", 64),
                    "admit fewer requests so their KV fits the pool", option=1)
    ctx.add_fix("--mem-fraction-static", _raise_mfs(_current_mfs(ctx, None)), "a larger KV pool (if headroom allows)", option=2)
    ctx.finding.options.extend([{"option": 1, "title": "lower the demand", "cost": 2}, {"option": 2, "title": "larger KV pool", "cost": 1}])
    return None


def _half(facts, flag: str, reading: str, default: int) -> int:
    v = _int(facts.flag(flag)) or _int(facts.readings.get(reading))
    return max(1, v // 2) if v else default


@remedy
def kv_retract(ctx: Context):
    """Runaway generations (few requests, full pool) versus a pool too small for the admitted load."""
    facts = ctx.facts
    b = next((s for s in facts.batches if len(s)), None)
    usage_text, reason = "token usage near 1.00", ""
    if b is not None:
        idx = [i for i in range(len(b)) if b.kind[i] == 1]
        if idx:
            last = idx[-1]
            running, tokens, usage = b.running[last], b.tokens[last], b.usage[last]
            usage_text = f"token usage {usage:.2f}" if usage == usage else usage_text
            if running == running and tokens == tokens and running > 0:
                per = tokens / running
                usage_text += f", {int(running)} running request(s) holding {int(tokens):,} tokens"
                if running <= 4 and per >= 32768:
                    reason = (f"Only {int(running)} request(s) hold about {per:,.0f} tokens each: generations that do not stop "
                              "(no max_tokens, a stop token never produced) take the whole pool, a client-side problem.")
                    ctx.finding.fix_other.append("Cap generation length per request (max_tokens / max_new_tokens in the client or "
                                                 "benchmark), and check the stop tokens / chat template.")
                    ctx.finding.confidence = max(ctx.finding.confidence, 0.75)
                else:
                    reason = "Many requests share a pool that is too small for what is admitted."
                    ctx.add_fix("--max-running-requests", max(1, int(running) // 2), "admit fewer concurrent requests", option=1)
                    ctx.add_fix("--mem-fraction-static", _raise_mfs(_current_mfs(ctx, None)), "a larger KV pool", option=2)
            for i in idx[-3:]:
                ctx.evidence(b.line[i], facts.context.get((0, b.line[i]), ""), role="context")
    ctx.values["usage_text"] = usage_text
    ctx.values["retract_reason"] = reason
    if not reason:
        ctx.finding.fix_other.append("Retraction is SGLang's recovery path; if it happens constantly, lower --max-running-requests or give the KV pool more memory.")
    return None


@remedy
def other_process(ctx: Context):
    facts = ctx.facts
    oi = _oom(ctx)
    pieces = []
    total = facts.gpu_total_gib
    if oi and oi.other_gib:
        if total and oi.other_gib < 0.05 * total and not any("unbalanced" in h.text for h in ctx.hits):
            return False  # a few hundred MiB of a display server does not explain an OOM
        for p in oi.other_pids:
            pieces.append(f"PID {p['pid']} holds {p['used_gib']:.2f} GiB")
            ctx.finding.fix_other.append(f"Stop PID {p['pid']}, which holds {p['used_gib']:.2f} GiB on GPU "
                                         f"{oi.event.data.get('gpu', '?')} (check it first: ps -o pid,user,etime,cmd -p {p['pid']}).")
        ctx.evidence(oi.event, role="trigger")
    smi_other = facts.values.get("smi.other")
    if smi_other:
        for p in smi_other:
            pieces.append(f"PID {p['pid']} ({p.get('name') or '?'}) holds {p['used_mib']} MiB on GPU {p.get('gpu')}")
            ctx.finding.fix_other.append(f"Stop PID {p['pid']} ({p.get('name') or '?'}) on GPU {p.get('gpu')}, or point "
                                         "CUDA_VISIBLE_DEVICES at free GPUs.")
    if any("unbalanced" in h.text for h in ctx.hits):
        pieces.append("one GPU had much less free memory than the others at start-up")
        ctx.add_fix(env="SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK", value="0",
                    why="only if the other process must stay: start anyway, every rank sized to the fullest GPU", option=2)
    lead = "Memory was already taken on the GPU when SGLang needed it: " + "; ".join(pieces) + "." if pieces else \
        "Another process holds memory on this GPU."
    ctx.values["other_sentence"] = lead + " SGLang sizes everything from what is free, so the server fails at whatever step runs out first."
    ctx.finding.fix_other.append("Check with nvidia-smi (or nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv) "
                                 "that the GPUs are empty before starting; in containers, PIDs of other containers are not visible by name.")
    return None


# -- flags and values ------------------------------------------------------------------

def _split_args(args: str) -> list[tuple[str, str | None]]:
    """'--a x --b --c y z' -> [('--a', 'x'), ('--b', None), ('--c', 'y z')]"""
    out: list[tuple[str, str | None]] = []
    for tok in args.split():
        if tok.startswith("-"):
            flag, _, val = tok.partition("=")
            out.append((flag, val or None))
        elif out:
            f, v = out[-1]
            out[-1] = (f, tok if v is None else f"{v} {tok}")
    return out


@remedy
def unknown_flag(ctx: Context):
    cat = ctx.facts.catalog
    args = ctx.values.get("args", "")
    bad, advice = [], []
    for flag, value in _split_args(args):
        bad.append(flag)
        target = _replacement(cat, flag)
        if target is None and flag in F.FOREIGN:
            advice.append(f"drop {flag}: SGLang has no such setting" + (" (its radix cache is on by default)" if "prefix" in flag else ""))
            continue
        if target and cat.has(target):
            info = cat.flag(target)
            why = f"{flag} is not a flag of SGLang {cat.label}"
            if "_" in flag and target == "--" + flag.lstrip("-").replace("_", "-"):
                why += "; SGLang's flags are spelled with dashes"
            elif flag in F.FOREIGN:
                why += f"; {target} is SGLang's name for that setting"
            elif target in cat.other_spellings(flag):
                why += f"; {target} is the spelling every release accepts"
            else:
                why += f"; it is spelled {target} in this version"
            if info and info.switch:
                value = None
            elif value is None and info:
                value = _pick_choice(info, ctx.facts)
                if value.startswith("<") and info.choices:
                    why += f" (choose one of: {', '.join(info.choices)})"
            ctx.add_fix(flag=target, value=value, why=why, option=1)
            advice.append(f"use {target}" + (f" {value}" if value else "") + f" instead of {flag}")
        else:
            advice.append(f"{flag} has no equivalent in SGLang {cat.label}: drop it (or install a version that has it)")
    ctx.values["bad_flags"] = ", ".join(bad) or args
    ctx.values["version_label"] = cat.label if cat.requested != "unknown" else f"{cat.label} (the newest known; the log does not show the version)"
    ctx.values["flag_advice"] = ("Fix: " + "; ".join(advice) + ".") if advice else ""
    return None


def _pick_choice(info, facts) -> str:
    """A value for a flag that needs one: the choice named like the model, else a placeholder to fill in."""
    model = (facts.model_path or getattr(facts.model, "name", "") or "").lower().replace("_", "-")
    for choice in sorted(info.choices or [], key=len, reverse=True):
        if choice.lower().replace("_", "-") in model:
            return choice
    return f"<{(info.dest or info.name.lstrip('-')).replace('_', '-')}>"


def _replacement(cat, flag: str) -> str | None:
    """What to write instead of a flag the user's parser rejected."""
    if flag in F.FOREIGN:
        return cat.translate_name(F.FOREIGN[flag]) if F.FOREIGN[flag] else None
    dashed = "--" + flag.lstrip("-").replace("_", "-")
    renamed = cat.translate_name(dashed)
    if renamed == flag:  # the catalog knows it, the user's (older) release did not: another spelling
        others = sorted(cat.other_spellings(flag), key=len)
        return others[0] if others else None
    if renamed:
        return renamed
    guess = cat.did_you_mean(flag)
    return guess[0] if guess else None


@remedy
def ambiguous_flag(ctx: Context):
    cat = ctx.facts.catalog
    flag = ctx.values.get("flag", "")
    target = cat.translate_name(flag)
    value = None
    if ctx.facts.launch and flag in ctx.facts.launch.argv:
        i = ctx.facts.launch.argv.index(flag)
        if i + 1 < len(ctx.facts.launch.argv) and not ctx.facts.launch.argv[i + 1].startswith("--"):
            value = ctx.facts.launch.argv[i + 1]
    if target:
        ctx.add_fix(target, value, f"{flag} was renamed {target}; the old spelling is now a prefix of several flags", option=1)
        ctx.values["flag_advice"] = f"Use {target}" + (f" {value}" if value else " <value>") + "."
    else:
        choices = [c.strip() for c in ctx.values.get("matches", "").split(",") if c.strip()]
        ctx.values["flag_advice"] = f"Write the full flag: one of {', '.join(choices)}."
    return None


@remedy
def invalid_value(ctx: Context):
    cat = ctx.facts.catalog
    flag = ctx.values.get("flag", "")
    value = ctx.values.get("value", "").strip("'\"")
    choices = [c.strip().strip("'\"") for c in (ctx.values.get("choices") or "").split(",") if c.strip()]
    info = cat.flag(flag)
    if not choices and info and info.choices:
        choices = list(info.choices)
    ctx.values["choices_text"] = f" (accepted: {', '.join(choices)})" if choices else ""
    from .launch import _closest_choice
    pick = _closest_choice(value, choices) if choices else None
    kind = ctx.values.get("type")
    if pick:
        ctx.add_fix(flag, pick, f"'{value}' is not one of {flag}'s choices in this version; '{pick}' is the closest", option=1)
        ctx.values["value_advice"] = f"Use {flag} {pick}."
    elif kind in ("int", "float"):
        ctx.values["value_advice"] = f"{flag} takes a plain {kind} number."
        cleaned = re.sub(r"[^\d.]", "", value)
        if cleaned:
            ctx.add_fix(flag, cleaned, f"{flag} takes a plain {kind}", option=1)
    else:
        ctx.values["value_advice"] = "Pick one of the accepted values."
    return None


@remedy
def device_ordinal(ctx: Context):
    msg = " ".join(e.data.get("message", "") for e in ctx.facts.events if "invalid device ordinal" in (e.data.get("message") or "") + e.text)
    gpu_id = re.search(r"gpu_id=(\d+)", msg)
    cvd = re.search(r"CUDA_VISIBLE_DEVICES'?\)?='([\d,\s]+)'", msg) or None
    visible = [x.strip() for x in (cvd[1] if cvd else ctx.facts.env.get("CUDA_VISIBLE_DEVICES", "")).split(",") if x.strip()]
    tp = re.search(r"tp_size=(\d+)", msg)
    rank = re.search(r"tp_rank=(\d+)", msg)
    if gpu_id:
        ctx.values["gpu_id_text"] = f" for device {gpu_id[1]}"
    if gpu_id and visible:
        gid = int(gpu_id[1])
        ctx.values["gpu_id_text"] += f" while only {len(visible)} GPU(s) are visible (CUDA_VISIBLE_DEVICES={','.join(visible)})"
        if gpu_id[1] in visible:
            base = visible.index(gpu_id[1]) - (int(rank[1]) if rank else 0)
            ctx.add_fix("--base-gpu-id", max(0, base), f"physical GPU {gid} is index {visible.index(gpu_id[1])} among the visible GPUs; "
                        "SGLang's GPU ids are relative to CUDA_VISIBLE_DEVICES", option=1)
            ctx.values["device_advice"] = (f"GPU {gid} is visible as index {visible.index(gpu_id[1])}: pass --base-gpu-id {max(0, base)} "
                                           "(indices relative to CUDA_VISIBLE_DEVICES), or stop restricting CUDA_VISIBLE_DEVICES.")
        else:
            ctx.values["device_advice"] = f"GPU {gid} is not among the visible GPUs; use an index below {len(visible)}."
            ctx.add_fix("--base-gpu-id", 0, "the first visible GPU", option=1)
        if tp and visible and int(tp[1]) > len(visible):
            ctx.finding.fix_other.append(f"--tp-size {tp[1]} needs {tp[1]} visible GPUs; only {len(visible)} are visible.")
    else:
        ctx.values["device_advice"] = ("Check CUDA_VISIBLE_DEVICES, --base-gpu-id and --tp-size/--dp-size: device indices are counted "
                                       "within the visible GPUs.")
    return None


@remedy
def quantization(ctx: Context):
    text = " ".join(h.text for h in ctx.hits)
    if "ModelOptFp4Config" in text or "FP4" in text:
        ctx.add_fix("--quantization", "modelopt_fp4", "the checkpoint is a ModelOpt FP4 export; name the FP4 loader explicitly", option=1)
        ctx.add_fix("--attention-backend", "trtllm_mha", "the TensorRT-LLM attention kernels that NVFP4 serving on Blackwell uses", option=1)
        ctx.values["quant_sentence"] = ("The checkpoint is a ModelOpt FP4 (NVFP4) export, but SGLang resolved it to the FP8 loader "
                                        "(ModelOptFp8Config), which refuses it. Select the FP4 method explicitly.")
        ctx.finding.fix_other.append("NVFP4 kernels need a Blackwell GPU (sm_100/sm_120); on older GPUs use an FP8 or BF16 checkpoint.")
    else:
        m = re.search(r"quantization method (\S+)", text)
        ctx.values["quant_sentence"] = ("The quantization method" + (f" {m[1]}" if m else "") +
                                        " does not match the checkpoint or this SGLang version. Use the method the checkpoint's "
                                        "quantization_config names (or drop --quantization to let SGLang read it).")
        if ctx.facts.flag("--quantization"):
            ctx.add_fix("--quantization", action="remove", why="let SGLang read the method from the checkpoint", option=1)
    return None


BACKEND_PREFERENCE = ("triton", "fa3", "flashinfer", "trtllm_mha", "fa4", "torch_native", "flex_attention")


@remedy
def backend(ctx: Context):
    text = " ".join(h.text for h in ctx.hits)
    allowed = ctx.values.get("allowed")
    flag = "--attention-backend"
    m = re.search(r"Got (\w+)=(\w+)", text)
    if m and m[1].endswith("backend"):
        flag = "--" + m[1].replace("_", "-")
    ctx.values["flag_name"] = flag
    reason = text.split("Error:", 1)[-1].strip() if "Error:" in text else text.strip()
    ctx.values["reason"] = reason.rstrip(".")
    if allowed:
        names = [a.strip().strip("'\"") for a in allowed.split(",") if a.strip()]
        names.sort(key=lambda n: BACKEND_PREFERENCE.index(n) if n in BACKEND_PREFERENCE else 99)
        for i, name in enumerate(names, 1):
            ctx.add_fix(flag, name, f"one of the backends SGLang allows here ({', '.join(names)})", option=i)
            ctx.finding.options.append({"option": i, "title": f"{flag} {name}", "cost": i})
        ctx.values["backend_advice"] = f"Use {flag} " + " or ".join(names) + "."
    elif "only supports topk = 1" in text:
        ctx.add_fix("--speculative-eagle-topk", 1, "this backend drafts a single chain", option=1)
        ctx.values["backend_advice"] = "Use --speculative-eagle-topk 1 with this backend, or another attention backend."
    else:
        ctx.values["backend_advice"] = "Choose a backend the message allows, or drop the feature it conflicts with."
    return None


# -- Mamba strategy and speculative decoding -------------------------------------------

def _strategy_flag(facts) -> str:
    return "--mamba-scheduler-strategy"  # translated to --mamba-radix-cache-strategy where that is the name


@remedy
def mamba_spec_radix(ctx: Context):
    facts = ctx.facts
    cat = facts.catalog
    arch = ctx.values.get("arch") or facts.architecture
    ctx.values["arch_text"] = f"for {arch}" if arch else ""
    ctx.values["version_label"] = facts.version.describe() if facts.version.describe() != "unknown" else "0.5.10–0.5.13"
    ctx.add_fix(_strategy_flag(facts), "extra_buffer", "keep radix cache and speculative decoding: per-request ping-pong state copies", option=1)
    if cat.has_env("SGLANG_ENABLE_SPEC_V2") and cat.env_default("SGLANG_ENABLE_SPEC_V2") is not True:
        ctx.add_fix(env="SGLANG_ENABLE_SPEC_V2", value="1", why="extra_buffer with speculative decoding needs the spec-v2 (overlap) worker", option=1)
    ctx.add_fix("--disable-radix-cache", None, "no prefix caching, no Mamba snapshots: no_buffer then works with speculative decoding", option=2)
    ctx.add_fix("--speculative-algorithm", action="remove", why="keep the radix cache and no_buffer; lose the draft speed-up", option=3)
    ctx.finding.options.extend([
        {"option": 1, "title": "extra_buffer strategy (costs Mamba memory per running request)", "cost": 1},
        {"option": 2, "title": "no radix cache (loses prefix caching)", "cost": 2},
        {"option": 3, "title": "no speculative decoding", "cost": 3},
    ])
    cost = ("Cost of extra_buffer: a running request holds 5 Mamba state slots with the overlap scheduler (4 without) instead of 3, "
            "so the same state pool serves 40% fewer running requests.")
    dep, b = _budget(ctx)
    if b is not None and b.mamba_bytes_per_slot:
        per = b.mamba_bytes_per_slot / 2**20
        cost = (f"Cost of extra_buffer: each state slot is {per:.1f} MiB per GPU and a running request holds "
                f"{b.mamba_ratios.get('extra_buffer', 5)} slots instead of {b.mamba_ratios.get('no_buffer', 3)} "
                f"({per * b.mamba_ratios.get('extra_buffer', 5):.0f} vs {per * b.mamba_ratios.get('no_buffer', 3):.0f} MiB per request).")
        if b.gpu_total_gib:
            ctx.finding.memory = _memory_json(b)
    ctx.values["strategy_cost"] = cost
    ctx.finding.fix_other.append("On a PD-disaggregation decode node this check is spurious (fixed upstream): use --disable-radix-cache there; "
                                 "following the message's advice there makes each request take extra Mamba slots and caps concurrency.")
    return None


@remedy
def mamba_strategy_validation(ctx: Context):
    text = " ".join(h.text for h in ctx.hits)
    f = _strategy_flag(ctx.facts)
    if "no_buffer do not support overlap" in text:
        ctx.values["check_text"] = "no_buffer cannot run with the overlap scheduler"
        ctx.add_fix("--disable-overlap-schedule", None, "no_buffer keeps one state per request and cannot overlap", option=1)
        ctx.add_fix(f, "extra_buffer", "or keep overlap scheduling with per-request state buffers (more Mamba memory)", option=2)
    elif "page_size=1" in text or "page_size = 1" in text:
        ctx.values["check_text"] = "no_buffer needs --page-size 1"
        ctx.add_fix("--page-size", 1, "no_buffer tracks states per token position", option=1)
        ctx.add_fix(f, "extra_buffer", "extra_buffer works with larger pages", option=2)
    elif "trtllm_mha" in text:
        ctx.values["check_text"] = "no_buffer cannot use the trtllm_mha attention backend"
        ctx.add_fix("--attention-backend", "triton", "a backend that supports page size 1", option=1)
    elif "not compatible with --disable-radix-cache" in text:
        ctx.values["check_text"] = "extra_buffer only makes sense with the radix cache"
        ctx.add_fix(f, "no_buffer", "without radix cache no_buffer already supports overlap scheduling", option=1)
    elif "extra_buffer_lazy" in text or "Lazy extra buffer" in text:
        ctx.values["check_text"] = "extra_buffer_lazy does not support this configuration"
        ctx.add_fix(f, "extra_buffer", "the non-lazy strategy supports speculative decoding and non-overlap scheduling", option=1)
    elif "mamba_track_interval" in text:
        other = ctx.values.get("other")
        ctx.values["check_text"] = "--mamba-track-interval " + ("is below the speculative draft tokens" if "draft" in text else "is not a multiple of the page size")
        ctx.add_fix("--mamba-track-interval", 256 if not other else (max(256, int(other)) if "draft" in text else int(other) * max(1, 256 // int(other))),
                    "a tracking interval at least the draft tokens and divisible by the page size", option=1)
    elif "not supported for" in text or "only supported on" in text or "platform support" in text:
        ctx.values["check_text"] = "extra_buffer is not supported for this model or platform"
        ctx.add_fix(f, "no_buffer", "the strategy this model/platform supports", option=1)
        ctx.add_fix("--disable-overlap-schedule", None, "no_buffer needs it", option=1)
    elif "FlashInfer GDN decode" in text:
        ctx.values["check_text"] = "the FlashInfer GDN decode kernel needs extra_buffer"
        ctx.add_fix(f, "extra_buffer", "required by --linear-attn-decode-backend flashinfer", option=1)
        ctx.add_fix("--linear-attn-decode-backend", "triton", "or keep no_buffer with the triton kernel", option=2)
    else:
        ctx.values["check_text"] = text.strip()[:160]
    ctx.values["strategy_advice"] = "Strategy memory: no_buffer holds 3 Mamba slots per running request, extra_buffer 4-5."
    return None


@remedy
def mamba_tracking_crash(ctx: Context):
    ctx.values.setdefault("site", "the Mamba tracking code")
    ctx.add_fix("--speculative-algorithm", action="remove", why="avoid the spec-v2 verify path that crashes", option=1)
    ctx.add_fix(_strategy_flag(ctx.facts), "no_buffer", "no tracking slots; needs the radix cache off with speculative decoding", option=2)
    ctx.add_fix("--disable-radix-cache", None, "required for no_buffer with speculative decoding", option=2)
    ctx.finding.options.extend([{"option": 1, "title": "run without speculative decoding", "cost": 2},
                                {"option": 2, "title": "no_buffer without radix cache", "cost": 2}])
    return None


@remedy
def spec_topk(ctx: Context):
    facts = ctx.facts
    topk = facts.values.get("spec.topk")
    steps = _int(facts.flag("--speculative-num-steps"))
    text = " ".join(h.text for h in ctx.hits)
    path = "the spec-v2 (overlap) worker"
    if "trtllm_mha" in text:
        path = "the trtllm_mha attention backend"
    elif "page_size > 1" in text:
        path = "paged attention with --page-size > 1"
    sentence = f"--speculative-eagle-topk {topk or '> 1'} asks for tree drafting, which {path} does not support"
    m = re.search(r"Expected size (\d+) but got size (\d+)", text)
    if m:
        sentence += f"; the draft model then fails on mismatched tensor sizes ({m[1]} vs {m[2]})"
    ctx.values["spec_sentence"] = sentence + "."
    ctx.add_fix("--speculative-eagle-topk", 1, "chain drafting, supported on every path", option=1)
    if steps:
        ctx.add_fix("--speculative-num-draft-tokens", steps + 1, "with topk 1 SGLang uses steps + 1 draft tokens", option=1)
    if facts.env.get("SGLANG_ENABLE_SPEC_V2") and facts.catalog.has_env("SGLANG_ENABLE_SPEC_V2"):
        ctx.add_fix(env="SGLANG_ENABLE_SPEC_V2", action="remove", why="the v1 worker supports topk > 1 (without overlap scheduling)", option=2)
        ctx.finding.options.append({"option": 2, "title": "keep tree drafting on the v1 worker", "cost": 2})
    ctx.finding.options.insert(0, {"option": 1, "title": "chain drafting (topk 1)", "cost": 1})
    return None


# -- context length ---------------------------------------------------------------------

@remedy
def context_length(ctx: Context):
    facts = ctx.facts
    v = ctx.values
    if v.get("c") and v.get("d"):
        c, d = int(v["c"]), int(v["d"])
        v["context_sentence"] = (f"--context-length {c:,} is larger than the model's derived maximum ({d:,}); SGLang refuses it "
                                 "unless told the longer context is intended (e.g. with RoPE scaling).")
        ctx.add_fix("--context-length", d, "the model's own maximum", option=1)
        ctx.add_fix(env="SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", value="1", why="only if the model really supports the longer context", option=2)
        return None
    n = int(v.get("n") or v.get("n2") or 0)
    mx = int(v.get("max") or v.get("max2") or v.get("max3") or 0)
    ctl = _int(facts.flag("--context-length")) or _int(facts.readings.get("context_len"))
    pool = _int(facts.readings.get("max_total_num_tokens"))
    limited_by_pool = bool(v.get("max")) and (ctl is None or mx < ctl - 10)
    if limited_by_pool:
        v["context_sentence"] = (f"A request of {n:,} tokens exceeds the {mx:,} tokens one request can use. "
                                 + (f"--context-length is {ctl:,}, but the limit" if ctl else "The limit")
                                 + " is the KV cache pool: one sequence's KV must fit in it"
                                 + (f" ({pool:,} tokens)" if pool else "") + ".")
        kv = facts.flag("--kv-cache-dtype")
        if kv in (None, "auto", "bf16", "bfloat16"):
            ctx.add_fix("--kv-cache-dtype", "fp8_e5m2", f"FP8 KV halves bytes per token: about {2 * mx:,} tokens fit", option=1)
        ctx.add_fix("--context-length", mx, "advertise only what the pool can hold, so clients get a clear error", option=2)
        ctx.add_fix("--allow-auto-truncate", None, "truncate over-long prompts instead of failing them", option=3)
        ctx.finding.options.extend([{"option": 1, "title": "fp8 KV cache (about twice the tokens)", "cost": 2},
                                    {"option": 2, "title": "match --context-length to the pool", "cost": 1},
                                    {"option": 3, "title": "truncate long prompts", "cost": 3}])
        ctx.finding.fix_other.append("More GPUs (higher --tp-size) or GPUs with more memory give the pool more tokens; "
                                     "for MLA models (DeepSeek) every TP rank holds the full KV, so DP attention does not help one long request.")
    else:
        v["context_sentence"] = (f"A request of {n:,} tokens exceeds the model's context length of {mx:,} tokens.")
        ctx.add_fix("--allow-auto-truncate", None, "truncate over-long prompts instead of failing them", option=1)
        longer = 1 << max(n - 1, 1).bit_length()
        ctx.add_fix("--context-length", longer, f"only if the model supports {longer:,} tokens (e.g. with RoPE/YaRN scaling in its "
                    "config or --json-model-override-args) and the KV pool holds it", option=2)
        ctx.finding.options.extend([{"option": 1, "title": "truncate long prompts", "cost": 1},
                                    {"option": 2, "title": "a longer context, where the model supports it", "cost": 2}])
        ctx.finding.fix_other.append("Shorten the prompt or lower max_tokens in the client; a model with a longer context window is the other fix.")
    return None


# -- launch-command lint ----------------------------------------------------------------

@remedy
def launch_lint_flags(ctx: Context):
    problems = ctx.facts.values.get("launch.unknown") or []
    sentences = []
    given = ctx.facts.launch.flags if ctx.facts.launch else {}
    for p in problems:
        sentences.append(p.message)
        if p.suggestion and p.suggestion.startswith("--") and " " not in p.suggestion and p.suggestion not in given:
            ctx.add_fix(p.suggestion, p.value, p.message, option=1)
    if ctx.facts.launch_event is not None:
        ctx.evidence(ctx.facts.launch_event, role="trigger")
    ctx.values["lint_sentence"] = "; ".join(sentences) + "."
    return None


@remedy
def launch_lint_combos(ctx: Context):
    conflicts = ctx.facts.values.get("launch.conflicts") or []
    ctx.values["lint_sentence"] = " ".join(c["message"] for c in conflicts)
    for i, c in enumerate(conflicts, 1):
        for fx in c.get("fix", []):
            ctx.add_fix(fx.get("flag"), fx.get("value"), fx.get("why", ""), env=fx.get("env"), action=fx.get("action", "set"), option=i)
    if ctx.facts.launch_event is not None:
        ctx.evidence(ctx.facts.launch_event, role="trigger")
    return None


# -- environment ------------------------------------------------------------------------

@remedy
def empty_log(ctx: Context):
    state = ctx.facts.state
    checks = [
        "Run the same command in the foreground (no nohup, no &) to see what it prints before it dies.",
        "Capture stderr: SGLang logs to stderr, so use `cmd > server.log 2>&1` (or `2>&1 | tee server.log`), not just `> server.log`.",
        "Set PYTHONUNBUFFERED=1 so nothing is lost in a buffer if the process is killed.",
        "Look for the kernel's OOM killer: `dmesg -T | grep -i -E 'killed process|out of memory'` (host RAM, not GPU memory).",
        "Over ssh, nohup'ed jobs can still die with the session: start them under tmux/screen or `setsid nohup cmd > log 2>&1 < /dev/null &`.",
        "Check that --log-level is not above info and that SGLANG_LOGGING_CONFIG_PATH does not send logs elsewhere.",
    ]
    if state == "empty":
        ctx.values["empty_sentence"] = "The input is empty: the server wrote nothing that reached this file."
    elif state == "nohup_only":
        ctx.values["empty_sentence"] = ("The file holds only nohup's own message: the server itself never wrote to it "
                                        "(output went elsewhere, or it died before its first line — e.g. killed with the ssh session).")
    else:
        ctx.values["empty_sentence"] = (f"The input ({ctx.facts.content_lines} line(s)) holds no line SGLang writes and no error diag "
                                        "recognises: there is too little to judge.")
        checks.insert(0, "Paste the server's own output (from the launch command to the error), not only the client's.")
    ctx.finding.fix_other.extend(checks)
    for e in ctx.facts.of_kind("nohup")[:2]:
        ctx.evidence(e, role="trigger")
    if not ctx.finding.evidence:  # quote what there is, or say that there is nothing
        lines = sorted(ctx.facts.context.items())[:3]
        for (inp, n), text in lines:
            if text.strip():
                ctx.evidence(n, text, role="trigger", input_index=inp)
        if not ctx.finding.evidence:
            ctx.evidence(0, "(the input is empty: 0 lines of text)", role="trigger")
    return None


@remedy
def truncated_startup(ctx: Context):
    ms = ctx.facts.milestones
    last = ms[-1] if ms else None
    names = {"load_begin": "Load weight begin", "load_end": "Load weight end", "kv_alloc": "KV Cache is allocated",
             "mamba_alloc": "Mamba Cache is allocated", "pool_end": "Memory pool end", "graph_begin": "Capture cuda graph begin",
             "graph_end": "Capture cuda graph end", "dist_begin": "Init torch distributed begin", "dist_end": "Init torch distributed ends"}
    if last:
        ctx.values["last_step"] = names.get(last.data.get("phase"), last.data.get("phase"))
        ctx.values["last_line"] = last.line
        ctx.evidence(last, role="trigger")
    nxt = P.from_milestones(ms, 10**12, None, bool(ctx.facts.flag("--speculative-algorithm")), None)[0]
    hint = {"weights": " Weight loading reads the checkpoint through host RAM: a SIGKILL from the OOM killer is likely if host memory is small.",
            "cuda_graph": " Graph capture was next or running: a native crash or a kill during capture leaves no traceback."}.get(nxt or "", "")
    ctx.values["stop_advice"] = ("Either the process was killed from outside (no traceback is printed then) or the paste/log was cut." + hint)
    ctx.finding.fix_other.extend([
        "Check whether the process still runs (ps / nvidia-smi) and how it ended: `dmesg -T | grep -i -E 'killed process|oom'`, "
        "the container's exit reason (docker inspect / kubectl describe pod: OOMKilled), the job scheduler's log.",
        "If the log was redirected, make sure stderr is captured (`2>&1`) and set PYTHONUNBUFFERED=1.",
        "Paste the rest of the log if it continues.",
    ])
    return None


@remedy
def killed(ctx: Context):
    facts = ctx.facts
    kill_line = min(h.line for h in ctx.hits) if ctx.hits else None
    # a Python failure before the kill: the launcher killed its own children after it
    for e in facts.events:
        if kill_line is not None and e.line < kill_line and e.kind in ("exception", "argparse") and e.data.get("type") not in (None,) \
                and "scheduler died" not in (e.data.get("message") or "") and "scheduler is dead" not in (e.data.get("message") or ""):
            return False
    text = " ".join(h.text for h in ctx.hits)
    if "Bus error" in text or "SIGBUS" in text:
        ctx.values["killed_sentence"] = ("A process died with SIGBUS ('Bus error'), which on GPU servers usually means /dev/shm is too "
                                         "small for the shared-memory transfers between SGLang's processes.")
        ctx.finding.category = "env.host_memory"
        ctx.finding.fix_other.append("Give the container more shared memory: docker run --shm-size 32g (or --ipc=host); on Kubernetes mount an emptyDir with medium: Memory at /dev/shm.")
        return None
    step = facts.failure_phase.phase if facts.failure_phase else None
    where = f" {P.DESCRIBE[step]}" if step in P.DESCRIBE else ""
    ctx.values["killed_sentence"] = (f"The server was killed with SIGKILL{where} and printed no Python error: something outside it "
                                     "ended it, most often the kernel's OOM killer (host RAM) or a container memory limit.")
    ctx.finding.fix_other.extend([
        "Confirm the sender: `dmesg -T | grep -i -E 'killed process|out of memory'`; in containers `docker inspect <id> --format '{{.State.OOMKilled}}'` or `kubectl describe pod` (OOMKilled).",
        "Give the process more host RAM (container memory limit) or reduce what SGLang keeps in host memory: --cpu-offload-gb, "
        "the hierarchical cache host pool (--hicache-ratio / --hicache-size), many tokenizer workers.",
        "Weight loading streams the checkpoint through host memory: loading several large servers at once on one host can exhaust RAM.",
    ])
    return None


@remedy
def host_memory(ctx: Context):
    text = " ".join(h.text for h in ctx.hits)
    v = ctx.values
    if v.get("req") and v.get("avail"):
        req, avail = float(v["req"]), float(v["avail"])
        v["host_sentence"] = (f"The hierarchical cache asked for {req:.1f} GB of pinned host memory but only {avail:.1f} GB "
                              "(host available minus 10 GiB) is free.")
        ratio = _float(ctx.facts.flag("--hicache-ratio"))
        ctx.add_fix("--hicache-size", int(avail * 0.9), f"a host pool that fits in the {avail:.0f} GB available (GB = 1e9 bytes)", option=1)
        if ratio:
            ctx.add_fix("--hicache-ratio", f"{max(1.0, ratio * avail / req * 0.9):.1f}", "scale the host pool to the memory available", option=2)
    elif "host memory should be larger" in text:
        v["host_sentence"] = ("The hierarchical cache's host pool must hold more tokens than the GPU pool (up to 0.5.14): "
                              "raise --hicache-ratio above 1 or give --hicache-size more GB.")
        ctx.add_fix("--hicache-ratio", 2, "host pool twice the GPU pool", option=1)
    elif "shm" in text or "shared memory" in text:
        v["host_sentence"] = "Shared memory (/dev/shm) ran out; containers default to 64 MB."
        ctx.finding.fix_other.append("Run the container with --shm-size 32g or --ipc=host (Kubernetes: an emptyDir with medium: Memory at /dev/shm).")
    else:
        v["host_sentence"] = "The host ran out of memory (ENOMEM) for an allocation SGLang or PyTorch made in host RAM."
        ctx.finding.fix_other.append("Check free host memory and container limits; reduce --cpu-offload-gb or the hierarchical cache's host pool.")
    return None


def _float(v) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


@remedy
def port_in_use(ctx: Context):
    facts = ctx.facts
    text = " ".join(h.text for h in ctx.hits) + " " + " ".join(e.data.get("message", "") for e in facts.of_kind("exception"))
    port = _int(facts.flag("--port"))
    addr = ctx.values.get("addr")
    http = bool(addr) or "uvicorn" in text.lower() or "bind on address" in text
    if http:
        p = re.search(r":(\d+)", addr or "")
        busy = int(p[1]) if p else (port or 30000)
        ctx.values["port_sentence"] = (f"The HTTP port {busy} is already taken (an older server still running?). The model had loaded; "
                                       "only binding the API port failed.")
        ctx.add_fix("--port", busy + 1, "a free HTTP port", option=1)
        ctx.finding.fix_other.append(f"Find the owner: `ss -ltnp 'sport = :{busy}'` (or lsof -i :{busy}); stop the old server if it is one.")
    else:
        dp = _int(facts.flag("--dp-size"))
        what = "TCPStore (torch.distributed rendezvous)" if ("TCPStore" in text or "listen on any local network address" in text) else "an internal port"
        ctx.values["port_sentence"] = (f"A port for {what} was taken between SGLang picking it and binding it. This is not the HTTP port: "
                                       "changing --port does not help."
                                       + (f" With --dp-size {dp} many such ports are opened at once, which makes the race likelier." if dp and dp > 1 else ""))
        ctx.finding.fix_other.extend([
            "Keep SGLang's internal ports out of the kernel's ephemeral range: check `sysctl net.ipv4.ip_local_port_range`, and reserve "
            "the range SGLang uses with net.ipv4.ip_local_reserved_ports (or move the ephemeral range above it).",
            "If it persists with data parallelism, run independent single-GPU servers behind a router instead of one --dp-size N server.",
        ])
        if facts.catalog.has("--nccl-port"):
            ctx.add_fix("--nccl-port", 23456, "pin the NCCL/rendezvous port to one outside the ephemeral range (make sure it is free)", option=1)
    return None


@remedy
def nccl(ctx: Context):
    text = " ".join(h.text for h in ctx.hits) + " " + " ".join(e.data.get("message", "") for e in ctx.facts.of_kind("exception"))
    multi_node = bool(re.search(r"TP(?:1[6-9]|[2-9]\d)|\brank(?:1[6-9]|[2-9]\d)\b", " ".join(sorted(ctx.facts.events[i].rank or "" for i in range(len(ctx.facts.events)))))) \
        or bool(ctx.facts.flag("--nnodes")) and str(ctx.facts.flag("--nnodes")) not in ("1",)
    if "connectFullMesh" in text or "Gloo" in text or "gloo" in text:
        ctx.values["comm_what"] = "Gloo"
        ctx.values["nccl_sentence"] = ("The ranks could not connect their Gloo (CPU) process group"
                                       + (" across nodes" if multi_node else "") + ": the sockets went to an interface or address "
                                       "the other ranks cannot reach.")
        ctx.add_fix(external_env="GLOO_SOCKET_IFNAME", value="<interface carrying the --dist-init-addr IP, e.g. eth0 / ib0>",
                    why="make Gloo use the network the nodes share", option=1)
        ctx.add_fix(external_env="NCCL_SOCKET_IFNAME", value="<same interface>", why="and NCCL's bootstrap too", option=1)
        ctx.finding.fix_other.append("Check that each node's hostname does not resolve to 127.0.x.x (/etc/hosts) and that no firewall blocks "
                                     "the ports between nodes; --dist-init-addr must be an address every node can reach.")
    elif re.search(r"[Tt]imeout|timed out", text):
        ctx.values["comm_what"] = "collective timeout"
        ctx.values["nccl_sentence"] = ("A collective operation timed out: one rank stopped participating (crashed, hung or is much "
                                       "slower), and the others waited until the watchdog aborted.")
        ms = re.search(r"Timeout\(ms\)=(\d+)", text)
        seq = re.search(r"SeqNum=(\d+)", text)
        early = (seq is not None and int(seq[1]) <= 10) or not any(len(b) for b in ctx.facts.batches)
        if early:
            secs = int(ms[1]) // 1000 if ms else 600
            ctx.values["nccl_sentence"] += (f" It was one of the first collectives (start-up), after {secs} s: in multi-node start-ups this is "
                                            "usually a node still loading its weights (slow disk or network storage) while the others wait.")
            ctx.add_fix("--dist-timeout", max(1800, secs * 3), "give slow nodes time to finish loading before the first collective", option=2)
        ctx.finding.fix_other.append("Find the rank that failed first (its own error comes earlier in its log); a timeout on every rank "
                                     "means the network between them is down.")
        ctx.add_fix(external_env="NCCL_DEBUG", value="INFO", why="log which rank and transport fail", option=1)
    else:
        ctx.values["comm_what"] = "NCCL"
        ctx.values["nccl_sentence"] = ("NCCL could not set up or run its communicators"
                                       + (" (it failed in ncclCommInitRank, during start-up)" if "CommInitRank" in text else "")
                                       + ": a system call in its transport failed. Rerun with NCCL_DEBUG=INFO to see which one.")
        ctx.add_fix(external_env="NCCL_DEBUG", value="INFO", why="NCCL prints the failing call and transport", option=1)
        ctx.add_fix(external_env="NCCL_IB_DISABLE", value="1", why="on a single node with broken or absent RDMA devices, use sockets/NVLink", option=2)
        ctx.add_fix(external_env="NCCL_P2P_DISABLE", value="1", why="if GPU peer-to-peer over PCIe is the failing transport", option=3)
        ctx.finding.fix_other.append("In containers give NCCL enough shared memory (--shm-size 32g or --ipc=host); 'unhandled system error' "
                                     "is often /dev/shm or an RDMA device it cannot open.")
    return None


@remedy
def nccl_crash(ctx: Context):
    sig = " ".join(h.text for h in ctx.hits)
    ctx.values["signal_text"] = "a segmentation fault" if "Segmentation" in sig or "SIGSEGV" in sig else ("an abort" if "ABRT" in sig else "a fatal signal")
    ctx.values["p2p_advice"] = ("On PCIe systems without working peer-to-peer (common with consumer GeForce cards), disable NCCL's P2P "
                                "transport; in containers also check /dev/shm.")
    ctx.add_fix(external_env="NCCL_P2P_DISABLE", value="1", why="fall back from GPU peer-to-peer to copies through host memory", option=1)
    ctx.add_fix(external_env="NCCL_DEBUG", value="INFO", why="see the transport NCCL picks before it crashes", option=1)
    ctx.finding.fix_other.append("If it still crashes, also try NCCL_IB_DISABLE=1 (no RDMA) and NCCL_SHM_DISABLE=1, and check that the "
                                 "driver supports this GPU generation.")
    return None


@remedy
def cuda_arch(ctx: Context):
    text = " ".join(h.text for h in ctx.hits)
    flashinfer = "flashinfer" in text.lower() or any("flashinfer" in (e.text or "").lower() for e in ctx.facts.events)
    if "driver" in text.lower() and ("insufficient" in text or "too old" in text):
        ctx.values["arch_sentence"] = ("The NVIDIA driver is older than the CUDA runtime the installed PyTorch/kernels were built "
                                       "with. Upgrade the driver, or install builds for the CUDA version the driver supports.")
        ctx.finding.fix_other.append("Compare `nvidia-smi` (driver, max CUDA) with `python -c 'import torch; print(torch.version.cuda)'`.")
        return None
    sm = ctx.values.get("sm") or ctx.values.get("sm2") or ctx.values.get("sm3") or ctx.values.get("sm4")
    if "ptxas" in text or "not a recognized processor" in text:
        ctx.values["arch_sentence"] = (f"Triton compiles kernels at run time with the ptxas it ships, and that ptxas does not know "
                                       f"this GPU's architecture{f' (sm_{sm})' if sm else ''}: the installed Triton/PyTorch predates the GPU. "
                                       "The first kernel compiled (often during CUDA graph capture) fails.")
        ctx.add_fix(external_env="TRITON_PTXAS_PATH", value="/usr/local/cuda/bin/ptxas",
                    why="use the CUDA toolkit's newer ptxas (CUDA 12.8+ knows Blackwell) instead of Triton's bundled one", option=1)
        ctx.finding.fix_other.append("Or install a PyTorch/Triton build made for this GPU (for Blackwell: CUDA 12.8+ wheels, e.g. torch cu128).")
        return None
    ctx.values["arch_sentence"] = ("A compiled kernel has no code for this GPU's architecture"
                                   + (f" (sm_{sm})" if sm else "") + (": FlashInfer's kernels were not built for it" if flashinfer else "")
                                   + ". The GPU is fine; the installed build does not support it.")
    if flashinfer:
        ctx.add_fix("--attention-backend", "triton", "Triton kernels compile for the GPU at run time", option=1)
        ctx.add_fix("--sampling-backend", "pytorch", "avoid FlashInfer's sampling kernels too", option=1)
        ctx.finding.options.append({"option": 1, "title": "use the portable Triton/PyTorch backends", "cost": 2})
    ctx.finding.fix_other.append("Or install builds that include this architecture (FlashInfer needs compute capability 8.0+ for most kernels; "
                                 "Blackwell needs CUDA 12.8+ builds).")
    return None


@remedy
def import_error(ctx: Context):
    v = ctx.values
    if v.get("symbol"):
        lib = re.search(r"(/\S+?\.so)\S*: undefined symbol", " ".join(h.text for h in ctx.hits))
        pkg = lib[1].split("/")[-2] if lib else "a compiled extension"
        v["what"] = f"{pkg} (undefined symbol)"
        v["import_sentence"] = (f"{pkg} was compiled against a different PyTorch than the one installed: the C++ symbol "
                                f"{v['symbol'][:60]} does not exist in this torch. Install the {pkg} build made for this torch "
                                "(or the torch version it expects); no server flag can fix this.")
        ctx.finding.fix_other.append("Reinstall matching versions together (e.g. `pip install 'sglang[all]==<version>'` in a fresh venv, "
                                     "which pins torch and sgl-kernel), or use the official lmsysorg/sglang container.")
    elif v.get("lib"):
        lib = v["lib"]
        v["what"] = lib
        cuda = bool(re.match(r"lib(?:nvrtc|cudart|cublas|cudnn|cufft|curand|cusparse|nccl|nvJitLink|cuda)\b", lib))
        v["import_sentence"] = (f"The shared library {lib} is not on the loader path"
                                + (": it belongs to the CUDA toolkit/runtime, which is not installed or not where the loader looks." if cuda else "."))
        if cuda:
            ctx.add_fix(external_env="LD_LIBRARY_PATH", value="$CUDA_HOME/lib64:$LD_LIBRARY_PATH",
                        why="point the loader at the CUDA libraries (or at site-packages/nvidia/*/lib from the pip wheels)", option=1)
            ctx.add_fix(external_env="CUDA_HOME", value="/usr/local/cuda", why="where the CUDA toolkit is installed", option=1)
        ctx.finding.fix_other.append("Install the missing library (for CUDA: a toolkit of the major version the wheels were built for).")
    elif v.get("module"):
        v["what"] = v["module"]
        v["import_sentence"] = (f"SGLang skipped {v['module']} because importing it failed; the architecture it provides will then be "
                                "reported as 'not supported'. The import error on that line is the cause.")
    elif v.get("mod"):
        mod = v["mod"].strip("'\"")
        v["what"] = mod
        v["import_sentence"] = f"The Python package providing '{mod}' is not installed in the environment the server runs in."
        ctx.finding.fix_other.append(f"Install it into the same environment (`python -m pip install {mod.split('.')[0]}` — for flashinfer, "
                                     "the wheel matching your torch and CUDA versions), or use the official container.")
    elif v.get("glibc"):
        v["what"] = v["glibc"]
        v["import_sentence"] = f"A binary package needs {v['glibc']}, newer than this system's C/C++ runtime."
        ctx.finding.fix_other.append("Use a newer OS image / container, or wheels built for this glibc (manylinux tag).")
    else:
        detail = v.get("detail", "")
        v["what"] = detail[:60]
        v["import_sentence"] = f"Import failed: {detail[:200]}"
        ctx.finding.fix_other.append("Reinstall SGLang and its kernels as one consistent set (fresh venv or the official container).")
    return None


@remedy
def build_failure(ctx: Context):
    text = " ".join(h.text for h in ctx.hits)
    m = re.search(r"Error building extension '([^']+)'", text)
    ctx.values["build_what"] = m[1] if m else text.strip()[:80]
    ctx.finding.fix_other.extend([
        "Make sure nvcc matches the CUDA version of torch (`nvcc --version` vs `python -c 'import torch; print(torch.version.cuda)'`) "
        "and that CUDA_HOME points at it.",
        "Clear the JIT cache (~/.cache/flashinfer, ~/.triton) and check it is writable with free space; or use prebuilt wheels / the official container.",
    ])
    return None


@remedy
def model_load(ctx: Context):
    v = ctx.values
    text = " ".join(h.text for h in ctx.hits)
    if v.get("archs"):
        archs = v["archs"]
        if any("Ignore import error when loading" in (e.text or "") for e in ctx.facts.events) or \
                any("Ignore import error" in t for t in ctx.facts.context.values()):
            v["model_sentence"] = (f"{archs} is reported unsupported because its SGLang module failed to import (see the "
                                   "'Ignore import error' line above); fix that import.")
        else:
            v["model_sentence"] = (f"The installed SGLang has no implementation of {archs}. Models are added release by release: "
                                   "upgrade SGLang to a version that lists this architecture.")
            ctx.finding.fix_other.append("Upgrade SGLang (`pip install -U 'sglang[all]'` or a newer container) and check its supported-models list; "
                                         "if the architecture should be there, look for 'Ignore import error when loading sglang.srt.models…' in the full log.")
    elif re.search(r"401|403|[Gg]ated|restricted", text):
        v["model_sentence"] = "The Hugging Face hub refused the download: the repo is gated or private and no valid token was sent."
        ctx.add_fix(external_env="HF_TOKEN", value="<a token with access to the repo>", why="accept the model's licence on its page, then pass a token", option=1)
    elif "not a valid model identifier" in text or "Repository Not Found" in text:
        v["model_sentence"] = "--model-path is neither an existing local folder nor a repo id on the hub (check the spelling and the path inside the container)."
    elif "safetensor" in text.lower() or "HeaderTooLarge" in text or "deserializing" in text:
        v["model_sentence"] = "A weight file is corrupt or incomplete (an interrupted download, or a Git LFS pointer instead of the file)."
        ctx.finding.fix_other.append("Re-download the checkpoint (huggingface-cli download --force-download) and compare file sizes with the hub.")
    elif "LocalEntryNotFound" in text or "disk cache" in text:
        v["model_sentence"] = "The model is not in the local cache and the hub cannot be reached (offline mode or no network)."
        ctx.finding.fix_other.append("Download it first on a machine with network access, or unset HF_HUB_OFFLINE.")
    else:
        v["model_sentence"] = "A file the model needs could not be found or read: " + text.strip()[:160]
    return None


@remedy
def http_proxy(ctx: Context):
    v = ctx.values
    status = v.get("status") or v.get("status2")
    v["status_text"] = f"HTTP {status}" if status else "a proxy error"
    host = str(ctx.facts.flag("--host") or "")
    url = next((e.data.get("url") for e in ctx.facts.milestones if e.data.get("phase") == "http_up" and e.data.get("url")), "")
    if not host and url:
        m = re.match(r"https?://([^:/]+)", url)
        host = m[1] if m else ""
    if host in ("", "0.0.0.0", "::"):
        ctx.add_fix("--host", "127.0.0.1", "the warm-up then targets 127.0.0.1, which no_proxy usually covers (the server is then local-only)", option=2)
    ctx.finding.fix_other.insert(0, "Exclude local addresses from the proxy for the server process: "
                                    "export no_proxy=localhost,127.0.0.1,0.0.0.0 NO_PROXY=localhost,127.0.0.1,0.0.0.0 "
                                    "(add the host's own name/IP), or unset http_proxy/https_proxy for it.")
    ctx.finding.options.extend([{"option": 2, "title": "bind to 127.0.0.1", "cost": 2}])
    ctx.add_fix(external_env="no_proxy", value="localhost,127.0.0.1,0.0.0.0", why="keep the server's requests to itself away from the proxy", option=1)
    ctx.finding.options.insert(0, {"option": 1, "title": "bypass the proxy for local addresses", "cost": 1})
    return None


@remedy
def watchdog(ctx: Context):
    facts = ctx.facts
    timeout = ctx.values.get("timeout")
    dumps = [e for e in facts.of_kind("watchdog") if e.data.get("frames")]
    missing = any(e.data.get("pyspy") == "failed" for e in facts.of_kind("watchdog"))
    sentence = f"A scheduler spent more than {float(timeout):.0f} s in one step and the watchdog ended the server." if timeout else \
        "A scheduler stopped making progress and the watchdog ended the server."
    if dumps:
        frames = dumps[0].data["frames"]
        top = frames[0] if frames else None
        sentence += f" The py-spy dump shows it stuck in {top.func} ({top.file}:{top.line})" if top else ""
        files = " ".join(f.file for f in frames)
        if "eagle" in files or "speculative" in files:
            sentence += ", inside speculative decoding's verify step."
            ctx.add_fix("--speculative-algorithm", action="remove", why="check whether the hang follows speculative decoding", option=1)
            ctx.finding.options.append({"option": 1, "title": "isolate: run without speculative decoding", "cost": 2})
            if facts.flag("--enable-hierarchical-cache", "--enable-hicache"):
                ctx.add_fix("--enable-hierarchical-cache", action="remove", why="or without the hierarchical cache", option=2)
        else:
            sentence += "."
        for e in dumps[:1]:
            ctx.evidence(e, role="trigger")
    elif missing:
        sentence += (" SGLang tried to dump the stuck scheduler with py-spy, but py-spy is not installed, so the hang's location is lost.")
    jit = [t for (_, n), t in facts.context.items() if "JIT" in t or "jit" in t]
    if jit:
        sentence += " It follows a just-in-time kernel compilation, which can take minutes on the first request."
        ctx.add_fix("--watchdog-timeout", int(float(timeout or 300) * 2), "only if the first forward legitimately waits for a JIT compile", option=2)
        ctx.finding.fix_other.append("Warm the JIT cache before serving (send one request after start-up, or keep ~/.cache/flashinfer between runs).")
    ctx.values["watchdog_sentence"] = sentence
    if missing:
        ctx.finding.fix_other.append("Install py-spy in the serving environment (pip install py-spy) so the next timeout prints the stuck stack.")
    ctx.finding.fix_other.append("Look at what ran just before the timeout on the rank that timed out; a rank waiting in a collective "
                                 "usually waits for another rank that failed or hung first.")
    return None


@remedy
def cut_forward(ctx: Context):
    ex = next((e for e in ctx.facts.of_kind("exception") if e.data.get("partial_tail")), None)
    if ex:
        frames = ex.data.get("frames") or []
        fwd = next((f for f in reversed(frames) if re.search(r"forward_extend|forward_decode|forward", f.func)), None)
        ctx.values["where"] = f"{fwd.func} in {fwd.file.split('/')[-1]}" if fwd else "the model's forward"
        ctx.evidence(ex, role="trigger")
        if ex.data.get("header"):
            ctx.values["where"] += f", reported as '{ex.data['header']}'"
    phase = ctx.facts.values.get("cut_forward")
    ctx.finding.confidence_notes.append("the exception line is missing: the category is inferred from where the traceback stops")
    if phase == "decode":
        ctx.add_fix("--max-running-requests", _half(ctx.facts, "--max-running-requests", "max_running_requests", 64),
                    "if it was an OOM: fewer requests per decode step", option=1)
    else:
        chunk = _int(ctx.facts.flag("--chunked-prefill-size"))
        ctx.add_fix("--chunked-prefill-size", max(512, chunk // 2) if chunk and chunk > 0 else 4096,
                    "if it was an OOM: smaller prefill chunks need less activation memory", option=1)
        ctx.add_fix("--max-running-requests", _half(ctx.facts, "--max-running-requests", "max_running_requests", 128),
                    "and fewer requests admitted at once", option=1)
    ctx.add_fix("--mem-fraction-static", _lower_mfs(_current_mfs(ctx, None)), "if it was an OOM: more headroom outside the static pool", option=2)
    ctx.finding.options.extend([{"option": 1, "title": "smaller batches", "cost": 1}, {"option": 2, "title": "more headroom", "cost": 2}])
    return None


@remedy
def log_end_prefill(ctx: Context):
    facts = ctx.facts
    n = facts.values.get("end.new_tokens")
    line = facts.values.get("end.line")
    ctx.values["end_line"] = line
    ctx.values["new_tokens_text"] = f"{n:,} new tokens" if n else "unknown size"
    ctx.values["cut_text"] = ", cut mid-line" if facts.values.get("end.cut") else ""
    if line is not None:
        ctx.evidence(line, facts.context.get((0, line), ""), role="trigger")
    cap = _pow2_below(n // 2) if n else 4096
    ctx.add_fix("--max-prefill-tokens", cap, f"at most {cap:,} new tokens per prefill batch (the last one had {n:,})" if n else
                "cap the new tokens of one prefill batch", option=1)
    ctx.add_fix("--chunked-prefill-size", cap, "and split long prompts into chunks of that size", option=1)
    ctx.add_fix("--mem-fraction-static", _lower_mfs(_current_mfs(ctx, None) or _default_mfs(ctx)),
                "more headroom outside the static pool for activations", option=2)
    ctx.finding.options.extend([{"option": 1, "title": "smaller prefill batches", "cost": 1},
                                {"option": 2, "title": "more headroom", "cost": 2}])
    ctx.finding.fix_other.append("Paste the lines after this one if the log continues: the exception decides the fix.")
    return None


def _pow2_below(n: int) -> int:
    p = 1024
    while p * 2 <= n:
        p *= 2
    return p


def _default_mfs(ctx: Context) -> float | None:
    """SGLang's automatic --mem-fraction-static for this deployment, when the GPU is known."""
    try:
        from . import memory as M
        dep = _deployment(ctx.facts)
        return M.default_mem_fraction_static(dep, dep.model).value if dep.total_mib else None
    except (ImportError, AttributeError):
        return None


@remedy
def kernel_fault(ctx: Context):
    step = ctx.facts.failure_phase.phase if ctx.facts.failure_phase else None
    ctx.values["phase_text"] = f" {P.DESCRIBE[step]}" if step in P.DESCRIBE else ""
    ctx.add_fix(external_env="CUDA_LAUNCH_BLOCKING", value="1", why="reproduce with synchronous launches so the traceback names the failing kernel", option=1)
    ctx.finding.fix_other.extend([
        "Try another attention backend (--attention-backend triton) and --disable-cuda-graph to see which component faults.",
        "If it follows specific requests, check their token ids and sampling parameters; report the reproducer to SGLang.",
        "'uncorrectable ECC error' is hardware: check nvidia-smi -q for ECC/row-remapping errors and drain the GPU.",
    ])
    return None


@remedy
def generic_exception(ctx: Context):
    ex = next((e for e in ctx.facts.of_kind("exception") if e.data.get("type")), None) or \
        next((e for e in ctx.facts.of_kind("exception")), None)
    if ex is None:
        return False
    etype = ex.data.get("type") or "an exception (its line is cut off)"
    msg = (ex.data.get("message") or "").strip().splitlines()
    frames = ex.data.get("frames") or []
    sg = [f for f in frames if "sglang" in f.file or "/srt/" in f.file]
    where = f" in {sg[-1].func} ({sg[-1].file.split('/')[-1]}:{sg[-1].line})" if sg else (f" in {frames[-1].func}" if frames else "")
    ctx.values["exc_type"] = etype
    ctx.values["exc_sentence"] = f"{etype}{where}" + (f": {msg[0][:200]}" if msg else "") + "."
    ctx.evidence(ex, role="trigger")
    step = ctx.facts.failure_phase.phase if ctx.facts.failure_phase else None
    if step in P.DESCRIBE:
        ctx.values["exc_sentence"] += f" It happened {P.DESCRIBE[step]}."
    ctx.finding.fix_other.append("Search SGLang's GitHub issues for the exception message; include the full traceback and launch command when reporting.")
    return None


@remedy
def symptom(ctx: Context):
    first = next((e for e in ctx.facts.events if e.kind == "exception" and e.data.get("type")), None)
    ctx.values["cause_hint"] = f" (first exception: line {first.line}, {first.data.get('type')})" if first else \
        " — it is not in this paste; include the lines above this one"
    codes = [e.data.get("exit_code") for e in ctx.facts.of_kind("signal") if e.data.get("exit_code") is not None]
    ctx.values["exit_text"] = f" with code {codes[0]}" if codes else ""
    if not first:
        ctx.finding.fix_other.append("Paste the log from the launch command on: the failing child's own traceback comes before this line.")
    return None
