"""SGLang GPU memory budget per GPU, the way a given SGLang version computes it.

Pure functions, no I/O. Formulas cite /work/shared/reference/sglang-memory.md as "§n"
and models.md as "models §n"; variable names follow SGLang's flags and variables.
Units: GiB = 2^30 B, MiB = 2^20 B; every "GB" in SGLang's log is GiB.

    dep = Deployment.from_flags(launch.flags, "0.5.10", gpu=find_gpu("RTX PRO 6000"))
    b = budget(dep, Readings(pre_load_free_gib=94.8))      # readings: what the log printed
    opts = options_for("mamba", dep, b)
"""
from __future__ import annotations

from .common import (  # noqa: F401
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
    PREFILL_GRAPH_MIB_PER_SIZE,
    PREFILL_GRAPH_MLA_MIB,
    PREFILL_OOM_LIKELY_SHARE,
    QUANT_FLAG_FORMAT,
    RADIX_OFF_DEFAULT_SLOTS,
    REQ_TO_TOKEN_EXTRA,
    SOURCES,
    SPEC_AUTO_PARAMS,
    SPEC_DEFAULT_MAX_RUNNING,
    SWA_FULL_TOKENS_RATIO,
)
from .inputs import (  # noqa: F401
    Deployment,
    Readings,
)
from .formulas import (  # noqa: F401
    MambaSplit,
    MfsDefault,
    WeightEstimate,
    decode_graph_batch_sizes,
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
    piecewise_token_sizes,
    resolve_mamba_strategy,
    swa_cell_bytes,
)
from .budget import (  # noqa: F401
    Budget,
    Item,
    budget,
    sglang_reserve_gib,
)
from .options import (  # noqa: F401
    COST_CHECKPOINT,
    COST_FLAG,
    COST_GPUS,
    COST_INFO,
    COST_THROUGHPUT,
    GOALS,
    MFS_SEARCH_STEP,
    Option,
    TP_CANDIDATES,
    all_options,
    options_for,
)
