"""Where each number of a budget came from: data about the arithmetic, none of the arithmetic.

`explain(b)` gives, per key of `Budget.to_json()` (and per budget item, by ITEM_KEYS), one of

    log             read from the log: `reads` names the printed figures (Readings fields)
    nvidia-smi      from an nvidia-smi snapshot
    model-catalog   from the model's architecture (diag's model catalog or the given config.json)
    gpu-catalog     from diag's GPU catalog (the GPU named, its memory not printed anywhere)
    launch-command  a flag the server was started with (`flags` names it)
    estimate        diag's estimate where nothing printed it
    formula         computed from other numbers (`from` names them, `reads` the log figures it used)
    default         SGLang's default or rule for the version

It reads what budget() recorded (b.sources, b.readings, b.deployment) and never recomputes.
"""
from __future__ import annotations

# budget item name -> the key that explains it
ITEM_KEYS = {"total": "total_gib", "cuda_context": "cuda_context_gib", "weights": "weights_gib",
             "draft_weights": "draft_gib", "kv_pool": "kv_pool_gib", "draft_kv": "draft_kv_gib",
             "mamba_state": "mamba_state_gib", "spec_scratch": "spec_scratch_gib", "cuda_graphs": "cuda_graph_gib",
             "activations": "activations_gib", "free": "free_gib"}
# the internal words of b.sources for the simple cases
PLAIN = {"model": "model-catalog", "sglang-default": "default", "estimate": "estimate", "nvidia-smi": "nvidia-smi"}


def explain(b) -> dict[str, dict]:
    from .inputs import Readings
    R = b.readings or Readings()
    dep = b.deployment
    src = b.sources
    out: dict[str, dict] = {}

    def put(key: str, source: str, reads=(), of=(), flags=(), note: str = "") -> None:
        entry: dict = {"source": source}
        if reads:
            entry["reads"] = list(reads)
        if of:
            entry["from"] = list(of)
        if flags:
            entry["flags"] = list(flags)
        if note:
            entry["note"] = note
        out[key] = entry

    def given(value) -> bool:
        return value is not None

    # GPU total and free memory before loading
    if given(b.gpu_total_gib):
        s = src.get("total")
        if s == "log":
            first = "gpu_total_gib" if dep is not None and dep.gpu_total_source == "log" else "oom_total_gib"
            put("total_gib", "log", reads=[first], note="PyTorch's out-of-memory message")
        elif s == "model":
            put("total_gib", "gpu-catalog")
        elif s == "nvidia-smi":
            put("total_gib", "nvidia-smi")
        else:
            put("total_gib", "launch-command", note="the GPU memory given to diag")
    if given(b.pre_load_free_gib):
        s = src.get("pre_load_free")
        if s == "log" and R.pre_load_free_gib is not None:
            put("pre_load_free_gib", "log", reads=["pre_load_free_gib"])
        elif s == "log":
            put("pre_load_free_gib", "formula", of=["after_load_free_gib", "weights_gib"])
        else:
            put("pre_load_free_gib", "estimate", of=["total_gib"], note="the GPU total less a typical CUDA context")
        if given(b.gpu_total_gib):
            if s == "log":
                put("cuda_context_gib", "formula", of=["total_gib", "pre_load_free_gib"])
            else:
                put("cuda_context_gib", "estimate", note="a typical CUDA context and NCCL")
    # --mem-fraction-static
    if given(b.mem_fraction_static):
        s = src.get("mem_fraction_static")
        if s == "flags":
            put("mem_fraction_static", "launch-command", flags=["--mem-fraction-static"])
        elif s == "log":
            put("mem_fraction_static", "log", reads=["mem_fraction_static"])
        else:
            put("mem_fraction_static", "default", note="SGLang's automatic fraction for this GPU and deployment")
    if given(b.mem_fraction_reserved_mib):
        put("mem_fraction_reserved_mib", "default")
    # weights
    if given(b.weights_gib):
        s = src.get("weights")
        if s == "log" and R.weights_gib is not None:
            put("weights_gib", "log", reads=["weights_gib"])
        elif s == "log":
            put("weights_gib", "formula", of=["pre_load_free_gib", "after_load_free_gib"])
        else:
            put("weights_gib", "model-catalog")
    if b.draft_weights_gib or "draft_weights" in src:
        s = src.get("draft_weights")
        if s == "log":
            put("draft_gib", "log", reads=["draft_weights_gib"])
        elif s == "model":
            put("draft_gib", "model-catalog")
    if given(b.after_load_free_gib):
        if src.get("after_load_free") == "log":
            put("after_load_free_gib", "log", reads=["after_load_free_gib"])
        else:
            put("after_load_free_gib", "formula", of=["pre_load_free_gib", "weights_gib"]
                + (["draft_gib"] if "draft_gib" in out and b.speculative else []))
    if given(b.static_budget_gib):
        put("static_budget_gib", "formula", of=["mem_fraction_static", "pre_load_free_gib"])
    if given(b.headroom_gib):
        put("headroom_gib", "formula", of=["pre_load_free_gib", "mem_fraction_static"])
    if given(b.rest_gib):
        put("rest_gib", "formula", of=["after_load_free_gib", "headroom_gib"])
    if given(b.min_viable_fraction):
        if given(b.after_load_free_gib) and b.pre_load_free_gib:
            put("min_viable_fraction", "formula", of=["after_load_free_gib", "pre_load_free_gib"])
        else:
            put("min_viable_fraction", "log", reads=["min_viable_fraction"])
    # KV cache
    if given(b.kv_bytes_per_token):
        s = src.get("kv_bytes_per_token")
        if s == "log" and R.kv_bytes_per_token:
            put("kv_bytes_per_token", "log", reads=["kv_bytes_per_token"])
        elif s == "log":
            sizes = ["k_size_gib", "v_size_gib"] if R.k_size_gib is not None and R.v_size_gib is not None else ["kv_size_gib"]
            put("kv_bytes_per_token", "log", reads=["kv_tokens" if R.kv_tokens else "max_total_num_tokens"] + sizes,
                note="the printed pool size over its tokens")
        elif s == "flags":
            put("kv_bytes_per_token", "model-catalog", flags=["--kv-cache-dtype"])
        else:
            put("kv_bytes_per_token", "model-catalog")
    if given(b.kv_cell_bytes):
        put("kv_cell_bytes", "formula", of=["kv_bytes_per_token"])
    if given(b.max_total_num_tokens):
        if src.get("max_total_num_tokens") == "log":
            put("max_total_num_tokens", "log", reads=["kv_tokens" if R.kv_tokens else "max_total_num_tokens"])
        else:
            put("max_total_num_tokens", "formula", of=["rest_gib", "kv_cell_bytes"]
                + (["mamba_state_gib"] if b.hybrid_mamba else []))
    if given(b.kv_pool_gib):
        put("kv_pool_gib", "formula", of=["max_total_num_tokens", "kv_bytes_per_token"])
    if b.draft_layers and b.speculative:
        in_static = bool(b.draft_kv_gib)
        if in_static:
            put("draft_kv_gib", "formula", of=["max_total_num_tokens", "kv_cell_bytes", "kv_bytes_per_token"])
        else:
            put("draft_kv_gib", "estimate", of=["max_total_num_tokens"])
    if given(b.swa_tokens):
        if R.swa_tokens:
            put("swa_tokens", "log", reads=["swa_tokens"])
        else:
            put("swa_tokens", "formula", of=["max_total_num_tokens"])
    if given(b.context_len):
        if dep is not None and dep.context_length:
            put("context_len", "launch-command", flags=["--context-length"])
        elif R.context_len:
            put("context_len", "log", reads=["context_len"])
        else:
            put("context_len", "model-catalog")
    # Mamba state
    if given(b.mamba_bytes_per_slot):
        s = src.get("mamba_bytes_per_slot")
        if s == "log":
            if R.mamba_bytes_per_slot:
                reads = ["mamba_bytes_per_slot"]
            elif R.mamba_cache_size is not None and R.conv_state_gib is not None and R.ssm_state_gib is not None:
                reads = ["mamba_cache_size", "conv_state_gib", "ssm_state_gib"]
            else:
                reads = ["mamba_per_req_mib"]
            entry = dict(reads=reads, note="the printed state sizes over their slots" if len(reads) > 1 else "")
        else:
            entry = {}
        for key in ("mamba_bytes_per_slot", "mamba_mib_per_slot"):
            put(key, "log" if s == "log" else "model-catalog", **entry)
    if given(b.mamba_slots_per_request):
        put("mamba_slots_per_request", "default", note="SGLang's slots per request for the strategy")
        put("mamba_slots_per_request_by_strategy", "default")
    if given(b.max_mamba_cache_size):
        if R.mamba_cache_size is not None:
            put("max_mamba_cache_size", "log", reads=["mamba_cache_size"])
        else:
            put("max_mamba_cache_size", "formula", of=["rest_gib", "mamba_bytes_per_slot", "mamba_slots_per_request"])
    if b.hybrid_mamba and given(b.max_mamba_cache_size):
        put("mamba_state_gib", "formula", of=["max_mamba_cache_size", "mamba_bytes_per_slot"])
    if b.spec_scratch_gib or (b.hybrid_mamba and b.speculative):
        if src.get("spec_scratch") == "log":
            put("spec_scratch_gib", "log", reads=["intermediate_ssm_gib", "intermediate_conv_gib"])
        else:
            put("spec_scratch_gib", "formula", of=["mamba_bytes_per_slot", "speculative_num_draft_tokens", "max_running_requests"])
    # speculative decoding
    if b.draft_tokens:
        steps = topk = drafts = None
        if dep is not None:
            steps, topk, drafts = dep.speculative_num_steps, dep.speculative_eagle_topk, dep.speculative_num_draft_tokens
        if drafts is not None and (topk or 1) != 1:
            put("speculative_num_draft_tokens", "launch-command", flags=["--speculative-num-draft-tokens"])
        elif steps is not None or topk is not None or drafts is not None:
            put("speculative_num_draft_tokens", "formula", note="SGLang uses --speculative-num-steps + 1 draft tokens with topk 1")
        else:
            put("speculative_num_draft_tokens", "estimate", note="SGLang chooses the speculative parameters; diag assumes its usual ones")
    # request slots, graphs, activations, free
    if given(b.max_running_requests):
        if src.get("max_running_requests") == "log":
            put("max_running_requests", "log", reads=["max_running_requests"])
        else:
            put("max_running_requests", "formula", of=["max_total_num_tokens", "context_len"]
                + (["max_mamba_cache_size"] if b.hybrid_mamba else []))
    if given(b.cuda_graph_max_bs):
        if dep is not None and dep.cuda_graph_max_bs:
            put("cuda_graph_max_bs", "launch-command", flags=["--cuda-graph-max-bs-decode", "--cuda-graph-max-bs"])
        else:
            put("cuda_graph_max_bs", "default")
    if given(b.chunked_prefill_size):
        if dep is not None and dep.chunked_prefill_size:
            put("chunked_prefill_size", "launch-command", flags=["--chunked-prefill-size"])
        else:
            put("chunked_prefill_size", "default")
    s = src.get("cuda_graphs")
    if s == "flags":
        put("cuda_graph_gib", "launch-command", flags=["--disable-cuda-graph", "--disable-decode-cuda-graph",
                                                       "--cuda-graph-backend-decode"])
    elif s == "log" and R.graph_mem_gib is not None:
        put("cuda_graph_gib", "log", reads=["graph_mem_gib"])
    elif s == "log":
        put("cuda_graph_gib", "formula", reads=["graph_begin_avail_gib", "graph_end_avail_gib"],
            note="free memory before capture less free memory after")
    elif s:
        put("cuda_graph_gib", "estimate", of=["cuda_graph_max_bs", "chunked_prefill_size"])
    if "activations" in src:
        put("activations_gib", "formula", of=["chunked_prefill_size", "max_running_requests", "context_len"],
            note="SGLang's reserve for prefill activations and metadata")
    if given(b.free_gib):
        if b.readings and b.readings.available_gpu_mem_gib is not None:
            put("free_gib", "formula", reads=["available_gpu_mem_gib"], of=["activations_gib"])
        else:
            parts = [ITEM_KEYS[i.name] for i in b.items[1:] if i.name != "free" and i.gib is not None]
            put("free_gib", "formula", of=["total_gib"] + parts)
    return out
