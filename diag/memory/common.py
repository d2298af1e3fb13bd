"""Constants and small helpers of the memory model."""
from __future__ import annotations

from ..versions import key as _vkey


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
SOURCES = ("log", "nvidia-smi", "model", "flags", "sglang-default", "estimate")  # what b.sources and Item.source say


def _ver(version: str | None) -> tuple[int, int, int, int]:
    return _vkey(version or NEWEST_RULES)


def _ge(vk: tuple, version: str) -> bool:
    return vk >= _vkey(version)
