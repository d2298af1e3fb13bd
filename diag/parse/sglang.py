"""SGLang server log -> typed events (start-up milestones, memory lines, batches,
tracebacks, OOM numbers, signals), streamed line by line.

Message templates and the versions that print them: ../shared/reference/sglang-logs.md,
sglang-errors.md (summarised in the comments below).
"""
from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

from ..events import Event, EventStore, Frame, Traceback
from .batches import NAN, BatchSeries, ts_seconds as _ts_seconds  # noqa: F401  (re-exported)
from .. import rx
from . import wording
from ..numbers import to_float, to_int

RE_FIELDS = rx.compile(r"(\w+)=([\d.]+)")
RE_KILLED_PREFIX = rx.compile(r"^(?:Killed|Aborted|Bus error|Segmentation fault|Floating point exception|Illegal instruction)(?: \(core dumped\))?\s+")
RE_SGLANG_SERVE = rx.compile(r"\bsglang serve\b")

# "[2025-01-06 02:58:11 TP0] msg", "[... .123 DP1 TP5 EP5] msg" (logs §1)
PREFIX = rx.compile(r"^\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)((?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP|CP)\d+)*)\]\s?")
OLD_PREFIX = rx.compile(r"^\[(?:gpu_id|gpu|rank|tp_rank)=(\d+)\]\s?")          # 0.2/0.3 era
RAY_TAG = rx.compile(r"^\[(TP\d+)\]\s")                                         # 0.5.23 Ray actor, before logging
TORCH_RANK = rx.compile(r"^\[rank(\d+)\]:\[([EWIF])\d+ [\d:.]+ [^\]]+\]\s?")   # c10 logging
# glog (C++ components: Mooncake's transfer engine, gRPC, XLA): 'E0520 06:53:47.272128 18592 tcp_transport.cpp:136] msg'
GLOG = rx.compile(r"^([EFWI])(\d{4}) (\d\d:\d\d:\d\d(?:\.\d{1,9})?)\s+\d{1,10} ([\w.+-]{1,120}):(\d{1,7})\] ?")
PY_LOGGING = rx.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[,.]\d+ - (\w+) - ")   # python logging default

FRAME = rx.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')
FRAME_HEAD = rx.compile(r'^\s*File "([^"]+)", line (\d+), in\s*$')          # the function name wrapped to the next line
FAULT_FRAME = rx.compile(r'^\s*File "([^"]+)", line (\d+) in (\S+)')       # faulthandler: no comma before "in"
FAULT_THREAD = rx.compile(r"^(Current thread|Thread) 0x[0-9a-fA-F]+ (?:\[[^\]]*\] )?\(most recent call first\):")
IDENT_LINE = rx.compile(r"^[A-Za-z_][\w.]*$")
PYSPY_FRAME = rx.compile(r"^\s+(\w+) \(([^():]+\.py):(\d+)\)\s*$")
# py-spy's thread header: 'Thread 309 (active): "MainThread"' (the state is idle, active or gil)
PYSPY_THREAD = rx.compile(r'^Thread (\w+) \((\w+)[^)]*\)(?::\s*"([^"]*)")?')
EXC_LINE = rx.compile(
    r"^((?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Fault|Failure|Warning)|Exception|AssertionError|KeyboardInterrupt|StopIteration))"
    r"(?::\s?(.*))?$")
# a line of Python source (shown unindented when a traceback was pasted without its indentation)
CODE_LINE = rx.compile(r"[:(\[{,=]$|^(?:if|elif|else|for|while|return|raise|with|def|class|try|except|finally|assert|import|from|"
                       r"yield|await|async|self\.|[a-z_][\w.]*\s*=[^=])")
# a statement of Python source standing alone above an exception (an exception-first excerpt): an
# assignment, a call on an attribute, or a keyword statement; a sentence of prose is not one
SOURCE_STATEMENT = rx.compile(r"^(?:[A-Za-z_][\w.]*(?:\[[^\]]*\])*\s*(?:,\s*[A-Za-z_][\w.]*\s*)*=[^=]|"
                              r"(?:return|raise|assert|if|elif|for|while|with|yield|await)\s|self\.|[a-z_]\w*(?:\.\w+)+\()")
PROSE = rx.compile(r"(?:\b[A-Za-z]{2,}\b[ ,]+){4}")
# advice in the log's own words: a flag to add ('add --x to your launch command', 'please use --x',
# 'try adding --x', 'by --x'); 'not using --x' / 'remove --x' / 'without --x' are not advice to add it
# (imperative verbs only: 'started with --x' or 'using --x' describes a launch, it does not advise one)
ADVICE = rx.compile(r"\b(?:add|adding|use|pass|try|enable it with|set|setting|by)\s+[`'\"]?(?P<flag>--[a-z][a-z0-9-]+)\b"
                    r"(?:[ =](?P<value>[A-Za-z0-9_.][A-Za-z0-9_.-]*))?")
# an SGLang warning that says it handled the error it quotes ('multimem all-gather disabled ({e})',
# 'falling back to …', 'skipping …'): the server went on without that part, so the quoted error is not
# a failure of its own
PLACEHOLDER = rx.compile(r"\{[^{}]*\}")
HANDLED = rx.compile(r"(?i)\b(?:disabl\w*|skip\w*|ignor\w*|fall(?:s|ing)? ?back|fallback|will not (?:be )?use\w*|not using|continu\w*)\b")
NEGATED = rx.compile(r"\b(?:not|remove|removing|without|drop|dropping|instead of)\s*$")
# a count that must divide over the TP ranks, named with the TP size it was checked against
TP_DIVISIBLE = rx.compile(r"divisible by (?:the )?(?:tensor[ _-]?parallel(?:[ _]size| world size)?|tp[ _]?size|tp)\W{0,3}(\d+)")
# the count such a check found not divisible ('Total number of attention heads (28) must be divisible by …')
DIVIDED_COUNT = rx.compile(r"\((\d+)\)\s*(?:must be|is not|should be) divisible")
# lines printed by the shell or the interpreter itself, never part of an exception message
STANDALONE = rx.compile(r"^(?:Killed|Aborted|Bus error|Segmentation fault|Floating point exception|Illegal instruction|Fatal Python error|nohup:|Exit code:|"
                        r"已杀死|已殺死|Getötet|強制終了)")  # bash's 'Killed' in Chinese, German, Japanese locales
CHAIN = ("During handling of the above exception", "The above exception was the direct cause")

NUM = r"(\d+(?:\.\d+)?)"
RE_LOAD_BEGIN = rx.compile(r"Load weight begin\. avail mem=" + NUM + " GB")
RE_LOAD_END = rx.compile(r"Load weight end\.(?: elapsed=" + NUM + r" s,)? type=([\w.]+),(?: dtype=([\w.]+),)?(?: (quant=[^,]+(?:, (?:bits|quant_algo|fmt)=[^,]+)*),)? avail mem=" + NUM + r" GB(?:, mem usage=" + NUM + " GB)?")
RE_DIST_END = rx.compile(r"Init torch distributed ends\.(?: elapsed=" + NUM + r" s,)? mem usage=" + NUM + " GB")
RE_BASELINE = rx.compile(r"Memory baseline taken\. mem usage=" + NUM + " GB")
RE_MAMBA = rx.compile(r"Mamba Cache is allocated\. max_mamba_cache_size: (\d+), conv_state size: " + NUM + r"\s?GB, ssm_state size: " + NUM + r"\s?GB"
                      r"(?: intermediate_ssm_state_cache size: " + NUM + r"\s?GB intermediate_conv_window_cache size: " + NUM + r"\s?GB)?")
RE_KV = rx.compile(r"(?:(\w+) )?KV Cache (?:is allocated|VA upper bound)\.(?: dtype: ([\w.]+),)? #tokens: (\d+), (?:K size: " + NUM + r" GB, V size: " + NUM + r" GB|KV size: " + NUM + r" GB)")
RE_SWA = rx.compile(r"Use sliding window memory pool(?: \(all SWA\))?\.(?: full_layer_tokens=(\d+),)? swa_layer_tokens=(\d+)")
RE_POOL_END = rx.compile(r"Memory pool end\. avail mem=" + NUM + " GB")
RE_GRAPH_BEGIN = rx.compile(r"Capture (.*?)(?:cuda graph|CUDA graph|cpu graph|npu graph|graph)(?: begin)?\b.*?begin\..*?avail mem=" + NUM + " GB")
RE_GRAPH_BEGIN_NOMEM = rx.compile(r"Capture (.*?)(?:cuda|CUDA|cpu|npu) graph begin\.")
RE_GRAPH_END = rx.compile(r"Capture (.*?)(?:cuda|CUDA|cpu|npu) graph end\..*?(?:Time elapsed: |elapsed=)" + NUM + r" s[.,]?(?: mem usage=" + NUM + r" GB[.,] avail mem=" + NUM + " GB)?")
RE_GRAPH_BS = rx.compile(r"Capture cuda graph bs \[([\d, ]*)")
RE_CAPACITY = rx.compile(r"max_total_num_tokens=(\d+)")
RE_KV_DTYPE = rx.compile(r"Using KV cache dtype: ([\w.]+)")
RE_HOST_POOL = rx.compile(r"Allocating (?:(\w+) hierarchical KV host pool: (\d+) tokens, )?" + NUM + r" GB host memory")
RE_KV_FULL = rx.compile(r"KV cache pool is full\. Retract requests\. #retracted_reqs: (\d+)|Decode out of memory happened\. #retracted_reqs: (\d+)")
RE_WATCHDOG = rx.compile(r"[Ww]atchdog timeout \((?:self\.)?watchdog_timeout=([\d.]+)")
RE_SIGQUIT = rx.compile(r"Received sigquit from a child process|SIGQUIT received\.")
RE_SCHED_DEAD = rx.compile(r"Rank (\d+) scheduler is dead|Rank (\d+) scheduler died during initialization \(exit code: (-?\d+)\)")
RE_EXIT_CODE = rx.compile(r"^Exit code: (-?\d+)")
RE_NCCL_VER = rx.compile(r"sglang is using nccl==([\d.]+)|NCCL version ([\d.]+)")
# `python -m sglang.check_env` (pasted into most issue reports): 'GPU 0,1: NVIDIA H100 80GB HBM3',
# 'GPU 0 Compute Capability: 9.0'
RE_ENV_GPU_CC = rx.compile(r"^GPU ([\d,]{1,40}) Compute Capability: (\d{1,2})\.(\d{1,2})\s*$")
RE_ENV_GPU_NAME = rx.compile(r"^GPU ([\d,]{1,40}): ([A-Za-z][^:]{2,80})$")
# an SGLang version named outright ('sglang==0.5.6', 'SGLang v0.5.4', 'lmsysorg/sglang:v0.5.9'): what the
# lookarounds said is checked in named_version (no sglang-router / -kernel / -diffusion package, and the
# version not followed by a digit or a dot)
RE_NAMED_VERSION = rx.compile(
    r"\bsglang(?P<other>[-_](?:router|kernel|diffusion))?(?:==|[-_ ]?v|:v|[-_ ]|\s+version[:=]?\s*|\s+v)"
    r"(\d+\.\d+\.\d+(?:\.?post\d+|rc\d+)?)", rx.IGNORECASE)
# what a message says about the process: os.environ.get('X')='v' (an env var SGLang read), a model class
RE_ENV_READ = rx.compile(r"os\.environ\.get\('(\w+)'\)='([^']*)'")
RE_ARCHITECTURE = rx.compile(r"\b([A-Z]\w+(?:ForCausalLM|ForConditionalGeneration))\b")
RE_FLAG_NAME = rx.compile(r"^--[\w-]+$")
# the end of the last line of a paste: message templates whose full form is known (a last line that
# starts one but lacks its end was cut), and a batch line's fields
CUT_TEMPLATES = [
    (rx.compile(r"Of the allocated memory"), rx.compile(r"Of the allocated memory [\d.]+ \w+ is allocated by PyTorch")),
    (rx.compile(r"It usually means the child"), rx.compile(r"It usually means the child failed\.")),
    (rx.compile(r"(?:Decode|Prefill) batch[ .,\[]"), rx.compile(r"#queue-req: \d+")),
]
RE_BATCH_WORDS = rx.compile(r"(?:Prefill|Decode) batch")
RE_NEW_TOKEN = rx.compile(r"#new-token: (\d+)")
# a failure message that a collector (or an interleaved writer) ran on after a batch line's fields:
# 'gen throughput (token/s): 1.0, #queue-req: 0 RuntimeError: NCCL error: …'
JOINED_TAIL = rx.compile(
    r"\s((?:Traceback \(most recent call last\)|(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b|Killed\b|"
    r"Fatal Python error|Segmentation fault|NCCL (?:error|WARN)|CUDA error|[Ww]atchdog).*)$")
JOINED_WORDS = ("Error", "Exception", "Traceback", "Killed", "Fatal", "Segmentation", "NCCL", "CUDA error", "atchdog")
RE_ACCESS = rx.compile(r'^(?:INFO:\s+)?[\d.:\[\]a-f]*:?\d* ?- "(?:GET|POST|PUT|DELETE|HEAD|OPTIONS) (\S+) HTTP/[\d.]+" (\d{3})')
USAGE_FLAG = rx.compile(r"\[(--[\w-]+)")
RE_ARGPARSE = rx.compile(r"^([\w./-]+|sglang serve): error: (.+)$")
RE_READY = "The server is fired up and ready to roll!"
RE_PROGRESS = rx.compile(r"(?P<what>Loading (?:safetensors|pt|bin|npcache|gguf) checkpoint shards|Multi-thread loading shards|"
                         r"Loading weights|Capturing batches|Capturing num tokens)(?: \((?:bs|num_tokens)=\d+ avail_mem=(?P<avail>[\d.]+) GB\))?:\s*\d+%")
RE_UVICORN = rx.compile(r"Uvicorn running on (\S+)")

# OOM numbers (PyTorch >= 2.1 wording, and the older parenthesised one)
UNIT = {"B": 1 / 2**30, "bytes": 1 / 2**30, "KiB": 1 / 2**20, "MiB": 1 / 1024, "GiB": 1.0, "TiB": 1024.0}
_Q = r"(\d+(?:\.\d+)?) (GiB|MiB|KiB|TiB|B|bytes)"
OOM_TRIED = rx.compile(r"Tried to allocate " + _Q)
OOM_TOTAL = rx.compile(r"(?:GPU|NPU|XPU) (\d+) has a total capacity of " + _Q + " of which " + _Q + " is free")
OOM_THIS = rx.compile(r"this process has " + _Q + " memory in use")
OOM_PROC = rx.compile(r"Process (\d+) has " + _Q + " memory in use")
OOM_ALLOC = rx.compile(r"Of the allocated memory " + _Q + " is allocated by PyTorch")
OOM_PRIVATE = rx.compile(r"with " + _Q + r" allocated in private pools")
OOM_RESERVED = rx.compile(r"and " + _Q + " is reserved by PyTorch but unallocated")
# the parenthesised form of older PyTorch, HIP and torch_npu: "(GPU 0; 79.15 GiB total capacity; 77.2 GiB already
# allocated; [10 GiB current active;] 1.2 GiB free; 78.1 GiB reserved in total by PyTorch)"
OOM_OLD = rx.compile(r"\((?:GPU|NPU|XPU|HIP)? ?(\d+); " + _Q + r" total capacity; " + _Q + r" already allocated;"
                     r"(?: [^;()]*? current active;)? " + _Q + r" free;(?: [^;()]*;)*? " + _Q + r" reserved in total by PyTorch")
OOM_WORDS = ("out of memory", "OutOfMemoryError", "OUT_OF_MEMORY", "CUBLAS_STATUS_ALLOC_FAILED", "cudaErrorMemoryAllocation",
             "Out of memory", "hipErrorOutOfMemory", "ACL_ERROR_RT_MEMORY_ALLOCATION")
# what a device's allocator prints (an SGLang message that wraps one of these is a device OOM too)
DEVICE_OOM_WORDS = ("CUDA out of memory", "OutOfMemoryError", "HIP out of memory", "NPU out of memory", "XPU out of memory",
                    "cudaErrorMemoryAllocation", "CUBLAS_STATUS_ALLOC_FAILED", "hipErrorOutOfMemory", "CUDA error: out of memory",
                    "ACL_ERROR_RT_MEMORY_ALLOCATION", "out of memory on device")
# SGLang's own KV-token allocator messages say "out of memory" too, but are not device OOMs
NOT_DEVICE_OOM = rx.compile(r"(?:Prefill|Decode) out of memory(?:\. Try to lower| happened)")


def gib(value: str, unit: str) -> float | None:
    v = to_float(value)
    return None if v is None else v * UNIT[unit]


def parse_oom_numbers(text: str) -> dict:
    """Every number a PyTorch OOM message carries, in GiB (None where absent)."""
    d: dict = {}
    if m := OOM_TRIED.search(text):
        d["tried_gib"] = gib(m[1], m[2])
    if m := OOM_TOTAL.search(text):
        d["gpu"] = to_int(m[1])
        d["total_gib"] = gib(m[2], m[3])
        d["free_gib"] = gib(m[4], m[5])
    if m := OOM_THIS.search(text):
        d["this_process_gib"] = gib(m[1], m[2])
    procs = [{"pid": to_int(m[1]), "used_gib": gib(m[2], m[3])} for m in OOM_PROC.finditer(text)]
    if procs:
        d["processes"] = procs
    if m := OOM_ALLOC.search(text):
        d["allocated_gib"] = gib(m[1], m[2])
    if m := OOM_PRIVATE.search(text):
        d["private_pools_gib"] = gib(m[1], m[2])
    if m := OOM_RESERVED.search(text):
        d["reserved_unallocated_gib"] = gib(m[1], m[2])
    if m := OOM_OLD.search(text):
        d["gpu"] = to_int(m[1])
        d["total_gib"] = gib(m[2], m[3])
        d["allocated_gib"] = gib(m[4], m[5])
        d["free_gib"] = gib(m[6], m[7])
        d["reserved_gib"] = gib(m[8], m[9])
    return d


# What an OOM message (or the SGLang message wrapping it) says was being allocated, most specific first.
OOM_WORDS_PHASE: list[tuple[str, object]] = [
    ("draft", rx.compile(r"(?i)\bdraft\b")),
    ("cuda_graph", rx.compile(r"(?i)captur\w* (?:cuda |prefill |decode |npu )?graph|cuda graph|graph (?:buffer|pool|memory)|symmetric memory|\bworkspace\b")),
    ("mamba", rx.compile(r"(?i)mamba|\bssm[_ ]state|conv[_ ]state|linear[- ]attention state")),
    ("kv_pool", rx.compile(r"(?i)kv[_ ]?(?:cache|pool|buffer)|token_to_kv|req_to_token|memory pool")),
    ("multimodal", rx.compile(r"(?i)patch[_ ]?embed|vision (?:tower|encoder)|image (?:encoder|features?)|pixel_values")),
    ("weights", rx.compile(r"(?i)position[_ ]embedding|rotary|cos_sin_cache|load(?:ing)? (?:the )?weights?|checkpoint shard")),
]


def oom_words_phase(text: str) -> str | None:
    """The step an OOM's own words name (SGLang often wraps torch's message: 'Capture cuda graph failed: …')."""
    head = text.split("Tried to allocate", 1)[0] if "Tried to allocate" in text else text[:400]
    for phase, pattern in OOM_WORDS_PHASE:
        if pattern.search(head):
            return phase
    return None


def is_oom_text(text: str, match=None) -> bool:
    """A device out-of-memory error. SGLang's own token and slot bookkeeping also says "out of memory"
    (the KV or request-slot allocator ran out): that is not a device OOM unless it quotes one."""
    if not any(w in text for w in OOM_WORDS) or NOT_DEVICE_OOM.search(text):
        return False
    if match is not None and getattr(match, "event", None) == "host_oom":
        return False        # the kernel's OOM killer, a host allocation: host RAM, not the device's
    if match is not None and getattr(match, "component", None) == "sglang" and getattr(match, "event", None) != "device_oom":
        return any(w in text for w in DEVICE_OOM_WORDS)
    return True


class LogParser:
    """Feed (line number, cleaned text); read events, tracebacks, batches, context afterwards."""

    CONTEXT_BEFORE = 12
    CONTEXT_AFTER = 12
    TAIL = 80
    MAX_TRACEBACKS = 1000
    MARKS = 1000             # marked lines whose windows survive a pruning of the context (first and last)
    CONTEXT_CAP = 50_000     # lines of context before the windows of forgotten events are pruned
    JOIN_TRIES = 2_000       # unprefixed line pairs tried as one message continued past a sentence break

    def __init__(self, input_index: int = 0):
        self.input = input_index
        self.events = EventStore()             # bounded per kind (diag/events.py)
        self.tracebacks: deque[Traceback] = deque(maxlen=self.MAX_TRACEBACKS)
        self.batches = BatchSeries()
        self.context: dict[int, str] = {}
        self.http = {"count": 0, "errors": 0, "last_line": None}
        self.lines = 0
        self.content_lines = 0
        self.prefixed_lines = 0
        self.first_ts: str | None = None
        self.last_ts: str | None = None
        self.ranks: set[str] = set()
        self.last_line_text = ""
        self.last_msg = ""
        self.first_batch: tuple[int, str] | None = None   # kept for version detection
        self._recent: deque[tuple[int, str]] = deque(maxlen=self.CONTEXT_BEFORE)
        self._tail: deque[tuple[int, str]] = deque(maxlen=self.TAIL)
        self._keep_after = 0
        self._tb: Traceback | None = None
        self._tb_chain_next = False
        self._exc: Event | None = None       # exception whose message may continue on the next lines
        self._pyspy: Event | None = None
        self._glog: tuple[str, str] | None = None   # (level, source file) of a glog record line
        self._usage: Event | None = None   # an argparse usage block lists the flags that release accepts
        self._launch: Event | None = None  # a launch command that goes on over the next lines (\ or an open quote)
        self._batch_rank: str | None = None
        self._catalog = _catalog()
        self._line_match = None
        self._frame_head: tuple[str, int | None] | None = None   # a frame line whose function is on the next line
        self._fault: Event | None = None        # a fatal signal whose faulthandler dump follows
        self._fault_current = False             # inside the dump of the crashing thread
        self._last: tuple | None = None      # the last content line (for a paste cut inside a message)
        self._absorbed = 0                   # the last line that went into an exception's message
        self._marks_first: list[int] = []
        self._marks_last: deque[int] = deque(maxlen=self.MARKS)
        self._context_cap = self.CONTEXT_CAP
        # SGLang versions the log names outright ('sglang==0.5.6'): version events of their own, not
        # in `events` (a line that only names a version is no SGLang line), in line order
        self.versions: list[Event] = []
        self.advice: list[tuple] = []             # (line, flag, value or None) the log's own text says to add
        self._open_line = None                    # a plain line that may continue on the next one
        self._multi = None                        # (event, lines left): a message whose template goes on over lines
        self._joins_left = self.JOIN_TRIES        # tries at a message continued after a sentence break
        self.first_batch_dated: list = []     # the wordings that date the first batch line (diag.parse.wording)

    # -- public ------------------------------------------------------------------
    def feed(self, lineno: int, text: str) -> str:
        """Parse one line; returns its class ('batch', 'http', 'event', 'plain', 'blank')."""
        self.lines += 1
        self._tail.append((lineno, text))
        if self._keep_after > 0:
            self.context[lineno] = text
            self._keep_after -= 1
        if not text.strip():
            self._close_exc()
            self._launch = None
            self._recent.append((lineno, text))
            return "blank"
        self.content_lines += 1
        self.last_line_text = text
        self._glog = None
        ts, rank, msg = self._split_prefix(text)
        self.last_msg = msg
        n_events = len(self.events)
        cls = self._classify(lineno, text, ts, rank, msg)
        if len(self.events) == n_events and cls == "plain" and "_" in msg and self._catalog is not None \
                and self._tb is None and not text[:1].isspace():     # not a traceback's code line
            # a message retold in the reporter's words around the names it copied
            m = self._catalog.match_loose(msg.strip())
            if m is not None and m.event not in QUIET_EVENTS:
                self._event("message", lineno, text, ts, rank, message=msg.strip(), loose=True).msg = m
        if len(self.events) > n_events:
            self.mark(lineno)
        if cls not in ("batch", "http") and ("glang" in text or "SGLang" in text) and (v := named_version(text)):
            self.versions.append(Event("version", self.input, lineno, text, rank=rank, ts=ts,
                                       data={"component": "sglang", "version": v}))
        self._last = (lineno, text, ts, rank, msg.strip(), cls)
        self._recent.append((lineno, text))
        return cls

    def _cut_last_line(self) -> None:
        """The last line of a paste may stop inside a long SGLang message: match its leading part."""
        if self._catalog is None or self._last is None:
            return
        lineno, text, ts, rank, stripped, cls = self._last
        if lineno == self._absorbed:
            return              # part of an exception's message, matched with it
        on_line = [e for e in self.events if e.line == lineno]
        if any(e.msg is not None for e in on_line) or cls in ("batch", "http", "blank") or len(stripped) < 40:
            return
        target = next((e for e in on_line if e.kind in ("exception", "error")), None)
        if on_line and target is None:
            return
        m = self._catalog.match_cut(stripped[:4000])
        if m is None:
            return
        if target is not None:
            target.msg = m
            target.data["cut"] = True
        elif m.event not in QUIET_EVENTS:
            self._event("message", lineno, text, ts, rank, message=stripped, cut=True).msg = m
            self.mark(lineno)

    def mark(self, lineno: int) -> None:
        """Keep the lines around this one for evidence windows."""
        for n, t in self._recent:
            self.context[n] = t
        self.context[lineno] = self._tail[-1][1] if self._tail and self._tail[-1][0] == lineno else self.context.get(lineno, "")
        self._keep_after = self.CONTEXT_AFTER
        if len(self._marks_first) < self.MARKS:
            self._marks_first.append(lineno)
        else:
            self._marks_last.append(lineno)
        if len(self.context) > self._context_cap:
            self._prune_context()

    def _prune_context(self) -> None:
        """Forget the windows of lines no kept event or remembered mark needs (event-dense logs:
        the context stays bounded like the events)."""
        spans = [(n, n) for n in self._marks_first] + [(n, n) for n in self._marks_last]
        for ev in self.events:
            spans.append((min(ev.line, ev.data.get("tb_start") or ev.line), ev.end_line or ev.line))
        if self._tb is not None:
            spans.append((self._tb.start, self._tb.start))
        live = set()
        for a, b in spans:
            live.update(range(a - self.CONTEXT_BEFORE, b + self.CONTEXT_AFTER + 1))
        self.context = {n: t for n, t in self.context.items() if n in live}
        self._context_cap = max(self.CONTEXT_CAP, 2 * len(self.context))

    def finish(self) -> None:
        self._close_exc()
        self._close_tb()
        self._cut_last_line()
        for n, t in self._tail:
            self.context[n] = t
        self.batches.finish()
        for ev in self.events:
            _read_fields(ev)
        self.first_batch_dated = wording.dated(self.first_batch[1]) if self.first_batch else []

    @property
    def last_line(self) -> "LastLine":
        """How the input ends (its last content line read once)."""
        return last_line(self.last_line_text, self.events[-3:])

    # -- the fast reader (diag/scan.py) ----------------------------------------------------
    def skip(self, gap) -> None:
        """Lines the fast reader accounted for without feeding them (well-formed batch lines, whose
        statistics it adds to `batches` itself, successful HTTP access lines and blank lines),
        all of them since the last line fed: the parser's state becomes what feeding them would
        have made it (counts, prefix facts, the lines kept for evidence windows, an exception
        message closed by a batch or blank line). `gap` is diag.scan.Gap."""
        self.lines += gap.count
        if self._keep_after > 0:
            for n, t in gap.head(self._keep_after):
                self.context[n] = t
                self._keep_after -= 1
        if gap.closes:
            self._close_exc()
        if gap.blank:
            self._launch = None          # a blank line ends a launch command's continuation
        if gap.content:
            self._last = None            # the last content line is a batch or access line: no cut message
        self.content_lines += gap.content
        if gap.last_text is not None:
            self.last_line_text, self.last_msg = gap.last_text, gap.last_msg
        self.prefixed_lines += gap.prefixed
        if gap.first_ts and self.first_ts is None:
            self.first_ts = gap.first_ts
        if gap.last_ts:
            self.last_ts = gap.last_ts
        self.ranks.update(gap.ranks)
        if gap.http:
            self.http["count"] += gap.http
            self.http["last_line"] = gap.http_last
        if gap.first_batch is not None and self._batch_rank is None:
            lineno, rank, msg = gap.first_batch
            self._batch_rank = rank or ""
            self.batches.rank = rank
            self.first_batch = (lineno, msg)
        self._recent.extend(gap.recent())

    def last_lines(self, lines) -> None:
        """The lines the fast reader accounted for among the input's last TAIL: the tail kept at
        finish() is the last TAIL lines of the input, fed or not."""
        merged = {n: t for n, t in lines}
        merged.update({n: t for n, t in self._tail})
        self._tail = deque(sorted(merged.items())[-self.TAIL:], maxlen=self.TAIL)

    @property
    def record_open(self) -> bool:
        """Whether the last record may still go on over the next lines (a traceback whose exception
        line has not come, or an exception whose message may continue): a live reader (diag watch)
        waits for the next record, or for quiet, before diagnosing."""
        return self._exc is not None or self._tb is not None

    @property
    def between_records(self) -> bool:
        """No record is open that the next line could continue or end (a traceback, an exception's
        message, a launch command, a usage block, a py-spy or faulthandler dump, a frame whose code
        follows): a line is then read on its own. The fast reader's memo of line classes
        (diag/scan.py, `_Memo`) learns and applies only in this state."""
        return (self._exc is None and self._tb is None and self._launch is None and self._usage is None
                and self._pyspy is None and self._fault is None and self._frame_head is None)

    @property
    def batch_rank(self) -> str | None:
        """The rank whose batch lines are kept ('' for lines without one; None before the first)."""
        return self._batch_rank

    # -- prefix ------------------------------------------------------------------
    def _split_prefix(self, text: str) -> tuple[str | None, str | None, str]:
        c = text[:1]
        if c == "[":
            m = PREFIX.match(text)
            if m:
                self.prefixed_lines += 1
                ts = m[1]
                rank = m[2].strip() or None
                if self.first_ts is None:
                    self.first_ts = ts
                self.last_ts = ts
                if rank:
                    self.ranks.add(rank)
                return ts, rank, text[m.end():]
            m = OLD_PREFIX.match(text) or RAY_TAG.match(text)
            if m:
                self.prefixed_lines += 1
                rank = m[1] if m[1].startswith("TP") else f"TP{m[1]}"
                self.ranks.add(rank)
                return None, rank, text[m.end():]
            m = TORCH_RANK.match(text)
            if m:
                return None, f"rank{m[1]}", text[m.end():]
        elif c.isdigit():
            m = PY_LOGGING.match(text)
            if m:
                return None, None, text[m.end():]
        elif c in "EF" and (m := GLOG.match(text)):
            self._glog = (m[1], m[4])     # an error or fatal record of a C++ component: an event of its own
            return None, None, text[m.end():]
        return None, None, text

    # -- classification ------------------------------------------------------------
    def _event(self, kind: str, lineno: int, text: str, ts, rank, **data) -> Event:
        ev = Event(kind=kind, input=self.input, line=lineno, text=text, rank=rank, ts=ts, data=data)
        self.events.append(ev)
        return ev

    def _classify(self, lineno: int, text: str, ts, rank, msg: str) -> str:
        # fast paths for the lines that dominate big logs
        if msg.startswith(("Decode batch", "Prefill batch")):
            self._close_exc()
            self._batch(lineno, ts, rank, msg)
            if any(w in msg for w in JOINED_WORDS) and (m := JOINED_TAIL.search(msg)):
                return self._classify(lineno, m[1], ts, rank, m[1])   # the run-on message is a line of its own
            return "batch"
        if ' HTTP/' in msg and '"' in msg:
            m = RE_ACCESS.search(msg)
            if m:
                self.http["count"] += 1
                self.http["last_line"] = lineno
                if not m[2].startswith(("2", "3")):
                    self.http["errors"] += 1
                    self._event("http", lineno, text, ts, rank, path=m[1], status=to_int(m[2]))
                    return "event"
                return "http"

        # tracebacks and exceptions
        stripped = msg.strip()
        if self._launch is not None:
            if self._continue_launch(lineno, stripped, ts or rank):
                return "event"
        if self._multi is not None and self._more_lines(lineno, ts or rank, msg, stripped):
            return "event"
        if "Traceback (most recent call last)" in msg:
            self._close_exc()
            self._close_tb()
            header = msg.split("Traceback (most recent call last)")[0].strip().rstrip(":")
            self._tb = Traceback(input=self.input, start=lineno, rank=rank, header_text=header, chained=self._tb_chain_next, ts=ts)
            self._tb_chain_next = False
            if header and (pm := RE_PROGRESS.search(header)):
                # a progress bar the traceback was printed after, on the same line: the step under way
                if pm["what"].startswith("Capturing"):
                    self._event("milestone", lineno, text, ts, rank, phase="graph_begin", role=_graph_role(header),
                                avail_gib=to_float(pm["avail"]) if pm["avail"] else None, progress=True)
                else:
                    self._event("milestone", lineno, text, ts, rank, phase="load_progress")
            elif header:
                ev = self._event("error", lineno, text, ts, rank, message=header, source="traceback-header")
                ev.msg = self._match(stripped)      # 'Initialization failed. warmup error: Traceback …'
            return "event"
        if self._frame_head is not None:
            file, line_no = self._frame_head
            self._frame_head = None
            if IDENT_LINE.match(stripped) and self._tb is not None:
                self._tb.frames.append(Frame(file, line_no, stripped))
                return "event"
        if self._fault is not None:
            if self._fault_dump(lineno, msg, stripped):
                return "event"
        m = FRAME.match(msg)
        if m:
            self._frame(lineno, rank, m[1], to_int(m[2]), m[3])
            return "event"
        m = FRAME_HEAD.match(msg)
        if m:
            self._frame(lineno, rank, m[1], to_int(m[2]), None)
            self._frame_head = (m[1], to_int(m[2]))
            return "event"
        if stripped.startswith(CHAIN):
            self._close_exc()
            self._close_tb()
            self._tb_chain_next = True
            return "plain"
        m = EXC_LINE.match(stripped) if stripped[:1].isalpha() else None
        if m and (not msg.startswith((" ", "\t")) or (self._tb is not None and _exception_name(m[1]) and (
                m[2] is not None or (stripped == m[1] and self._tb.frames)))):
            # an exception line, or one indented under the frames it ends (a paste that kept the
            # indentation), a bare exception name ('  AssertionError') included
            self._exception(lineno, text, ts, rank, m[1], m[2] or "")
            return "event"
        if self._tb is not None:
            if msg.startswith((" ", "\t")) or stripped.startswith("^") or stripped == "...":
                if self._tb.frames and not self._tb.frames[-1].code and not stripped.startswith("^"):
                    self._tb.frames[-1].code = stripped[:200]
                return "plain"  # source line under a frame
            if not (ts or rank) and CODE_LINE.search(stripped):
                return "plain"  # an unindented source line in a pasted fragment
            cut = _complete_exception_name(stripped) if len(stripped) >= 6 and IDENT_LINE.match(stripped) \
                and not _exception_name(stripped) and self._tb.frames else None
            self._close_tb((lineno, cut) if cut else None)   # a new record (the traceback was cut), or its cut exception name
            if cut:
                return "event"
        if self._exc is not None:
            if ts or rank or FRAME.match(msg) or STANDALONE.match(stripped) or \
                    (stripped.startswith(("python", "sglang ", "$ ", "# ")) and ("sglang" in stripped or "launch_server" in stripped)):
                self._close_exc()     # a new record, or a command line after the error: not its message
            else:
                self._exc.data["message"] += "\n" + stripped
                self._exc.end_line = lineno
                if " --" in stripped:
                    self._advice(lineno, stripped)
                self._absorbed = lineno
                if self._exc.data.get("oom") is None and is_oom_text(stripped):
                    self._oom_from(self._exc)
                self._nested(lineno, text, ts, rank, stripped)
                if len(self._exc.data["message"]) > 4000:
                    self._close_exc()
                return "event"
        if self._usage is not None:
            if msg.startswith((" ", "\t")) and "[" in msg:  # argparse wraps the usage block with indentation
                self._usage.data["usage_flags"].extend(USAGE_FLAG.findall(msg))
                self._usage.end_line = lineno
                return "event"
            self._usage = None
        if self._pyspy is not None:
            if PYSPY_FRAME.match(msg) or stripped.startswith(("Thread ", "Process ", "Python v")) or not stripped:
                f = PYSPY_FRAME.match(msg)
                d = self._pyspy.data
                if f:
                    fr = Frame(f[2], to_int(f[3]), f[1])
                    d["frames"].append(fr)
                    if d.get("threads"):
                        d["threads"][-1]["frames"].append(fr)
                elif (t := PYSPY_THREAD.match(stripped)):
                    d.setdefault("threads", []).append({"id": t[1], "state": t[2], "name": t[3] or "", "frames": []})
                self._pyspy.end_line = lineno
                return "event"
            self._pyspy = None
        if " --" in stripped:
            self._advice(lineno, stripped)
        n_events = len(self.events)
        m = self._line_match = self._match(stripped)
        cls = self._message(lineno, text, ts, rank, msg, stripped)
        if m is not None:
            new = self.events[n_events:]
            for ev in new:
                if ev.msg is None:
                    ev.msg = m
            if m.event == "device_oom" and not any(ev.data.get("oom") or ev.kind == "oom" for ev in new) \
                    and is_oom_text(stripped, m):
                ev = self._event("error", lineno, text, ts, rank, message=stripped, source="oom-line")
                ev.msg = m
                self._oom_from(ev)        # an OOM in a wording the parser's own words do not cover
                return "event"
            if not new and m.event != "device_oom" and (inner := self._quoted_oom(m)) is not None:
                # a runtime's abort that names an out-of-memory status ('Queue … aborting with error :
                # HSA_STATUS_ERROR_OUT_OF_RESOURCES'): the device ran out of memory
                ev = self._event("error", lineno, text, ts, rank, message=stripped, source="oom-line")
                ev.msg = inner
                self._oom_from(ev)
                return "event"
            if not new and (got := self._inner_of(m)) is not None:
                # a line that quotes an error the catalog knows ('Error: {e}. Please install …', a print or
                # a warning wrapping an ImportError): that error is the event, whatever the wrapper's level
                ev = self._event("message", lineno, text, ts, rank, message=got[0], inner_of=m.name or m.family)
                ev.msg = got[1]
                return "event"
            if not new and (m.event not in QUIET_EVENTS or (m.event == "milestone" and m.component != "sglang")):
                # SGLang's own start-up steps are the parser's milestones; another component's
                # (a JIT build starting, NCCL connected) is an event of its own
                ev = self._event("message", lineno, text, ts, rank, message=stripped)
                ev.msg = m
                self._arm_multi(ev, m)
                return "event"
            for ev in new:
                if ev.kind in ("message", "error") and ev.data.get("message") == stripped:
                    self._arm_multi(ev, m)
        elif len(self.events) == n_events and cls == "plain":
            return self._continued(lineno, text, ts, rank, stripped, cls)
        return cls

    MULTI_LINES = 6          # lines a message printed over several may take after its first

    def _arm_multi(self, ev, m) -> None:
        """A message whose template goes on over further lines ('Decode out of memory. …' then 'Try
        to allocate {n} tokens.' then 'Available tokens: …'), matched so far without the values on
        those lines: the next lines are tried as its rest."""
        if m.template and "\n" in m.template and any(v is None for v in (m.fields or {}).values()):
            self._multi = (ev, self.MULTI_LINES)

    def _more_lines(self, lineno, prefixed, msg, stripped) -> bool:
        """The next line of a message printed over several: joined when the template then matches
        with more of its text (same family, a higher score); any other line ends it."""
        ev, left = self._multi
        self._multi = None
        if prefixed or not stripped or left <= 0 or FRAME.match(msg) or STANDALONE.match(stripped) or \
                "Traceback (most recent call last)" in msg:
            return False
        joined = (ev.data.get("message") or "") + "\n" + stripped
        m2 = self._match(joined)
        if m2 is None or ev.msg is None or m2.family != ev.msg.family or m2.score <= ev.msg.score:
            return False
        ev.msg, ev.data["message"], ev.end_line = m2, joined, lineno
        self.mark(lineno)
        if any(v is None for v in (m2.fields or {}).values()):
            self._multi = (ev, left - 1)
        return True

    def _continued(self, lineno, text, ts, rank, stripped, cls) -> str:
        """A message printed over two lines (the paste or the terminal broke it mid-sentence): a line
        that matches nothing and does not end a sentence, then one that starts in lower case; the
        two joined are matched once. A pair broken after a sentence (an exception text that ended
        with a full stop, then the rest of SGLang's template) is one message only when a template
        matches the two whole with literal text past the break (tried JOIN_TRIES times per input)."""
        prev, self._open_line = self._open_line, None
        if prev is not None and prev[0] == lineno - 1 and not (ts or rank) and stripped[:1].isalpha():
            joined = prev[1] + " " + stripped
            if stripped[:1].islower() and not prev[5]:
                m = self._match(joined) or (self._catalog.match_cut(joined[:4000]) if self._catalog is not None else None)
            else:
                # a new sentence on the next line: the pair is one message only when a template matches
                # them whole and its literal text goes on past the break ('{e}. The full weights of ...'
                # after an exception text that ended the first line)
                m = None
                if self._joins_left > 0:      # bounded: on pages of plain prose every line would pay a second match
                    self._joins_left -= 1
                    m = self._match(joined)
                if m is not None and (m.partial or m.span[0] > len(prev[1]) or m.span[1] < len(prev[1]) + 12):
                    m = None
            if m is not None and m.event not in QUIET_EVENTS:
                ev = self._event("message", prev[0], prev[2], prev[3], prev[4], message=joined)
                ev.msg, ev.end_line = m, lineno
                return "event"
        if len(stripped) >= 30 and stripped[:1].isalpha():
            ended = stripped.endswith((".", "!", "?", ")", "]", "}", ":"))
            self._open_line = (lineno, stripped, text, ts, rank, ended)
        return cls

    def _advice(self, lineno: int, stripped: str) -> None:
        """A flag the log's own text tells the user to add ('To work around this error, add
        --disable-piecewise-cuda-graph to your launch command'), never one it says to drop."""
        for m in ADVICE.finditer(stripped):
            if not NEGATED.search(stripped[max(0, m.start() - 12):m.start()]) and len(self.advice) < 16:
                self.advice.append((lineno, m["flag"], m["value"]))
                self.mark(lineno)

    def _nested(self, lineno, text, ts, rank, stripped) -> None:
        """A line of an exception's message that is a message of its own (NCCL's 'Last error:' detail,
        a transport error a rank reports about its peer): an event of its own, tied to the exception."""
        m = self._match(stripped)
        exc = self._exc
        if m is None or m.event in QUIET_EVENTS or m.event == "device_oom" or (exc.msg is not None and m.id == exc.msg.id):
            return
        ev = self._event("message", lineno, text, ts, rank, message=stripped, inside=exc.line)
        ev.msg = m
        exc.data.setdefault("nested", []).append(m.id)

    def _match(self, text: str):
        """The catalog's match for a message (None when the catalog is missing or knows nothing)."""
        if self._catalog is None or not text or len(text) < 8:
            return None
        return self._catalog.match(text[:4000])

    def _message(self, lineno, text, ts, rank, msg, stripped) -> str:
        e = self._event
        # start-up milestones and memory lines (logs §3-§7)
        if msg.startswith("Load weight begin"):
            m = RE_LOAD_BEGIN.search(msg)
            e("milestone", lineno, text, ts, rank, phase="load_begin", avail_gib=to_float(m[1]) if m else None)
        elif msg.startswith("Load weight end"):
            m = RE_LOAD_END.search(msg)
            if m:
                e("milestone", lineno, text, ts, rank, phase="load_end", model_class=m[2], dtype=m[3], quant=m[4],
                  avail_gib=to_float(m[5]), usage_gib=to_float(m[6]) if m[6] else None, elapsed=m[1] is not None)
            else:
                e("milestone", lineno, text, ts, rank, phase="load_end")
        elif msg.startswith("Init torch distributed begin") or msg.startswith("Init parallel begin"):
            e("milestone", lineno, text, ts, rank, phase="dist_begin")
        elif msg.startswith(("Init torch distributed ends", "Memory baseline taken", "Init parallel ends")):
            m = RE_DIST_END.search(msg) or RE_BASELINE.search(msg)
            usage = to_float(m.groups()[-1]) if m else None
            e("milestone", lineno, text, ts, rank, phase="dist_end", usage_gib=usage, template=msg[:28])
        elif "Mamba Cache is allocated" in msg:
            m = RE_MAMBA.search(msg)
            if m:
                e("milestone", lineno, text, ts, rank, phase="mamba_alloc", size=to_int(m[1]), conv_gib=to_float(m[2]),
                  ssm_gib=to_float(m[3]), inter_ssm_gib=to_float(m[4]) if m[4] else None, inter_conv_gib=to_float(m[5]) if m[5] else None)
        elif "KV Cache is allocated" in msg or "KV Cache VA upper bound" in msg:
            m = RE_KV.search(msg)
            if m:
                k = to_float(m[4]) if m[4] else None
                v = to_float(m[5]) if m[5] else None
                kv = to_float(m[6]) if m[6] else None
                e("milestone", lineno, text, ts, rank, phase="kv_alloc", label=m[1], dtype=m[2], tokens=to_int(m[3]),
                  k_gib=k, v_gib=v, kv_gib=kv, dtype_field=m[2] is not None)
        elif msg.startswith("Use sliding window memory pool"):
            m = RE_SWA.search(msg)
            if m:
                e("milestone", lineno, text, ts, rank, phase="swa_split", full_tokens=to_int(m[1]) if m[1] else None, swa_tokens=to_int(m[2]))
        elif msg.startswith("Memory pool end"):
            m = RE_POOL_END.search(msg)
            e("milestone", lineno, text, ts, rank, phase="pool_end", avail_gib=to_float(m[1]) if m else None)
        elif msg.startswith("Capture "):
            self._graph(lineno, text, ts, rank, msg)
        elif msg.startswith("Registering ") and (m := RE_GRAPH_BUFFERS.match(msg)):
            # custom all-reduce, leaving a capture (its finally block): the graph buffers it exchanges with the other ranks
            e("graph_buffers", lineno, text, ts, rank, n=int(m[1]))
        elif (m := RE_PROGRESS.search(msg)):
            # tqdm progress bars: checkpoint shards being loaded, CUDA graph batches being captured
            if m["what"].startswith("Capturing"):
                self._event("milestone", lineno, text, ts, rank, phase="graph_begin", role=_graph_role(msg),
                            avail_gib=to_float(m["avail"]) if m["avail"] else None, progress=True)
            else:
                self._event("milestone", lineno, text, ts, rank, phase="load_progress")
        elif msg.startswith("max_total_num_tokens="):
            fields = dict(RE_FIELDS.findall(msg))
            e("capacity", lineno, text, ts, rank, **{k: to_float(v) if "." in v else to_int(v) for k, v in fields.items()})
        elif RE_READY in msg:
            e("milestone", lineno, text, ts, rank, phase="ready")
        elif msg.startswith("server_args="):
            from ..launch import parse_server_args
            e("server_args", lineno, text, ts, rank, fields=parse_server_args(msg[len("server_args="):]))
        elif "Uvicorn running on" in msg:
            m = RE_UVICORN.search(msg)
            e("milestone", lineno, text, ts, rank, phase="http_up", url=m[1] if m else None)
        elif msg.startswith("Using KV cache dtype"):
            m = RE_KV_DTYPE.search(msg)
            e("milestone", lineno, text, ts, rank, phase="kv_dtype", dtype=m[1] if m else None)
        elif "host memory for hierarchical KV cache" in msg or "hierarchical KV host pool" in msg:
            m = RE_HOST_POOL.search(msg)
            e("milestone", lineno, text, ts, rank, phase="host_pool", gb=to_float(m[3]) if m else None)
        # failure paths (logs §9)
        elif RE_SIGQUIT.search(msg):
            e("signal", lineno, text, ts, rank, signal="sigquit")
        elif "scheduler is dead" in msg or "scheduler died during initialization" in msg:
            m = RE_SCHED_DEAD.search(msg)
            code = to_int(m[3]) if m and m[3] else None
            e("signal", lineno, text, ts, rank, signal="scheduler_dead", exit_code=code)
        elif RE_EXIT_CODE.match(stripped):
            e("signal", lineno, text, ts, rank, signal="exit_code", exit_code=to_int(RE_EXIT_CODE.match(stripped)[1]))
        elif stripped in ("Killed", "Aborted", "Bus error", "Segmentation fault", "Floating point exception", "Illegal instruction",
                          "已杀死", "已殺死", "Getötet", "強制終了") or RE_KILLED_PREFIX.match(stripped) or "Fatal Python error" in msg:
            sig = "segfault" if ("Segmentation" in msg) else ("sigbus" if "Bus error" in msg else ("abort" if "Abort" in msg else
                  ("sigfpe" if "Floating point exception" in msg else ("sigill" if "Illegal instruction" in msg else
                   ("fatal" if "Fatal" in msg else "killed")))))
            ev = e("signal", lineno, text, ts, rank, signal=sig)
            if "Fatal Python error" in msg:
                self._fault, self._fault_current = ev, False
        elif "Initialization failed" in msg:
            e("error", lineno, text, ts, rank, message=msg, source="init_failed")
        elif (m := RE_KV_FULL.search(msg)):
            e("retract", lineno, text, ts, rank, retracted=to_int(m[1] or m[2]))
        elif (m := RE_WATCHDOG.search(msg)):
            e("watchdog", lineno, text, ts, rank, timeout_s=to_float(m[1]))
        elif msg.startswith("Pyspy dump for PID") or msg.startswith("Pyspy failed"):
            ev = e("watchdog", lineno, text, ts, rank, pyspy="failed" if "failed" in msg else "dump", frames=[])
            if "failed" not in msg:
                self._pyspy = ev
        elif (m := RE_NCCL_VER.search(msg)):
            e("version", lineno, text, ts, rank, component="nccl", version=m[1] or m[2])
            if m[1]:
                # printed as SGLang's PyNccl communicator is created, inside torch.distributed's set-up:
                # a failure after it and before the next step is in that set-up
                e("milestone", lineno, text, ts, rank, phase="nccl_init")
        elif msg.startswith("nohup:"):
            e("nohup", lineno, text, ts, rank)
        elif (m := RE_ARGPARSE.match(stripped)):
            e("argparse", lineno, text, ts, rank, message=m[2], prog=m[1].rsplit("/", 1)[-1])
        elif stripped.startswith("usage: ") and ("launch_server" in stripped or "sglang" in stripped):
            self._usage = e("argparse", lineno, text, ts, rank, message="", usage=True, usage_flags=USAGE_FLAG.findall(stripped))
        elif "sglang.launch_server" in msg or "launch_server.py" in msg or RE_SGLANG_SERVE.search(msg):
            ev = e("launch", lineno, text, ts, rank, command=stripped)
            if _command_open(stripped):
                self._launch = ev
        elif is_oom_text(msg, self._line_match):
            ev = e("error", lineno, text, ts, rank, message=stripped, source="oom-line")
            self._oom_from(ev)
        elif rank is None and ts is None and msg.startswith(("CUDA Error", "CUDA error", "NCCL WARN", "NCCL error")):
            e("error", lineno, text, ts, rank, message=stripped, source="raw")
        elif self._glog is not None:
            level, source = self._glog
            e("error", lineno, text, ts, rank, message=stripped, source="glog", level=level, file=source)
        elif stripped.startswith("GPU ") and (m := RE_ENV_GPU_CC.match(stripped)):
            e("gpu_info", lineno, text, ts, rank, gpus=m[1], compute_capability=f"{int(m[2])}.{int(m[3])}")
        elif stripped.startswith("GPU ") and (m := RE_ENV_GPU_NAME.match(stripped)):
            e("gpu_info", lineno, text, ts, rank, gpus=m[1], name=m[2].strip())
        else:
            return "plain"
        return "event"

    def _continue_launch(self, lineno: int, stripped: str, prefixed) -> bool:
        """A line that continues a launch command (after a trailing backslash, or inside a quote
        the command opened) joins it; a log record or a long run ends it."""
        ev = self._launch
        if prefixed or lineno - ev.line > LAUNCH_MAX_LINES:
            self._launch = None
            return False
        cmd = ev.data["command"]
        cmd = cmd[:-1].rstrip() if cmd.endswith("\\") else cmd
        ev.data["command"] = f"{cmd} {stripped}" if not _quote_open(cmd) else f"{cmd}\n{stripped}"
        ev.end_line = lineno
        if not _command_open(ev.data["command"]) or len(ev.data["command"]) > 16000:
            self._launch = None
        return True

    def _graph(self, lineno, text, ts, rank, msg) -> None:
        if " end." in msg:
            m = RE_GRAPH_END.search(msg)
            role = _graph_role(msg)
            self._event("milestone", lineno, text, ts, rank, phase="graph_end", role=role,
                        elapsed_s=to_float(m[2]) if m and m[2] else None,
                        usage_gib=to_float(m[3]) if m and m[3] else None, avail_gib=to_float(m[4]) if m and m[4] else None)
        elif " begin." in msg or "begin" in msg:
            m = RE_GRAPH_BEGIN.search(msg)
            self._event("milestone", lineno, text, ts, rank, phase="graph_begin", role=_graph_role(msg),
                        avail_gib=to_float(m[2]) if m else None)
        elif msg.startswith("Capture cuda graph bs"):
            m = RE_GRAPH_BS.search(msg)
            sizes = [n for n in (to_int(x) for x in m[1].split(",") if x.strip()) if n is not None] if m else []
            self._event("milestone", lineno, text, ts, rank, phase="graph_bs", max_bs=max(sizes) if sizes else None)

    def _batch(self, lineno, ts, rank, msg) -> None:
        if self._batch_rank is None:
            self._batch_rank = rank or ""
            self.batches.rank = rank
            self.first_batch = (lineno, msg)
        if (rank or "") != self._batch_rank:
            return  # one rank's view is enough; others repeat it
        self.batches.add(lineno, ts, msg)
        if ts:
            self.last_ts = ts

    def _frame(self, lineno: int, rank, file: str, line_no: int | None, func: str | None) -> None:
        self._close_exc()
        if self._tb is None:
            self._tb = Traceback(input=self.input, start=lineno, rank=rank, partial_head=True, chained=self._tb_chain_next)
            self._tb_chain_next = False
        if func is not None:
            self._tb.frames.append(Frame(file, line_no, func))
        self.mark(lineno)

    def _fault_dump(self, lineno: int, msg: str, stripped: str) -> bool:
        """faulthandler's dump after 'Fatal Python error': the crashing thread's frames go to the signal."""
        t = FAULT_THREAD.match(stripped)
        if t:
            self._fault_current = t[1] == "Current thread"
            self._fault.end_line = lineno
            return True
        f = FAULT_FRAME.match(msg)
        if f:
            if self._fault_current:
                self._fault.data.setdefault("frames", []).append(Frame(f[1], to_int(f[2]), f[3]))
            self._fault.end_line = lineno
            return True
        if not stripped or stripped.startswith(("Extension modules:", "Python runtime state", "<no Python frame>")):
            return True
        self._fault = None
        self._fault_current = False
        return False

    # -- exceptions ------------------------------------------------------------------
    def _exception(self, lineno, text, ts, rank, exc_type, message) -> None:
        self._close_exc()
        if " --" in message:
            self._advice(lineno, message)
        tb = self._tb
        frames = tb.frames if tb else []
        ev = self._event("exception", lineno, text, ts or (tb.ts if tb else None), rank or (tb.rank if tb else None), type=exc_type, message=message,
                         frames=list(frames), tb_start=tb.start if tb else None,
                         partial_head=tb.partial_head if tb else True, has_traceback=tb is not None,
                         chained=bool(tb and tb.chained) or self._tb_chain_next, header=tb.header_text if tb else "")
        if tb:
            tb.exc_type, tb.message, tb.end = exc_type, message, lineno
            self.tracebacks.append(tb)
            self._tb = None
        self._tb_chain_next = False
        ev.end_line = lineno
        if tb is None and len(self._tail) >= 2 and self._tail[-2][0] == lineno - 1:
            # an exception-first excerpt that kept the source line above it ('x = req.buf[...]')
            prev = self._tail[-2][1].strip()
            if prev and len(prev) <= 300 and SOURCE_STATEMENT.match(prev) and not PROSE.search(prev):
                ev.data["code"] = prev
        ev.msg = self._match(message) or self._match(f"{exc_type}: {message}")
        if ev.msg is None and not message.strip() and exc_type.endswith("AssertionError") and frames:
            ev.msg = self._check_site(frames[-1])
        if ev.msg is not None and ev.msg.span[0] > 0 and self._catalog is not None:
            # the best match quotes another message inside a wrapper ('Capture cuda graph failed: {e}'):
            # the wrapper, which can name the step, is kept by name
            outer = next((m for m in self._catalog.match_all(message[:4000]) if m.span[0] == 0 and m.family != ev.msg.family
                          and m.component == "sglang" and m.name), None)
            if outer is not None:
                ev.data["outer"] = outer.name
        self._exc = ev
        if is_oom_text(exc_type + ": " + message, ev.msg):
            self._oom_from(ev)
        else:
            self._inner_error(ev)

    def _inner_error(self, ev: Event) -> None:
        """A wrapper ('Capture cuda graph failed: {error}', 'Init failed: {e}') quoting another
        component's error as its last value: that error, when the catalog knows it by name, is an
        event of its own on the same line, so the rules about it see it."""
        got = self._inner_of(ev.msg)
        if got is not None:
            inner_text, inner = got
            extra = self._event("message", ev.line, ev.text, ev.ts, ev.rank, message=inner_text, inner_of=ev.msg.name or ev.msg.family)
            extra.msg = inner

    @staticmethod
    def _handled(m) -> bool:
        """A warning whose own words say SGLang handled what it quotes (switched a part off, fell back)."""
        return m.event in ("warning", "info") and bool(m.template) and bool(HANDLED.search(PLACEHOLDER.sub(" ", m.template)))

    def _quoted_oom(self, m):
        """The catalog's match of an out-of-memory status a matched message quotes in one of its values
        (not in a warning that says it was handled); else None."""
        if m is None or not m.fields or self._handled(m):
            return None
        for v in m.fields.values():
            if isinstance(v, str) and len(v) >= 12 and (inner := self._match(v)) is not None \
                    and inner.event == "device_oom" and inner.family != m.family:
                return inner
        return None

    def _inner_of(self, m):
        """(the text, the catalog's match) of an error a matched message quotes as its last long value,
        when the catalog knows it as an error of its own category; else None."""
        if m is None or not m.fields or self._handled(m):
            return None
        inner_text = next((v for v in reversed(list(m.fields.values())) if isinstance(v, str) and len(v) >= 12), None)
        if inner_text is None:
            return None
        inner = self._match(inner_text)
        if inner is None or inner.family == m.family or not inner.category or inner.category == "runtime.other" \
                or inner.event in ("device_oom", "milestone", "info", "warning"):
            return None
        return inner_text, inner

    def _check_site(self, frame: Frame):
        """A bare AssertionError: the catalog's check at the innermost frame that tests the names
        its quoted source line reads (diag/messages/sites.py), or None."""
        if self._catalog is None or not frame.code:
            return None
        from ..messages.sites import module_of, source_names
        names = source_names(frame.code)
        if not names:
            return None
        return self._catalog.check_at(module_of(frame.file), frame.func, names)

    def _oom_from(self, ev: Event) -> None:
        msg = ev.data.get("message", "")
        nums = parse_oom_numbers(msg)
        ev.data["oom"] = True
        oom = self._event("oom", ev.line, ev.text, ev.ts, ev.rank, exc_line=ev.line, frames=ev.data.get("frames", []),
                          exc_type=ev.data.get("type"), message=msg, **nums)
        oom.msg = ev.msg
        header = ev.data.get("header") or ""
        oom.data["words_phase"] = oom_words_phase(f"{header} {msg}")
        ev.data["oom_event"] = oom

    def _close_exc(self) -> None:
        ev = self._exc
        if ev is None:
            return
        self._exc = None
        if "\n" in (ev.data.get("message") or ""):   # a message over several lines: match it as one sentence
            parts = [part.strip() for part in ev.data["message"].splitlines() if part.strip()]
            joined = " ".join(parts)
            better = self._match(joined)
            # a message that is one of the nested lines stays that line's, not the exception's
            if better is not None and better.id not in (ev.data.get("nested") or ()) and \
                    (ev.msg is None or better.score > ev.msg.score):
                ev.msg = better
        if ev.msg is None and self._catalog is not None:
            # an exception whose message stops after one of its sentences (the rest of SGLang's text, or
            # the lines after it, not pasted): the message it is the start of
            lines = [part.strip() for part in (ev.data.get("message") or "").strip().splitlines() if part.strip()]
            # the message as one sentence when the paste wrapped it over lines, else its first line
            # (at a sentence's end only: a line that stops mid-sentence inside a log is another message)
            for head in dict.fromkeys((" ".join(lines), lines[0] if lines else "")):
                if len(head) >= 40 and head.rstrip().endswith((".", "!", "?")):
                    ev.msg = self._catalog.match_cut(head[:4000])
                    if ev.msg is not None:
                        if ev.msg.partial:
                            ev.data["cut"] = True
                        break
        if ev.msg is None and self._catalog is not None:
            # the message stops where its template's first value begins ('Capture cuda graph failed'
            # of 'Capture cuda graph failed: {e}'): the paste left out the error the wrapper quoted
            head = " ".join((ev.data.get("message") or "").split())
            if len(head) >= 20 and head.count(" ") >= 2 and head[-1:].isalnum():
                m = self._match(head + ": ")
                if m is not None and (m.template or "").startswith(head + ": {"):
                    ev.msg = m
                    ev.data["cut"] = True
            if ev.msg is None and len(head) >= 30:
                # a rewording of a catalogued check (a build from source between releases)
                ev.msg = self._catalog.match_near(head)
        oom = ev.data.get("oom_event")
        if oom is not None:  # numbers may have arrived on continuation lines
            nums = parse_oom_numbers(ev.data["message"])
            oom.data.update(nums)
            oom.data["message"] = ev.data["message"]
            oom.data["words_phase"] = oom_words_phase(f"{ev.data.get('header') or ''} {ev.data['message']}")
            oom.msg = oom.msg or ev.msg

    def _close_tb(self, cut_name: tuple[int, str] | None = None) -> None:
        tb = self._tb
        if tb is None:
            return
        self._tb = None
        tb.end = tb.end or tb.start
        self.tracebacks.append(tb)
        if cut_name is not None:      # 'torch.OutOfMemor' as the last line: the exception, its name cut mid-word
            lineno, name = cut_name
            self._tb = tb
            self._exception(lineno, self._tail[-1][1] if self._tail else name, tb.ts, tb.rank, name, "")
            self._exc.data["cut"] = True
            self._close_exc()
            return
        earlier = next((e for e in reversed(self.events) if e.kind == "exception" and e.data.get("type")
                        and not e.data.get("has_traceback") and not e.data.get("frames") and 0 < tb.start - e.line <= 20), None)
        if earlier is not None and tb.frames:   # 'ValueError: …' first, then the traceback that raised it
            earlier.data.update(frames=list(tb.frames), tb_start=tb.start, has_traceback=True, partial_head=tb.partial_head)
            oom = earlier.data.get("oom_event")
            if oom is not None:            # an OOM line printed just before the traceback that raised it
                oom.data["frames"] = list(tb.frames)
            return
        # a cut traceback still says where the process was
        first = self.context.get(tb.start, "")
        ev = self._event("exception", tb.start, first, tb.ts, tb.rank, type=None, message="", frames=list(tb.frames),
                         tb_start=tb.start, partial_head=tb.partial_head, partial_tail=True, has_traceback=True,
                         chained=tb.chained, header=tb.header_text)
        last = tb.frames[-1] if tb.frames else None
        if last is not None and last.code and last.code.lstrip().startswith("assert ") and ev.msg is None:
            # the paste stops at the raising frame's own source line, an assert: the exception is that
            # check's (Python prints the failing statement last), whatever its message was
            check = self._check_site(last)
            if check is not None:
                ev.msg = check
                ev.data["at_assert"] = True
                ev.data["message"] = re.sub(r"\{[^{}]*\}", "…", check.template or "")


# exception types a cut name may be completed to, most likely first
KNOWN_EXCEPTIONS = (
    "torch.OutOfMemoryError", "torch.cuda.OutOfMemoryError", "torch.distributed.DistBackendError",
    "torch.distributed.DistNetworkError", "torch.distributed.DistStoreError", "RuntimeError", "ValueError", "AssertionError",
    "TypeError", "KeyError", "AttributeError", "ImportError", "ModuleNotFoundError", "OSError", "FileNotFoundError",
    "IndexError", "NotImplementedError", "ConnectionRefusedError", "ConnectionResetError", "TimeoutError", "MemoryError",
    "subprocess.CalledProcessError", "triton.compiler.errors.CompilationError", "torch._dynamo.exc.BackendCompilerFailed",
    "safetensors_rust.SafetensorError", "huggingface_hub.errors.RepositoryNotFoundError", "ray.exceptions.RayTaskError",
    "ray.exceptions.ActorDiedError", "zmq.error.ZMQError", "json.decoder.JSONDecodeError", "PermissionError",
    "torch.AcceleratorError", "torch.cuda.CudaError",
)


def _exception_name(name: str) -> bool:
    """A name that reads as an exception class (last part ends like one)."""
    last = name.rsplit(".", 1)[-1]
    return bool(last[:1].isupper() and last.endswith(("Error", "Exception", "Exit", "Interrupt", "Fault", "Failure", "Warning"))) \
        or last in ("Exception", "KeyboardInterrupt", "StopIteration")


def _complete_exception_name(prefix: str) -> str | None:
    for name in KNOWN_EXCEPTIONS:
        if name.startswith(prefix) or name.rsplit(".", 1)[-1].startswith(prefix):
            return name
    return None


def named_version(text: str) -> str | None:
    """The SGLang version a line names outright ('sglang==0.5.6'), or None."""
    for m in RE_NAMED_VERSION.finditer(text):
        end = m.end()
        if m["other"] or (end < len(text) and (text[end].isdigit() or text[end] == ".")):
            continue
        return m[2]
    return None


def _read_fields(ev: Event) -> None:
    """What an event's finished text says beyond its kind, as typed data: the env vars a message
    shows SGLang reading (`env`), the model class it names (`architecture`, not from a message
    that says the class is not supported), a refusal of the speculative topk (`spec_topk_error`),
    the flag names of a launch command (`flag_names`), the wordings that date it (`dated_*`,
    diag.parse.wording)."""
    d = ev.data
    message = d.get("message") or ""
    if "os.environ.get(" in message:
        env = {}
        for m in RE_ENV_READ.finditer(message):
            env.setdefault(m[1], m[2])
        if env:
            d["env"] = env
    if ("ForCausalLM" in message or "ForConditionalGeneration" in message) and "not supported" not in message:
        m = RE_ARCHITECTURE.search(message)
        if m:
            d["architecture"] = m[1]
    # the wordings that date the log: of the line, of an exception's or argparse's message (wrapped
    # lines read as one), of the files a traceback names
    for key, found in (("dated_text", wording.dated(ev.text) if ev.text else ()),
                       ("dated_message", wording.dated(" ".join(message.split()))
                        if ev.kind in ("exception", "argparse") else ()),
                       ("dated_frames", [r for fr in d.get("frames") or () for r in wording.dated(fr.file)]
                        if ev.kind == "exception" else ())):
        if found:
            d[key] = found
    if "only supports topk = 1" in message or "topk > 1" in message:   # speculative decoding refuses the EAGLE topk
        d["spec_topk_error"] = True
    if ev.kind in ("exception", "error") and "divisible by" in message and (tpm := TP_DIVISIBLE.search(message)):
        d["not_divisible_by"] = int(tpm[1][:6])    # '… must be divisible by tensor parallel size (8)'
        d["tp_divides_check"] = True                # the message names the TP size it checked against
        if (cm := DIVIDED_COUNT.search(message[:400])):
            d["divided_count"] = int(cm[1][:9])     # 'Total number of attention heads (28) must be …'
    elif ev.kind in ("exception", "error") and ("%" in message or "not divisible by" in message):
        # a check that something divides evenly over the TP ranks: the assertion's source line
        # ('assert self.total_num_heads % tp_size == 0') or ensure_divisibility's 'N is not divisible by M'
        squeezed = message[:400].replace(" ", "")
        if "%" in squeezed and "==0" in squeezed and ("tp_size" in squeezed or "tensor_parallel" in squeezed):
            d["tp_divides_check"] = True
        elif "not divisible by" in message:
            tail = message.rsplit("not divisible by", 1)[1].strip().rstrip(".").split()
            if tail and tail[0].isdigit():
                d["not_divisible_by"] = int(tail[0][:6])
    if d.get("source") == "glog" and "Bad address" in message:
        d["efault"] = True          # EFAULT: a pointer the call cannot read (a GPU buffer handed to a socket)
    if ev.kind == "launch" and isinstance(d.get("command"), str):
        from ..launch import split_command
        d["flag_names"] = [name for t in split_command(d["command"]) if RE_FLAG_NAME.match(name := t.split("=", 1)[0])]


@dataclass
class LastLine:
    """The last content line of an input, read: cut in the middle of a message (`cut`), a batch
    line (`batch`) with its queue field missing (`batch_cut`) and its #new-token count."""
    cut: bool = False
    batch: bool = False
    batch_cut: bool = False
    new_tokens: int | None = None


def last_line(text: str, last_events) -> LastLine:
    """Read the last content line (`text`) with the input's last few events: the paste stops in the
    middle of a message when the catalog matched only the leading part of one, brackets are left
    open, or a known template lacks its end."""
    last = text.rstrip()
    out = LastLine()
    if not last:
        return out
    out.cut = any(e.data.get("cut") for e in last_events) \
        or any(last.count(a) > last.count(b) for a, b in ("()", "[]", "{}")) \
        or any(start.search(last) and not full.search(last) for start, full in CUT_TEMPLATES)
    if RE_BATCH_WORDS.search(last):
        out.batch = True
        out.batch_cut = "#queue-req" not in last
        m = RE_NEW_TOKEN.search(last)
        out.new_tokens = int(m[1]) if m else None
    return out


# catalog event kinds that do not make an event of their own (the parser's milestones cover start-up)
QUIET_EVENTS = ("info", "milestone")
RE_GRAPH_BUFFERS = rx.compile(r"Registering (\d+) cuda graph addresses")
LAUNCH_MAX_LINES = 60


def _quote_open(cmd: str) -> bool:
    import shlex
    try:
        shlex.split(cmd)
        return False
    except ValueError:
        return True


def _command_open(cmd: str) -> bool:
    """The command goes on over the next line: it ends with a backslash, or a quote after its
    first flag is still open."""
    if cmd.endswith("\\"):
        return True
    return " --" in cmd and _quote_open(cmd[cmd.index(" --"):])


def _catalog():
    try:
        from ..messages import Catalog
        return Catalog.open()
    except Exception:  # no catalog (a broken install): the parser still types what it knows
        return None


def _graph_role(msg: str) -> str:
    low = msg.lower()
    if "draft" in low:
        return "draft"
    if "piecewise" in low or "prefill" in low or "num tokens" in low or "num_tokens" in low:   # piecewise capture is by token count
        return "prefill"
    return "decode"


def iter_events(numbered_lines, input_index: int = 0):
    """Every line as an event, streamed: the typed events the parser recognises, 'batch' rows,
    and 'plain' events for lines that match nothing (nothing is held beyond the parser's context)."""
    parser = LogParser(input_index)
    for lineno, text in numbered_lines:
        before = len(parser.events)
        cls = parser.feed(lineno, text)
        if len(parser.events) > before:
            yield from parser.events[before:]
        elif cls == "batch" and len(parser.batches) and parser.batches.last_line == lineno:
            r = parser.batches.last()
            yield Event("batch", input_index, lineno, text, data={
                "kind": "decode" if r["kind"] else "prefill", "running": r["running"], "queue": r["queue"],
                "token_usage": r["usage"], "tokens": r["tokens"], "throughput": r["throughput"]})
        elif cls != "blank":
            yield Event("http" if cls == "http" else "plain", input_index, lineno, text)
    before = len(parser.events)
    parser.finish()
    yield from parser.events[before:]
