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

# Most specific first: a draft graph capture is "draft", a vision forward inside a prefill is "multimodal".
FRAME_RULES: list[tuple[str, object]] = [
    ("draft", rx.compile(r"eagle_worker|eagle_draft|draft_cuda_graph|speculative/.*(?:worker|draft)|multi_layer_eagle|DraftWorker|draft_worker|init_draft")),
    ("cuda_graph", rx.compile(r"cuda_graph_runner|graph_runner|init_cuda_graphs|init_device_graphs|capture_one_batch_size|\bcapture\b|prealloc_symmetric_memory|piecewise")),
    ("mamba", rx.compile(r"MambaPool|HybridReqToTokenPool|mamba_pool|MambaRadixCache.*__init__|init_mamba")),
    ("kv_pool", rx.compile(r"init_memory_pool|TokenToKVPool|_create_buffers|profile_max_num_token|kv_cache_configurator|pool_configurator|ReqToTokenPool|memory_pool\.py")),
    ("weights", rx.compile(r"load_model|load_weights|weight_loader|model_loader|_initialize_model|\bget_model\b|create_weights|process_weights_after_loading|safetensors|load_state_dict")),
    ("multimodal", rx.compile(r"vision|visual|get_image_feature|mm_utils|multimodal|pixel_values|siglip|encode_images|image_encoder|\bvit\b|processor")),
    ("dist_init", rx.compile(r"init_distributed_environment|init_torch_distributed|initialize_model_parallel|init_process_group|ncclCommInitRank|pynccl")),
    ("prefill", rx.compile(r"forward_extend|prefill|run_batch.*extend")),
    ("decode", rx.compile(r"forward_decode|decode_step")),
]

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
    text = " ".join(f"{f.file} {f.func} {f.code}" for f in frames)
    for phase, pattern in FRAME_RULES:
        if pattern.search(text):
            if phase == "kv_pool" and ("mamba" in text or "Mamba" in text):
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
