"""Fix options derived from a budget, each re-checked by recomputing the budget, ranked by cost.

An option is values only: its kind (which names its texts in rules/_fixes/memory.toml), the
flag changes, the numbers its texts quote (`values`), and the re-checked budget after the
change (`values["after"]`). No sentence is written here.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from .common import ACTIVATION_MIB_PER_TOKEN, DTYPE_BYTES, GIB, MIB, _ge, _ver
from .inputs import Deployment, Readings
from .formulas import decode_graph_batch_sizes, kv_dtype_bytes
from .budget import Budget, _spec_params, budget


COST_FLAG = 1          # a flag tweak
COST_THROUGHPUT = 2    # lower throughput / concurrency / context
COST_GPUS = 3          # more GPUs
COST_CHECKPOINT = 4    # another checkpoint
COST_INFO = 5          # not a fix: what an alternative would give
TP_CANDIDATES = (2, 4, 8)   # tensor-parallel sizes tried for "more GPUs" (one node)
MFS_SEARCH_STEP = 0.005     # granularity of a proposed --mem-fraction-static
MFS_MIN_STEP = 0.01         # a fraction moved by less than this is not worth proposing
MFS_MARGIN_GIB = 1.0        # GiB kept free beyond what the arithmetic needs when the fraction is lowered

GOALS = ("weights", "kv_pool", "cuda_graph", "prefill", "decode", "mamba", "speculative")
KINDS = ("tp", "checkpoint_fp8", "checkpoint_nvfp4", "checkpoint_int4", "online_fp8", "language_only",
         "raise_fraction", "context_length", "fp8_kv", "lower_fraction", "graph_bs", "disable_graph",
         "prefill_chunk", "cap_requests_context", "cap_requests_mamba", "mamba_cache_size", "mamba_bf16",
         "mamba_no_buffer", "fewer_draft_tokens", "no_speculative", "share_fraction")


@dataclass
class Option:
    kind: str
    cost: int
    changes: list[dict] = field(default_factory=list)   # {"flag": name (newest catalog), "value": str | None, "action"}
    values: dict = field(default_factory=dict)          # numbers the option's texts quote; "after": the re-checked budget
    goal: str = ""
    fits: bool | None = None
    order: int = 0                                      # tie-break within one cost (higher = later)

    @property
    def flags(self) -> list[str]:
        return [c["flag"] for c in self.changes if c.get("flag")]

    def to_json(self) -> dict:
        return {"kind": self.kind, "cost": self.cost, "goal": self.goal, "changes": self.changes, "values": self.values,
                "fits": self.fits}


def _set(flag: str, value=None, action: str = "set") -> dict:
    return {"flag": flag, "value": None if value is None else str(value), "action": action}


def after(nb: Budget) -> dict:
    """What a re-checked budget gives, as numbers (the texts print them)."""
    out = {"fits": nb.fits, "weights_gib": nb.weights_gib, "kv_tokens": nb.max_total_num_tokens, "kv_gib": nb.kv_pool_gib,
           "running": nb.max_running_requests, "fraction": nb.mem_fraction_static, "context_len": nb.context_len,
           "headroom_gib": nb.headroom_gib}
    if nb.hybrid_mamba and nb.max_mamba_cache_size is not None:
        out.update(mamba_slots=nb.max_mamba_cache_size, mamba_gib=nb.mamba_state_gib)
    if nb.spec_scratch_gib:
        out["scratch_gib"] = nb.spec_scratch_gib
    return {k: v for k, v in out.items() if v is not None}


def _readings_for(b: Budget, keep: str) -> Readings:
    """The log numbers that stay valid after a change: 'load' (same weights per GPU), 'pre' (free before load)."""
    R = b.readings or Readings()
    if keep == "none":
        return Readings()
    if keep == "pre":
        return Readings(pre_load_free_gib=R.pre_load_free_gib)
    kv = b.kv_bytes_per_token if b.sources.get("kv_bytes_per_token") == "log" else None
    slot = b.mamba_bytes_per_slot if b.sources.get("mamba_bytes_per_slot") == "log" else None
    return Readings(pre_load_free_gib=R.pre_load_free_gib, after_load_free_gib=R.after_load_free_gib,
                    weights_gib=R.weights_gib, draft_weights_gib=R.draft_weights_gib,
                    mem_fraction_static=R.mem_fraction_static, kv_bytes_per_token=kv, mamba_bytes_per_slot=slot,
                    kv_dtype=R.kv_dtype, context_len=R.context_len)


def _try(dep: Deployment, b: Budget, keep: str = "load", **changes) -> tuple[Deployment, Budget]:
    new = dataclasses.replace(dep, **changes)
    return new, budget(new, _readings_for(b, keep))


def options_for(goal: str, dep: Deployment, b: Budget) -> list[Option]:
    """Ranked fixes for one goal, each re-checked with budget()."""
    fn = {"weights": _opts_weights, "kv_pool": _opts_kv_pool, "cuda_graph": _opts_cuda_graph, "prefill": _opts_prefill,
          "decode": _opts_decode, "mamba": _opts_mamba, "speculative": _opts_speculative}.get(goal)
    if fn is None:
        return []
    opts = [o for o in fn(dep, b) if o is not None and (o.fits is not False or o.cost == COST_INFO)]
    before = after(b)
    for o in opts:
        o.goal = o.goal or goal
        o.values.setdefault("before", before)
    return sorted(opts, key=lambda o: (o.cost, o.order))


def all_options(dep: Deployment, b: Budget) -> list[Option]:
    """Options for every goal the budget raised (problems first, then warnings), de-duplicated."""
    seen, out = set(), []
    for goal in list(b.goals) + [g for g in b.warning_goals if g not in b.goals]:
        for o in options_for(goal, dep, b):
            key = tuple((c["flag"], c["value"]) for c in o.changes) or (o.kind,)
            if key in seen:
                continue
            seen.add(key)
            out.append(o)
    return sorted(out, key=lambda o: (o.cost, o.order))


def _tp_option(dep: Deployment, b: Budget) -> Option | None:
    """The smallest TP that fits; when its KV pool cannot hold a full-context request, cap the context too."""
    if dep.model is None and b.weights_gib is None:
        return None
    for tp in TP_CANDIDATES:
        if tp <= dep.tp:
            continue
        if dep.model is None:                     # no config: scale the per-GPU figures by TP
            R = b.readings or Readings()
            scale = dep.tp / tp
            nr = Readings(pre_load_free_gib=R.pre_load_free_gib, weights_gib=(b.weights_gib or 0) * scale,
                          kv_bytes_per_token=(b.kv_bytes_per_token or 0) * scale or None,
                          mamba_bytes_per_slot=(b.mamba_bytes_per_slot or 0) * scale or None)
            nb = budget(dataclasses.replace(dep, tp=tp), nr)
        else:
            _, nb = _try(dep, b, "pre", tp=tp)
        if not nb.fits:
            continue
        changes = [_set("--tp-size", tp)]
        values = {"tp": tp, "was_tp": dep.tp, "gpus": tp * dep.pp, "after": after(nb)}
        if not _holds_context(nb) and nb.max_total_num_tokens:
            changes.append(_set("--context-length", nb.max_total_num_tokens))
            values["context_cap"] = nb.max_total_num_tokens
        return Option("tp", COST_GPUS, changes, values, fits=True)
    return None


def _holds_context(nb: Budget) -> bool:
    return not nb.context_len or (nb.max_total_num_tokens or 0) >= nb.context_len


def _checkpoint_options(dep: Deployment, b: Budget) -> list[Option]:
    """Another checkpoint of the same model: FP8, NVFP4 (Blackwell), 4-bit AWQ/GPTQ. A checkpoint is
    named only when the catalog knows a published one; otherwise the option says what to look for."""
    m = dep.model
    out = []
    if m is None or m.weight_quant is not None:
        return out
    arch = (dep.gpu.arch if dep.gpu else "") or ""
    blackwell = arch.startswith("sm_10") or arch.startswith("sm_12")
    for fmt, kind, order in (("fp8", "checkpoint_fp8", 0), ("nvfp4", "checkpoint_nvfp4", 1), ("awq", "checkpoint_int4", 2)):
        variant = m.variants.get(fmt) or {}
        if fmt == "nvfp4" and not blackwell:
            continue                               # NVFP4 kernels need Blackwell
        if fmt == "nvfp4" and not variant.get("hf_id"):
            continue                               # no known NVFP4 checkpoint: do not suggest one
        qm = m.with_quant(fmt)
        _, nb = _try(dep, b, "pre", model=qm, weight_quant=fmt)
        if not nb.fits:
            continue
        published = variant.get("hf_id")
        changes = [_set("--model-path", published)] if published else []
        out.append(Option(kind, COST_CHECKPOINT, changes,
                          {"format": fmt, "published": published or None, "unpublished": not published or None,
                           "model": m.hf_id or m.name,
                           "weights_gib": b.weights_gib, "after": after(nb)}, fits=True, order=order))
    return out


def fp8_capable(arch: str) -> bool:
    """Whether a GPU architecture computes in FP8: NVIDIA from sm_89 (Ada, Hopper, Blackwell), AMD from
    CDNA3 (gfx942 MI300, gfx950 MI355); unknown names pass (no refusal without knowledge)."""
    a = arch.lower()
    if a.startswith("sm_"):
        digits = "".join(ch for ch in a[3:] if ch.isdigit())
        return not digits or int(digits) >= 89
    if a.startswith("gfx"):
        digits = "".join(ch for ch in a[3:6] if ch.isdigit())
        return len(digits) == 3 and int(digits) >= 942
    return True


def _online_fp8_option(dep: Deployment, b: Budget) -> Option | None:
    """--quantization fp8 on a BF16 checkpoint: SGLang quantizes the linear layers to FP8 while loading."""
    m = dep.model
    if m is None or m.weight_quant is not None or dep.weight_quant is not None:
        return None
    arch = (dep.gpu.arch if dep.gpu else "") or ""
    if arch and not fp8_capable(arch):
        return None                                # FP8 kernels need Ada, Hopper, Blackwell or CDNA3+
    _, nb = _try(dep, b, "pre", model=m.with_quant("fp8"), weight_quant="fp8")
    if not nb.fits:
        return None
    return Option("online_fp8", COST_THROUGHPUT, [_set("--quantization", "fp8")],
                  {"weights_gib": b.weights_gib, "after": after(nb)}, fits=True, order=1)


def _draft_outside_gib(b: Budget) -> float:
    """Draft weights + draft KV paid from the headroom (before 0.5.14, §6)."""
    d, dk = b.item("draft_weights"), b.item("draft_kv")
    if d and "headroom" in d.note:
        return (d.gib or 0) + ((dk.gib or 0) if dk else 0)
    return 0.0


def _mfs_leaving(b: Budget, outside_gib: float) -> float:
    """The --mem-fraction-static (3 decimals, rounded down) that leaves outside_gib of the free memory outside."""
    return math.floor((1 - outside_gib / b.pre_load_free_gib) * 1000) / 1000


def _mfs_max(b: Budget) -> float | None:
    """The highest --mem-fraction-static that still leaves SGLang's graph/activation reserve (and the draft before 0.5.14)."""
    if not b.pre_load_free_gib:
        return None
    return _mfs_leaving(b, b.cuda_graph_gib + b.activations_gib + _draft_outside_gib(b))


def _opts_weights(dep: Deployment, b: Budget) -> list[Option]:
    opts = []
    tp = _tp_option(dep, b)
    if tp:
        opts.append(tp)
    opts += _checkpoint_options(dep, b)
    online = _online_fp8_option(dep, b)
    if online:
        opts.append(online)
    if dep.model and dep.model.multimodal and not dep.language_only:
        _, nb = _try(dep, b, "pre", language_only=True)
        if nb.fits:
            opts.append(Option("language_only", COST_THROUGHPUT, [_set("--language-only")],
                               {"weights_gib": b.weights_gib, "after": after(nb)}, fits=True))
    return opts


def _raise_fraction(dep: Deployment, b: Budget) -> Option | None:
    """The fraction that gives the pools room, searched in steps of 0.005 up to the highest value that
    still leaves CUDA graphs and prefill activations their room; when even that is too little, the
    same with smaller prefill chunks (the two changes then go together)."""
    cur = b.mem_fraction_static or 0
    if not b.pre_load_free_gib or not 0 < cur < 1:         # a value outside (0, 1) is no fraction to raise
        return None
    chunk = b.chunked_prefill_size or 0
    chunks = [None] + [chunk >> k for k in range(1, 4) if chunk >> k >= 2048]
    for c in chunks:
        base_dep, base_b = (dep, b) if c is None else _try(dep, b, "load", chunked_prefill_size=c)
        found = _search_fraction(base_dep, base_b, cur)
        if found is None:
            continue
        x, nb, cap = found
        if c is None and b.fits and (nb.max_total_num_tokens or 0) <= (b.max_total_num_tokens or 0):
            return None
        pre = b.pre_load_free_gib
        changes = [_set("--mem-fraction-static", f"{x:.3f}")]
        values = {"fraction": x, "was": cur, "cap": cap, "pre_free_gib": pre, "static_gib": x * pre,
                  "outside_gib": (1 - x) * pre, "graph_gib": base_b.cuda_graph_gib, "act_gib": base_b.activations_gib,
                  "margin_gib": (cap - x) * pre, "after": after(nb)}
        if c is not None:
            changes.append(_set("--chunked-prefill-size", c))
            values.update(chunk=c, was_chunk=chunk)
        return Option("raise_fraction", COST_FLAG if c is None else COST_THROUGHPUT, changes, values, fits=True)
    return None


def _search_fraction(dep: Deployment, b: Budget, cur: float) -> tuple[float, Budget, float] | None:
    ctx = b.context_len or 0
    cap = _mfs_max(b)
    if not cap or cap < cur + MFS_MIN_STEP:
        return None
    step = MFS_SEARCH_STEP
    x = round(math.ceil((cur + MFS_MIN_STEP) / step) * step, 3)
    best = None
    while x <= cap + 1e-9:
        _, nb = _try(dep, b, "load", mem_fraction_static=x)
        if nb.fits:
            best = (x, nb, cap)                # keep the largest fitting value ...
            if ctx and (nb.max_total_num_tokens or 0) >= ctx:
                break                          # ... unless a smaller one already holds the full context
        x = round(x + step, 3)
    return best


def _opts_kv_pool(dep: Deployment, b: Budget) -> list[Option]:
    opts = []
    ctx = b.context_len or 0
    raised = _raise_fraction(dep, b)
    if raised:
        opts.append(raised)
    if b.max_total_num_tokens and ctx and b.max_total_num_tokens < ctx:
        value = max(1024, b.max_total_num_tokens // 1024 * 1024)
        opts.append(Option("context_length", COST_THROUGHPUT, [_set("--context-length", value)],
                           {"context": value, "pool_tokens": b.max_total_num_tokens, "model_context": ctx}, fits=True))
    e, _, _ = kv_dtype_bytes(dep.kv_cache_dtype, dep.model, (b.readings or Readings()).kv_dtype)
    if e >= 2:
        _, nb = _try(dep, b, "load", kv_cache_dtype="fp8_e4m3")
        nb_tokens = nb.max_total_num_tokens or 0
        if nb.fits or nb_tokens > (b.max_total_num_tokens or 0):
            opts.append(Option("fp8_kv", COST_THROUGHPUT, [_set("--kv-cache-dtype", "fp8_e4m3")],
                               {"bytes_before": b.kv_bytes_per_token, "bytes_after": nb.kv_bytes_per_token, "after": after(nb)},
                               fits=nb.fits))
    if b.hybrid_mamba:
        opts += [o for o in _opts_mamba(dep, b) if o.kind == "mamba_cache_size"]
    tp = _tp_option(dep, b)
    if tp:
        opts.append(tp)
    if not b.fits and "weights" not in b.goals:
        opts += [o for o in _checkpoint_options(dep, b) if o.fits]
    return opts


def _opts_cuda_graph(dep: Deployment, b: Budget) -> list[Option]:
    opts = []
    pre_gib = b.pre_load_free_gib
    if not pre_gib:
        return opts
    draft_out = _draft_outside_gib(b)
    opt = _lower_fraction(dep, b)
    if opt:
        opts.append(opt)
    bs = b.cuda_graph_max_bs or 0
    headroom = b.headroom_gib or 0
    per_bs = b.cuda_graph_gib / max(1, min(bs, b.max_running_requests or bs))
    room = headroom - draft_out - b.activations_gib
    if per_bs > 0 and bs > 1 and room > 0:
        # at least halve the largest graph; otherwise the largest batch size the room allows (with no
        # room at all outside the activations' reserve, smaller graphs cannot be the fix: none offered)
        new_bs = max(1, min(bs // 2, int(room / per_bs)))
        new_bs = max(b_ for b_ in decode_graph_batch_sizes(max(new_bs, 1), bool(dep.spec)) or [1])
        opts.append(Option("graph_bs", COST_THROUGHPUT, [_set("--cuda-graph-max-bs-decode", new_bs)],
                           {"bs": new_bs, "was": bs, "per_bs_mib": per_bs * 1024, "room_gib": room}, fits=None))
    opts.append(Option("disable_graph", COST_THROUGHPUT, [_set("--cuda-graph-backend-decode", "disabled")],
                       {"graph_gib": b.cuda_graph_gib}, fits=None, order=9))
    return opts


def _lower_fraction(dep: Deployment, b: Budget, extra_gib: float = 0.0) -> Option | None:
    """The --mem-fraction-static that leaves graphs, draft and activations (and extra_gib) their room
    outside the pools, with a margin; None when that is not lower than the current value by a step
    worth making, or when the pools no longer fit at it."""
    if not b.pre_load_free_gib or not b.mem_fraction_static:
        return None
    draft_out = _draft_outside_gib(b)
    need = b.cuda_graph_gib + draft_out + b.activations_gib + extra_gib
    mfs = round(math.floor(_mfs_leaving(b, need + MFS_MARGIN_GIB) / MFS_SEARCH_STEP) * MFS_SEARCH_STEP, 3)
    if mfs > b.mem_fraction_static - MFS_MIN_STEP or mfs <= 0.3:
        return None
    _, nb = _try(dep, b, "load", mem_fraction_static=mfs)
    if not nb.fits:
        return None
    return Option("lower_fraction", COST_FLAG, [_set("--mem-fraction-static", f"{mfs:.3f}")],
                  {"fraction": mfs, "was": b.mem_fraction_static, "graph_gib": b.cuda_graph_gib, "draft_gib": draft_out,
                   "act_gib": b.activations_gib, "extra_gib": extra_gib or None, "need_gib": need, "margin_gib": MFS_MARGIN_GIB,
                   "pre_free_gib": b.pre_load_free_gib, "freed_gib": (b.mem_fraction_static - mfs) * b.pre_load_free_gib,
                   "after": after(nb)}, fits=True)


def _opts_prefill(dep: Deployment, b: Budget) -> list[Option]:
    """Smaller prefill chunks, or a lower fraction, so a chunk's activations fit outside the pools (§8)."""
    opts = []
    pre_gib = b.pre_load_free_gib
    if not pre_gib or b.headroom_gib is None:
        return opts
    chunk = b.chunked_prefill_size or 0
    R = b.readings or Readings()
    other_gib = b.activations_gib - max(chunk, 2048) * ACTIVATION_MIB_PER_TOKEN / 1024   # metadata + req_to_token
    if R.available_gpu_mem_gib is not None:
        room_gib, where = R.available_gpu_mem_gib - other_gib, "log"
    else:
        room_gib, where = b.headroom_gib - b.cuda_graph_gib - _draft_outside_gib(b) - other_gib, "budget"
    halvings = [chunk >> k for k in range(1, 6) if chunk >> k >= 256]         # chunk/2 ... chunk/32
    fitting = [c for c in halvings if c * ACTIVATION_MIB_PER_TOKEN / 1024 <= room_gib]
    if chunk > 0 and halvings:
        new_chunk = fitting[0] if fitting else halvings[-1]
        # under DP attention each rank prefills the flag's value / --dp-size: the flag is that many times the rank's chunk
        per = dep.attn_dp
        opts.append(Option("prefill_chunk", COST_THROUGHPUT, [_set("--chunked-prefill-size", new_chunk * per)],
                           {"chunk": new_chunk * per, "was": chunk * per, "rank_chunk": new_chunk if per > 1 else None,
                            "act_before_gib": chunk * ACTIVATION_MIB_PER_TOKEN / 1024,
                            "act_after_gib": new_chunk * ACTIVATION_MIB_PER_TOKEN / 1024, "room_gib": max(room_gib, 0.0),
                            "room_source": where}, fits=None))
    opt = _lower_fraction(dep, b)
    if opt:
        opts.append(opt)
    return opts


def _opts_decode(dep: Deployment, b: Budget) -> list[Option]:
    opts = []
    tokens, ctx = b.max_total_num_tokens or 0, b.context_len or 0
    if tokens and ctx and b.max_running_requests:
        n = max(1, tokens // ctx)
        if n < b.max_running_requests:
            opts.append(Option("cap_requests_context", COST_THROUGHPUT, [_set("--max-running-requests", n)],
                               {"requests": n, "was": b.max_running_requests, "kv_tokens": tokens, "context": ctx}, fits=True))
    opts += [o for o in _opts_kv_pool(dep, b) if o.kind in ("raise_fraction", "fp8_kv")]
    return opts


def _opts_mamba(dep: Deployment, b: Budget) -> list[Option]:
    opts: list[Option] = []
    if not b.hybrid_mamba or not b.mamba_bytes_per_slot:
        return opts
    ratio = b.mamba_slots_per_request or 3
    per_mib = b.mamba_bytes_per_slot / MIB
    want = b.requested_running_requests or b.max_running_requests or 1
    ctx = b.context_len or 0
    common = {"slots_per_request": ratio, "strategy": b.mamba_strategy, "slot_mib": per_mib, "draft_tokens": b.draft_tokens or None}
    # 1) fewer running requests: the largest N whose slots (and, with spec, scratch) fit
    best_n = None
    for n in range(want, 0, -1):
        _, nb = _try(dep, b, "load", max_running_requests=n)
        if nb.fits and (nb.max_running_requests or 0) >= n:
            best_n = (n, nb)
            break
    changed = best_n and (not b.fits or (best_n[1].max_total_num_tokens or 0) != (b.max_total_num_tokens or 0))
    if best_n and changed:
        n, nb = best_n
        opts.append(Option("cap_requests_mamba", COST_THROUGHPUT, [_set("--max-running-requests", n)],
                           {**common, "requests": n, "was": want, "scratch_gib": nb.spec_scratch_gib or None, "after": after(nb)},
                           fits=True))
    # 2) --max-mamba-cache-size in slots: exactly ratio x N slots, the rest of the share goes to KV
    floor_tokens = min(ctx, b.max_total_num_tokens) if (ctx and b.max_total_num_tokens) else 0
    for n in ([best_n[0]] if best_n and changed else range(want, 0, -1)):
        slots = ratio * n
        changes = {"max_mamba_cache_size": slots}
        if b.draft_tokens or n < want:
            changes["max_running_requests"] = n
        _, nb = _try(dep, b, "load", **changes)
        if nb.fits and (nb.max_running_requests or 0) >= n and (nb.max_total_num_tokens or 0) >= floor_tokens:
            fixes = [_set("--max-mamba-cache-size", slots)]
            if "max_running_requests" in changes:
                fixes.append(_set("--max-running-requests", n))
            opts.append(Option("mamba_cache_size", COST_THROUGHPUT if n < want else COST_FLAG, fixes,
                               {**common, "slots": slots, "requests": n, "state_gib": slots * b.mamba_bytes_per_slot / GIB,
                                "after": after(nb)}, fits=True))
            break
    # 3) bf16 SSM state halves the ssm part
    if b.mamba_ssm_dtype and DTYPE_BYTES.get(b.mamba_ssm_dtype, 4) > 2 and _ge(_ver(dep.version), "0.5.4"):
        _, nb = _try(dep, b, "load", mamba_ssm_dtype="bfloat16")
        if nb.mamba_bytes_per_slot:
            opts.append(Option("mamba_bf16", COST_THROUGHPUT, [_set("--mamba-ssm-dtype", "bfloat16")],
                               {**common, "slot_mib_after": nb.mamba_bytes_per_slot / MIB, "after": after(nb)}, fits=nb.fits))
    # 4) no_buffer needs fewer slots per request than extra_buffer
    vk = _ver(dep.version)
    if b.mamba_strategy and b.mamba_strategy.startswith("extra_buffer") and _ge(vk, "0.5.7"):
        changes = {"mamba_strategy": "no_buffer"}
        radix_off = dep.spec and _ge(vk, "0.5.10") and not _ge(vk, "0.5.14")
        if radix_off:
            changes = {"mamba_strategy": "no_buffer", "disable_radix_cache": True}
        elif _ge(vk, "0.5.14"):
            changes["disable_overlap_schedule"] = True
        _, nb = _try(dep, b, "load", **changes)
        fixes = [_set("--mamba-radix-cache-strategy", "no_buffer")]
        if changes.get("disable_radix_cache"):
            fixes.append(_set("--disable-radix-cache"))
        if changes.get("disable_overlap_schedule"):
            fixes.append(_set("--disable-overlap-schedule"))
        opts.append(Option("mamba_no_buffer", COST_THROUGHPUT, fixes,
                           {**common, "slots_after": nb.mamba_slots_per_request, "radix_off": bool(radix_off) or None,
                            "overlap_off": bool(changes.get("disable_overlap_schedule")) or None, "after": after(nb)},
                           fits=nb.fits))
    tp = _tp_option(dep, b)
    if tp:
        opts.append(tp)
    opts += [o for o in _checkpoint_options(dep, b) if o.fits]
    return opts


def _opts_speculative(dep: Deployment, b: Budget) -> list[Option]:
    opts: list[Option] = []
    if not dep.spec:
        return opts
    steps, topk, D, _ = _spec_params(dep)
    for d in range(D - 1, 1, -1):
        _, nb = _try(dep, b, "load", speculative_num_steps=d - 1, speculative_eagle_topk=1, speculative_num_draft_tokens=d)
        if nb.fits:
            opts.append(Option("fewer_draft_tokens", COST_THROUGHPUT,
                               [_set("--speculative-num-steps", d - 1), _set("--speculative-eagle-topk", 1),
                                _set("--speculative-num-draft-tokens", d)],
                               {"draft_tokens": d, "was": D, "after": after(nb)}, fits=True))
            break
    _, nb = _try(dep, b, "load" if not _ge(_ver(dep.version), "0.5.14") else "pre", speculative_algorithm=None)
    opts.append(Option("no_speculative", COST_THROUGHPUT, [_set("--speculative-algorithm", action="remove")],
                       {"after": after(nb)}, fits=nb.fits))
    return opts


def share_fraction(b: Budget, was: float | None, other_gib: float, missing_gib: float | None) -> Option | None:
    """SGLang sharing its GPU with another process that holds other_gib: SGLang sizes its static pools
    once, from the memory free at start-up, so whatever the two processes need later comes out of
    what the fraction leaves outside the pools. The fraction that leaves what the failed allocation
    lacked, plus a 1 GiB margin: was - (missing + margin) / free before loading, rounded down to
    0.005 and at least 0.01 below the fraction in use; None when that would be below 0.3 (the
    other process holds too much for a smaller pool to help: free the GPU instead)."""
    pre = b.pre_load_free_gib or b.gpu_total_gib
    if not was or not pre or not other_gib or other_gib <= 0:
        return None
    missing = max(0.0, missing_gib or 0.0)
    need = missing + MFS_MARGIN_GIB
    new = math.floor((was - need / pre) / MFS_SEARCH_STEP) * MFS_SEARCH_STEP
    new = round(min(new, was - MFS_MIN_STEP), 3)
    if new < 0.3:
        return None
    return Option("share_fraction", COST_FLAG, [_set("--mem-fraction-static", f"{new:.3f}")],
                  {"fraction": new, "was": was, "other_gib": other_gib, "missing_gib": missing, "need_gib": need,
                   "margin_gib": MFS_MARGIN_GIB, "pre_free_gib": pre, "freed_gib": (was - new) * pre,
                   "was_source": (b.sources or {}).get("mem_fraction_static")}, fits=None)
