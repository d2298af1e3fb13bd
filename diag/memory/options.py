"""Fix options derived from a budget, each re-checked by recomputing the budget, ranked by cost."""
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

GOALS = ("weights", "kv_pool", "cuda_graph", "prefill", "decode", "mamba", "speculative")


@dataclass
class Option:
    title: str
    cost: int
    fixes: list[dict] = field(default_factory=list)     # {"flag", "value", "why"} with the newest catalog's names
    other: list[str] = field(default_factory=list)
    arithmetic: str = ""
    goal: str = ""
    fits: bool | None = None
    order: int = 0                                      # tie-break within one cost (higher = later)

    def to_json(self) -> dict:
        return {"title": self.title, "cost": self.cost, "goal": self.goal, "fixes": self.fixes, "other": self.other,
                "arithmetic": self.arithmetic, "fits": self.fits}


def _fix(flag: str, value, why: str) -> dict:
    return {"flag": flag, "value": None if value is None else str(value), "why": why}


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
    """Ranked fixes for one goal, each re-checked with budget() and carrying its arithmetic."""
    fn = {"weights": _opts_weights, "kv_pool": _opts_kv_pool, "cuda_graph": _opts_cuda_graph, "prefill": _opts_prefill,
          "decode": _opts_decode, "mamba": _opts_mamba, "speculative": _opts_speculative}.get(goal)
    if fn is None:
        return []
    opts = [o for o in fn(dep, b) if o is not None and (o.fits is not False or o.cost == COST_INFO)]
    for o in opts:
        o.goal = o.goal or goal
    return sorted(opts, key=lambda o: (o.cost, o.order))


def all_options(dep: Deployment, b: Budget) -> list[Option]:
    """Options for every goal the budget raised (problems first, then warnings), de-duplicated."""
    seen, out = set(), []
    for goal in list(b.goals) + [g for g in b.warning_goals if g not in b.goals]:
        for o in options_for(goal, dep, b):
            key = tuple((f["flag"], f["value"]) for f in o.fixes) or (o.title,)
            if key in seen:
                continue
            seen.add(key)
            out.append(o)
    return sorted(out, key=lambda o: (o.cost, o.order))


def _fits_summary(nb: Budget) -> str:
    parts = []
    if nb.weights_gib is not None:
        parts.append(f"weights {nb.weights_gib:.1f} GiB")
    if nb.hybrid_mamba and nb.max_mamba_cache_size is not None:
        parts.append(f"{nb.max_mamba_cache_size} Mamba slots ({nb.mamba_state_gib:.1f} GiB)")
    if nb.spec_scratch_gib:
        parts.append(f"scratch {nb.spec_scratch_gib:.1f} GiB")
    if nb.max_total_num_tokens is not None:
        parts.append(f"{nb.max_total_num_tokens:,} KV tokens ({nb.kv_pool_gib or 0:.1f} GiB)")
    if nb.max_running_requests is not None:
        parts.append(f"{nb.max_running_requests} running requests")
    return ", ".join(parts)


def _tp_option(dep: Deployment, b: Budget, why: str) -> Option | None:
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
        fixes = [_fix("--tp-size", tp, why)]
        other = [f"needs {tp} GPUs per server"]
        if not _holds_context(nb) and nb.max_total_num_tokens:
            fixes.append(_fix("--context-length", nb.max_total_num_tokens,
                              f"the KV pool at TP{tp} holds {nb.max_total_num_tokens:,} tokens, less than the model's {nb.context_len:,}"))
        return Option(f"TP={tp}: split the model over {tp} GPUs", COST_GPUS, fixes, other,
                      f"per GPU at TP{tp}: {_fits_summary(nb)}; --mem-fraction-static {nb.mem_fraction_static:.3f}",
                      fits=True)
    return None


def _holds_context(nb: Budget) -> bool:
    return not nb.context_len or (nb.max_total_num_tokens or 0) >= nb.context_len


def _checkpoint_options(dep: Deployment, b: Budget, why: str) -> list[Option]:
    m = dep.model
    out = []
    if m is None or m.weight_quant is not None:
        return out
    arch = (dep.gpu.arch if dep.gpu else "") or ""
    blackwell = arch.startswith("sm_10") or arch.startswith("sm_12")
    for fmt in ("fp8", "nvfp4"):
        variant = m.variants.get(fmt) or {}
        if fmt == "nvfp4" and not (variant.get("hf_id") and blackwell):
            continue                               # NVFP4 kernels need Blackwell; only a listed checkpoint
        qm = m.with_quant(fmt)
        new, nb = _try(dep, b, "pre", model=qm, weight_quant=fmt)
        hf = variant.get("hf_id") or f"{m.hf_id or m.name}-FP8"
        other = [] if variant.get("hf_id") else [f"{hf} is the usual name of an FP8 checkpoint; check that it is published"]
        if nb.fits:
            out.append(Option(f"{fmt.upper()} checkpoint on the same GPUs", COST_CHECKPOINT,
                              [_fix("--model-path", hf, why)], other + (["NVFP4 runs on Blackwell GPUs only"] if fmt == "nvfp4" else []),
                              f"weights {b.weights_gib or 0:.1f} -> {nb.weights_gib or 0:.1f} GiB per GPU; {_fits_summary(nb)}",
                              fits=True))
        elif fmt == "fp8":
            out.append(Option(f"an FP8 checkpoint alone does not fit on {dep.tp} GPU(s)", COST_INFO, [], [
                f"FP8 weights {nb.weights_gib or 0:.1f} GiB per GPU: " + "; ".join(nb.problems[:1])],
                f"weights {b.weights_gib or 0:.1f} -> {nb.weights_gib or 0:.1f} GiB", fits=False))
    return out


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
    why = f"weights {b.weights_gib or 0:.1f} GiB do not fit one GPU's static budget"
    tp = _tp_option(dep, b, why)
    if tp:
        opts.append(tp)
    opts += _checkpoint_options(dep, b, why)
    if dep.model and dep.model.multimodal and not dep.language_only:
        new, nb = _try(dep, b, "pre", language_only=True)
        if nb.fits:
            opts.append(Option("skip the vision tower", COST_THROUGHPUT, [_fix("--language-only", None, "text-only serving")],
                               ["no image/video input"], f"weights {b.weights_gib or 0:.1f} -> {nb.weights_gib or 0:.1f} GiB", fits=True))
    return opts


def _opts_kv_pool(dep: Deployment, b: Budget) -> list[Option]:
    opts = []
    ctx = b.context_len or 0
    cap = _mfs_max(b)
    cur = b.mem_fraction_static or 0
    if cap and cap > cur:
        step = MFS_SEARCH_STEP
        x = round(math.ceil((cur + 0.001) / step) * step, 3)
        best = None
        while x <= cap + 1e-9:
            new, nb = _try(dep, b, "load", mem_fraction_static=x)
            if nb.fits:
                best = (x, nb)                     # keep the largest fitting value ...
                if ctx and (nb.max_total_num_tokens or 0) >= ctx:
                    break                          # ... unless a smaller one already holds the full context
            x = round(x + step, 3)
        if best and (not b.fits or (best[1].max_total_num_tokens or 0) > (b.max_total_num_tokens or 0)):
            x, nb = best
            opts.append(Option(f"raise --mem-fraction-static to {x:.3f}", COST_FLAG,
                               [_fix("--mem-fraction-static", f"{x:.3f}", "more of the free memory for the static pools")],
                               [], f"static {x:.3f} x {b.pre_load_free_gib:.1f} = {x * b.pre_load_free_gib:.1f} GiB; "
                               f"{_fits_summary(nb)}; leaves {(1 - x) * b.pre_load_free_gib:.1f} GiB for graphs "
                               f"{b.cuda_graph_gib:.1f} + activations {b.activations_gib:.1f} GiB (highest safe value {cap:.3f})",
                               fits=True))
    if b.max_total_num_tokens and ctx and b.max_total_num_tokens < ctx:
        value = max(1024, b.max_total_num_tokens // 1024 * 1024)
        opts.append(Option(f"shorter context: {value:,} tokens", COST_THROUGHPUT,
                           [_fix("--context-length", value, "what the KV pool holds for one request")], [],
                           f"pool {b.max_total_num_tokens:,} tokens < context {ctx:,}; {value:,} fits one request", fits=True))
    e, _, _ = kv_dtype_bytes(dep.kv_cache_dtype, dep.model, (b.readings or Readings()).kv_dtype)
    if e >= 2:
        new, nb = _try(dep, b, "load", kv_cache_dtype="fp8_e4m3")
        nb_tokens = nb.max_total_num_tokens or 0
        if nb.fits or nb_tokens > (b.max_total_num_tokens or 0):
            opts.append(Option("FP8 KV cache", COST_THROUGHPUT, [_fix("--kv-cache-dtype", "fp8_e4m3", "half the KV bytes per token")],
                               ["small accuracy cost; check the attention backend supports FP8 KV"],
                               f"KV {b.kv_bytes_per_token or 0:,.0f} -> {nb.kv_bytes_per_token or 0:,.0f} B/token; {_fits_summary(nb)}",
                               fits=nb.fits))
    if b.hybrid_mamba:
        opts += [o for o in _opts_mamba(dep, b) if o.fixes and o.fixes[0]["flag"] == "--max-mamba-cache-size"]
    tp = _tp_option(dep, b, "more GPU memory for the KV pool")
    if tp:
        opts.append(tp)
    if not b.fits and "weights" not in b.goals:
        opts += [o for o in _checkpoint_options(dep, b, "smaller weights leave more for the KV pool") if o.fits]
    return opts


def _opts_cuda_graph(dep: Deployment, b: Budget) -> list[Option]:
    opts = []
    pre_gib = b.pre_load_free_gib
    if not pre_gib:
        return opts
    draft_out = _draft_outside_gib(b)
    opt = _lower_mfs_option(dep, b, "leave room outside the static pools for the graphs")
    if opt:
        opts.append(opt)
    bs = b.cuda_graph_max_bs or 0
    headroom = b.headroom_gib or 0
    per_bs = b.cuda_graph_gib / max(1, min(bs, b.max_running_requests or bs))
    room = headroom - draft_out - b.activations_gib
    if per_bs > 0 and bs > 1:
        # at least halve the largest graph; otherwise the largest batch size the room allows
        new_bs = max(1, min(bs // 2, int(room / per_bs))) if room > 0 else 1
        new_bs = max(b_ for b_ in decode_graph_batch_sizes(max(new_bs, 1), bool(dep.spec)) or [1])
        opts.append(Option(f"capture graphs up to batch {new_bs}", COST_THROUGHPUT,
                           [_fix("--cuda-graph-max-bs-decode", new_bs, "smaller CUDA graphs")],
                           ["larger decode batches run without graphs"],
                           f"~{per_bs * 1024:.1f} MiB per captured batch size; {room:.1f} GiB free for graphs -> up to {new_bs}",
                           fits=None))
    opts.append(Option("disable CUDA graphs", COST_THROUGHPUT,
                       [_fix("--cuda-graph-backend-decode", "disabled", "no graph memory (large decode slowdown)")],
                       ["last resort: decode becomes much slower"],
                       f"frees the {b.cuda_graph_gib:.1f} GiB of graphs", fits=None, order=9))
    return opts


def _lower_mfs_option(dep: Deployment, b: Budget, why: str) -> Option | None:
    """The --mem-fraction-static that leaves graphs, draft and activations their room outside the pools."""
    draft_out = _draft_outside_gib(b)
    need = b.cuda_graph_gib + draft_out + b.activations_gib
    mfs = _mfs_leaving(b, need)
    if not b.mem_fraction_static or mfs >= b.mem_fraction_static:
        return None
    _, nb = _try(dep, b, "load", mem_fraction_static=mfs)
    if not nb.fits:
        return None
    return Option(f"lower --mem-fraction-static to {mfs:.3f}", COST_FLAG, [_fix("--mem-fraction-static", f"{mfs:.3f}", why)], [],
                  f"outside the pools: graphs {b.cuda_graph_gib:.1f} + draft {draft_out:.1f} + activations {b.activations_gib:.1f} "
                  f"= {need:.1f} GiB -> 1 - {need:.1f}/{b.pre_load_free_gib:.1f} = {mfs:.3f} (was {b.mem_fraction_static:.3f}); "
                  f"then {_fits_summary(nb)}", fits=True)


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
        room_gib, where = R.available_gpu_mem_gib - other_gib, "available_gpu_mem (log)"
    else:
        room_gib, where = b.headroom_gib - b.cuda_graph_gib - _draft_outside_gib(b) - other_gib, "left outside the pools"
    halvings = [chunk >> k for k in range(1, 6) if chunk >> k >= 256]         # chunk/2 ... chunk/32
    fitting = [c for c in halvings if c * ACTIVATION_MIB_PER_TOKEN / 1024 <= room_gib]
    if chunk > 0 and halvings:
        new_chunk = fitting[0] if fitting else halvings[-1]
        opts.append(Option(f"smaller prefill chunks ({new_chunk} tokens)", COST_THROUGHPUT,
                           [_fix("--chunked-prefill-size", new_chunk, "smaller prefill activations")],
                           ["long prompts take more prefill steps"],
                           f"activations ~1.5 MiB x tokens: {chunk} -> {new_chunk} tokens = {chunk * 1.5 / 1024:.1f} -> "
                           f"{new_chunk * 1.5 / 1024:.1f} GiB; {max(room_gib, 0):.1f} GiB {where}", fits=None))
    opt = _lower_mfs_option(dep, b, "more memory outside the static pools for activations")
    if opt:
        opts.append(opt)
    return opts


def _opts_decode(dep: Deployment, b: Budget) -> list[Option]:
    opts = []
    tokens, ctx = b.max_total_num_tokens or 0, b.context_len or 0
    if tokens and ctx and b.max_running_requests:
        n = max(1, tokens // ctx)
        if n < b.max_running_requests:
            opts.append(Option(f"cap concurrency at {n} running requests", COST_THROUGHPUT,
                               [_fix("--max-running-requests", n, "no retraction even at full context length")],
                               ["lower concurrency"], f"{tokens:,} KV tokens // {ctx:,} context = {n} requests at full length",
                               fits=True))
    opts += [o for o in _opts_kv_pool(dep, b) if o.fixes and o.fixes[0]["flag"] in ("--mem-fraction-static", "--kv-cache-dtype")]
    return opts


def _opts_mamba(dep: Deployment, b: Budget) -> list[Option]:
    opts: list[Option] = []
    if not b.hybrid_mamba or not b.mamba_bytes_per_slot:
        return opts
    ratio = b.mamba_slots_per_request or 3
    per_mib = b.mamba_bytes_per_slot / MIB
    want = b.requested_running_requests or b.max_running_requests or 1
    ctx = b.context_len or 0
    # 1) fewer running requests: the largest N whose slots (and, with spec, scratch) fit
    best_n = None
    for n in range(want, 0, -1):
        new, nb = _try(dep, b, "load", max_running_requests=n)
        if nb.fits and (nb.max_running_requests or 0) >= n:
            best_n = (n, nb)
            break
    changed = best_n and (not b.fits or (best_n[1].max_total_num_tokens or 0) != (b.max_total_num_tokens or 0))
    if best_n and changed:
        n, nb = best_n
        scratch = f" + scratch {n} x {b.draft_tokens} x {per_mib:.1f} MiB = {nb.spec_scratch_gib:.1f} GiB" if b.draft_tokens else ""
        opts.append(Option(f"cap concurrency at {n} running requests", COST_THROUGHPUT,
                           [_fix("--max-running-requests", n, f"{n} requests x {ratio} slots fit the Mamba share")],
                           ["lower concurrency"],
                           f"{n} x {ratio} slots ({b.mamba_strategy}) x {per_mib:.1f} MiB{scratch}; {_fits_summary(nb)}", fits=True))
    # 2) --max-mamba-cache-size in slots: exactly ratio x N slots, the rest of the share goes to KV
    floor_tokens = min(ctx, b.max_total_num_tokens) if (ctx and b.max_total_num_tokens) else 0
    for n in ([best_n[0]] if best_n and changed else range(want, 0, -1)):
        slots = ratio * n
        changes = {"max_mamba_cache_size": slots}
        if b.draft_tokens or n < want:
            changes["max_running_requests"] = n
        new, nb = _try(dep, b, "load", **changes)
        if nb.fits and (nb.max_running_requests or 0) >= n and (nb.max_total_num_tokens or 0) >= floor_tokens:
            fixes = [_fix("--max-mamba-cache-size", slots, f"{n} requests x {ratio} slots per request ({b.mamba_strategy})")]
            if "max_running_requests" in changes:
                fixes.append(_fix("--max-running-requests", n, "the slots above serve this many requests"))
            opts.append(Option(f"cap the Mamba pool at {slots} slots ({n} requests x {ratio}; the flag counts slots, not GiB)",
                               COST_THROUGHPUT if n < want else COST_FLAG,
                               fixes, [], f"{n} requests x {ratio} slots = {slots} slots x {per_mib:.1f} MiB = "
                               f"{slots * b.mamba_bytes_per_slot / GIB:.1f} GiB; {_fits_summary(nb)}", fits=True))
            break
    # 3) bf16 SSM state halves the ssm part
    if b.mamba_ssm_dtype and DTYPE_BYTES.get(b.mamba_ssm_dtype, 4) > 2 and _ge(_ver(dep.version), "0.5.4"):
        new, nb = _try(dep, b, "load", mamba_ssm_dtype="bfloat16")
        if nb.mamba_bytes_per_slot:
            opts.append(Option(f"bf16 SSM state ({nb.mamba_bytes_per_slot / MIB:.1f} MiB per slot)", COST_THROUGHPUT,
                               [_fix("--mamba-ssm-dtype", "bfloat16", "halves the SSM state per slot")],
                               ["the recurrent state is kept in lower precision (accuracy risk on long outputs)"],
                               f"per slot {per_mib:.1f} -> {nb.mamba_bytes_per_slot / MIB:.1f} MiB; {_fits_summary(nb)}",
                               fits=nb.fits))
    # 4) no_buffer needs fewer slots per request than extra_buffer
    vk = _ver(dep.version)
    if b.mamba_strategy and b.mamba_strategy.startswith("extra_buffer") and _ge(vk, "0.5.7"):
        changes = {"mamba_strategy": "no_buffer"}
        other = ["no overlap scheduler (lower throughput)"]
        if dep.spec and _ge(vk, "0.5.10") and not _ge(vk, "0.5.14"):
            changes = {"mamba_strategy": "no_buffer", "disable_radix_cache": True}
            other = ["no prefix caching (SGLang 0.5.10–0.5.13 refuses no_buffer + radix cache with speculative decoding)"]
        elif _ge(vk, "0.5.14"):
            changes["disable_overlap_schedule"] = True
        new, nb = _try(dep, b, "load", **changes)
        fixes = [_fix("--mamba-radix-cache-strategy", "no_buffer", f"{nb.mamba_slots_per_request} slots per request instead of {ratio}")]
        if changes.get("disable_radix_cache"):
            fixes.append(_fix("--disable-radix-cache", None, "required with speculative decoding and no_buffer"))
        if changes.get("disable_overlap_schedule"):
            fixes.append(_fix("--disable-overlap-schedule", None, "no_buffer does not support the overlap scheduler"))
        slots_word = "slot" if nb.mamba_slots_per_request == 1 else "slots"
        opts.append(Option(f"no_buffer strategy ({nb.mamba_slots_per_request} {slots_word} per request)", COST_THROUGHPUT, fixes, other,
                           f"{ratio} -> {nb.mamba_slots_per_request} slots per request; {_fits_summary(nb)}", fits=nb.fits))
    tp = _tp_option(dep, b, "half the Mamba state and weights per GPU")
    if tp:
        opts.append(tp)
    opts += [o for o in _checkpoint_options(dep, b, "smaller weights leave more for the Mamba/KV pools") if o.fits]
    return opts


def _opts_speculative(dep: Deployment, b: Budget) -> list[Option]:
    opts: list[Option] = []
    if not dep.spec:
        return opts
    steps, topk, D, _ = _spec_params(dep)
    for d in range(D - 1, 1, -1):
        new, nb = _try(dep, b, "load", speculative_num_steps=d - 1, speculative_eagle_topk=1, speculative_num_draft_tokens=d)
        if nb.fits:
            opts.append(Option(f"fewer draft tokens: {d} instead of {D}", COST_THROUGHPUT,
                               [_fix("--speculative-num-steps", d - 1, "fewer draft steps"),
                                _fix("--speculative-eagle-topk", 1, "one candidate per step"),
                                _fix("--speculative-num-draft-tokens", d, "smaller verify scratch")],
                               ["lower speculative speed-up"], f"scratch and verify buffers scale with D: {D} -> {d}; {_fits_summary(nb)}",
                               fits=True))
            break
    new, nb = _try(dep, b, "load" if not _ge(_ver(dep.version), "0.5.14") else "pre", speculative_algorithm=None)
    opts.append(Option("without speculative decoding", COST_THROUGHPUT,
                       [], ["remove --speculative-algorithm and the other --speculative-* flags"],
                       f"no draft weights/KV/scratch; {_fits_summary(nb)}", fits=nb.fits))
    return opts
