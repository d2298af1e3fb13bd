"""The env explainer: values about the environment a failure happened in, from the events a rule
matched and the facts. Values only — names, numbers, booleans and lists; every sentence is in
the rule files (rules/env/).

    message, messages        the catalog names of the matched messages (for text tables)
    signal, signal_line      the first fatal signal the matched lines report (SIGKILL, SIGBUS, ...),
    signals, sigkill         from bash's job lines, exit codes, faulthandler and the launcher
    oom_killer               a kernel / cgroup / Kubernetes / Slurm / systemd OOM-kill line is among them
    error_before(_line)      another failure was reported before the first matched line (so a kill
                             that follows is the launcher stopping its own children)
    nccl_frames              a fatal-error dump or traceback runs through NCCL / pynccl code
    flashinfer, sampling     FlashInfer's kernels are the ones that failed (sampling kernels)
    port, next_port, ...     the port a bind failed on, one to use instead, the HTTP port
    zmq_loopback, apart_port a ZMQ bind on a loopback TCP port (SGLang's IPC block, based on --port), and a
                             --port 1000 away from the one in use (or from the taken port)
    hicache_*                host-pool sizes that fit what the check reported
    collective_*             a collective's timeout, its sequence number, a start-up --dist-timeout
    multi_node               the ranks span more than one node
    module, package          a missing module and the package that provides it
    library, cuda_library    a shared library the loader could not find; whether CUDA ships it
    local_host               the server listens on 0.0.0.0 / :: / nothing given (warm-up goes there)
    fault_*, held_*          GPUs nvidia-smi shows in an error state / with memory in use
"""
from __future__ import annotations

import os

from . import Explainer, ExplainContext, Values

PROVIDES = (
    "message", "messages", "signal", "signal_line", "signals", "sigkill", "oom_killer", "error_before",
    "error_before_line", "nccl_frames", "dump_phase", "flashinfer", "sampling", "flashinfer_attention", "port", "port_name", "next_port", "http_port", "zmq_loopback", "apart_port", "tcpstore", "dp_size", "tp_size", "multi_dp", "build_tool", "import_ignored", "warmup_failed", "proxy_error", "mooncake",
    "hicache_size_gb", "hicache_printed_gb", "hicache_hidden_reserve", "hicache_ratio_fit", "hicache_ratio_raise", "hicache_requested_gb", "hicache_available_gb", "collective_timeout_s", "collective_seq",
    "early_collective", "dist_timeout_s", "multi_node", "module", "package", "library", "cuda_library",
    "local_host", "host", "sighup", "fault_gpus", "fault_errors", "fault_severe", "held_gpus", "held_used_mib",
    "held_total_mib", "held_pids", "smi_error",
)

# the fatal signal each catalog message reports
SIGNAL_OF = {
    "os.bash_killed": "SIGKILL", "os.exit_sigkill": "SIGKILL", "kernel.oom_killed_process": "SIGKILL",
    "kernel.oom_killed_rss": "SIGKILL", "kernel.oom_invoked": "SIGKILL", "kernel.oom_reaper": "SIGKILL",
    "kernel.oom_constraint": "SIGKILL", "kernel.memcg_usage_limit": "SIGKILL", "kubernetes.oomkilled": "SIGKILL",
    "slurm.oom_kill_events": "SIGKILL", "systemd.oomd_killed": "SIGKILL",
    "os.bash_bus_error": "SIGBUS", "os.exit_sigbus": "SIGBUS", "faulthandler.bus_error": "SIGBUS",
    "os.bash_segfault": "SIGSEGV", "os.exit_sigsegv": "SIGSEGV", "faulthandler.segfault": "SIGSEGV",
    "kernel.segfault": "SIGSEGV",
    "os.bash_aborted": "SIGABRT", "os.exit_sigabrt": "SIGABRT", "faulthandler.aborted": "SIGABRT",
    "os.bash_terminated": "SIGTERM", "os.exit_sigterm": "SIGTERM", "os.bash_hangup": "SIGHUP",
}
OOM_KILLER = ("kernel.oom_killed_process", "kernel.oom_killed_rss", "kernel.oom_invoked", "kernel.oom_reaper",
              "kernel.oom_constraint", "kernel.memcg_usage_limit", "kubernetes.oomkilled", "slurm.oom_kill_events",
              "systemd.oomd_killed")
# what the parser itself calls the signal lines it types (short lines such as 'Killed' carry no catalog match)
PARSER_SIGNAL = {"killed": "SIGKILL", "sigbus": "SIGBUS", "segfault": "SIGSEGV", "abort": "SIGABRT", "sigfpe": "SIGFPE", "sigill": "SIGILL"}
BASH_WORD = {"Killed": "SIGKILL", "Segmentation fault": "SIGSEGV", "Aborted": "SIGABRT", "Bus error": "SIGBUS",
             "Terminated": "SIGTERM", "Hangup": "SIGHUP"}
EXIT_CODE = {-9: "SIGKILL", 137: "SIGKILL", -7: "SIGBUS", 135: "SIGBUS", -11: "SIGSEGV", 139: "SIGSEGV",
             -6: "SIGABRT", 134: "SIGABRT", -15: "SIGTERM", 143: "SIGTERM"}
# catalog event kinds that report a failure of their own (a later kill is the launcher's reaction)
FAILURE_EVENTS = {"import_error", "cuda_error", "driver_error", "arch_error", "nccl_error", "comm_error", "build_error",
                  "model_load_error", "port_error", "device_oom", "host_oom", "refusal", "argparse", "watchdog"}

# import name -> the package to install (only where the two differ or the package is not on PyPI)
PACKAGE_OF = {
    "flashinfer": "flashinfer-python", "sgl_kernel": "sgl-kernel", "deep_ep": "deep_ep (DeepEP, built from source)",
    "deep_gemm": "deep_gemm (DeepGEMM, built from source)", "cv2": "opencv-python-headless", "PIL": "pillow",
    "yaml": "pyyaml", "sklearn": "scikit-learn", "google.protobuf": "protobuf", "zmq": "pyzmq",
    "vllm": "vllm", "triton": "triton", "decord": "decord", "outlines": "outlines", "xgrammar": "xgrammar",
    "sentencepiece": "sentencepiece", "tiktoken": "tiktoken", "flash_attn": "flash-attn", "mooncake": "mooncake-transfer-engine",
    "nixl": "nixl", "torchvision": "torchvision", "torchaudio": "torchaudio", "transformers": "transformers",
    "accelerate": "accelerate", "modelscope": "modelscope", "huggingface_hub": "huggingface_hub",
    "torch_memory_saver": "torch_memory_saver", "lmcache": "lmcache", "py_spy": "py-spy", "uvloop": "uvloop",
    "orjson": "orjson", "msgspec": "msgspec", "partial_json_parser": "partial-json-parser", "pybase64": "pybase64",
    "einops": "einops", "timm": "timm", "qwen_vl_utils": "qwen-vl-utils", "soundfile": "soundfile", "librosa": "librosa",
    "ninja": "ninja", "numpy": "numpy", "scipy": "scipy", "psutil": "psutil", "setproctitle": "setproctitle",
    "aiter": "aiter (ROCm, built from source)", "torch_npu": "torch_npu", "sgl_kernel_npu": "sgl-kernel-npu",
}
# libraries that come with the CUDA toolkit / the nvidia-* pip wheels
CUDA_LIBRARIES = ("libcudart", "libnvrtc", "libcublas", "libcublasLt", "libcudnn", "libcufft", "libcurand", "libcusparse",
                  "libcusolver", "libnccl", "libnvJitLink", "libnvToolsExt", "libcupti", "libcuda")
# names FlashInfer gives its kernels and modules (a failing kernel of one of these is FlashInfer's)
FLASHINFER_KERNELS = ("TopKTopPSamplingFromProbs", "TopPSamplingFromProbs", "TopKSamplingFromProbs",
                      "SamplingFromProbs", "MinPSamplingFromProbs", "TopKRenormProb", "TopPRenormProb", "TopKMaskLogits",
                      "RMSNorm", "FusedAddRMSNorm", "GemmaRMSNorm", "BatchPrefillWithPagedKVCache",
                      "BatchDecodeWithPagedKVCache", "SinglePrefillWithKVCache", "SingleDecodeWithKVCache",
                      "SiluAndMul", "GeluAndMul", "apply_rope")
SAMPLING_KERNELS = ("SamplingFromProbs", "RenormProb", "MaskLogits")
ATTENTION_KERNELS = ("BatchPrefill", "BatchDecode", "SinglePrefill", "SingleDecode", "MLA", "Attention")
LOCAL_BIND = ("0.0.0.0", "::", "[::]", "")


def _name(ev) -> str | None:
    m = getattr(ev, "msg", None)
    return (m.name or m.id) if m is not None else None


def _fields(ev) -> dict:
    m = getattr(ev, "msg", None)
    return dict(m.fields) if m is not None and m.fields else {}


def _int(v):
    from ..numbers import to_int
    return to_int(v)


def _float(v):
    from ..numbers import to_float
    return to_float(v)


def signal_of(ev) -> str | None:
    """The fatal signal an event reports, or None (SIGQUIT from a child is the launcher's reaction)."""
    name = _name(ev)
    if name in SIGNAL_OF:
        return SIGNAL_OF[name]
    fields = _fields(ev)
    if name == "os.bash_job_signal":
        return BASH_WORD.get(str(fields.get("signal") or ""))
    if name in ("launcher.scheduler_died",) or ev.data.get("signal") in ("scheduler_dead", "exit_code"):
        code = _int(fields.get("exit_code", fields.get("code", ev.data.get("exit_code"))))
        return EXIT_CODE.get(code) if code is not None else None
    if ev.kind == "signal":
        return PARSER_SIGNAL.get(ev.data.get("signal") or "")
    return None


def _is_failure(ev) -> bool:
    """An event that reports a failure of its own (not the launcher reacting to one)."""
    m = getattr(ev, "msg", None)
    if m is not None and m.event == "signal":
        return False
    if ev.kind == "exception":
        return bool(ev.data.get("type"))
    if ev.kind in ("watchdog", "retract"):
        return True
    if ev.kind in ("argparse", "oom"):
        return not ev.data.get("usage")
    if ev.kind == "error":
        return ev.data.get("source") != "traceback-header"
    if ev.kind == "message":
        return m is not None and m.event in FAILURE_EVENTS
    return False


def _signals(facts, hits, v: dict) -> None:
    found = [(ev, s) for ev in hits if (s := signal_of(ev))]
    v["signals"] = sorted({s for _, s in found})
    v["sigkill"] = any(s == "SIGKILL" for _, s in found)
    v["oom_killer"] = any(_name(ev) in OOM_KILLER for ev in hits)
    if found:
        ev, s = min(found, key=lambda x: (x[0].input, x[0].line))
        v["signal"], v["signal_line"] = s, ev.line
    v["sighup"] = v.get("signal") == "SIGHUP"
    first = min(((e.input, e.line) for e in hits), default=None)
    if first is None:
        v["error_before"] = False
        return
    hit_ids = {id(e) for e in hits}
    before = [e for e in facts.events if (e.input, e.line) < first and id(e) not in hit_ids and _is_failure(e)]
    v["error_before"] = bool(before)
    if before:
        v["error_before_line"] = before[0].line


def _frames_name(facts, word: str) -> bool:
    """Whether a fatal-error dump or a traceback runs through code whose file or function names `word`."""
    for e in facts.events:
        if _name(e) == "faulthandler.frame":
            f = _fields(e)
            if word in str(f.get("file") or "").lower() or word in str(f.get("function") or "").lower():
                return True
        for fr in e.data.get("frames") or []:
            if word in (fr.file or "").lower() or word in (fr.func or "").lower():
                return True
    return False


def _dump_phase(facts) -> str | None:
    """The start-up step a fatal-error dump was in: the crashing thread's frames the parser puts on
    the signal event (faulthandler's 'Current thread' block), else loose faulthandler frame lines."""
    from .. import phase as P
    from ..events import Frame
    for e in facts.events:
        if e.kind == "signal" and e.data.get("frames"):
            return P.from_frames(e.data["frames"])
    frames = [Frame(str(f.get("file") or ""), _int(f.get("line")), str(f.get("function") or ""))
              for f in (_fields(e) for e in facts.events if _name(e) == "faulthandler.frame")]
    return P.from_frames(frames) if frames else None


def _all_matches(ev) -> list:
    """Every catalog message a matched line is (a FlashInfer wrapper around a CUDA error is both);
    the event carries only the best one."""
    try:
        from ..messages import Catalog
    except ImportError:
        return [ev.msg] if ev.msg is not None else []
    text = ev.text if ev.kind != "exception" else f"{ev.data.get('type') or ''}: {ev.data.get('message') or ''}"
    found = Catalog.open().match_all(text[:4000]) if text else []
    return found or ([ev.msg] if ev.msg is not None else [])


def _flashinfer(facts, hits, v: dict) -> None:
    matches = [m for e in hits for m in _all_matches(e)]
    comps = {m.component for m in matches}
    kernels = [str(m.fields.get("kernel") or "") for m in matches]
    files = [str(m.fields.get("file") or "") for m in matches]
    frames = [fr for e in hits for fr in (e.data.get("frames") or [])]
    v["flashinfer"] = ("flashinfer" in comps or any(k.startswith(FLASHINFER_KERNELS) for k in kernels)
                       or any("flashinfer" in f.lower() for f in files)
                       or any("flashinfer" in (fr.file or "").lower() for fr in frames))
    v["sampling"] = any(any(s in k for s in SAMPLING_KERNELS) for k in kernels) or \
        any("sampl" in (fr.func or "").lower() or "sampl" in (fr.file or "").lower() for fr in frames)
    # FlashInfer's attention kernels (the attention backend can avoid them; its norm and
    # activation kernels are used whatever the backend in older releases)
    v["flashinfer_attention"] = v["flashinfer"] and (
        any(any(a in k for a in ATTENTION_KERNELS) for k in kernels)
        or any("flashinfer" in f.lower() and ("/attention/" in f or "prefill" in f or "decode" in f) for f in files)
        or any("flashinfer" in (fr.file or "").lower() and "attention" in (fr.file or "").lower() for fr in frames))


def _port_of(address) -> int | None:
    """The port of a bind address as the libraries print it: ('0.0.0.0', 30000), tcp://h:p, h:p."""
    if address is None:
        return None
    text = str(address).strip().strip("()[]'\"")
    if "," in text:                                   # a Python socket address tuple
        return _int(text.split(",")[1].strip())
    tail = text.rsplit(":", 1)[-1] if ":" in text else ""
    return _int(tail) if tail.isdigit() else None


def _ports(facts, hits, v: dict) -> None:
    v["dp_size"] = _int(facts.flag("--dp-size", "--data-parallel-size")) or 1
    v["tp_size"] = _int(facts.flag("--tp-size", "--tensor-parallel-size")) or 1
    v["multi_dp"] = v["dp_size"] > 1
    http = _int(facts.flag("--port"))
    v["http_port"] = http or 30000
    port = name = None
    for e in hits:
        f = _fields(e)
        port = port or _int(f.get("port")) or _port_of(f.get("address"))
        name = name or f.get("port_name")
    v["port"], v["port_name"] = port, name
    v["tcpstore"] = any((_name(e) or "").startswith(("torch.tcpstore", "torch.libuv")) or _name(e) == "port.internal_in_use"
                        for e in hits)
    base = port or v["http_port"]
    v["next_port"] = base + 1 if base < 65535 else base - 1
    # a ZMQ endpoint on a loopback TCP port: SGLang's IPC ports, taken from a block based on --port (port_base)
    v["zmq_loopback"] = any(_name(e) == "zmq.address_in_use" and any(h in str(_fields(e).get("address") or e.text)
                                                                     for h in ("127.0.0.1", "localhost", "0.0.0.0"))
                            for e in hits)
    start = http or port or 30000
    v["apart_port"] = start + 1000 if start + 1000 < 65000 else max(1024, start - 1000)


HICACHE_RESERVE_GB = 10 * (1 << 30) / 1e9      # the 10 GiB SGLang keeps free beside the host pool, in GB


def _hicache(facts, hits, v: dict) -> None:
    req = avail = None
    for e in hits:
        f = _fields(e)
        req = req if req is not None else _float(f.get("requested_bytes"))           # GB (1e9), named so by SGLang
        avail = avail if avail is not None else _float(f.get("available", f.get("available_bytes")))
    # the request fits the number printed yet was refused: that release compared the request plus the
    # 10 GiB reserve with the host's available memory and printed the available memory without it
    hidden = req is not None and avail is not None and req <= avail
    if hidden:
        v["hicache_printed_gb"] = avail
        avail = max(0.0, avail - HICACHE_RESERVE_GB)
    v["hicache_hidden_reserve"] = hidden
    v["hicache_requested_gb"], v["hicache_available_gb"] = req, avail
    if avail is not None and avail > 1:
        v["hicache_size_gb"] = max(1, int(avail * 0.9))
    ratio = _float(facts.flag("--hicache-ratio"))
    if ratio and req and avail is not None and req > 0:
        fit = round(ratio * avail / req * 0.9, 1)
        if fit < ratio:
            v["hicache_ratio_fit"] = fit
    v["hicache_ratio_raise"] = round(max(2.0, (ratio or 1.0) * 2), 1)


def _collective(facts, hits, v: dict) -> None:
    timeout_ms = seq = None
    for e in hits:
        f = _fields(e)
        timeout_ms = timeout_ms or _int(f.get("timeout_ms"))
        seq = seq or _int(f.get("seq"))
    secs = (timeout_ms // 1000) if timeout_ms else _int(facts.flag("--dist-timeout"))
    v["collective_timeout_s"], v["collective_seq"] = secs, seq
    serving = any(len(b) for b in facts.batches)
    v["early_collective"] = (seq is not None and seq <= 10) or not serving
    v["dist_timeout_s"] = max(1800, (secs or 600) * 3)
    nnodes = _int(facts.flag("--nnodes"))
    ranks = [_int(str(e.rank or "").rsplit("TP", 1)[-1].replace("rank", "")) for e in facts.events if e.rank]
    tp = _int(facts.flag("--tp-size")) or 0
    v["multi_node"] = bool(nnodes and nnodes > 1) or (tp > 8) or any(r is not None and r >= 8 for r in ranks)


# SGLang's own 'X is not installed' messages, by review name -> the module they need
MODULE_OF_MESSAGE = {"deps.deepep_not_installed": "deep_ep", "deps.vllm_not_installed": "vllm",
                     "deps.flash_attn_not_installed": "flash_attn", "ninja.not_installed": "ninja",
                     "cpp_extension.ninja_required": "ninja"}


def _module(hits, v: dict) -> None:
    for e in hits:
        f = _fields(e)
        mod = MODULE_OF_MESSAGE.get(_name(e) or "") or f.get("module")
        if mod:
            mod = str(mod).strip("'\"")
            v["module"] = mod
            top = mod.split(".")[0]
            v["package"] = PACKAGE_OF.get(mod) or PACKAGE_OF.get(top) or top.replace("_", "-")
            return


# SGLang's warnings that it skipped a model module because importing it failed
IMPORT_IGNORED = ("models.import_error_ignored", "models.import_error_ignored_colon", "models.import_error_ignored_arch")
# the class-name endings of an architecture, longest first ('Qwen3MoeForCausalLM' -> 'Qwen3Moe')
_ARCH_SUFFIXES = ("ForConditionalGeneration", "ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering",
                  "ForRewardModel", "ForCausalLM", "ForMaskedLM", "ForEmbedding", "LMHeadModel", "Model")


def _stem(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isascii() and ch.isalnum())


def _arch_names(value) -> list[str]:
    """The architecture names of a message's field: a list, or its printed form ("['A', 'B']")."""
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    import ast
    try:
        got = ast.literal_eval(str(value))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        got = str(value)
    if isinstance(got, (list, tuple, set)):
        return [str(v) for v in got]
    return [w for w in str(got).replace(",", " ").split() if w]


def _arch_stem(arch: str) -> str:
    for suffix in _ARCH_SUFFIXES:
        if arch.endswith(suffix) and len(arch) > len(suffix):
            arch = arch[: -len(suffix)]
            break
    return _stem(arch)


def _import_ignored(events) -> bool:
    """Whether a model module SGLang skipped for an import error is the one the model needed: the
    skip names the architecture, or the log names an architecture as not supported and a skipped
    module's name shares its stem with it ('qwen3_moe' for Qwen3MoeForCausalLM, 'deepseek_v2' for
    DeepseekV3ForCausalLM). SGLang prints the skip for optional modules at every start-up (a
    platform's own backend such as mindspore), which says nothing about another model."""
    modules = [_stem(str(_fields(e).get("module") or "").rsplit(".", 1)[-1]) for e in events if _name(e) in IMPORT_IGNORED]
    if not modules:
        return False
    if any(_name(e) == "models.import_error_ignored_arch" for e in events):
        return True
    archs = []
    for e in events:
        if (_name(e) or "").startswith("model.arch_"):
            archs += _arch_names(_fields(e).get("archs") or "")
    for arch in archs:
        a = _arch_stem(arch)
        for m in modules:
            if m and a and (m.startswith(a) or a.startswith(m) or len(os.path.commonprefix([a, m])) >= 6):
                return True
    return False


BUILD_TOOLS = ("ninja", "nvcc", "gcc", "g++", "c++", "cc", "clang", "clang++", "cmake", "make", "hipcc", "ptxas", "ld")


def _build(hits, v: dict) -> None:
    """Whether the failed commands are builds: a build tool's own message, or a subprocess whose
    program is a compiler or build tool."""
    for e in hits:
        if _name(e) != "python.subprocess_failed":
            v["build_tool"] = True
            return
        cmd = str(_fields(e).get("command") or "").strip("[]'\" ")
        prog = cmd.split("'", 1)[0].split(" ", 1)[0].rsplit("/", 1)[-1]
        if prog in BUILD_TOOLS or prog.startswith(("gcc-", "g++-", "x86_64-linux-gnu-g")):
            v["build_tool"] = True
            return
    v["build_tool"] = False


def _library(hits, v: dict) -> None:
    for e in hits:
        lib = _fields(e).get("library")
        if lib:
            v["library"] = str(lib)
            v["cuda_library"] = str(lib).startswith(CUDA_LIBRARIES)
            return


def _host(facts, v: dict) -> None:
    host = facts.flag("--host")
    if host is None:
        up = next((m for m in facts.milestones if m.data.get("phase") == "http_up" and m.data.get("url")), None)
        if up is not None:
            url = str(up.data["url"])
            host = url.split("://", 1)[-1].rsplit(":", 1)[0]
    v["host"] = host
    v["local_host"] = str(host or "") in LOCAL_BIND


def _smi(facts, v: dict, out: Values) -> None:
    faults = facts.values.get("smi.faults") or []
    if faults:
        v["fault_gpus"] = [f["gpu"] for f in faults]
        v["fault_errors"] = sorted({e for f in faults for e in f["errors"]})
        v["fault_severe"] = any("ERR!" in e or ("uncorrectable" in e.lower()) or "fallen off" in e.lower()
                                for f in faults for e in f["errors"])
    held = []
    for snap in facts.smi:
        inp = next(iter(snap.context), (0, 0))[0] if getattr(snap, "context", None) else 0
        for g in snap.gpus:
            if g.memory_used_mib and g.memory_total_mib and g.memory_used_mib / g.memory_total_mib >= 0.1:
                held.append(g)
                if g.line is not None:
                    row = g.line + 1 if snap.format == "table" else g.line     # the table's memory cell is a row below
                    out.evidence.append((inp, row, "trigger"))
        for g in snap.gpus:
            if any(f["gpu"] == g.index for f in faults) and g.line is not None:
                out.evidence.append((inp, g.line, "trigger"))
        if snap.error and snap.error_line is not None:
            out.evidence.append((inp, snap.error_line, "trigger"))
            v["smi_error"] = snap.error
    if held:
        v["held_gpus"] = [g.index for g in held]
        v["held_used_mib"] = sum(g.memory_used_mib for g in held)
        v["held_total_mib"] = sum(g.memory_total_mib for g in held)
        gpus = {g.index for g in held}
        v["held_pids"] = [p["pid"] for p in facts.gpu_processes if p.get("gpu") in gpus and p.get("used_mib")][:8]


def explain(ctx: ExplainContext) -> Values:
    facts, hits = ctx.facts, ctx.hits
    out = Values()
    v = out.values
    names = [n for n in (_name(e) for e in hits) if n]
    v["message"] = names[0] if names else None
    v["messages"] = sorted(set(names))
    _signals(facts, hits, v)
    v["nccl_frames"] = _frames_name(facts, "nccl")
    v["mooncake"] = _frames_name(facts, "mooncake")
    v["dump_phase"] = _dump_phase(facts)
    _flashinfer(facts, hits, v)
    _ports(facts, hits, v)
    _hicache(facts, hits, v)
    _collective(facts, hits, v)
    _module(hits, v)
    _library(hits, v)
    _build(hits, v)
    v["import_ignored"] = _import_ignored(facts.events)
    v["warmup_failed"] = any(_name(e) in ("warmup.failed", "warmup.failed_aborting") for e in facts.events)
    v["proxy_error"] = any(_name(e) == "requests.proxy_error" for e in hits)
    _host(facts, v)
    _smi(facts, v, out)
    return out


EXPLAINER = Explainer("env", explain, PROVIDES)
