"""SGLang GPU memory budget per GPU, the way a given SGLang version computes it.

Pure functions, no I/O. Formulas cite /work/shared/reference/sglang-memory.md as "§n"
and models.md as "models §n"; variable names follow SGLang's flags and variables.
Units: GiB = 2^30 B, MiB = 2^20 B; every "GB" in SGLang's log is GiB.

    dep = Deployment.from_flags(launch.flags, "0.5.10", gpu=find_gpu("RTX PRO 6000"))
    b = budget(dep, Readings(pre_load_free_gib=94.8))      # readings: what the log printed
    opts = options_for("mamba", dep, b)
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from . import knowledge as K
from .versions import key as _vkey

GIB = 1 << 30
MIB = 1 << 20
NEWEST_RULES = "0.5.23"          # rules used when the SGLang version is unknown
CUDA_CONTEXT_GIB = 0.75          # CUDA context + NCCL before "Load weight begin" (§9: 79.65 GiB total, 78.90 free)
SPEC_DEFAULT_MAX_RUNNING = 48    # §6: EAGLE/NGRAM set max_running_requests = 48 when unset
SPEC_AUTO_PARAMS = (3, 1, 4)     # steps, topk, draft tokens assumed when SGLang auto-chooses them (§6)
MAMBA_FULL_MEMORY_RATIO = 0.9    # §5 --mamba-full-memory-ratio default
SWA_FULL_TOKENS_RATIO = 0.8      # §4 --swa-full-tokens-ratio default
RADIX_OFF_DEFAULT_SLOTS = 512    # §5.2 0.5.4–0.5.8: radix off and no --max-running-requests -> 512 slots
GRAPH_MIB_PER_BS = 2             # §7 SGLang reserves 2 MiB per decode graph batch size
PREFILL_GRAPH_MIB_PER_SIZE = 8   # §2/§7 8 MiB per captured prefill (piecewise) size, non-MLA
PREFILL_GRAPH_MLA_MIB = 1536     # §2/§7 1.5 GiB for MLA models
ACTIVATION_MIB_PER_TOKEN = 1.5   # §8 1.5 MiB x max(chunked_prefill_size, 2048) for prefill activations
METADATA_RESERVE_MIB = 512       # §2 "reserved = 512" constant metadata
REQ_TO_TOKEN_EXTRA = 4           # §8 req_to_token row = context_len + 4 [+ D] int32 entries
LOG_GIB_ROUNDING = 0.005         # the log prints GiB with 2 decimals
PREFILL_OOM_LIKELY_SHARE = 1 / 6  # §8: < ~2 GiB left with chunk 8192 (12 GiB proxy) -> prefill OOM likely

DTYPE_BYTES = {"float32": 4, "fp32": 4, "float": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
               "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "mxfp8": 1, "int8": 1}
FP4_KV = {"fp4_e2m1", "nvfp4", "fp4_mx_block16", "mxfp4"}
QUANT_FLAG_FORMAT = {"fp8": "fp8", "w8a8_fp8": "fp8", "modelopt_fp8": "fp8", "fbgemm_fp8": "fp8", "mxfp8": "fp8",
                     "modelopt_fp4": "nvfp4", "modelopt": None, "petit_nvfp4": "nvfp4", "mxfp4": "mxfp4",
                     "awq": "awq", "awq_marlin": "awq", "gptq": "gptq", "gptq_marlin": "gptq", "moe_wna16": "gptq",
                     "w8a8_int8": "w8a8", "w4afp8": "awq"}
SOURCES = ("log", "model", "flags", "sglang-default", "estimate")


def _ver(version: str | None) -> tuple[int, int, int, int]:
    return _vkey(version or NEWEST_RULES)


def _ge(vk: tuple, version: str) -> bool:
    return vk >= _vkey(version)


# =======================================================================================
# Inputs
# =======================================================================================

@dataclass
class Deployment:
    """What was launched, per the flags (None = SGLang's default for that version)."""
    model: K.ModelSpec | None = None
    gpu: K.GpuSpec | None = None
    gpu_total_mib: int | None = None
    version: str | None = None
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    dp_attention: bool = False
    mem_fraction_static: float | None = None
    context_length: int | None = None
    max_running_requests: int | None = None
    max_total_tokens: int | None = None
    page_size: int | None = None
    kv_cache_dtype: str | None = None
    weight_quant: str | None = None
    speculative_algorithm: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    draft_model: K.ModelSpec | None = None
    draft_model_path: str | None = None
    mamba_strategy: str | None = None            # no_buffer / extra_buffer / extra_buffer_lazy / auto
    max_mamba_cache_size: int | None = None
    mamba_full_memory_ratio: float | None = None
    mamba_ssm_dtype: str | None = None
    disable_radix_cache: bool = False
    disable_overlap_schedule: bool = False
    cuda_graph_max_bs: int | None = None
    disable_cuda_graph: bool = False
    disable_prefill_graph: bool = False          # --disable-piecewise-cuda-graph / prefill backend disabled
    enable_piecewise_cuda_graph: bool = False    # opt-in 0.5.6–0.5.9
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = None
    swa_full_tokens_ratio: float | None = None
    disable_hybrid_swa_memory: bool = False
    language_only: bool = False
    enable_multimodal: bool | None = None
    model_path: str | None = None
    env: dict = field(default_factory=dict)

    @property
    def attn_tp(self) -> int:
        """Attention-TP size: tp / dp under DP attention, else tp (§ conventions)."""
        return max(1, self.tp // self.dp) if self.dp_attention else self.tp

    @property
    def attn_dp(self) -> int:
        return self.dp if self.dp_attention else 1

    @property
    def total_mib(self) -> int | None:
        return self.gpu_total_mib or (self.gpu.memory_total_mib if self.gpu else None)

    @property
    def spec(self) -> str | None:
        """Speculative algorithm as SGLang runs it (NEXTN is rewritten to EAGLE, §6)."""
        a = (self.speculative_algorithm or "").upper()
        if not a or a == "NONE":
            return None
        return "EAGLE" if a in ("NEXTN", "MTP") else a

    @classmethod
    def from_flags(cls, flags: dict, version: str | None, model: K.ModelSpec | None = None,
                   gpu: K.GpuSpec | None = None, gpu_total_mib: int | None = None,
                   env: dict | None = None) -> "Deployment":
        """Read catalog flag names of any version (or server_args field names)."""
        f = {_flag_key(k): v for k, v in (flags or {}).items()}

        def get(*names):
            for n in names:
                v = f.get(n)
                if v is not None and v is not False:
                    return v
            return None

        tp = _int(get("--tp-size", "--tensor-parallel-size", "--tp")) or 1
        attn_dp = _int(get("--attn-dp-size"))
        dp = _int(get("--dp-size", "--data-parallel-size")) or attn_dp or 1
        dp_attention = _bool(get("--enable-dp-attention")) or bool(attn_dp and attn_dp > 1)
        strategy = get("--mamba-radix-cache-strategy", "--mamba-scheduler-strategy")
        graph_backend = str(get("--cuda-graph-backend-decode") or "")
        prefill_backend = str(get("--cuda-graph-backend-prefill") or "")
        quant = get("--quantization")
        model_path = get("--model-path", "--model")
        draft_path = get("--speculative-draft-model-path", "--speculative-draft-model")
        ver = version
        if model is None and model_path:
            model = K.find_model(str(model_path))
        draft = K.find_model(str(draft_path)) if draft_path else None
        weight_quant = QUANT_FLAG_FORMAT.get(str(quant).lower(), None) if quant else None
        if model is not None and weight_quant and model.weight_quant != weight_quant:
            model = model.with_quant(weight_quant)
        return cls(
            model=model, gpu=gpu, gpu_total_mib=gpu_total_mib, version=ver,
            tp=tp, pp=_int(get("--pp-size", "--pipeline-parallel-size")) or 1, dp=dp,
            ep=_int(get("--ep-size", "--expert-parallel-size")) or 1, dp_attention=dp_attention,
            mem_fraction_static=_float(get("--mem-fraction-static")),
            context_length=_int(get("--context-length")),
            max_running_requests=_int(get("--max-running-requests")),
            max_total_tokens=_int(get("--max-total-tokens")),
            page_size=_int(get("--page-size")),
            kv_cache_dtype=_str(get("--kv-cache-dtype")),
            weight_quant=weight_quant or (model.weight_quant if model else None),
            speculative_algorithm=_str(get("--speculative-algorithm")),
            speculative_num_steps=_int(get("--speculative-num-steps")),
            speculative_eagle_topk=_int(get("--speculative-eagle-topk")),
            speculative_num_draft_tokens=_int(get("--speculative-num-draft-tokens")),
            draft_model=draft, draft_model_path=_str(draft_path),
            mamba_strategy=_str(strategy),
            max_mamba_cache_size=_int(get("--max-mamba-cache-size")),
            mamba_full_memory_ratio=_float(get("--mamba-full-memory-ratio")),
            mamba_ssm_dtype=_str(get("--mamba-ssm-dtype")),
            disable_radix_cache=_bool(get("--disable-radix-cache")),
            disable_overlap_schedule=_bool(get("--disable-overlap-schedule")),
            cuda_graph_max_bs=_int(get("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs")),
            disable_cuda_graph=_bool(get("--disable-cuda-graph", "--disable-decode-cuda-graph")) or graph_backend == "disabled",
            disable_prefill_graph=(_bool(get("--disable-piecewise-cuda-graph", "--disable-prefill-cuda-graph"))
                                   or prefill_backend == "disabled"),
            enable_piecewise_cuda_graph=_bool(get("--enable-piecewise-cuda-graph")),
            chunked_prefill_size=_int(get("--chunked-prefill-size")),
            max_prefill_tokens=_int(get("--max-prefill-tokens")),
            swa_full_tokens_ratio=_float(get("--swa-full-tokens-ratio")),
            disable_hybrid_swa_memory=_bool(get("--disable-hybrid-swa-memory")),
            language_only=_bool(get("--language-only")),
            enable_multimodal=True if _bool(get("--enable-multimodal")) else None,
            model_path=_str(model_path), env=dict(env or {}),
        )


def _flag_key(k: str) -> str:
    """'--tp-size' stays; a server_args field 'tp_size' becomes '--tp-size'."""
    k = str(k)
    return k if k.startswith("-") else "--" + k.replace("_", "-")


def _int(v) -> int | None:
    if v is None or v is True or v is False or v == "":
        return None
    try:
        return int(float(v))
    except (TypeError, ValueError):
        return None


def _float(v) -> float | None:
    if v is None or v is True or v is False or v == "":
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _bool(v) -> bool:
    if isinstance(v, str):
        return v.strip().lower() not in ("", "0", "false", "no", "none", "off")
    return bool(v)


def _str(v) -> str | None:
    if v is None or v is True or v is False:
        return None
    s = str(v).strip()
    return s or None


@dataclass
class Readings:
    """What the log printed (GiB as printed; see sglang-logs.md §3–§6 for the lines).

    after_load_free_gib is the "avail mem" of the last "Load weight end" before the memory
    pools (0.5.14+: after the draft model too); weights_gib is the target's "mem usage".
    kv_bytes_per_token / mamba_bytes_per_slot may carry per-unit sizes derived earlier.
    """
    pre_load_free_gib: float | None = None
    after_load_free_gib: float | None = None
    weights_gib: float | None = None
    draft_weights_gib: float | None = None
    kv_tokens: int | None = None
    k_size_gib: float | None = None
    v_size_gib: float | None = None
    kv_size_gib: float | None = None
    kv_dtype: str | None = None
    swa_tokens: int | None = None
    mamba_cache_size: int | None = None
    conv_state_gib: float | None = None
    ssm_state_gib: float | None = None
    intermediate_ssm_gib: float | None = None
    intermediate_conv_gib: float | None = None
    pool_end_avail_gib: float | None = None
    graph_begin_avail_gib: float | None = None
    graph_end_avail_gib: float | None = None
    graph_mem_gib: float | None = None
    max_total_num_tokens: int | None = None
    max_running_requests: int | None = None
    context_len: int | None = None
    available_gpu_mem_gib: float | None = None
    mem_fraction_static: float | None = None
    min_viable_fraction: float | None = None
    suggested_fraction: float | None = None
    mamba_per_req_mib: float | None = None
    mamba_total_rest_gib: float | None = None
    oom_total_gib: float | None = None
    oom_free_gib: float | None = None
    oom_tried_gib: float | None = None
    oom_process_gib: float | None = None
    kv_bytes_per_token: float | None = None
    mamba_bytes_per_slot: float | None = None


# =======================================================================================
# Formulas (one place each)
# =======================================================================================

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


# =======================================================================================
# Budget
# =======================================================================================

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
    b = Budget(version=dep.version or f"unknown (rules of {NEWEST_RULES})", readings=R)
    if not dep.version:
        b.notes.append(f"SGLang version unknown: rules of {NEWEST_RULES} used")
    model = dep.model
    if model is None:
        b.notes.append("model unknown: only the log's numbers are used")
    src = b.sources

    # -- GPU and free memory before loading (§1) ---------------------------------------
    total_mib = dep.total_mib
    if total_mib:
        b.gpu_total_gib, src["total"] = total_mib / 1024, ("flags" if dep.gpu_total_mib else "model")
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
                      f"{dep.total_mib:,} MiB (nvidia-smi)" if dep.total_mib else ""))
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


# =======================================================================================
# Fix options
# =======================================================================================

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
