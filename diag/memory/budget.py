"""The per-GPU budget of one deployment, item by item, with where each number came from."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .. import knowledge as K
from ..versions import key as _vkey
from .common import (
    ACTIVATION_MIB_PER_TOKEN,
    CUDA_CONTEXT_GIB,
    DTYPE_BYTES,
    FP4_KV,
    GIB,
    GRAPH_MIB_PER_BS,
    LOG_GIB_ROUNDING,
    MAMBA_FULL_MEMORY_RATIO,
    METADATA_RESERVE_MIB,
    MIB,
    NEWEST_RULES,
    PREFILL_OOM_LIKELY_SHARE,
    REQ_TO_TOKEN_EXTRA,
    SPEC_AUTO_PARAMS,
    SPEC_DEFAULT_MAX_RUNNING,
    SWA_FULL_TOKENS_RATIO,
    _ge,
    _ver,
)
from .inputs import Deployment, Readings
from .provenance import explain
from .formulas import (
    MambaSplit,
    _prefill_graph_reserve_mib,
    default_graph_and_chunk,
    default_mem_fraction_static,
    estimate_weights,
    kv_cell_bytes,
    kv_dtype_bytes,
    mamba_slots_per_request,
    mamba_split,
    mamba_ssm_dtype,
    mamba_state_bytes,
    max_running_requests,
    overlap_schedule_on,
    resolve_mamba_strategy,
    swa_cell_bytes,
)


# How the GPU total was found, for the total's note (never nvidia-smi unless a snapshot gave it).
TOTAL_FROM = {"nvidia-smi": "nvidia-smi", "log": "PyTorch's out-of-memory message", "model": "GPU catalog"}


@dataclass
class Item:
    name: str
    label: str
    gib: float | None
    source: str
    note: str = ""

    def to_json(self) -> dict:
        return {"name": self.name, "label": self.label, "gib": _r(self.gib), "source": self.source, "note": self.note}


def _r(x, nd: int = 3):
    return None if x is None else round(float(x), nd)


@dataclass
class Budget:
    version: str
    items: list[Item] = field(default_factory=list)
    gpu_total_gib: float | None = None
    pre_load_free_gib: float | None = None
    after_load_free_gib: float | None = None
    weights_gib: float | None = None
    draft_weights_gib: float = 0.0
    static_budget_gib: float | None = None       # mem_fraction_static * pre_load_free
    headroom_gib: float | None = None            # pre_load_free * (1 - mfs)
    rest_gib: float | None = None                # after_load_free - headroom
    mem_fraction_static: float | None = None
    mem_fraction_static_auto: bool = False
    mem_fraction_reserved_mib: float | None = None
    min_viable_fraction: float | None = None
    kv_dtype: str | None = None
    kv_bytes_per_token: float | None = None      # target cell (what the pool charges per token, incl. SWA share)
    kv_cell_bytes: float | None = None           # incl. draft layers from 0.5.14
    kv_full_layer_bytes: float | None = None     # full-attention layers only (per-layer basis of the draft KV)
    kv_pool_gib: float | None = None
    draft_kv_gib: float = 0.0
    max_total_num_tokens: int | None = None
    swa_tokens: int | None = None
    context_len: int | None = None
    hybrid_mamba: bool = False
    mamba_bytes_per_slot: float | None = None
    mamba_conv_bytes_per_slot: float | None = None
    mamba_ssm_bytes_per_slot: float | None = None
    mamba_ssm_dtype: str | None = None
    mamba_strategy: str | None = None
    overlap_schedule: bool | None = None
    mamba_slots_per_request: int | None = None
    mamba_ratios: dict = field(default_factory=dict)   # strategy -> slots per request
    max_mamba_cache_size: int | None = None
    mamba_state_gib: float = 0.0
    spec_scratch_gib: float = 0.0
    speculative: str | None = None
    draft_tokens: int = 0
    draft_layers: int = 0
    max_running_requests: int | None = None
    max_running_requests_why: str = ""
    requested_running_requests: int | None = None
    cuda_graph_gib: float = 0.0
    cuda_graph_max_bs: int | None = None
    activations_gib: float = 0.0
    chunked_prefill_size: int | None = None
    free_gib: float | None = None
    fits: bool | None = None
    problems: list[str] = field(default_factory=list)
    goals: list[str] = field(default_factory=list)        # fix goals for the problems, most important first
    warnings: list[str] = field(default_factory=list)
    warning_goals: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sources: dict = field(default_factory=dict)
    readings: Readings | None = field(default=None, repr=False)
    deployment: Deployment | None = field(default=None, repr=False)

    def item(self, name: str) -> Item | None:
        return next((i for i in self.items if i.name == name), None)

    def problem(self, goal: str, text: str) -> None:
        self.problems.append(text)
        if goal not in self.goals:
            self.goals.append(goal)

    def warn(self, goal: str, text: str) -> None:
        self.warnings.append(text)
        if goal not in self.warning_goals:
            self.warning_goals.append(goal)

    def to_json(self) -> dict:
        out = {
            "sglang_rules": self.version,
            "total_gib": _r(self.gpu_total_gib), "pre_load_free_gib": _r(self.pre_load_free_gib),
            "after_load_free_gib": _r(self.after_load_free_gib),
            "weights_gib": _r(self.weights_gib), "draft_gib": _r(self.draft_weights_gib),
            "static_budget_gib": _r(self.static_budget_gib), "headroom_gib": _r(self.headroom_gib),
            "rest_gib": _r(self.rest_gib),
            "kv_pool_gib": _r(self.kv_pool_gib), "draft_kv_gib": _r(self.draft_kv_gib),
            "mamba_state_gib": _r(self.mamba_state_gib), "spec_scratch_gib": _r(self.spec_scratch_gib),
            "cuda_graph_gib": _r(self.cuda_graph_gib), "activations_gib": _r(self.activations_gib),
            "free_gib": _r(self.free_gib),
            "mem_fraction_static": _r(self.mem_fraction_static, 4), "mem_fraction_static_auto": self.mem_fraction_static_auto,
            "mem_fraction_reserved_mib": _r(self.mem_fraction_reserved_mib, 1),
            "min_viable_fraction": _r(self.min_viable_fraction, 4),
            "kv_dtype": self.kv_dtype, "kv_bytes_per_token": _r(self.kv_bytes_per_token, 1),
            "kv_cell_bytes": _r(self.kv_cell_bytes, 1),
            "max_total_num_tokens": self.max_total_num_tokens, "swa_tokens": self.swa_tokens,
            "context_len": self.context_len,
            "mamba_bytes_per_slot": _r(self.mamba_bytes_per_slot, 0),
            "mamba_mib_per_slot": _r(self.mamba_bytes_per_slot / MIB if self.mamba_bytes_per_slot else None, 2),
            "mamba_ssm_dtype": self.mamba_ssm_dtype, "mamba_strategy": self.mamba_strategy,
            "overlap_schedule": self.overlap_schedule,
            "mamba_slots_per_request": self.mamba_slots_per_request, "mamba_slots_per_request_by_strategy": self.mamba_ratios,
            "max_mamba_cache_size": self.max_mamba_cache_size,
            "speculative_algorithm": self.speculative, "speculative_num_draft_tokens": self.draft_tokens or None,
            "max_running_requests": self.max_running_requests, "max_running_requests_why": self.max_running_requests_why,
            "cuda_graph_max_bs": self.cuda_graph_max_bs, "chunked_prefill_size": self.chunked_prefill_size,
            "fits": self.fits, "problems": self.problems, "goals": self.goals, "warnings": self.warnings,
            "notes": self.notes, "sources": self.sources,
            "items": [i.to_json() for i in self.items],
            "provenance": explain(self),
        }
        return out


def _draft_info(dep: Deployment, model: K.ModelSpec | None) -> tuple[int, str, K.ModelSpec | None]:
    """(draft KV layers, description, separate draft model) for the speculative algorithm (§6)."""
    spec = dep.spec
    if not spec or spec == "NGRAM":
        return 0, "", None
    if dep.draft_model is not None:
        return max(1, dep.draft_model.kv_layers), f"draft model {dep.draft_model.name}", dep.draft_model
    if model and model.mtp_layers and (not dep.draft_model_path or spec == "EAGLE"):
        return model.mtp_layers, f"MTP ({model.mtp_layers} layer of the checkpoint)", None
    return 1, "draft model unknown (1 layer assumed, weights not counted)", None


def _spec_params(dep: Deployment) -> tuple[int, int, int, bool]:
    """(steps, topk, draft tokens D, assumed) with SGLang's adjustment D = steps + 1 when topk == 1 (§6)."""
    steps, topk, d = dep.speculative_num_steps, dep.speculative_eagle_topk, dep.speculative_num_draft_tokens
    assumed = steps is None and topk is None and d is None
    if assumed:
        steps, topk, d = SPEC_AUTO_PARAMS
    steps = steps or SPEC_AUTO_PARAMS[0]
    topk = topk or 1
    if topk == 1 or d is None:
        d = steps + 1
    return steps, topk, d, assumed


def budget(dep: Deployment, readings: Readings | None = None) -> Budget:
    """Per-GPU memory budget as the deployment's SGLang version computes it (§1–§8)."""
    R = readings or Readings()
    vk = _ver(dep.version)
    b = Budget(version=dep.version or f"unknown (rules of {NEWEST_RULES})", readings=R, deployment=dep)
    if not dep.version:
        b.notes.append(f"SGLang version unknown: rules of {NEWEST_RULES} used")
    model = dep.model
    if model is None:
        b.notes.append("model unknown: only the log's numbers are used")
    src = b.sources

    # -- GPU and free memory before loading (§1) ---------------------------------------
    total_mib = dep.total_mib
    if total_mib:
        b.gpu_total_gib, src["total"] = total_mib / 1024, ((dep.gpu_total_source or "flags") if dep.gpu_total_mib else "model")
    elif R.oom_total_gib:
        b.gpu_total_gib, src["total"] = R.oom_total_gib, "log"
        b.notes.append("GPU total from PyTorch's OOM message (a little below nvidia-smi's total)")
    if R.pre_load_free_gib is not None:
        b.pre_load_free_gib, src["pre_load_free"] = R.pre_load_free_gib, "log"
    elif R.after_load_free_gib is not None and R.weights_gib is not None:
        b.pre_load_free_gib, src["pre_load_free"] = R.after_load_free_gib + R.weights_gib, "log"
    elif b.gpu_total_gib is not None:
        b.pre_load_free_gib, src["pre_load_free"] = b.gpu_total_gib - CUDA_CONTEXT_GIB, "estimate"
    pre_gib = b.pre_load_free_gib

    # -- --mem-fraction-static (§2) ------------------------------------------------------
    if dep.mem_fraction_static is not None:
        b.mem_fraction_static, src["mem_fraction_static"] = dep.mem_fraction_static, "flags"
    elif R.mem_fraction_static is not None:
        b.mem_fraction_static, src["mem_fraction_static"] = R.mem_fraction_static, "log"
    else:
        d = default_mem_fraction_static(dep, model)
        b.mem_fraction_static, b.mem_fraction_reserved_mib = d.value, d.reserved_mib
        b.mem_fraction_static_auto, src["mem_fraction_static"] = True, "sglang-default"
        b.notes.append(f"--mem-fraction-static automatic: {d.value:.3f} (reserved {d.reserved_mib or 0:.0f} MiB: "
                       + ", ".join(d.terms) + ")")
    mfs = b.mem_fraction_static

    # -- speculative decoding (§6) --------------------------------------------------------
    spec = dep.spec
    b.speculative = spec
    draft_layers, draft_desc, draft_model = _draft_info(dep, model)
    D = 0
    if spec:
        steps, topk, D, assumed = _spec_params(dep)
        if spec == "NGRAM":
            D = dep.speculative_num_draft_tokens or D
        b.draft_tokens, b.draft_layers = D, draft_layers
        if assumed:
            b.notes.append(f"speculative steps/topk/draft tokens not given: SGLang chooses them; {steps}/{topk}/{D} assumed")
    requested = dep.max_running_requests or (SPEC_DEFAULT_MAX_RUNNING if spec else None)
    b.requested_running_requests = requested
    if spec and not dep.max_running_requests and _ge(vk, "0.5.4"):
        b.notes.append(f"speculative decoding sets --max-running-requests {SPEC_DEFAULT_MAX_RUNNING} when unset (§6)")

    # -- weights (models §1) ------------------------------------------------------------------
    est = estimate_weights(model, dep.tp, dep.pp, dep.attn_tp, language_only=dep.language_only) if model else None
    if R.weights_gib is not None:
        b.weights_gib, src["weights"], w_note = R.weights_gib, "log", "Load weight end: mem usage"
    elif R.pre_load_free_gib is not None and R.after_load_free_gib is not None and not (spec and _ge(vk, "0.5.14")):
        b.weights_gib, src["weights"], w_note = R.pre_load_free_gib - R.after_load_free_gib, "log", "free before - after loading"
    elif est:
        b.weights_gib, src["weights"], w_note = est.target_gib, "model", est.note
        if est.vision_gib > 0:
            w_note += f"; incl. vision tower {est.vision_gib:.2f} GiB"
        if est.mtp_gib > 0:
            w_note += f"; MTP {est.mtp_gib:.2f} GiB " + ("loaded as the draft" if spec else "not loaded")
    else:
        w_note = "unknown"
    if est and R.weights_gib is not None and est.target_gib > 0:
        diff = R.weights_gib / est.target_gib - 1
        if abs(diff) > 0.05:
            b.notes.append(f"weights printed {R.weights_gib:.2f} GiB vs {est.target_gib:.2f} GiB expected for "
                           f"{model.name} ({model.checkpoint_format}) at TP{dep.tp}: {diff:+.0%}")
    if spec and draft_layers:
        if R.draft_weights_gib is not None:
            b.draft_weights_gib, src["draft_weights"] = R.draft_weights_gib, "log"
        elif draft_model is not None:
            de = estimate_weights(draft_model, dep.tp, dep.pp, dep.attn_tp, language_only=True)
            b.draft_weights_gib, src["draft_weights"] = de.target_gib, "model"
        elif est and model.mtp_layers:
            b.draft_weights_gib, src["draft_weights"] = est.mtp_gib, "model"
    draft_in_static = bool(spec) and _ge(vk, "0.5.14")      # §6: 0.5.14+ loads the draft before the pools

    # after_load_free: the log's figure, else pre - weights (- draft in 0.5.14+)
    if R.after_load_free_gib is not None:
        b.after_load_free_gib, src["after_load_free"] = R.after_load_free_gib, "log"
    elif pre_gib is not None and b.weights_gib is not None:
        b.after_load_free_gib = pre_gib - b.weights_gib - (b.draft_weights_gib if draft_in_static else 0.0)
        src["after_load_free"] = "estimate" if src.get("pre_load_free") == "estimate" else src.get("weights", "model")
    after_gib = b.after_load_free_gib

    # -- headroom and rest (§1) ----------------------------------------------------------
    if pre_gib is not None and mfs is not None:
        b.static_budget_gib = pre_gib * mfs
        b.headroom_gib = pre_gib * (1 - mfs)
    if after_gib is not None and b.headroom_gib is not None:
        b.rest_gib = after_gib - b.headroom_gib
    if after_gib is not None and pre_gib:
        b.min_viable_fraction = 1 - after_gib / pre_gib           # printed by 0.5.14+ (errors §1.2)
        src["min_viable_fraction"] = "log" if src.get("after_load_free") == "log" and src.get("pre_load_free") == "log" else "estimate"
    if R.min_viable_fraction is not None and b.min_viable_fraction is None:
        b.min_viable_fraction, src["min_viable_fraction"] = R.min_viable_fraction, "log"

    ctx = dep.context_length or R.context_len or (model.max_position_embeddings if model else None) or 0
    b.context_len = ctx or None

    # -- Mamba state, spec scratch, KV cell --------------------------------------------------
    hybrid = (bool(model and model.is_hybrid_mamba) or R.mamba_cache_size is not None or R.mamba_per_req_mib is not None
              or R.mamba_bytes_per_slot is not None)
    b.hybrid_mamba = hybrid
    _kv_cell(b, dep, model, R, draft_layers, vk)
    ratio = None
    if hybrid:
        ratio = _mamba_setup(b, dep, model, R, vk)

    rest_bytes = b.rest_gib * GIB if b.rest_gib is not None else None
    if rest_bytes is not None and rest_bytes <= 0:
        _weights_problem(b, dep, vk)
    kv_budget_bytes = rest_bytes
    if hybrid and b.mamba_bytes_per_slot and rest_bytes is not None and ratio:
        split = mamba_split(dep.version, rest_bytes, b.mamba_bytes_per_slot, ratio=ratio, draft_tokens=D,
                            max_running_requests=requested, max_mamba_cache_size=dep.max_mamba_cache_size,
                            radix_disabled=dep.disable_radix_cache,
                            mamba_full_memory_ratio=dep.mamba_full_memory_ratio or MAMBA_FULL_MEMORY_RATIO,
                            attn_dp=dep.attn_dp)
        b.max_mamba_cache_size, src["max_mamba_cache_size"] = split.max_mamba_cache_size, src.get("mamba_bytes_per_slot", "model")
        b.mamba_state_gib = split.mamba_bytes / GIB
        b.spec_scratch_gib = split.scratch_bytes / GIB
        kv_budget_bytes = split.rest_after_bytes
        b.notes.append(f"Mamba slots: {split.case}")
        if R.mamba_cache_size is not None:
            if R.mamba_cache_size != split.max_mamba_cache_size:
                b.notes.append(f"log allocated {R.mamba_cache_size} Mamba slots; the formula gives {split.max_mamba_cache_size}")
            b.max_mamba_cache_size, src["max_mamba_cache_size"] = R.mamba_cache_size, "log"
            b.mamba_state_gib = R.mamba_cache_size * b.mamba_bytes_per_slot / GIB
        if R.intermediate_ssm_gib is not None or R.intermediate_conv_gib is not None:
            b.spec_scratch_gib, src["spec_scratch"] = (R.intermediate_ssm_gib or 0) + (R.intermediate_conv_gib or 0), "log"
        if rest_bytes <= 0:
            pass                                    # reported as a weights / static-budget problem
        elif b.max_mamba_cache_size <= 0 or split.rest_after_bytes + split.mamba_bytes <= 0:
            _mamba_problem(b, dep, vk, split, rest_bytes)
        elif b.max_mamba_cache_size // ratio < 1:
            b.problem("mamba", f"{b.max_mamba_cache_size} Mamba slots cannot hold one request at {ratio} slots per request"
                      + (" (SGLang 0.5.13+: 'Hybrid … state cache is too small to serve any requests')" if _ge(vk, "0.5.13") else ""))
    elif hybrid and rest_bytes is not None and not b.mamba_bytes_per_slot:
        b.notes.append("Mamba state per slot unknown: KV pool not computed")
        kv_budget_bytes = None

    # -- KV pool (§3) ---------------------------------------------------------------------------
    _kv_pool(b, dep, R, kv_budget_bytes, rest_bytes, vk)

    # -- request slots (§5.5) -----------------------------------------------------------------------
    if b.max_total_num_tokens is not None and b.max_total_num_tokens > 0:
        cap = b.max_mamba_cache_size // ratio if (hybrid and ratio and b.max_mamba_cache_size is not None) else None
        n, why = max_running_requests(dep.version, b.max_total_num_tokens, ctx or 1, requested=requested,
                                      mamba_cap=cap, attn_dp=dep.attn_dp)
        b.max_running_requests, b.max_running_requests_why, src["max_running_requests"] = n, why, "sglang-default"
        if R.max_running_requests is not None:
            if R.max_running_requests != n:
                b.notes.append(f"log: max_running_requests={R.max_running_requests}; the formula gives {n}")
            b.max_running_requests, src["max_running_requests"] = R.max_running_requests, "log"
        if requested and b.max_running_requests < requested // dep.attn_dp:
            goal = "mamba" if why.startswith("Mamba") else "decode"
            b.warn(goal, f"running requests capped at {b.max_running_requests} ({why}); {requested} requested"
                   + (" (speculative default)" if not dep.max_running_requests else ""))
        if ctx and b.max_total_num_tokens < ctx:
            b.warn("kv_pool", f"KV pool holds {b.max_total_num_tokens:,} tokens, less than the context length {ctx:,}: "
                   "one request cannot use the full context")
    elif R.max_running_requests is not None:
        b.max_running_requests, src["max_running_requests"] = R.max_running_requests, "log"

    # -- outside the static budget: graphs, draft, activations (§6–§8) ----------------------
    _headroom(b, dep, R, model, vk, draft_in_static)
    b.fits = not b.problems if (b.rest_gib is not None or b.problems) else None
    _items(b, dep, draft_in_static, draft_desc, w_note)
    if R.pool_end_avail_gib is not None and R.after_load_free_gib is not None:
        b.notes.append(f"log: the pools took {R.after_load_free_gib - R.pool_end_avail_gib:.2f} GiB "
                       f"(Load weight end {R.after_load_free_gib:.2f} -> Memory pool end {R.pool_end_avail_gib:.2f} GiB)")
    if R.mamba_total_rest_gib is not None and b.rest_gib is not None and abs(R.mamba_total_rest_gib - b.rest_gib) > 0.05:
        b.notes.append(f"log: total_rest_memory={R.mamba_total_rest_gib:.2f} GB; computed rest {b.rest_gib:.2f} GiB")
    if R.oom_tried_gib is not None and R.oom_free_gib is not None:
        b.notes.append(f"PyTorch OOM: tried {R.oom_tried_gib:.2f} GiB with {R.oom_free_gib:.2f} GiB free"
                       + (f" (process held {R.oom_process_gib:.2f} GiB)" if R.oom_process_gib is not None else ""))
    return b


def sglang_reserve_gib(dep: Deployment) -> float:
    """What SGLang's automatic fraction keeps outside the static pools: activations, metadata, graphs (§2)."""
    vk = _ver(dep.version)
    chunk_default, bs_default = default_graph_and_chunk(vk, dep.total_mib, dep.tp)
    chunk = dep.chunked_prefill_size or chunk_default
    tokens = max(chunk, 2048) if chunk > 0 else max(dep.max_prefill_tokens or 16384, 2048)
    graphs = 0 if dep.disable_cuda_graph else (dep.cuda_graph_max_bs or bs_default) * GRAPH_MIB_PER_BS
    return (METADATA_RESERVE_MIB + tokens * ACTIVATION_MIB_PER_TOKEN + graphs) / 1024


def _weights_problem(b: Budget, dep: Deployment, vk: tuple) -> None:
    weights_gib = (b.weights_gib or 0) + (b.draft_weights_gib if dep.spec and _ge(vk, "0.5.14") else 0)
    pre_gib, mfs = b.pre_load_free_gib, b.mem_fraction_static
    what = "weights" + (" + draft weights" if dep.spec and _ge(vk, "0.5.14") and b.draft_weights_gib else "")
    text = (f"{what} {weights_gib:.1f} GiB exceed the static budget {pre_gib * mfs:.1f} GiB "
            f"(--mem-fraction-static {mfs:.3f} x {pre_gib:.1f} GiB free)")
    if weights_gib >= pre_gib:
        text = f"{what} {weights_gib:.1f} GiB per GPU exceed the GPU's {pre_gib:.1f} GiB free memory: CUDA out of memory while loading"
    elif b.hybrid_mamba and _ge(vk, "0.5.13"):      # the Mamba share is computed first (errors §1.1)
        text += "; SGLang: 'Not enough GPU memory for hybrid (mamba/linear-attention) state cache'"
        if _ge(vk, "0.5.14"):
            text += f" or 'Loaded weights leave no GPU memory for the KV cache' (minimum viable {b.min_viable_fraction:.4f})"
    elif _ge(vk, "0.5.14"):
        text += f"; SGLang: 'Loaded weights leave no GPU memory for the KV cache' (minimum viable {b.min_viable_fraction:.4f})"
    else:
        text += "; SGLang: 'Not enough memory. Please try to increase --mem-fraction-static'"
    # weights that leave less than SGLang's own reserve on the GPU need fewer bytes per GPU, not a higher fraction
    if weights_gib + sglang_reserve_gib(dep) >= pre_gib:
        b.problem("weights", text)
    else:
        b.problem("kv_pool", text)
    if dep.spec and _ge(vk, "0.5.14") and b.draft_weights_gib and "speculative" not in b.goals:
        b.goals.append("speculative")


def _mamba_problem(b: Budget, dep: Deployment, vk: tuple, split: MambaSplit, rest_bytes: float) -> None:
    scratch = split.scratch_bytes / GIB
    text = (f"no room for the Mamba state: {split.max_mamba_cache_size} slots of {b.mamba_bytes_per_slot / MIB:.1f} MiB "
            f"from {rest_bytes / GIB:.1f} GiB")
    if scratch > 0 and dep.spec:
        text += f" after the speculative scratch {scratch:.1f} GiB ({b.requested_running_requests} requests x {b.draft_tokens} draft tokens x per-slot state)"
    if _ge(vk, "0.5.13"):
        text += "; SGLang: 'Not enough GPU memory for hybrid (mamba/linear-attention) state cache'"
    else:
        text += "; SGLang sizes a zero Mamba pool, then fails with 'Not enough memory' or an assertion"
    b.problem("mamba", text)
    if scratch > 0 and "speculative" not in b.goals:
        b.goals.append("speculative")


def _kv_cell(b: Budget, dep: Deployment, model: K.ModelSpec | None, R: Readings, draft_layers: int, vk: tuple) -> None:
    """KV bytes per token: model arithmetic, reconciled with the log's K/V sizes (§3)."""
    e, dtype, dsrc = kv_dtype_bytes(dep.kv_cache_dtype, model, R.kv_dtype)
    b.kv_dtype = dtype
    fp4 = (dep.kv_cache_dtype or "").lower() in FP4_KV
    model_cell = full_cell = None
    if model and model.num_hidden_layers:
        use_swa = model.is_hybrid_swa and not dep.disable_hybrid_swa_memory and _ge(vk, "0.4.10")
        if use_swa:
            ratio = dep.swa_full_tokens_ratio or SWA_FULL_TOKENS_RATIO
            model_cell, full_cell = swa_cell_bytes(model, dep.attn_tp, e, ratio, pp=dep.pp)
            b.notes.append(f"hybrid SWA: {model.swa['full_layers']} full + {model.swa['swa_layers']} sliding layers, "
                           f"SWA pool = {ratio:g} x full tokens (§4)")
        else:
            model_cell = full_cell = kv_cell_bytes(model, dep.attn_tp, e, pp=dep.pp, fp4=fp4)
    log_cell, tol = _log_kv_cell(R, dep.page_size or 1)
    if R.kv_bytes_per_token:
        b.kv_bytes_per_token, b.sources["kv_bytes_per_token"] = R.kv_bytes_per_token, "log"
    elif log_cell and not (model and model.is_hybrid_swa):
        if model_cell and abs(model_cell - log_cell) <= tol:
            b.kv_bytes_per_token, b.sources["kv_bytes_per_token"] = model_cell, "model"
            b.notes.append(f"KV bytes/token {model_cell:,.0f} matches the log's K/V sizes")
        else:
            b.kv_bytes_per_token, b.sources["kv_bytes_per_token"] = log_cell, "log"
            if model_cell:
                b.notes.append(f"log K/V sizes give {log_cell:,.0f} B/token; the model gives {model_cell:,.0f} "
                               "(different dtype, TP or checkpoint?) - the log's figure is used")
    elif model_cell:
        b.kv_bytes_per_token, b.sources["kv_bytes_per_token"] = model_cell, "model" if dsrc != "flags" else "flags"
    cell = b.kv_bytes_per_token
    if cell and draft_layers and _ge(vk, "0.5.14") and dep.spec in ("EAGLE", "EAGLE3", "STANDALONE"):
        kv_layers = max(1, model.kv_layers if model else draft_layers)
        cell = cell * (1 + draft_layers / kv_layers)   # §3: draft KV inside the target cell from 0.5.14
        b.notes.append(f"0.5.14+: KV cell includes {draft_layers} draft layer(s): x(1 + {draft_layers}/{kv_layers})")
    b.kv_cell_bytes = cell
    b.kv_full_layer_bytes = full_cell if (full_cell and b.kv_bytes_per_token == model_cell) else b.kv_bytes_per_token


def _log_kv_cell(R: Readings, page_size: int) -> tuple[float | None, float]:
    """Bytes per token from 'KV Cache is allocated' (sizes include one padding page), and the rounding tolerance."""
    tokens = R.kv_tokens or R.max_total_num_tokens
    if not tokens:
        return None, 0.0
    if R.k_size_gib is not None and R.v_size_gib is not None:
        size, n = R.k_size_gib + R.v_size_gib, 2
    elif R.kv_size_gib is not None:
        size, n = R.kv_size_gib, 1
    else:
        return None, 0.0
    slots = tokens + page_size
    return size * GIB / slots, n * LOG_GIB_ROUNDING * GIB / slots


def _mamba_setup(b: Budget, dep: Deployment, model: K.ModelSpec | None, R: Readings, vk: tuple) -> int:
    """Per-slot bytes (model, reconciled with the log) and slots per request; returns the ratio."""
    dtype, dsrc = mamba_ssm_dtype(dep, model)
    b.mamba_ssm_dtype = dtype
    ssm_bytes = DTYPE_BYTES.get(dtype.replace("torch.", ""), 4)
    per_slot = None
    if model and model.is_hybrid_mamba:
        conv, ssm = mamba_state_bytes(model, dep.attn_tp, ssm_bytes)
        if dep.pp > 1 and _ge(vk, "0.5.23"):              # §5.2: 0.5.23 PP ranks charge only their own layers
            conv, ssm = math.ceil(conv / dep.pp), math.ceil(ssm / dep.pp)
        b.mamba_conv_bytes_per_slot, b.mamba_ssm_bytes_per_slot = conv, ssm
        per_slot, b.sources["mamba_bytes_per_slot"] = conv + ssm, "model"
    if R.mamba_bytes_per_slot:
        per_slot, b.sources["mamba_bytes_per_slot"] = R.mamba_bytes_per_slot, "log"
    elif R.mamba_cache_size is not None and R.conv_state_gib is not None and R.ssm_state_gib is not None:
        slots = R.mamba_cache_size + 1                     # the pool holds size + 1 slots (padding)
        log_slot = (R.conv_state_gib + R.ssm_state_gib) * GIB / slots
        tol = 2 * LOG_GIB_ROUNDING * GIB / slots
        if per_slot and abs(per_slot - log_slot) <= tol:
            b.notes.append(f"Mamba bytes/slot {per_slot:,.0f} matches the log's conv/ssm sizes")
        else:
            if per_slot:
                b.notes.append(f"log conv/ssm sizes give {log_slot:,.0f} B/slot; the model gives {per_slot:,.0f} - the log's figure is used")
            per_slot, b.sources["mamba_bytes_per_slot"] = log_slot, "log"
    elif R.mamba_per_req_mib and not per_slot:
        per_slot, b.sources["mamba_bytes_per_slot"] = R.mamba_per_req_mib * MIB, "log"
    b.mamba_bytes_per_slot = per_slot
    strategy, why = resolve_mamba_strategy(dep)
    overlap, owhy = overlap_schedule_on(dep, strategy)
    spec = bool(dep.spec)
    b.mamba_strategy, b.overlap_schedule = strategy, overlap
    ratio = mamba_slots_per_request(dep.version, strategy, radix_disabled=dep.disable_radix_cache,
                                    overlap=overlap, speculative=spec)
    b.mamba_slots_per_request = ratio
    b.mamba_ratios = {
        "extra_buffer (overlap)": mamba_slots_per_request(dep.version, "extra_buffer", overlap=True, speculative=spec),
        "extra_buffer (no overlap)": mamba_slots_per_request(dep.version, "extra_buffer", overlap=False, speculative=spec),
        "no_buffer": mamba_slots_per_request(dep.version, "no_buffer", overlap=overlap, speculative=spec),
        "radix cache disabled": 1,
    }
    if not _ge(vk, "0.5.7"):
        b.mamba_ratios = {"radix cache on": 3, "radix cache disabled": 1}
    b.notes.append(f"Mamba strategy {strategy} ({why}); overlap scheduler {'on' if overlap else 'off'} ({owhy}); "
                   f"{ratio} slots per running request")
    if spec and strategy == "no_buffer" and not dep.disable_radix_cache:
        if _ge(vk, "0.5.10") and not _ge(vk, "0.5.14"):
            b.warn("mamba", "SGLang 0.5.10–0.5.13 refuses speculative decoding with radix cache and no_buffer "
                   "(ValueError): use --mamba-scheduler-strategy extra_buffer or --disable-radix-cache")
        elif _ge(vk, "0.5.9") and not _ge(vk, "0.5.10"):
            b.notes.append("0.5.9 disables the radix cache for speculative decoding on this model (1 slot per request)")
    if spec and strategy.startswith("extra_buffer") and _vkey("0.5.10") <= vk < _vkey("0.5.11") and not overlap \
            and not dep.disable_overlap_schedule:
        b.warn("mamba", "SGLang 0.5.10 needs SGLANG_ENABLE_SPEC_V2=1 for extra_buffer with speculative decoding "
               "(overlap off without it: 4 slots per request)")
    return ratio


def _kv_pool(b: Budget, dep: Deployment, R: Readings, kv_budget_bytes: float | None, rest_bytes: float | None,
             vk: tuple) -> None:
    """max_total_num_tokens = floor(kv_budget / cell), capped, page-aligned (§3)."""
    cell = b.kv_cell_bytes
    tokens = None
    if kv_budget_bytes is not None and cell:
        tokens = max(0, math.floor(kv_budget_bytes / cell))
        if dep.max_total_tokens:
            tokens = min(tokens, dep.max_total_tokens)
        page = dep.page_size or 1
        tokens = tokens // page * page
        if dep.spec and not _ge(vk, "0.5.7") and b.requested_running_requests and tokens > 0:
            steps, topk, d, _ = _spec_params(dep)      # 0.4.6–0.5.6 add spec headroom tokens beyond the budget
            tokens += b.requested_running_requests * (steps * topk + d) + 100
        b.sources["max_total_num_tokens"] = "sglang-default"
    logged = R.kv_tokens or R.max_total_num_tokens
    if logged:
        if tokens is not None and tokens > 0 and abs(logged / tokens - 1) > 0.01:
            b.notes.append(f"log: {logged:,} KV tokens; the formula gives {tokens:,}")
        tokens, b.sources["max_total_num_tokens"] = logged, "log"
    b.max_total_num_tokens = tokens
    if tokens is not None:
        target_cell = b.kv_bytes_per_token or 0
        b.kv_pool_gib = tokens * target_cell / GIB
        if b.kv_cell_bytes and target_cell and b.kv_cell_bytes > target_cell:
            b.draft_kv_gib = tokens * (b.kv_cell_bytes - target_cell) / GIB
        if dep.model and dep.model.is_hybrid_swa and not dep.disable_hybrid_swa_memory:
            ratio = dep.swa_full_tokens_ratio or SWA_FULL_TOKENS_RATIO
            b.swa_tokens = R.swa_tokens or int(tokens * ratio)
    if tokens is not None and tokens <= 0 and not b.problems:
        left = (kv_budget_bytes or 0) / GIB
        b.problem("kv_pool", f"no room for the KV cache: {left:.2f} GiB left after weights"
                  + (" and Mamba state" if b.hybrid_mamba else "")
                  + f" under --mem-fraction-static {b.mem_fraction_static:.3f}; SGLang: 'Not enough memory. "
                  "Please try to increase --mem-fraction-static'")


def _headroom(b: Budget, dep: Deployment, R: Readings, model: K.ModelSpec | None, vk: tuple, draft_in_static: bool) -> None:
    """CUDA graphs, draft memory before 0.5.14, and activations, all outside the static budget (§6–§8)."""
    chunk_default, bs_default = default_graph_and_chunk(vk, dep.total_mib, dep.tp)
    chunk = dep.chunked_prefill_size or chunk_default
    b.chunked_prefill_size = chunk
    max_bs = dep.cuda_graph_max_bs or bs_default
    mrr = b.max_running_requests or b.requested_running_requests
    capture_bs = min(max_bs, mrr) if mrr else max_bs        # graphs are captured up to the request-slot count
    b.cuda_graph_max_bs = max_bs
    if dep.disable_cuda_graph:
        graphs, gsrc = 0.0, "flags"
    elif R.graph_mem_gib is not None:
        graphs, gsrc = R.graph_mem_gib, "log"
    elif R.graph_begin_avail_gib is not None and R.graph_end_avail_gib is not None:
        graphs, gsrc = R.graph_begin_avail_gib - R.graph_end_avail_gib, "log"
    else:
        graphs = capture_bs * GRAPH_MIB_PER_BS / 1024
        if dep.spec:
            graphs *= 2                                    # draft decode graphs on top of the target's (estimate)
        is_mla = bool(model and model.is_mla)
        graphs += _prefill_graph_reserve_mib(vk, dep, chunk, is_mla) / 1024
        gsrc = "estimate"
    b.cuda_graph_gib, b.sources["cuda_graphs"] = graphs, gsrc
    tokens_for_table = (mrr or 0) * ((b.context_len or 0) + REQ_TO_TOKEN_EXTRA + b.draft_tokens) * 4
    prefill_tokens = max(chunk, 2048) if chunk > 0 else max(dep.max_prefill_tokens or 16384, 2048)
    b.activations_gib = (prefill_tokens * ACTIVATION_MIB_PER_TOKEN + METADATA_RESERVE_MIB) / 1024 + tokens_for_table / GIB
    b.sources["activations"] = "sglang-default"
    if b.headroom_gib is None:
        return
    draft_outside = 0.0 if draft_in_static else (b.draft_weights_gib + _draft_kv_outside(b, dep, vk))
    need_hard = graphs + draft_outside
    if b.rest_gib is not None and b.rest_gib > 0 and need_hard > b.headroom_gib:
        goal = "speculative" if draft_outside > graphs else "cuda_graph"
        b.problem(goal, f"CUDA graphs {graphs:.1f} GiB" + (f" + draft model {draft_outside:.1f} GiB" if draft_outside else "")
                  + f" exceed the {b.headroom_gib:.1f} GiB left outside the static budget "
                  f"(1 - {b.mem_fraction_static:.3f}) x {b.pre_load_free_gib:.1f} GiB")
    prefill_proxy_gib = prefill_tokens * ACTIVATION_MIB_PER_TOKEN / 1024
    left = b.headroom_gib - need_hard
    if b.rest_gib is not None and b.rest_gib > 0 and 0 <= left < prefill_proxy_gib * PREFILL_OOM_LIKELY_SHARE:
        b.warn("prefill", f"only {left:.1f} GiB left outside the static pools after graphs"
               + (" and the draft model" if draft_outside else "") + f"; SGLang budgets {prefill_proxy_gib:.1f} GiB for a "
               f"{prefill_tokens}-token prefill chunk: a prefill will likely run out of memory")
    if R.available_gpu_mem_gib is not None and R.available_gpu_mem_gib < prefill_proxy_gib * PREFILL_OOM_LIKELY_SHARE:
        b.warn("prefill", f"available_gpu_mem {R.available_gpu_mem_gib:.2f} GiB after graphs is small for a "
               f"{prefill_tokens}-token prefill chunk (SGLang budgets {prefill_proxy_gib:.1f} GiB): prefill OOM likely")


def _draft_kv_outside(b: Budget, dep: Deployment, vk: tuple) -> float:
    """Before 0.5.14 the draft KV pool has as many tokens as the target's, from the headroom (§6)."""
    if not dep.spec or _ge(vk, "0.5.14") or not b.draft_layers or not b.max_total_num_tokens:
        return 0.0
    model = dep.draft_model or dep.model
    if model is None or not b.kv_bytes_per_token:
        return 0.0
    per_layer = (b.kv_full_layer_bytes or b.kv_bytes_per_token) / max(1, dep.model.kv_layers if dep.model else 1)
    if dep.draft_model is not None:
        e, _, _ = kv_dtype_bytes(dep.kv_cache_dtype, dep.draft_model)
        per_token = kv_cell_bytes(dep.draft_model, dep.attn_tp, e, pp=dep.pp)
    else:
        per_token = per_layer * b.draft_layers
    return b.max_total_num_tokens * per_token / GIB



def _items(b: Budget, dep: Deployment, draft_in_static: bool, draft_desc: str, w_note: str) -> None:
    """The ordered budget table; free = total - everything else."""
    vk = _ver(dep.version)
    src = b.sources
    items = b.items
    total = b.gpu_total_gib
    items.append(Item("total", "GPU total", total, src.get("total", "model"),
                      f"{dep.total_mib:,} MiB ({TOTAL_FROM.get(src.get('total'), 'given')})" if dep.total_mib else ""))
    ctx_gib = (total - b.pre_load_free_gib) if (total is not None and b.pre_load_free_gib is not None) else None
    items.append(Item("cuda_context", "CUDA context / NCCL", ctx_gib, src.get("pre_load_free", "estimate"),
                      "total - free at 'Load weight begin'"))
    items.append(Item("weights", "weights", b.weights_gib, src.get("weights", "model"), w_note))
    draft_kv_out = _draft_kv_outside(b, dep, vk)
    if dep.spec:
        where = "in the static budget (0.5.14+)" if draft_in_static else "from the headroom (before 0.5.14)"
        items.append(Item("draft_weights", "draft weights", b.draft_weights_gib, src.get("draft_weights", "model"),
                          f"{draft_desc}; {where}"))
    kv_note = ""
    if b.max_total_num_tokens is not None and b.kv_bytes_per_token:
        kv_note = f"{b.max_total_num_tokens:,} tokens x {b.kv_bytes_per_token:,.0f} B ({b.kv_dtype})"
    items.append(Item("kv_pool", "KV pool", b.kv_pool_gib, src.get("max_total_num_tokens", "model"), kv_note))
    if dep.spec and b.draft_layers:
        d_kv = b.draft_kv_gib if draft_in_static else draft_kv_out
        items.append(Item("draft_kv", "draft KV", d_kv, "estimate" if not draft_in_static else src.get("max_total_num_tokens", "model"),
                          "same tokens as the target, draft layers only; " + ("in the KV cell (0.5.14+)" if draft_in_static else "from the headroom")))
    if b.hybrid_mamba:
        note = ""
        if b.max_mamba_cache_size is not None and b.mamba_bytes_per_slot:
            note = f"{b.max_mamba_cache_size} slots x {b.mamba_bytes_per_slot / MIB:.2f} MiB"
        items.append(Item("mamba_state", "Mamba state", b.mamba_state_gib, src.get("max_mamba_cache_size", "model"), note))
        if dep.spec:
            items.append(Item("spec_scratch", "spec scratch (Mamba)", b.spec_scratch_gib, src.get("spec_scratch", "model"),
                              f"per-slot state x {b.draft_tokens} draft tokens per running request"))
    items.append(Item("cuda_graphs", "CUDA graphs", b.cuda_graph_gib, src.get("cuda_graphs", "estimate"),
                      "measured 'mem usage'" if src.get("cuda_graphs") == "log" else
                      f"SGLang's reserve: 2 MiB x bs up to {min(b.cuda_graph_max_bs or 0, b.max_running_requests or b.cuda_graph_max_bs or 0)}"
                      + (" (x2 with draft graphs)" if dep.spec else "") + " + prefill graphs"))
    items.append(Item("activations", "activations (reserve)", b.activations_gib, "sglang-default",
                      f"prefill {max(b.chunked_prefill_size or 0, 2048)} tokens x 1.5 MiB + 512 MiB metadata + req_to_token"))
    free = None
    if b.readings and b.readings.available_gpu_mem_gib is not None:
        free, fsrc = b.readings.available_gpu_mem_gib - b.activations_gib, "log"
        note = "available_gpu_mem after graphs - activation reserve"
    elif total is not None and b.weights_gib is not None and b.kv_pool_gib is not None:
        free = total - sum(i.gib for i in items[1:] if i.gib is not None)
        fsrc, note = "estimate", "total - all of the above"
    else:
        fsrc, note = "estimate", "unknown"
    b.free_gib = free
    items.append(Item("free", "free", free, fsrc, note + ("; negative = the activation reserve is not all there"
                                                             if free is not None and free < 0 else "")))
