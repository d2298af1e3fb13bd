"""The memory explainer: the budget SGLang's own sizing rules give for this deployment, the step
that failed, and the fix options for it, each re-checked by the memory model (diag/memory).

Values only. `goal` says what must shrink or grow (weights, kv_pool, cuda_graph, prefill,
decode, mamba, speculative); rules with another category condition on it.
"""
from __future__ import annotations

import math

from . import Explainer, ExplainContext, OptionValue, Values

# the goal of the fix for the step that failed
GOAL = {"weights": "weights", "kv_pool": "kv_pool", "mamba": "mamba", "cuda_graph": "cuda_graph", "draft": "speculative",
        "prefill": "prefill", "warmup": "prefill", "decode": "decode", "multimodal": "prefill", "dist_init": "kv_pool"}
PROVIDES = (
    "phase", "phase_basis", "goal", "budget_goal", "fits", "version_used", "version_chosen", "version_range",
    "budget_json", "weights_gib", "draft_weights_gib", "kv_pool_gib", "kv_tokens", "kv_bytes_per_token", "fraction",
    "fraction_auto", "fraction_unknown", "pre_free_gib", "static_gib", "headroom_gib", "total_gib", "rest_gib", "mamba_state_gib",
    "mamba_slots", "mamba_slot_mib", "mamba_slots_per_request", "mamba_strategy", "scratch_gib", "graph_gib", "act_gib",
    "draft_tokens", "context_len", "max_running_requests", "has_options", "has.*",
    "fallback.*", "oom_missing_gib", "table.*", "mamba_request_cap", "mamba_cap_basis", "mamba_rebalance.*", "mamba_pool.*",
    "low_fraction",
    "sized", "alloc.*", "retract.*", "pool_short.*", "mamba_check", "mamba_rest_short", "alloc_context.*",
)
OPTIONS = ("tp", "checkpoint_fp8", "checkpoint_nvfp4", "checkpoint_int4", "online_fp8", "language_only",
           "raise_fraction", "context_length", "fp8_kv", "lower_fraction", "graph_bs", "disable_graph",
           "prefill_chunk", "cap_requests_context", "cap_requests_mamba", "mamba_cache_size", "mamba_bf16",
           "mamba_no_buffer", "fewer_draft_tokens", "no_speculative", "share_fraction")
LOW_FRACTION = 0.5            # a fraction this low was set by a person or a wrapper, not by SGLang
FAR_BELOW_CONTEXT = 4096      # a request limit below this is below any current model's context


def _int(v):
    from ..numbers import to_int
    return to_int(v)


def _float(v):
    from ..numbers import to_float
    return to_float(v)


def deployment(facts, version: str | None):
    from .. import memory as M
    total_mib, where = None, None
    if facts.gpus:
        total_mib = next((g.get("memory_total_mib") for g in facts.gpus if g.get("memory_total_mib")), None)
        where = "nvidia-smi" if total_mib is not None else None
    if total_mib is None and facts.gpu_total_gib:
        total_mib, where = int(round(facts.gpu_total_gib * 1024)), "log"
    dep = M.Deployment.from_flags(facts.flags, version, model=facts.model, gpu=facts.gpu, gpu_total_mib=total_mib,
                                  env=facts.env, gpu_total_source=where)
    # the server_args dump prints the chunk each scheduler runs (after DP attention's division),
    # which the flag's value only implies
    ran = (getattr(facts, "server_args", None) or {}).get("chunked_prefill_size")
    if isinstance(ran, int) and ran > 0:
        dep.chunked_prefill_size = ran
    return dep


def readings(facts):
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
    known = {k: v for k, v in r.items() if v is not None and k in M.Readings.__dataclass_fields__}
    return M.Readings(**known)


def choose_budget(facts, failure: bool):
    """(deployment, budget, version used, why that version). When the log narrows the SGLang
    version only to a range, the versions' sizing can differ; for a failure the newest version
    whose arithmetic reproduces it is used, else the newest of the range."""
    from .. import memory as M
    R = readings(facts)
    if facts.version.exact:
        dep = deployment(facts, facts.version.exact)
        return dep, M.budget(dep, R), facts.version.exact, "exact"
    candidates = list(reversed(facts.catalog.versions)) if facts.catalog else [None]
    first = None
    for v in candidates:
        dep = deployment(facts, v)
        b = M.budget(dep, R)
        first = first or (dep, b, v)
        if not failure or b.fits is False:
            return dep, b, v, ("reproduces" if failure else "newest") if len(candidates) > 1 else "exact"
    return first[0], first[1], first[2], "newest"


def _phase(facts, hits) -> tuple[str | None, str | None]:
    if facts.ooms:
        oi = facts.ooms[0]
        return oi.phase, oi.basis
    if facts.failure_phase:
        return facts.failure_phase.phase, facts.failure_phase.basis
    return None, None


def explain(ctx: ExplainContext, goal: str | None = None, failure: bool = True) -> Values:
    facts = ctx.facts
    phase, basis = _phase(facts, ctx.hits)
    goal = goal or GOAL.get(phase or "", None)
    out = Values()
    v = out.values
    v.update(phase=phase, phase_basis=basis)
    try:
        from .. import memory as M
    except ImportError:
        M = None
    dep = b = None
    if M is not None:
        dep, b, used, why = choose_budget(facts, failure)
        v.update(version_used=used, version_chosen=why, version_range=facts.version.describe())
    mfs = _current_fraction(facts, b)
    # neither the log nor the command shows the fraction, and the GPU's capacity is unknown: SGLang's
    # automatic value depends on that capacity, so the value in use is not known (the formula's
    # 'no GPU info' fallback is what SGLang uses when *it* cannot read the GPU, not diag)
    unknown = mfs is not None and b is not None and b.mem_fraction_static_auto and b.gpu_total_gib is None \
        and facts.readings.get("mem_fraction_static") is None and _float(facts.flag("--mem-fraction-static")) is None
    v["fraction_unknown"] = unknown
    if unknown:
        mfs = None
    v["fraction"] = mfs
    v["low_fraction"] = mfs is not None and mfs < LOW_FRACTION
    if b is not None:
        v["budget_json"] = _budget_json(b)
        v.update(budget_goal=b.goals[0] if b.goals else None, fits=b.fits, weights_gib=b.weights_gib,
                 draft_weights_gib=b.draft_weights_gib or None, kv_pool_gib=b.kv_pool_gib, kv_tokens=b.max_total_num_tokens,
                 kv_bytes_per_token=b.kv_bytes_per_token, fraction_auto=b.mem_fraction_static_auto,
                 pre_free_gib=b.pre_load_free_gib, static_gib=b.static_budget_gib, headroom_gib=b.headroom_gib,
                 total_gib=b.gpu_total_gib, rest_gib=b.rest_gib, scratch_gib=b.spec_scratch_gib or None,
                 graph_gib=b.cuda_graph_gib, act_gib=b.activations_gib, draft_tokens=b.draft_tokens or None,
                 context_len=b.context_len, max_running_requests=b.max_running_requests)
        if b.hybrid_mamba:
            v.update(mamba_state_gib=b.mamba_state_gib, mamba_slots=b.max_mamba_cache_size,
                     mamba_slot_mib=(b.mamba_bytes_per_slot / 2**20) if b.mamba_bytes_per_slot else None,
                     mamba_slots_per_request=b.mamba_slots_per_request, mamba_strategy=b.mamba_strategy)
        if goal is None:
            goal = b.goals[0] if b.goals else None
        # a KV-pool refusal whose arithmetic blames the Mamba state (or weights) is about that instead
        if goal == "kv_pool" and b.goals and b.goals[0] == "mamba":
            goal = "mamba"
        opts = M.options_for(goal, dep, b) if goal else []
        if goal == "kv_pool" and b.goals and b.goals[0] == "weights":
            # the weights alone exceed the static budget: a higher fraction (when the GPU has room) or smaller weights
            seen = {o.kind for o in opts}
            opts += [o for o in M.options_for("weights", dep, b) if o.kind not in seen]
        if not opts and b.goals:
            opts = M.all_options(dep, b)
        missing = _oom_missing(facts)
        v["oom_missing_gib"] = missing
        if goal in ("cuda_graph", "prefill", "decode", "speculative") and missing is not None and \
                not any(o.kind == "lower_fraction" for o in opts):
            low = _shortfall_fraction(b, mfs, missing)
            if low is not None:
                opts.append(low)
        other = max((o.other_gib for o in facts.ooms), default=0.0)
        if other > 0:
            share = M.options.share_fraction(b, mfs, other, missing)
            if share is not None:
                opts.append(share)
        out.options = [OptionValue(o.kind, o.cost, [dict(c) for c in o.changes], _clean(o.values), o.fits, o.order)
                       for o in opts if o.fits is not False]
    v["goal"] = goal
    v["table"] = _request_table(facts, b)
    v["has_options"] = bool(out.options)
    v["has"] = {k: any(o.kind == k for o in out.options) for k in OPTIONS}
    refusal = any(getattr(getattr(e, "msg", None), "event", None) == "refusal" for e in ctx.hits)
    v["fallback"] = _fallbacks(facts, b, mfs, unknown, goal, "kv_pool" if refusal and phase is None else phase)
    v["alloc_context"] = _alloc_context(facts, dep, b, phase, v["fallback"])
    v["sized"] = b is not None and bool(b.pre_load_free_gib) and b.weights_gib is not None
    v["alloc"] = _alloc(facts, ctx.hits, v["fallback"])
    v["retract"] = _retract(facts, ctx.hits, out, dep.attn_dp if dep is not None else 1)
    v["pool_short"] = _pool_short(facts, ctx.hits)
    mamba_hit = next((h for h in ctx.hits if getattr(h.msg, "category", None) == "oom.mamba_state"), None)
    if mamba_hit is not None:
        v["mamba_check"] = "runtime" if mamba_hit.msg.event == "capacity" else "startup"
    # SGLang's own arithmetic left nothing (or less) for the state pool: the weights (and the KV share)
    # take the whole static budget, so no setting of the state pool helps, only a larger budget
    rest = _float(_hit_field(ctx.hits, "total_rest_memory", "rest_memory")) if mamba_hit is not None else None
    v["mamba_rest_short"] = rest is not None and rest <= 0
    if goal == "mamba" or phase == "mamba" or mamba_hit is not None:
        cap, basis_ = _mamba_request_cap(facts, ctx.hits)
        v["mamba_request_cap"], v["mamba_cap_basis"] = cap, basis_
        v["mamba_rebalance"] = _mamba_rebalance(facts, ctx.hits)
        if v.get("mamba_check") == "runtime":
            pool = _mamba_pool(facts, ctx.hits)
            if pool and b is not None and b.hybrid_mamba and b.mamba_bytes_per_slot:
                # the memory model re-checks the larger pool: the slots come out of the KV pool's share
                _, nb = M.options._try(dep, b, "load", max_mamba_cache_size=pool["slots"])
                pool = pool if nb.fits is not False else None
                if pool:
                    pool["kv_tokens_after"] = nb.max_total_num_tokens
            v["mamba_pool"] = pool
        if v["mamba_rebalance"]:
            out.evidence.append((0, v["mamba_rebalance"]["line"], "context"))
    if facts.ooms and facts.ooms[0].basis == "milestones":
        ms = [m for m in facts.milestones if m.line <= facts.ooms[0].event.line][-2:]
        out.evidence.extend((m.input, m.line, "context") for m in ms)
    return out


def _clean(values: dict) -> dict:
    from ..numbers import finite
    out = {}
    for k, x in values.items():
        out[k] = _clean(x) if isinstance(x, dict) else finite(x)
    return out


def _budget_json(b) -> dict:
    j = b.to_json()
    keep = {k: x for k, x in j.items() if x not in (None, [], {}, 0.0) or k in ("fits",)}
    keep["items"] = [i for i in j["items"] if i.get("gib") is not None]
    return keep


def _current_fraction(facts, b) -> float | None:
    """The fraction in use: what the log or the command proves first, then the budget's value."""
    r = facts.readings.get("mem_fraction_static")
    if r is not None:
        return float(r)
    flag = _float(facts.flag("--mem-fraction-static"))
    if flag is not None:
        return flag
    if b is not None and b.mem_fraction_static:
        return b.mem_fraction_static
    return None


def _oom_missing(facts) -> float | None:
    """What the failed allocation lacked: requested minus free, GiB."""
    if not facts.ooms:
        return None
    d = facts.ooms[0].event.data
    tried, free = d.get("tried_gib"), d.get("free_gib")
    if tried is None or free is None:
        return None
    return max(0.0, tried - free)


def _shortfall_fraction(b, mfs: float | None, missing: float) -> "object | None":
    """A lower fraction from what the OOM lacked: the current fraction minus (missing + 1 GiB) of
    the free memory, rounded down to 0.005."""
    from .. import memory as M
    pre = b.pre_load_free_gib or b.gpu_total_gib
    if not mfs or not pre:
        return None
    need = missing + M.options.MFS_MARGIN_GIB
    new = math.floor((mfs - need / pre) / M.MFS_SEARCH_STEP) * M.MFS_SEARCH_STEP
    new = round(min(new, mfs - M.options.MFS_MIN_STEP), 3)
    if new < 0.3:
        return None
    return M.Option("lower_fraction", M.COST_FLAG, [{"flag": "--mem-fraction-static", "value": f"{new:.3f}", "action": "set"}],
                    {"fraction": new, "was": mfs, "graph_gib": b.cuda_graph_gib, "draft_gib": 0.0, "act_gib": b.activations_gib,
                     "extra_gib": missing, "need_gib": need - M.options.MFS_MARGIN_GIB, "margin_gib": M.options.MFS_MARGIN_GIB,
                     "pre_free_gib": pre, "freed_gib": (mfs - new) * pre}, fits=None)


def _alloc_context(facts, dep, b, phase, fallback: dict) -> dict | None:
    """The KV pool's own allocation ran out of memory: at the smaller fraction proposed for it, the
    memory model's pool holds this many tokens; when that is less than the context, one request of
    full length could not fit, so the context goes down with the fraction (a multiple of 1024)."""
    if phase != "kv_pool" or not facts.ooms or b is None or not b.context_len or "lower_fraction" not in fallback:
        return None
    from .. import memory as M
    low = float(fallback["lower_fraction"])
    _, nb = M.options._try(dep, b, "load", mem_fraction_static=low)
    tokens = nb.max_total_num_tokens
    if not tokens or tokens >= b.context_len:
        return None
    return {"context": max(1024, tokens // 1024 * 1024), "tokens": tokens, "fraction": low, "model_context": b.context_len}


# with the fraction in use unknown (no GPU capacity, no value in the log): SGLang's automatic value on
# GPUs of 24–80 GiB lies between about 0.80 and 0.88 (sglang-memory.md §2), so these are above / below it
UNKNOWN_RAISE, UNKNOWN_LOWER = "0.90", "0.78"


def _fallbacks(facts, b, mfs: float | None, unknown: bool = False, goal: str | None = None,
               phase: str | None = None) -> dict:
    """Values for fixes when the arithmetic lacks inputs: directions from the step, values from
    what the log shows (never the value already in use)."""
    from .. import memory as M
    out: dict = {}
    base = mfs
    if base is None and b is not None and b.mem_fraction_static and not unknown:
        base = b.mem_fraction_static
    if unknown:
        # the direction comes from the step: only a pool SGLang refused to size asks for a larger share
        out["fraction_unknown"] = True
        if goal in ("kv_pool", "mamba") and phase in ("kv_pool", "mamba"):
            out["raise_fraction"] = UNKNOWN_RAISE
        else:
            out["lower_fraction"] = UNKNOWN_LOWER
    elif base is not None:
        low = round(max(0.5, base - 0.05), 2)
        if low < base - 0.005:
            out["lower_fraction"] = f"{low:.2f}"
        high = 0.85 if base < 0.6 else round(min(0.95, base + 0.05), 2)
        if high >= base + M.options.MFS_MIN_STEP - 1e-9:      # never a tweak below 0.01
            out["raise_fraction"] = f"{high:.2f}"
    tp = _int(facts.flag("--tp-size", "--tensor-parallel-size")) or _ranks_tp(facts) or 1
    out["tp"] = tp * 2
    chunk = _int(facts.flag("--chunked-prefill-size"))
    if b is not None and not chunk:
        chunk = b.chunked_prefill_size
    if chunk and chunk > 512:
        out["chunk"] = max(512, chunk // 2)
    running, basis = _int(facts.flag("--max-running-requests")), "flag"
    if not running:
        running, basis = _int(facts.readings.get("max_running_requests")), "log"
    if not running:
        running, basis = _busiest(facts), "batches"
    if running and running > 1:
        out["requests"] = max(1, running // 2)
        out["requests_from"], out["requests_basis"] = running, basis
    bs = _int(facts.flag("--cuda-graph-max-bs")) or (b.cuda_graph_max_bs if b is not None else None)
    if bs and bs > 1:
        out["graph_bs"] = max(1, bs // 2)
    dt = _int(facts.flag("--speculative-num-draft-tokens"))
    if dt and dt > 2:
        out["draft_tokens"] = max(2, dt // 2)
    page = _int(facts.flag("--page-size"))
    if page and page > 1:
        out["page_size"] = 1 if page <= 16 else page // 4
    del M
    return out


def _request_table(facts, b) -> dict | None:
    """An allocation larger than the GPU at start-up: SGLang's request-to-token table, request slots x
    (context + 4) x 4 bytes, sized from --context-length (the model's own, when unset) and the slots
    (--max-running-requests, else SGLang's default of at least 2048). The context that keeps the table
    within 5% of the GPU, a power of two."""
    if not facts.ooms:
        return None
    d = facts.ooms[0].event.data
    if not d.get("larger_than_gpu") or not d.get("tried_gib") or not d.get("total_gib"):
        return None
    slots = _int(facts.flag("--max-running-requests")) or (b.max_running_requests if b is not None and
                                                           b.max_running_requests and b.max_running_requests >= 2048 else 2048)
    context = _int(facts.flag("--context-length")) or (b.context_len if b is not None else None)
    implied = int(d["tried_gib"] * 2**30 / (slots * 4))
    context = context or implied
    cap = 2 ** int(math.log2(max(1024, 0.05 * d["total_gib"] * 2**30 / (slots * 4))))
    if cap >= context:
        return None
    return {"slots": slots, "context": context, "implied_context": implied, "context_cap": cap,
            "table_gib": d["tried_gib"], "cap_table_gib": slots * (cap + 4) * 4 / 2**30}


def _ranks_tp(facts) -> int | None:
    """The tensor-parallel size the rank prefixes prove (TP0 … TP7: at least 8)."""
    most = -1
    for e in facts.events:
        for part in (e.rank or "").split():
            if part.startswith("TP") and part[2:].isdigit():
                most = max(most, int(part[2:]))
    return most + 1 if most > 0 else None


# SGLang's own allocators (a catalog capacity event that stopped a batch): which batch, what it needed, what was free
def _alloc(facts, hits, fallback: dict) -> dict | None:
    ev = next((h for h in hits if getattr(h.msg, "event", None) == "capacity"
               and h.msg.category != "oom.mamba_state"), None)
    if ev is None:
        return None
    f = ev.msg.fields or {}
    needed, free, evictable = _int(f.get("needed")), _int(f.get("free")), _int(f.get("evictable"))
    kind = {"oom.runtime_decode": "decode", "oom.runtime_prefill": "prefill"}.get(ev.msg.category)
    basis = "message"
    if kind is None:
        phase = facts.failure_phase.phase if facts.failure_phase else None
        kind, basis = (phase, "frames") if phase in ("prefill", "decode") else ("prefill", "none")
    page = _int(facts.flag("--page-size"))
    # enough free tokens, yet it failed: the allocator hands out whole pages, one per request at least
    page_gap = needed is not None and free is not None and free >= needed and (page is None or page > 1)
    out = {"kind": kind, "basis": basis, "needed": needed, "free": free, "evictable": evictable, "page_size": page,
           "page_gap": page_gap, "line": ev.line}
    if page_gap:
        out["page_fix"] = 1 if page is None or page <= 16 else page // 4
    # a decode step allocates one token per running request: 'needed' is the batch's size
    if kind == "decode" and needed and needed > 1:
        out["requests_fix"] = max(1, needed // 2)
    elif fallback.get("requests"):
        out["requests_fix"] = fallback["requests"]
    return out


def _retract(facts, hits, out, ranks: int = 1) -> dict | None:
    """Retraction (the KV pool full while decoding): runaway generations (a few requests holding
    tens of thousands of tokens each) or a pool too small for what was admitted."""
    if not any(h.kind == "retract" or getattr(h.msg, "event", None) == "retract" or _in_retraction(h) for h in hits):
        return None
    b = next((s for s in facts.batches if any(k == 1 for k in s.kind)), None)
    if b is None:
        return {"known": False}
    idx = [i for i in range(len(b)) if b.kind[i] == 1]
    last = idx[-1]
    running, tokens, usage = b.running[last], b.tokens[last], b.usage[last]
    r = {"known": True, "usage": usage if usage == usage else None, "line": b.line[last]}
    for i in idx[-3:]:
        out.evidence.append((0, b.line[i], "context"))
    if running == running and tokens == tokens and running > 0:
        per = tokens / running
        r.update(running=int(running), tokens=int(tokens), per_request=int(per),
                 runaway=running <= 4 and per >= 32768)
        if not r["runaway"] and running > 1:
            # with DP attention each rank's scheduler admits --max-running-requests / dp-size, and the
            # batch line is one rank's: the flag's value is that many times the rank's share
            r["requests"] = max(1, int(running) // 2) * ranks
    return r


def _in_retraction(ev) -> bool:
    """An exception raised inside SGLang's retraction (the pool ran full while decoding and the
    scheduler was freeing running requests to make room)."""
    return ev.kind == "exception" and any((getattr(fr, "func", "") or "").startswith("retract")
                                          or "retract_decode(" in (getattr(fr, "code", "") or "")
                                          for fr in ev.data.get("frames") or ())


def _pool_short(facts, hits) -> dict | None:
    """A request limit (or a pool) far below any model's context: the KV pool is what bounds it, not
    --context-length. SGLang caps a request's input at min(context_len - 1, pool tokens - 1) - 5."""
    limit = None
    for h in hits:
        f = getattr(h.msg, "fields", None) or {}
        if h.msg is not None and h.msg.name == "request.input_too_long":
            limit = _int(f.get("max_input_tokens"))
            break
    pool = _int(facts.readings.get("max_total_num_tokens"))
    context = _int(facts.readings.get("context_len"))
    if limit is None and pool is None:
        return None
    small = limit if limit is not None else pool
    pool_bound = (pool is not None and limit is not None and limit >= pool - 16) or \
        (context is not None and context > 2 * small) or (limit is None and context is not None and pool < context)
    far = small is not None and small < FAR_BELOW_CONTEXT and pool_bound
    return {"limit": limit, "pool": pool, "context": context, "far_below": far}


def _busiest(facts) -> int | None:
    """The most requests the batch lines show running at once (what the log proves was admitted)."""
    most = max((x for s in facts.batches for x in s.running if x == x), default=0)
    return int(most) or None


def _batch0(facts):
    return next((s for s in facts.batches if len(s)), None)


def _hit_field(hits, *names):
    for ev in hits:
        fields = getattr(getattr(ev, "msg", None), "fields", None) or ev.data.get("fields") or {}
        for n in names:
            if fields.get(n) is not None:
                return fields[n]
    return None


def _mamba_request_cap(facts, hits) -> tuple[int | None, str | None]:
    """Running requests the Mamba pool can serve: its slots over the slots each request holds, with
    a quarter left for states the radix cache keeps for cached prefixes."""
    slots = _int(_hit_field(hits, "pool_size", "slots", "mamba_pool_size", "max_mamba_cache_size")) or \
        _int(facts.readings.get("mamba_cache_size")) or _int(facts.flag("--max-mamba-cache-size"))
    b = _batch0(facts)
    strategy = str(facts.flag("--mamba-scheduler-strategy", "--mamba-radix-cache-strategy") or "")
    ratio, basis = (5 if "extra_buffer" in strategy else 3), "strategy"
    if slots and b is not None and len(b):
        last = b.last()
        used, running = last["mamba_usage"], last["running"]
        if used == used and running == running and running > 0:
            ratio, basis = max(1, round(slots * used / running)), "usage"
    if slots:
        return max(1, int(slots / ratio * 0.75)), basis
    mrr = _int(facts.flag("--max-running-requests"))
    if b is not None and len(b):
        running = b.max_running if b.max_running == b.max_running else 0
        mrr = mrr or int(running)
    return (max(1, mrr // 2) if mrr else None), "running"


MAMBA_POOL_GROWTH = 1.5      # a pool that ran out at run time, the wanted concurrency unknown: half as many slots again


def _mamba_pool(facts, hits) -> dict | None:
    """A larger --max-mamba-cache-size for a pool that ran out of slots at run time, when its size is
    known (the message, the start-up line or the flag): the slots the wanted concurrency needs
    (--max-running-requests, else the most requests the batch lines show running and queued) at the
    slots each request holds, with the quarter the request cap keeps for cached prefix states; when
    that is not more than the pool, half as many slots again. A multiple of the slots per request."""
    slots = _int(_hit_field(hits, "pool_size", "slots", "mamba_pool_size", "max_mamba_cache_size")) or \
        _int(facts.readings.get("mamba_cache_size")) or _int(facts.flag("--max-mamba-cache-size"))
    if not slots:
        return None
    strategy = str(facts.flag("--mamba-scheduler-strategy", "--mamba-radix-cache-strategy") or "")
    ping_pong = any("ping_pong" in (getattr(h.msg, "name", None) or "") for h in hits)   # extra_buffer's tracking slots
    ratio, basis = (5 if "extra_buffer" in strategy or ping_pong else 3), "strategy"
    b = _batch0(facts)
    if b is not None and len(b):
        last = b.last()
        used, running = last["mamba_usage"], last["running"]
        if used == used and running == running and running > 0:
            ratio, basis = max(1, round(slots * used / running)), "usage"
    want = _int(facts.flag("--max-running-requests"))
    if not want and b is not None and len(b):
        most = max((r + (q if q == q else 0) for r, q in zip(b.running, b.queue) if r == r), default=0)
        want = int(most) or None
    need = math.ceil(want * ratio / 0.75) if want else 0
    grow = need > slots
    new = need if grow else math.ceil(slots * MAMBA_POOL_GROWTH)
    new = math.ceil(new / ratio) * ratio
    return {"slots": new, "was": slots, "slots_per_request": ratio, "ratio_basis": basis,
            "requests": want if grow else None, "growth": None if grow else True}


def _mamba_rebalance(facts, hits) -> dict | None:
    """Run-time slot exhaustion while the KV pool has room: SGLang gives the Mamba pool r/(1+r) of
    the pool budget (r = --mamba-full-memory-ratio, 0.9); a larger r serves more requests."""
    b = _batch0(facts)
    if b is None or not len(b):
        return None
    last = b.last()
    kv, mamba = last["usage"], last["mamba_usage"]
    if not (mamba == mamba and kv == kv) or mamba < 0.95 or kv > 0.7:
        return None
    r0 = _float(facts.flag("--mamba-full-memory-ratio")) or 0.9
    kv_share = 1 / (1 + r0) * max(kv / 0.8, 0.05)       # keep 20% spare in the KV pool
    r1 = round((1 - kv_share) / kv_share, 1)
    gain = (1 - kv_share) / (r0 / (1 + r0))
    size = _int(_hit_field(hits, "pool_size", "mamba_pool_size"))
    return {"ratio": r1, "was": r0, "kv_usage": kv, "mamba_usage": mamba, "kv_share": kv_share,
            "kv_keeps": kv_share * (1 + r0), "gain": gain, "slots": size, "slots_after": int(size * gain) if size else None,
            "line": last["line"]}


EXPLAINER = Explainer("memory", explain, PROVIDES, OPTIONS, args=("goal", "failure"))
