"""What was launched (Deployment, from any version's flags) and what the log printed (Readings)."""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import knowledge as K
from ..numbers import to_float
from .common import QUANT_FLAG_FORMAT


@dataclass
class Deployment:
    """What was launched, per the flags (None = SGLang's default for that version)."""
    model: K.ModelSpec | None = None
    gpu: K.GpuSpec | None = None
    gpu_total_mib: int | None = None
    gpu_total_source: str | None = None          # where gpu_total_mib was read: nvidia-smi | log
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
                   env: dict | None = None, gpu_total_source: str | None = None) -> "Deployment":
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
            model=model, gpu=gpu, gpu_total_mib=gpu_total_mib, gpu_total_source=gpu_total_source, version=ver,
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
            # DP attention divides the flag's value among its ranks (ServerArgs, before the dump): each
            # scheduler prefills that share
            chunked_prefill_size=(lambda c: max(1, c // dp) if c and dp_attention and dp > 1 else c)(_int(get("--chunked-prefill-size"))),
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
    """A flag or server_args value as an integer (4096, '4096', '4096.0'); anything else is unknown."""
    f = to_float(v)
    return None if f is None else int(f)


def _float(v) -> float | None:
    return to_float(v)


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
