"""The runtime explainer: where a scheduler was stuck or raised, from the events' typed fields.

Values only (names, numbers, lines, booleans); the rule files say what they mean.

    exc.*       the first exception with a type: type, message (its first line), line, rank
    frame.*     the innermost SGLang frame of its traceback past generic helpers (phase.where):
                module, function, line, subsystem, library (the first library frame below it)
    raised.*    the catalog message of the exception when SGLang raises it: name, module, function
                (where the newest release raises it), versions (first–last release that prints it), meaning
    library.*   the catalog message of the exception when another component prints it: name, component,
                meaning
    watchdog.*  the timeout: timeout_s, soft, ranks, n_ranks, batch_size, line, doubled_s
    pyspy       dumped | failed | none
    stuck.*     the innermost SGLang frame of the dumped scheduler's main thread (function, file,
                line, thread) and what it waited in: kind (collective, graph_replay, kernel_sync,
                jit, python), wait_function, wait_file
    speculative the stuck stack is in speculative decoding
    hicache     the stuck stack is in the hierarchical (host-memory) KV cache's code
    hicache_draft_skipped  the draft KV pool type the hierarchical cache said it leaves out (its warning
                before the timeout), with speculative decoding on
    peer.*      another rank as the cause: cause (exception | collective), rank, line, type
    jit.*       a JIT build that started before the timeout and did not finish: name, line
    cut.*       a traceback cut inside a forward pass: function, file, header
    prefill_cap the new tokens a prefill batch may hold to halve the last one (a power of two)
    fault       the catalog id of a CUDA kernel fault the rule matched
    implicated  components the failure touches (phase.implicated): attention backends by SGLang module
                (flashinfer, fa3, trtllm, triton_attention, …), libraries and subsystems named by a path in the
                first exception's frames or in the matched lines (flashinfer, aiter, cuda_graph, speculative, …)
    first_exception.*  the first exception with a type: line, type
    exit_code   a scheduler's exit code (its message or the launcher's 'Exit code' line)
    http_5xx    HTTP answers with a 5xx status (their lines are quoted)
    health.*    SGLang's own health-check failure: line
    phase       the failure phase id

Argument `focus` (exception, watchdog, cut, log_end, fault, symptom, http): the part whose lines
the finding quotes as evidence; every value is computed whatever the focus.
"""
from __future__ import annotations

import sys

from . import Explainer, ExplainContext, Values

PROVIDES = (
    "exc.*", "frame.*", "raised.*", "watchdog.*", "pyspy", "stuck.*", "speculative", "hicache", "hicache_draft_skipped", "peer.*", "jit.*", "cut.*",
    "prefill_cap", "fault", "implicated", "first_exception.*", "exit_code", "http_5xx", "health.*", "library.*", "phase",
)

# what a stuck frame waited in, by function name and by file
COLLECTIVE_FUNCS = frozenset((
    "all_reduce", "all_gather", "all_gather_into_tensor", "_all_gather_base", "all_gather_object", "reduce_scatter",
    "reduce_scatter_tensor", "_reduce_scatter_base", "broadcast", "broadcast_object_list", "broadcast_pyobj", "barrier",
    "monitored_barrier", "send", "recv", "isend", "irecv", "all_to_all", "all_to_all_single", "gather", "scatter",
    "reduce", "send_object_list", "recv_object_list", "tensor_model_parallel_all_reduce",
    "tensor_model_parallel_all_gather",
))
COLLECTIVE_FILES = ("distributed_c10d.py", "parallel_state.py", "pynccl", "custom_all_reduce", "communication_op.py",
                    "deepep", "nccl_allocator", "symm_mem")
GRAPH_FUNCS = frozenset(("replay", "replay_prepare"))
GRAPH_FILES = ("cuda/graphs.py", "cuda_graph_runner.py", "graph_runner.py")
SYNC_FUNCS = frozenset(("synchronize", "wait_stream", "wait_event", "query"))
SYNC_FILES = ("cuda/__init__.py", "cuda/streams.py")
JIT_FILES = ("jit", "cpp_extension", "ninja", "triton/compiler", "tvm_ffi")
# the hierarchical cache: its radix tree, the controller that moves KV between GPU and host, the host pool, storage backends
HICACHE_FILES = ("hiradix_cache", "hi_mamba_radix", "hicache", "cache_controller", "memory_pool_host")
# libraries whose frames are not SGLang's (py-spy prints paths shortened to their package)
OTHER_TOPS = frozenset(("torch", "triton", "flashinfer", "transformers", "vllm", "sgl_kernel", "numpy", "zmq", "uvloop",
                        "uvicorn", "fastapi", "starlette", "asyncio", "concurrent", "multiprocessing", "safetensors",
                        "huggingface_hub", "deep_gemm", "tvm_ffi", "ray", "site-packages", "dist-packages"))
JIT_STARTS = ("flashinfer.loading_jit_ops", "cpp_extension.building_module")
JIT_ENDS = ("flashinfer.finished_jit_ops", "cpp_extension.loading_module")
WATCHDOG_NAMES = ("scheduler.watchdog_timeout", "scheduler.watchdog_timeout_named")
PYSPY_FAILED = ("scheduler.pyspy_failed", "scheduler.pyspy_failed_native", "scheduler.pyspy_all_failed")
MAX_MESSAGE = 200


def _module_of(path: str) -> str | None:
    """'…/python/sglang/srt/managers/scheduler.py' -> 'sglang.srt.managers.scheduler'."""
    p = path.replace("\\", "/")
    i = p.rfind("sglang/")
    if i < 0 or (i > 0 and p[i - 1] not in "/"):
        return None
    mod = p[i:]
    mod = mod[:-3] if mod.endswith(".py") else mod
    return mod.replace("/", ".")


def _top(path: str) -> str:
    parts = [x for x in path.replace("\\", "/").split("/") if x]
    return parts[0] if parts else ""


def is_sglang_frame(frame, shortened: bool = False) -> bool:
    """A traceback frame is SGLang's when its file is under a sglang package. py-spy prints paths
    shortened to what tells them apart, so there a frame is SGLang's unless it is Python's own
    library or another package's."""
    path = frame.file.replace("\\", "/")
    if "/sglang/" in path or path.startswith("sglang/"):
        return True
    if not shortened:
        return False
    top = _top(path)
    name = top[:-3] if top.endswith(".py") else top
    return bool(name) and name not in sys.stdlib_module_names and name not in OTHER_TOPS and "python3" not in path


def _frame_values(frame, shortened: bool = False) -> dict:
    return {"function": frame.func, "file": frame.file.replace("\\", "/").split("/")[-1], "path": frame.file,
            "line": frame.line, "module": _module_of(frame.file) if not shortened else None}


def _wait_kind(frame) -> str | None:
    f, path = frame.func, frame.file.replace("\\", "/")
    if f in COLLECTIVE_FUNCS or any(k in path for k in COLLECTIVE_FILES):
        return "collective"
    if f in GRAPH_FUNCS and ("graph" in path or any(path.endswith(k) for k in GRAPH_FILES)):
        return "graph_replay"
    if f in SYNC_FUNCS and (any(path.endswith(k) for k in SYNC_FILES) or "cuda" in path):
        return "kernel_sync"
    if any(k in path for k in JIT_FILES):
        return "jit"
    return None


def _name(ev) -> str | None:
    m = getattr(ev, "msg", None)
    return (m.name or m.id) if m is not None else None


def _first_exception(facts):
    return next((e for e in facts.events if e.kind == "exception" and e.data.get("type")), None)


def _versions(facts, msg) -> str | None:
    """The releases that print the message's family (any of its wordings): 'first–last'."""
    cat = _catalog()
    if cat is None or msg is None:
        return None
    info = cat.family_info(msg.family)
    vs = (info or {}).get("versions") or cat.versions_of(msg)
    if not vs:
        return None
    return vs[0] if len(vs) == 1 else f"{vs[0]}–{vs[-1]}"


def _catalog():
    try:
        from ..messages import Catalog
        return Catalog.open()
    except Exception:       # no catalog: the values that need it are unknown
        return None


def _exception_values(facts, v: dict, out: Values, quote: bool) -> None:
    ex = _first_exception(facts) or next((e for e in facts.events if e.kind == "exception"), None)
    if ex is None:
        return
    lines = (ex.data.get("message") or "").strip().splitlines()
    v["exc"] = {"type": ex.data.get("type"), "message": lines[0][:MAX_MESSAGE] if lines else None, "line": ex.line,
                "rank": ex.rank, "cut": not ex.data.get("type")}
    frames = ex.data.get("frames") or []
    from .. import phase as P
    w = P.where(frames)                 # the innermost SGLang frame past generic helpers, the library below it
    if w.function:
        v["frame"] = {"module": w.module, "function": w.function, "line": w.line, "subsystem": w.subsystem,
                      "library": w.library}
    m = ex.msg
    if m is not None:
        cat = _catalog()
        e = cat.get(m.id) if cat is not None else None
        known = {"name": m.name or m.family, "component": m.component, "meaning": e.meaning if e is not None else None}
        if m.component == "sglang":
            v["raised"] = dict(known, module=m.module, function=m.function, versions=_versions(facts, m))
        else:
            v["library"] = known
    if quote:
        out.evidence.append((ex.input, ex.line, "trigger"))


def _dump_frames(ev) -> tuple[list, str | None]:
    """The frames of a py-spy dump's scheduler thread (MainThread, else the first active one)."""
    threads = ev.data.get("threads") or []
    main = next((t for t in threads if t.get("name") == "MainThread"), None) or \
        next((t for t in threads if t.get("state") == "active"), None)
    if main is not None:
        return main["frames"], main.get("name")
    return ev.data.get("frames") or [], None


def _watchdog_values(facts, hits, v: dict, out: Values, quote: bool) -> None:
    from .. import phase as P
    from ..numbers import to_float
    timeouts = [e for e in hits if _name(e) in WATCHDOG_NAMES] or \
        [e for e in facts.events if _name(e) in WATCHDOG_NAMES]
    if not timeouts:
        return
    first = timeouts[0]
    fields = first.msg.fields if first.msg is not None else {}
    timeout = to_float(fields.get("watchdog_timeout"))
    soft = fields.get("soft")
    ranks = sorted({e.rank for e in timeouts if e.rank}, key=_rank_order)
    seen = sorted({e.rank for e in facts.events if e.rank}, key=_rank_order)
    w = {"timeout_s": timeout, "line": first.line, "ranks": ranks, "n_ranks": len(ranks),
         "soft": str(soft) == "True",          # before 0.5.7 the watchdog always ends the server
         "all_ranks": (set(ranks) >= set(seen)) if len(seen) > 1 and ranks else None,
         "doubled_s": int(timeout * 2) if timeout else None}
    batch = next((e for e in facts.events if _name(e) == "scheduler.watchdog_batch"), None)
    if batch is not None:
        w["batch_size"] = batch.msg.fields.get("batch_size")
    v["watchdog"] = w
    dumps = [e for e in facts.events if e.kind == "watchdog" and (e.data.get("frames") or e.data.get("threads"))]
    failed = any(_name(e) in PYSPY_FAILED or e.data.get("pyspy") == "failed" for e in facts.events)
    v["pyspy"] = "dumped" if dumps else ("failed" if failed else "none")
    if dumps:
        mine = [d for d in dumps if d.rank in ranks] or dumps
        frames, thread = _dump_frames(mine[0])
        sg = [f for f in frames if is_sglang_frame(f, shortened=True)]
        if sg:
            v["stuck"] = dict(_frame_values(sg[0], shortened=True), thread=thread, rank=mine[0].rank)
        else:
            v["stuck"] = {"thread": thread, "rank": mine[0].rank}
        kind, wait = "python", None
        for f in frames:                     # innermost first
            k = _wait_kind(f)
            if k:
                kind, wait = k, f
                break
        v["stuck"]["kind"] = kind if frames else None
        if wait is not None:
            v["stuck"]["wait_function"] = wait.func
            v["stuck"]["wait_file"] = wait.file.replace("\\", "/").split("/")[-1]
        v["speculative"] = P.in_speculative(frames)
        v["hicache"] = any(any(k in (f.file or "").replace("\\", "/").split("/")[-1] for k in HICACHE_FILES) for f in frames)
        if quote:
            out.evidence.append((mine[0].input, mine[0].line, "trigger"))
    skipped = next((e for e in facts.events if e.line <= first.line and e.msg is not None
                    and e.msg.name == "hicache.draft_pool_skipped"), None)
    if skipped is not None:
        v["hicache_draft_skipped"] = str(skipped.msg.fields.get("name") or "its type")
        if quote:
            out.evidence.append((skipped.input, skipped.line, "context"))
    # another rank as the cause: an exception of a rank that did not time out, before the timeout
    other = next((e for e in facts.events if e.kind == "exception" and e.data.get("type") and e.line <= first.line
                  and (e.rank is None or e.rank not in ranks) and _within(e.ts, first.ts, timeout)), None)
    if other is not None:
        v["peer"] = {"cause": "exception", "rank": other.rank, "line": other.line, "type": other.data.get("type")}
        if quote:
            out.evidence.append((other.input, other.line, "context"))
    elif v.get("stuck", {}).get("kind") == "collective":
        v["peer"] = {"cause": "collective", "rank": None}
    # a JIT build that started before the timeout and had not finished
    starts = [e for e in facts.events if e.msg is not None and e.msg.id in JIT_STARTS and e.line <= first.line]
    if starts:
        last = starts[-1]
        done = any(e.msg is not None and e.msg.id in JIT_ENDS and last.line < e.line <= first.line for e in facts.events)
        if not done:
            v["jit"] = {"name": last.msg.fields.get("name"), "line": last.line}
            if quote:
                out.evidence.append((last.input, last.line, "context"))


def _seconds(ts: str | None) -> float | None:
    import datetime
    if not ts:
        return None
    try:
        return datetime.datetime.fromisoformat(ts.strip().replace("/", "-")).timestamp()
    except ValueError:
        return None


def _within(before: str | None, at: str | None, timeout: float | None) -> bool:
    """An earlier failure can have caused the hang: it came at most the timeout (plus two minutes)
    before the watchdog fired (unknown times: it can)."""
    a, b = _seconds(before), _seconds(at)
    if a is None or b is None:
        return True
    return b - (timeout or 300) - 120 <= a <= b


def _rank_order(rank: str):
    digits = "".join(ch for ch in rank if ch.isdigit())
    return (len(rank.split()), int(digits) if digits else 0, rank)


def _cut_values(facts, v: dict, out: Values, quote: bool) -> None:
    cut = next((e for e in facts.events if e.kind == "exception" and e.data.get("partial_tail")), None)
    if cut is None:
        return
    frames = cut.data.get("frames") or []
    fwd = next((f for f in reversed(frames) if "forward" in f.func), None) or (frames[-1] if frames else None)
    v["cut"] = {"header": cut.data.get("header") or None}
    if fwd is not None:
        v["cut"].update(function=fwd.func, file=fwd.file.replace("\\", "/").split("/")[-1])
    if quote:
        out.evidence.append((cut.input, cut.line, "trigger"))


def _prefill_cap(facts) -> int | None:
    n = facts.values.get("end.new_tokens")
    if not n:
        return None
    p = 1024
    while p * 2 <= n // 2:
        p *= 2
    return p


def _exit_code(facts, hits) -> int | None:
    from ..numbers import to_int
    for e in hits:
        m = e.msg
        code = (m.fields or {}).get("exit_code") if m is not None else None
        if code is not None and to_int(code) is not None:
            return to_int(code)
    for e in facts.events:
        if e.kind == "signal" and e.data.get("exit_code") is not None:
            return e.data["exit_code"]
    return None


FOCUS = ("exception", "watchdog", "cut", "log_end", "fault", "symptom", "http")


def explain(ctx: ExplainContext, focus: str | None = None) -> Values:
    facts, hits = ctx.facts, ctx.hits
    out = Values()
    v = out.values
    v["phase"] = facts.failure_phase.phase if facts.failure_phase else None
    _exception_values(facts, v, out, focus == "exception")
    first = _first_exception(facts)
    if first is not None:
        v["first_exception"] = {"line": first.line, "type": first.data.get("type")}
    _watchdog_values(facts, hits, v, out, focus == "watchdog")
    _cut_values(facts, v, out, focus == "cut")
    v["prefill_cap"] = _prefill_cap(facts)
    end_line = facts.values.get("end.line")
    if end_line is not None and focus == "log_end":
        out.evidence.append((0, end_line, "trigger"))
    fault = next((e.msg.id for e in hits if e.msg is not None and e.msg.event == "cuda_error"), None)
    v["fault"] = fault
    from .. import phase as P
    ex = _first_exception(facts) or next((e for e in facts.events if e.kind == "exception"), None)
    frames = (ex.data.get("frames") or []) if ex is not None else []
    texts = [e.text for e in hits] + ([ex.data.get("message") or ""] if ex is not None else [])
    v["implicated"] = P.implicated(frames, texts) or None
    v["exit_code"] = _exit_code(facts, hits)
    errors = [e for e in facts.events if e.kind == "http" and (e.data.get("status") or 0) >= 500]
    v["http_5xx"] = len(errors) or None
    health = [e for e in facts.events if (_name(e) or "").startswith("health.")]
    if health:
        v["health"] = {"line": health[0].line}
    if focus == "http":
        out.evidence.extend((e.input, e.line, "trigger") for e in (health[:1] + errors[:3]))
    return out


EXPLAINER = Explainer("runtime", explain, PROVIDES, args=("focus",))
