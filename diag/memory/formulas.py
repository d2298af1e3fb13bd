"""SGLang's sizing formulas, one place each: default fraction, weights, KV and Mamba bytes, slot ratios, request caps."""
from __future__ import annotations

import math
from dataclasses import dataclass

from .. import knowledge as K
from .common import (
    ACTIVATION_MIB_PER_TOKEN,
    DTYPE_BYTES,
    FP4_KV,
    GIB,
    GRAPH_MIB_PER_BS,
    MAMBA_FULL_MEMORY_RATIO,
    METADATA_RESERVE_MIB,
    PREFILL_GRAPH_MIB_PER_SIZE,
    PREFILL_GRAPH_MLA_MIB,
    RADIX_OFF_DEFAULT_SLOTS,
    _ge,
    _ver,
)
from .inputs import Deployment, _bool


def default_graph_and_chunk(vk: tuple, gpu_mem_mib: int | None, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) defaults by GPU capacity (§2 table, 0.5.4+)."""
    if not _ge(vk, "0.5.4"):
        # 0.4.x: chunk 2048 below 25000 MiB else 8192; graphs up to 160 (256 on > 96 GiB GPUs, §7)
        chunk = 2048 if gpu_mem_mib and gpu_mem_mib < 25000 else 8192
        return chunk, (256 if gpu_mem_mib and gpu_mem_mib > 96 * 1024 else 160)
    if gpu_mem_mib is None:
        return 4096, 160
    small = tp < 4
    if gpu_mem_mib < 20 * 1024:
        return 2048, 8
    if gpu_mem_mib < 35 * 1024:
        if _ge(vk, "0.5.23"):
            return 4096, (48 if small else 160)
        return 2048, (24 if small else 80)
    if gpu_mem_mib < 60 * 1024:
        return 4096, (32 if small else 160)
    if gpu_mem_mib < 160 * 1024:
        return 8192, (256 if small else 512)
    return 16384, 512


def piecewise_token_sizes(max_tokens: int) -> list[int]:
    """Prefill (piecewise) CUDA graph sizes (server_args._generate_piecewise_cuda_graph_tokens; 58 for 8192, §2)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1025, 64)) + list(range(1280, 4097, 256)) + list(range(4608, max_tokens + 1, 512)))
    return [s for s in sizes if s <= max_tokens]


def decode_graph_batch_sizes(max_bs: int, speculative: bool) -> list[int]:
    """Decode CUDA graph capture sizes (§7)."""
    if speculative:
        bs = (list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8))
              + list(range(272, max_bs + 1, 16)))
    else:
        bs = [1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 512, 16)) + list(range(512, max_bs + 1, 32))
    return [b for b in bs if b <= max_bs]


@dataclass
class MfsDefault:
    value: float
    reserved_mib: float | None
    terms: list[str]


def default_mem_fraction_static(dep: Deployment, model: K.ModelSpec | None = None) -> MfsDefault:
    """SGLang's automatic --mem-fraction-static for this version (§2)."""
    vk = _ver(dep.version)
    model = model or dep.model
    gpu_mem = dep.total_mib
    spec = dep.spec
    par = dep.tp * dep.pp
    if gpu_mem is None:
        value = 0.95 if _ge(vk, "0.5.23") else 0.88      # §2 "without gpu info"
        return MfsDefault(value, None, ["no GPU capacity known: SGLang's fallback"])
    if not _ge(vk, "0.4.10"):
        # 0.4.6.post5 (§2): steps by parallel size, then a bonus on > 96 GiB GPUs
        mfs = 0.88
        if gpu_mem <= 81920:
            mfs = 0.79 if par >= 16 else 0.81 if par >= 8 else 0.85 if par >= 4 else 0.87 if par >= 2 else 0.88
        if gpu_mem > 96 * 1024:
            mfs = min(mfs + 48 * 1024 * (1 - mfs) / gpu_mem, (gpu_mem - 18 * 1024) / gpu_mem)
        return MfsDefault(mfs, None, [f"0.4.6 rule for tp*pp={par}"])
    if not _ge(vk, "0.5.4"):
        # 0.4.10.post2 (§2)
        if gpu_mem < 35 * 1024:
            reserved = (2.8 + par / 10) * 1024
        elif gpu_mem < 90 * 1024:
            reserved = (9.5 + par / 2) * 1024
        elif gpu_mem < 160 * 1024:
            reserved = (12 + par / 2) * 1024
        else:
            reserved = 32 * 1024
        terms = [f"base {reserved:.0f}"]
        if spec:
            reserved += 2048
            terms.append("speculative +2048")
        if dep.dp_attention:
            reserved += 4096
            terms.append("DP attention +4096")
        return MfsDefault(round((gpu_mem - reserved) / gpu_mem, 3), reserved, terms)

    chunk_default, bs_default = default_graph_and_chunk(vk, gpu_mem, dep.tp)
    chunk = dep.chunked_prefill_size or chunk_default
    max_bs = dep.cuda_graph_max_bs or bs_default
    if _ge(vk, "0.5.23") and dep.cuda_graph_max_bs is None and dep.max_running_requests:
        max_bs = min(max_bs, dep.max_running_requests)       # §2 0.5.23 lowers an unset decode max_bs
    is_mla = bool(model and model.is_mla)
    activation_tokens = max(chunk, 2048) if chunk > 0 else max(dep.max_prefill_tokens or 16384, 2048)
    reserved = METADATA_RESERVE_MIB + activation_tokens * ACTIVATION_MIB_PER_TOKEN
    terms = [f"metadata {METADATA_RESERVE_MIB}", f"activations {activation_tokens}x1.5"]
    decode_graphs = not (_ge(vk, "0.5.19") and dep.disable_cuda_graph)   # ≤0.5.14 always counts max_bs*2 (§7)
    if decode_graphs:
        reserved += max_bs * GRAPH_MIB_PER_BS
        terms.append(f"decode graphs {max_bs}x2")
    reserved += par / 8 * 1024
    terms.append(f"tp*pp/8 GiB = {par / 8 * 1024:.0f}")
    if dep.dp_attention:
        reserved += max_bs * dep.dp * 3 + (max_bs * dep.dp * 1.5 if max_bs > 300 else 0)
        terms.append("DP attention padding")
    prefill_mib = _prefill_graph_reserve_mib(vk, dep, chunk, is_mla)
    floor_first = _ge(vk, "0.5.6") and not _ge(vk, "0.5.7")   # 0.5.6.post2 floors before the piecewise term
    if floor_first and gpu_mem > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    if prefill_mib:
        reserved += prefill_mib
        terms.append(f"prefill graphs {prefill_mib:.0f}")
    if not floor_first and gpu_mem > 60 * 1024 and reserved < 10 * 1024:
        reserved = 10 * 1024
        terms.append("floor 10 GiB")
    if spec and not _ge(vk, "0.5.14"):                 # draft reserve; 0.5.14+ counts draft memory instead (§6)
        extra = 6144 if spec == "STANDALONE" else 0 if spec == "NGRAM" else (4096 if _ge(vk, "0.5.10") else 2048)
        reserved += extra
        terms.append(f"speculative +{extra}")
    mfs = round((gpu_mem - reserved) / gpu_mem, 3)
    factor = _vlm_factor(vk, dep, model)
    if factor != 1.0:
        terms.append(f"multimodal x{factor:.4f}")
        mfs = mfs * factor
    return MfsDefault(mfs, reserved, terms)


def _prefill_graph_reserve_mib(vk: tuple, dep: Deployment, chunk: int, is_mla: bool) -> float:
    """Piecewise / prefill CUDA graph term of the automatic reserve, per version (§2)."""
    max_tokens = 2048 if is_mla else chunk            # piecewise_cuda_graph_max_tokens default
    if _ge(vk, "0.5.10"):                             # on unless disabled (0.5.14+: prefill backend)
        if dep.disable_prefill_graph:
            return 0.0
        return PREFILL_GRAPH_MLA_MIB if is_mla else len(piecewise_token_sizes(max_tokens)) * PREFILL_GRAPH_MIB_PER_SIZE
    if not dep.enable_piecewise_cuda_graph or not _ge(vk, "0.5.6"):
        return 0.0
    if not _ge(vk, "0.5.7"):
        return max_tokens // 4
    if not _ge(vk, "0.5.8"):
        return max_tokens // 8
    return len(piecewise_token_sizes(max_tokens)) * PREFILL_GRAPH_MIB_PER_SIZE


def _vlm_factor(vk: tuple, dep: Deployment, model: K.ModelSpec | None) -> float:
    """adjust_mem_fraction_for_vlm: 0.95 * clamp(1 - 0.1*(layers*hidden^2/(24*1024^2) - 1), 0.8, 1.05) (§2)."""
    if not model or not model.multimodal or dep.language_only or _ge(vk, "0.5.19"):
        return 1.0
    if _ge(vk, "0.5.23") and model.architecture in ("Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration") \
            and not dep.enable_multimodal:
        return 1.0
    v = model.vision or {}
    layers = v.get("num_hidden_layers") or 24        # SGLang: getattr(vision_config, "num_hidden_layers", 24)
    hidden = v.get("hidden_size") or 1024            # SGLang: getattr(vision_config, "hidden_size", 1024)
    ratio = layers * hidden ** 2 / (24 * 1024 ** 2)
    return 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))


# -- weights (models §1) ------------------------------------------------------------------

def _format_bytes(fmt: str | None, group: str) -> float:
    """Bytes per parameter of a group in a checkpoint format (models §1.1)."""
    linear = group in ("attn", "attn_kv", "attn_replicated", "linear_attn", "mlp_dense", "shared_experts",
                       "experts", "eh_proj")
    if fmt in (None, "bf16", "fp16"):
        return 2.0
    if fmt == "fp8":
        return K.FP8_BLOCK_BYTES if linear else 2.0
    if fmt == "mxfp4":                      # gpt-oss: experts only; attention, router, embeddings BF16
        return K.MXFP4_BYTES if group == "experts" else 2.0
    if fmt == "nvfp4":                      # ModelOpt mixed: attention/GDN FP8, MLPs and lm_head NVFP4
        if group in ("mlp_dense", "shared_experts", "experts", "lm_head"):
            return K.NVFP4_BYTES
        return K.FP8_BLOCK_BYTES if linear else 2.0
    if fmt in ("awq", "gptq"):
        return K.INT4_G128_BYTES if linear else 2.0
    if fmt == "w8a8":
        return 1.0 if linear else 2.0
    return 2.0


def _per_gpu_share(group: str, model: K.ModelSpec, tp: int, attn_tp: int) -> float:
    """Fraction of a parameter group one GPU holds (models §1.2)."""
    if group in ("attn", "linear_attn"):
        return 1 / attn_tp
    if group == "attn_kv":                  # every rank keeps >= 1 KV head: replicated once attn_tp > kv heads
        kvh = max(1, model.num_key_value_heads)
        return max(1, kvh // attn_tp) / kvh
    if group in ("attn_replicated", "small", "eh_proj"):    # eh_proj: replicated nn.Linear of the MTP module
        return 1.0
    return 1 / tp                           # MLPs, experts (any EP split), vocab-parallel embed / lm_head


@dataclass
class WeightEstimate:
    target_gib: float
    mtp_gib: float
    vision_gib: float
    note: str


def estimate_weights(model: K.ModelSpec, tp: int = 1, pp: int = 1, attn_tp: int | None = None,
                     *, language_only: bool = False) -> WeightEstimate:
    """Target and MTP weights per GPU (models §1): config arithmetic, scaled to the published size."""
    attn_tp = attn_tp or tp
    fmt = model.weight_quant
    groups = model.param_groups()
    have_config = model.hidden_size > 0 and model.num_hidden_layers > 0
    layer_bytes = embed_bytes = head_bytes = total_bytes = 0.0
    for g, n in groups.items():
        b = n * _format_bytes(fmt, g)
        total_bytes += b
        share = b * _per_gpu_share(g, model, tp, attn_tp)
        if g == "embed":
            embed_bytes += share
        elif g == "lm_head":
            head_bytes += share
        else:
            layer_bytes += share
    # pipeline stages split the layers; the first holds the embedding, the last the lm_head
    target = layer_bytes / pp + (max(embed_bytes, head_bytes) if pp > 1 else embed_bytes + head_bytes)
    mtp_fmt = None if fmt == "nvfp4" else fmt       # ModelOpt NVFP4 checkpoints exclude the MTP layers
    mtp_groups = model.mtp_param_groups()
    mtp_total = sum(n * _format_bytes(mtp_fmt, g) for g, n in mtp_groups.items())
    mtp = sum(n * _format_bytes(mtp_fmt, g) * _per_gpu_share(g, model, tp, attn_tp) for g, n in mtp_groups.items())
    vision_total = model.vision_params() * 2          # vision towers stay BF16
    vision = 0.0 if language_only else vision_total / tp
    computed_total = total_bytes + mtp_total + vision_total
    published = model.weights_gib_checkpoint
    note = "from config arithmetic"
    if published and have_config and computed_total > 0:
        scale = published * GIB / computed_total
        if 0.8 <= scale <= 1.25:                      # same checkpoint: anchor the split to the published size
            target, mtp, vision = target * scale, mtp * scale, vision * scale
            note = f"{model.weights_includes or 'published size'} {published:.2f} GiB, split by config"
        else:
            target, mtp, vision = published * GIB / (tp * pp), 0.0, 0.0
            note = f"{model.weights_includes or 'published size'} {published:.2f} GiB / {tp * pp} GPUs (config incomplete)"
    elif published and not have_config:
        target, mtp, vision = published * GIB / (tp * pp), 0.0, 0.0
        note = f"published size {published:.2f} GiB / {tp * pp} GPUs"
    elif not have_config and model.params_total_b:
        target = model.params_total_b * 1e9 * _format_bytes(fmt, "mlp_dense") / (tp * pp)
        note = f"{model.params_total_b}B parameters x format bytes / {tp * pp} GPUs"
    return WeightEstimate(target / GIB + vision / GIB, mtp / GIB, vision / GIB, note)


# -- KV cache (§3, §4; models §2) -------------------------------------------------------

def kv_dtype_bytes(kv_cache_dtype: str | None, model: K.ModelSpec | None, printed: str | None = None) -> tuple[float, str, str]:
    """(bytes per KV element, dtype name, source) for --kv-cache-dtype (§3 'e')."""
    flag = (kv_cache_dtype or "auto").lower()
    if flag != "auto":
        if flag in FP4_KV:
            return 0.5, flag, "flags"
        return float(DTYPE_BYTES.get(flag, 2)), flag, "flags"
    if printed:
        name = printed.replace("torch.", "").lower()
        if name in DTYPE_BYTES:
            return float(DTYPE_BYTES[name]), name, "log"
    if model and model.kv_cache_quant == "fp8":
        return 1.0, "fp8 (checkpoint KV scheme)", "model"
    dtype = (model.torch_dtype if model and model.torch_dtype else "bfloat16").replace("torch.", "")
    return float(min(2, DTYPE_BYTES.get(dtype, 2))), dtype, "model" if model else "sglang-default"


def kv_cell_bytes(model: K.ModelSpec, attn_tp: int, e: float, *, pp: int = 1, fp4: bool = False) -> float:
    """KV bytes per token on one rank for the target's own layers (§3 cell_size, models §2).

    MHA/GQA: max(1, kv_heads // attn_tp) * (head_dim + v_head_dim) * L * e (KV heads replicated
    once attn_tp > kv heads); MLA: (kv_lora_rank + qk_rope_head_dim) * L * e, not split by TP.
    L = layers holding KV (hybrid GDN: full-attention layers; PP: this rank's share).
    """
    layers = math.ceil(model.kv_layers / pp)
    if model.is_mla:
        elements = (model.mla["kv_lora_rank"] + model.mla["qk_rope_head_dim"]) * layers
    else:
        heads = max(1, model.num_key_value_heads // attn_tp)
        elements = heads * 2 * model.head_dim_ * layers
    if fp4:                                  # packed two per byte + an 8-bit scale per 16 values (§3)
        return elements / 2 + elements / 16
    return elements * e


def swa_cell_bytes(model: K.ModelSpec, attn_tp: int, e: float, ratio: float, *, pp: int = 1) -> tuple[float, float]:
    """(bytes per full-pool token incl. the SWA pool's share, full-layer bytes) for hybrid SWA (§4).

    cell = full_per_token * full_layers + ratio * swa_per_token * swa_layers (0.5.9+ memory split;
    the 0.4.10–0.5.8 token split gives the same pool sizes for equal per-layer sizes).
    """
    heads = max(1, model.num_key_value_heads // attn_tp)
    per_layer = heads * 2 * model.head_dim_ * e
    full = math.ceil(model.swa["full_layers"] / pp) * per_layer
    swa = math.ceil(model.swa["swa_layers"] / pp) * per_layer
    return full + ratio * swa, full


# -- Mamba / GDN state (§5) -------------------------------------------------------------

def mamba_state_bytes(model: K.ModelSpec, attn_tp: int, ssm_bytes: int, conv_bytes: int = 2) -> tuple[int, int]:
    """(conv, ssm) bytes of one request slot on one rank, all GDN layers (§5.1 mamba_cache_per_req)."""
    la = model.linear
    t = attn_tp
    n_groups = la["linear_num_key_heads"]
    if n_groups % t:
        n_groups = math.ceil(n_groups / t) * t          # key groups padded to a multiple of t
    conv_dim = la["linear_value_head_dim"] * la["linear_num_value_heads"] + 2 * n_groups * la["linear_key_head_dim"]
    conv = conv_dim // t * (la["linear_conv_kernel_dim"] - 1) * conv_bytes
    ssm = la["linear_num_value_heads"] // t * la["linear_value_head_dim"] * la["linear_key_head_dim"] * ssm_bytes
    layers = model.num_linear_layers
    return conv * layers, ssm * layers


def mamba_ssm_dtype(dep: Deployment, model: K.ModelSpec | None) -> tuple[str, str]:
    """(dtype, source): --mamba-ssm-dtype, env SGLANG_MAMBA_SSM_DTYPE (0.5.9+), config, float32 (§5)."""
    vk = _ver(dep.version)
    if dep.mamba_ssm_dtype:
        return dep.mamba_ssm_dtype, "flags"
    if _ge(vk, "0.5.9"):
        env = dep.env.get("SGLANG_MAMBA_SSM_DTYPE")
        if env:
            return env, "flags"
        if model and model.linear and model.linear.get("mamba_ssm_dtype"):
            return model.linear["mamba_ssm_dtype"], "model"
    return "float32", "sglang-default"


def resolve_mamba_strategy(dep: Deployment) -> tuple[str, str]:
    """(strategy, why) after SGLang resolves 'auto' (§5.4)."""
    vk = _ver(dep.version)
    s = (dep.mamba_strategy or "auto").lower()
    if not _ge(vk, "0.5.7"):
        return "no_buffer", "no strategy flag before 0.5.7"
    if s != "auto":
        return s, "flags"
    if not _ge(vk, "0.5.14"):
        return "no_buffer", "auto = no_buffer in 0.5.7–0.5.13"
    if not dep.disable_overlap_schedule or (dep.page_size or 1) > 1:
        return "extra_buffer", "auto = extra_buffer with the overlap scheduler (0.5.14+)"
    return "no_buffer", "auto = no_buffer without the overlap scheduler (0.5.14+)"


def overlap_schedule_on(dep: Deployment, strategy: str | None = None) -> tuple[bool, str]:
    """Whether the overlap scheduler runs (§6 overlap; §5.4 no_buffer forces it off)."""
    vk = _ver(dep.version)
    if dep.disable_overlap_schedule:
        return False, "--disable-overlap-schedule"
    spec = dep.spec
    if spec in ("EAGLE", "EAGLE3", "STANDALONE") and not _ge(vk, "0.5.14"):
        env = dep.env.get("SGLANG_ENABLE_SPEC_V2")
        default_on = _ge(vk, "0.5.11")             # env defaults to true in 0.5.11–0.5.13
        on = _bool(env) if env is not None else default_on
        if not on:
            return False, "speculative decoding without SGLANG_ENABLE_SPEC_V2=1 turns overlap off (0.5.4–0.5.10)"
    if spec and not _ge(vk, "0.5.4"):
        return False, "speculative decoding turns overlap off"
    hybrid = bool(dep.model and dep.model.is_hybrid_mamba)
    if (hybrid and strategy == "no_buffer" and not spec and not dep.disable_radix_cache
            and _ge(vk, "0.5.7") and not _ge(vk, "0.5.14")):
        return False, "no_buffer disables the overlap scheduler (0.5.7–0.5.13)"
    return True, "default"


def mamba_slots_per_request(version: str | None, strategy: str, *, radix_disabled: bool = False,
                            overlap: bool = True, speculative: bool = False) -> int:
    """Mamba slots a running request may hold, the 'ratio' of §5.3."""
    vk = _ver(version)
    if radix_disabled:
        return 1
    if not _ge(vk, "0.5.7"):
        return 3
    if not _ge(vk, "0.5.8"):                      # 0.5.7 adds the overlap term even without extra_buffer
        return 4 if (strategy.startswith("extra_buffer") and speculative) else 5
    if strategy == "no_buffer":
        return 3
    if not _ge(vk, "0.5.10"):
        return 4 if speculative else 5            # 0.5.8.post1–0.5.9: 3+2, or 3+1 with spec
    if strategy == "extra_buffer_lazy":
        return 4
    return 5 if overlap else 4                    # 1 working slot + 2 (overlap) or 1 ping-pong slots


@dataclass
class MambaSplit:
    max_mamba_cache_size: int
    mamba_bytes: float
    scratch_bytes: float
    rest_after_bytes: float            # what is left for the KV pool
    case: str


def mamba_split(version: str | None, rest_bytes: float, per_req: float, *, ratio: int, draft_tokens: int = 0,
                max_running_requests: int | None = None, max_mamba_cache_size: int | None = None,
                radix_disabled: bool = False, mamba_full_memory_ratio: float = MAMBA_FULL_MEMORY_RATIO,
                attn_dp: int = 1) -> MambaSplit:
    """handle_max_mamba_cache: split `rest` between Mamba slots, spec scratch and KV (§5.2, §6).

    draft_tokens = --speculative-num-draft-tokens D (0 without speculative decoding);
    max_running_requests = the requested (or speculative default 48) value, None if unset.
    """
    vk = _ver(version)
    r = mamba_full_memory_ratio
    D = draft_tokens
    mrr = max_running_requests
    mrr_dp = (mrr // attn_dp) if mrr else None
    rest = rest_bytes
    if not _ge(vk, "0.5.7"):
        # 0.5.4–0.5.6: each slot also carries D scratch entries; radix on -> always the ratio split
        if radix_disabled:
            size, case = (max_mamba_cache_size or mrr or RADIX_OFF_DEFAULT_SLOTS), "flag / requests / 512 (radix off)"
        else:
            size, case = math.floor(rest * r / (1 + r) / per_req / (1 + D)), "ratio split (radix on)"
        return MambaSplit(size, size * per_req, size * per_req * D, rest - size * per_req * (1 + D), case)

    joint = _ge(vk, "0.5.13")
    scratch = 0.0
    if D and not joint:
        # 0.5.7–0.5.12: scratch for the requested requests is subtracted first
        scratch = per_req * (mrr_dp or 0) * D
        rest -= scratch
    if max_mamba_cache_size:
        size, case = max_mamba_cache_size // attn_dp, "--max-mamba-cache-size"
    elif radix_disabled and (mrr or not _ge(vk, "0.5.9")):
        size = (mrr_dp if mrr else RADIX_OFF_DEFAULT_SLOTS)
        case = "radix cache off: one slot per request"
    else:
        budget = rest * r / (1 + r)
        case = f"ratio split r={r:g}"
        if D and joint:
            if _ge(vk, "0.5.23"):
                size = math.floor((budget - per_req * (1 + D)) / (per_req * (1 + D / ratio)))
            else:
                size = math.floor(budget / (per_req * (1 + D / ratio)))
        else:
            size = math.floor(budget / per_req) - (1 if _ge(vk, "0.5.23") else 0)   # 0.5.23: minus the padding slot
    size = max(size, 0)
    if D and joint:
        reqs = min(mrr_dp, size // ratio) if mrr_dp else size // ratio
        scratch = per_req * D * (reqs + (1 if _ge(vk, "0.5.23") else 0))
        rest -= scratch
    return MambaSplit(size, size * per_req, scratch, rest - size * per_req, case)


def max_running_requests(version: str | None, max_total_num_tokens: int, context_len: int, *,
                         requested: int | None, mamba_cap: int | None = None, attn_dp: int = 1) -> tuple[int, str]:
    """The final request-slot count per DP rank (§5.5) and what capped it."""
    vk = _ver(version)
    default = min(max(int(max_total_num_tokens / max(1, context_len) * 512), 2048), 4096)
    req = requested // attn_dp if requested else None
    if _ge(vk, "0.5.14"):
        n = min(req or default, max_total_num_tokens // 2)
        why = "--max-running-requests" if req and n == req else ("KV pool // 2" if n == max_total_num_tokens // 2 else "default")
        if mamba_cap is not None and mamba_cap < n:
            return mamba_cap, "Mamba slots // slots per request"
        return n, why
    n = req or default
    why = "--max-running-requests" if req else "default min(max(tokens/context*512, 2048), 4096)"
    if mamba_cap is not None and mamba_cap < n:
        n, why = mamba_cap, "Mamba slots // slots per request"
    limit = req if req else max_total_num_tokens // 2
    if limit < n:
        n, why = limit, "KV pool // 2"
    return n, why
