"""Where in SGLang's life a failure happened: start-up step or serving, and why we think so.

Three kinds of evidence, strongest first: the traceback's frames (which SGLang function
was allocating), the start-up milestones the failing rank printed before it failed, and
for a bare PyTorch OOM line the numbers it carries. The phase decides the direction of a
memory fix (raising --mem-fraction-static helps a KV-pool refusal, hurts a graph capture).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import rx
from .events import Event, Frame

PHASES = ("dist_init", "weights", "kv_pool", "mamba", "cuda_graph", "draft", "warmup", "prefill", "decode", "multimodal")

# catalog messages that name the step they were printed in (by review name)
MESSAGE_PHASES = {"graph.capture_failed": "cuda_graph"}

# Most specific first: a draft graph capture is "draft", a vision forward inside a prefill is "multimodal".
# Each pattern is tried on every frame ("file function source-line"); the first rule any frame matches wins.
FRAME_RULES: list[tuple[str, object]] = [
    ("draft", rx.compile(r"eagle_worker|eagle_draft|draft_cuda_graph|speculative/.*(?:worker|draft)|multi_layer_eagle|DraftWorker|draft_worker|init_draft|draft_model_runner")),
    ("cuda_graph", rx.compile(r"cuda_graph_runner|graph_runner|init_cuda_graphs|init_device_graphs|capture_one_batch_size|\bcapture\b|prealloc_symmetric_memory|piecewise|workspace_buffer|init_attention_backend")),
    ("mamba", rx.compile(r"MambaPool|HybridReqToTokenPool|mamba_pool|MambaRadixCache.*__init__|init_mamba")),
    ("kv_pool", rx.compile(r"init_memory_pool|TokenToKVPool|_create_buffers|profile_max_num_token|kv_cache_configurator|pool_configurator|ReqToTokenPool|req_to_token_pool|memory_pool\.py")),
    # the weights: the loader, or the model being built (a module's constructor, PyTorch's device-context dispatch)
    ("weights", rx.compile(r"load_model|load_weights|weight_loader|model_loader|_initialize_model|\bget_model\b|create_weights|process_weights_after_loading|safetensors|load_state_dict|"
                           r"sglang/srt/models/\S+ __init__|torch/utils/_device\.py __torch_function__|cos_sin_cache")),
    # a multimodal processor (not the logits processor every forward ends in, nor mm_utils' embedding
    # routine, which every forward of a VLM runs, text-only prompts included)
    ("multimodal", rx.compile(r"vision|visual|get_image_feature|multimodal|pixel_values|siglip|encode_images|image_encoder|\bvit\b|"
                              r"(?:image|mm|video|audio)_?processor|processors/|patch_embed|PatchEmbed")),
    # the start-up warm-up: FlashInfer's autotune runs a dummy forward of the largest batch
    ("warmup", rx.compile(r"_flashinfer_autotune|flashinfer_autotune|_dummy_run\b|autotune_process|kernel_warmup")),
    ("dist_init", rx.compile(r"init_distributed_environment|init_torch_distributed|initialize_model_parallel|init_process_group|ncclCommInitRank|pynccl")),
    ("prefill", rx.compile(r"forward_extend|prefill|run_batch.*extend")),
    ("decode", rx.compile(r"forward_decode|decode_step")),
]

# Words of a frame's file or function that place it in speculative decoding (draft worker, EAGLE, MTP).
SPECULATIVE_WORDS = ("eagle", "speculative", "spec_", "ngram", "mtp", "draft")


def in_speculative(frames) -> bool:
    """Whether any of the frames runs speculative-decoding code."""
    for fr in frames or ():
        where = f"{getattr(fr, 'file', '') or ''} {getattr(fr, 'func', '') or ''}".lower()
        if any(w in where for w in SPECULATIVE_WORDS):
            return True
    return False


# The part of SGLang the innermost SGLang frame belongs to (by its file), most specific first.
SUBSYSTEMS: list[tuple[str, object]] = [
    ("speculative worker", rx.compile(r"sglang/srt/speculative/")),
    ("CUDA graph runner", rx.compile(r"graph_runner|/runner/\w*graph|piecewise")),
    ("Mamba state cache", rx.compile(r"mamba|hybrid_linear_attn")),
    ("memory pool", rx.compile(r"sglang/srt/mem_cache/|pool_configurator|kv_cache_configurator|model_runner_kv_cache_mixin")),
    ("attention backend", rx.compile(r"sglang/srt/layers/attention/")),
    ("MoE layer", rx.compile(r"sglang/srt/layers/moe/")),
    ("quantization", rx.compile(r"sglang/srt/layers/quantization/")),
    ("model loader", rx.compile(r"sglang/srt/model_loader/")),
    ("server-args validation", rx.compile(r"server_args\.py|sglang/srt/arg_groups/")),
    ("distributed set-up", rx.compile(r"sglang/srt/distributed/|parallel_state")),
    ("disaggregation", rx.compile(r"sglang/srt/disaggregation/")),
    ("multimodal processor", rx.compile(r"multimodal|mm_utils|processors/")),
    ("model", rx.compile(r"sglang/srt/models/")),
    ("sampler", rx.compile(r"sglang/srt/layers/sampler|sampling/")),
    ("model runner", rx.compile(r"sglang/srt/model_executor/")),
    ("tokenizer manager", rx.compile(r"tokenizer_manager|detokenizer")),
    ("scheduler", rx.compile(r"sglang/srt/managers/")),
    ("HTTP server", rx.compile(r"sglang/srt/entrypoints/|http_server")),
    ("kernel", rx.compile(r"sgl_kernel/")),
]
# The library a frame below the innermost SGLang frame belongs to.
LIBRARIES: list[tuple[str, object]] = [
    ("flashinfer", rx.compile(r"/flashinfer/")), ("triton", rx.compile(r"/triton/")), ("sgl-kernel", rx.compile(r"/sgl_kernel/")),
    ("deep_gemm", rx.compile(r"/deep_gemm/")), ("transformers", rx.compile(r"/transformers/")),
    ("safetensors", rx.compile(r"/safetensors/")), ("huggingface_hub", rx.compile(r"/huggingface_hub/")),
    ("xgrammar", rx.compile(r"/xgrammar/")), ("vllm", rx.compile(r"/vllm/")), ("ray", rx.compile(r"/ray/")),
    ("torch.distributed", rx.compile(r"torch/distributed/")),
    ("torch.compile", rx.compile(r"torch/_dynamo/|torch/_inductor/|torch/_functorch/")), ("torch", rx.compile(r"/torch/")),
]


@dataclass
class Where:
    """Where an exception was raised: the innermost SGLang frame and the library frame below it."""
    subsystem: str | None = None
    module: str | None = None        # sglang.srt.mem_cache.memory_pool
    function: str | None = None
    line: int | None = None
    library: str | None = None


def _sglang_tail(path: str) -> str | None:
    """'…/site-packages/sglang/srt/x.py' -> 'sglang/srt/x.py'; None for a file outside SGLang's package
    (a virtualenv in a folder named sglang holds torch, not SGLang)."""
    i = path.rfind("/sglang/")
    tail = path[i + 1:] if i >= 0 else (path if path.startswith("sglang/") else None)
    if tail is None or "site-packages/" in tail or "dist-packages/" in tail or "/.venv/" in tail or "/lib/python" in tail:
        return None
    return tail


UTILITY = rx.compile(r"^sglang/(?:srt/)?utils(?:/|\.py)|/_?utils?\.py$|^sglang/srt/utils/")


def where(frames: list[Frame]) -> Where:
    out = Where()
    paths = [f.file.replace("\\", "/") for f in frames]
    tails = [_sglang_tail(p) for p in paths]
    ours = [i for i in range(len(frames)) if tails[i]]
    # the innermost SGLang frame that is not a generic helper (raise_error_or_warn, utils)
    inner = next((i for i in reversed(ours) if not UTILITY.search(tails[i])), ours[-1] if ours else None)
    if inner is not None:
        path = paths[inner]
        out.function, out.line = frames[inner].func, frames[inner].line
        out.module = tails[inner].removesuffix(".py").replace("/", ".")
        out.subsystem = next((name for name, pat in SUBSYSTEMS if pat.search(path)), None)
    below = range(inner + 1, len(frames)) if inner is not None else range(len(frames))
    for i in below:
        lib = next((name for name, pat in LIBRARIES if pat.search(paths[i])), None)
        if lib:
            out.library = lib
            break
    return out


# The component a failure implicates, from a path in its frames or in its own message (FlashInfer's
# CUDA-call macro prints the .cuh it failed in). SGLang's attention backends are named by their module,
# which says which --attention-backend value was running.
ATTENTION_MODULES: list[tuple[str, object]] = [
    ("flashinfer", rx.compile(r"attention/flashinfer(?:_mla)?_backend")), ("fa3", rx.compile(r"attention/flashattention_backend")),
    ("trtllm", rx.compile(r"attention/trtllm_\w*backend")), ("flashmla", rx.compile(r"attention/flashmla_backend")),
    ("cutlass_mla", rx.compile(r"attention/cutlass_mla_backend")), ("aiter", rx.compile(r"attention/aiter_backend")),
    ("triton_attention", rx.compile(r"attention/triton_backend|attention/triton_ops/")),
]
PATH_COMPONENTS: list[tuple[str, object]] = [
    ("flashinfer", rx.compile(r"/flashinfer/|\bflashinfer/\w")), ("aiter", rx.compile(r"/aiter/")),
    ("flash_attn", rx.compile(r"/flash_attn/|/sgl_kernel/flash_attn")), ("deep_gemm", rx.compile(r"/deep_gemm/")),
    ("triton", rx.compile(r"/triton/")), ("custom_all_reduce", rx.compile(r"custom_all_reduce|/quick_all_reduce")),
    ("cuda_graph", rx.compile(r"graph_runner|torch/cuda/graphs\.py")),
    ("speculative", rx.compile(r"sglang/srt/speculative/")), ("lora", rx.compile(r"sglang/srt/lora/")),
    ("moe", rx.compile(r"sglang/srt/layers/moe/")),
    ("host_pool", rx.compile(r"mem_cache/memory_pool_host|mem_cache/hicache|mem_cache/hiradix|managers/cache_controller")),
    ("torch_compile", rx.compile(r"torch/_dynamo/|torch/_inductor/")),
    ("overlap_schedule", rx.compile(r"tp_worker_overlap_thread|overlap_thread\.py")),
    ("two_batch_overlap", rx.compile(r"two_batch_overlap")), ("single_batch_overlap", rx.compile(r"single_batch_overlap")),
]


def implicated(frames: list[Frame], texts: list[str] = ()) -> list[str]:
    """Components a failure touches: attention backends (by SGLang module) and libraries or subsystems
    named by any frame's path or by a path inside the failure's own lines. Sorted names."""
    found: set[str] = set()
    paths = [f.file.replace("\\", "/") for f in frames] + [t.replace("\\", "/") for t in texts if t]
    for path in paths:
        for name, pat in ATTENTION_MODULES:
            if pat.search(path):
                found.add(name)
        for name, pat in PATH_COMPONENTS:
            if pat.search(path):
                found.add(name)
    return sorted(found)


CATEGORY = {
    "weights": "oom.weights", "kv_pool": "oom.kv_pool", "mamba": "oom.mamba_state", "cuda_graph": "oom.cuda_graph",
    "draft": "oom.speculative", "prefill": "oom.runtime_prefill", "decode": "oom.runtime_decode",
    "multimodal": "oom.multimodal", "warmup": "oom.runtime_prefill", "dist_init": "oom.other_process",
}

DESCRIBE = {
    "dist_init": "while initialising torch.distributed / NCCL, before any weight was loaded",
    "weights": "while loading the model weights",
    "kv_pool": "while allocating the KV cache pool",
    "mamba": "while allocating the Mamba/linear-attention state pool",
    "cuda_graph": "while capturing CUDA graphs (after the static pools were allocated)",
    "draft": "while loading or capturing the speculative-decoding draft model",
    "warmup": "during the warm-up request, after start-up finished",
    "prefill": "in the forward pass of a prefill batch while serving",
    "decode": "in a decode step while serving",
    "multimodal": "in the vision/multimodal encoder",
}


@dataclass
class PhaseGuess:
    phase: str | None
    basis: str                 # frames | milestones | message | numbers | model | none
    confidence: float
    notes: list[str] = field(default_factory=list)
    line: int | None = None    # the line that shows it


def from_frames(frames: list[Frame]) -> str | None:
    if not frames:
        return None
    texts = [f"{f.file.replace(chr(92), '/')} {f.func} {f.code}" for f in frames]
    for phase, pattern in FRAME_RULES:
        if any(pattern.search(t) for t in texts):
            if phase == "kv_pool" and any("mamba" in t or "Mamba" in t for t in texts):
                return "mamba"
            return phase
    return None


def from_milestones(milestones: list[Event], before_line: int, rank: str | None, spec: bool, batches_before: str | None,
                    before_ts: str | None = None) -> tuple[str | None, Event | None]:
    """The step after the last milestone the failing rank (or any rank) printed before the failure.
    'Before' is by line, or by timestamp when both carry one (pastes are not always in order)."""
    def earlier(m: Event) -> bool:
        return m.line <= before_line or bool(before_ts and m.ts and m.ts <= before_ts)

    relevant = [m for m in milestones if earlier(m) and (rank is None or m.rank in (rank, None))]
    if not relevant and rank is not None:
        relevant = [m for m in milestones if earlier(m)]
    if before_ts:
        relevant.sort(key=lambda m: (m.ts or "", m.line))
    if batches_before:
        return batches_before, None
    if not relevant:
        return None, None
    last = relevant[-1]
    phase = last.data.get("phase")
    seen = {m.data.get("phase") for m in relevant}
    graphs_done = "graph_end" in seen
    step = {
        "dist_begin": "dist_init",
        "nccl_init": "dist_init",
        "dist_end": "weights",
        "load_begin": "weights",
        "load_progress": "weights",
        "load_end": "draft" if graphs_done and spec else "kv_pool",
        "kv_dtype": "kv_pool",
        "mamba_alloc": "kv_pool",
        "kv_alloc": "kv_pool" if "pool_end" not in seen else "cuda_graph",
        "swa_split": "kv_pool",
        "pool_end": "cuda_graph",
        "graph_bs": "cuda_graph",
        "graph_begin": "draft" if last.data.get("role") == "draft" else "cuda_graph",
        "graph_end": "draft" if spec and last.data.get("role") != "draft" else "warmup",
        "host_pool": "kv_pool",
        "ready": "prefill",
        "http_up": "warmup",
    }.get(phase)
    if phase == "graph_end" and "capacity" in seen:
        step = "warmup"
    return step, last


def from_oom_numbers(oom: dict) -> PhaseGuess:
    """A bare PyTorch OOM line: what its numbers allow us to say (weak evidence)."""
    total = oom.get("total_gib")
    tried = oom.get("tried_gib") or 0.0
    held = oom.get("this_process_gib")
    procs = oom.get("processes") or []
    if held is None and len(procs) == 1:
        held = procs[0]["used_gib"]  # inside a container PyTorch names the server itself by PID
    if oom.get("private_pools_gib"):
        return PhaseGuess("prefill", "numbers", 0.45, [
            "CUDA graphs already hold memory in private pools, so start-up had finished: the OOM happened while serving; "
            "the paste does not show whether a prefill or a decode batch ran"])
    if total is None:
        return PhaseGuess(None, "none", 0.3, ["the OOM message carries no capacity figures"])
    if held is not None and held >= 0.85 * total and tried >= 1.0 and total >= 40:
        return PhaseGuess("cuda_graph", "numbers", 0.45, [
            f"the process already held {held:.1f} of {total:.1f} GiB and asked for a further {tried:.2f} GiB in one piece: "
            "that is a start-up buffer allocated after the static pools (CUDA graphs, workspaces, symmetric memory), "
            "not a weight shard or a pool slice"])
    if total < 40:
        return PhaseGuess("weights", "numbers", 0.45, [
            f"no start-up step is in the paste; on a {total:.1f} GiB GPU a small allocation failing with the GPU full "
            "is most often the weights not fitting (SGLang sizes its pools from what is free, so pools rarely overrun)"])
    return PhaseGuess(None, "none", 0.3, ["the paste shows neither a start-up step nor a traceback"])
