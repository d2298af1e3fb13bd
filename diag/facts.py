"""All inputs -> one Facts object: versions, flags, model, GPUs, memory readings, failures."""
from __future__ import annotations

from dataclasses import dataclass, field

from . import detect_version as DV
from . import flags as F
from . import phase as P
from .events import Event
from .launch import LaunchCommand, parse_launch, server_args_to_flags
from .parse import wording
from .parse.sglang import BatchSeries, LogParser, last_line
from . import versions as V
from .versions import VersionRange


@dataclass
class OomInfo:
    event: Event
    phase: str | None
    basis: str
    confidence: float
    notes: list[str]
    other_gib: float = 0.0          # memory held by other processes on that GPU
    other_pids: list[dict] = field(default_factory=list)


@dataclass
class Facts:
    version: VersionRange = field(default_factory=VersionRange)
    version_lines: list[int] = field(default_factory=list)
    version_note: str = ""
    catalog: F.Catalog | None = None
    launch: LaunchCommand | None = None
    launch_event: Event | None = None
    server_args: dict = field(default_factory=dict)
    server_args_event: Event | None = None
    flags: dict = field(default_factory=dict)          # effective flags, this version's names
    env: dict = field(default_factory=dict)
    model_path: str | None = None
    architecture: str | None = None
    model: object = None                               # knowledge.ModelSpec
    gpu: object = None                                 # knowledge.GpuSpec
    gpu_total_gib: float | None = None
    gpus: list[dict] = field(default_factory=list)
    gpu_processes: list[dict] = field(default_factory=list)
    driver_version: str | None = None
    cuda_version: str | None = None
    components: dict = field(default_factory=dict)     # nccl, torch ... versions
    events: list[Event] = field(default_factory=list)
    milestones: list[Event] = field(default_factory=list)
    batches: list[BatchSeries] = field(default_factory=list)
    ooms: list[OomInfo] = field(default_factory=list)
    readings: dict = field(default_factory=dict)
    reading_events: dict = field(default_factory=dict)  # reading name -> the event whose message printed it (message readings)
    state: str = "unknown"
    failure_line: int | None = None
    failure_phase: P.PhaseGuess | None = None
    failure_event: Event | None = None                # the first typed exception (or failure line) of the log
    failure_where: P.Where = field(default_factory=P.Where)
    known: "KnownFailure | None" = None                 # the first failure message the catalog has reviewed
    guess: "KnownFailure | None" = None                 # else: the first SGLang failure message its build categorised
    advice: list = field(default_factory=list)           # (input, line, flag, value) the log's own text says to add
    fragment: list[str] = field(default_factory=list)  # why the input looks like a piece of a log
    smi: list = field(default_factory=list)            # SmiSnapshot objects
    http: dict = field(default_factory=dict)
    context: dict = field(default_factory=dict)        # (input, line) -> text kept for evidence windows
    lines_total: int = 0
    content_lines: int = 0
    sglang_lines: int = 0
    nohup_only: bool = False
    model_note: str = ""                               # why a given model config could not be used
    values: dict = field(default_factory=dict)         # flat facts that rule conditions read

    # -- helpers used by rules and remedies --------------------------------------
    def flag(self, *names: str, default=None):
        for n in names:
            if n in self.flags:
                return self.flags[n]
        return default

    def of_kind(self, *kinds: str) -> list[Event]:
        return [e for e in self.events if e.kind in kinds]

    def to_json(self) -> dict:
        out = {
            "sglang_version": self.version.exact or (self.version.describe() if self.version.describe() != "unknown" else None),
            "sglang_version_basis": self.version.source or None,
            "flags_checked_against": self.catalog.label if self.catalog else None,
            "launch_flags": {k: (v if isinstance(v, (str, int, float, bool)) or v is None else str(v)) for k, v in self.flags.items()},
            "env": self.env,
            "driver_version": self.driver_version,
            "cuda_version": self.cuda_version,
            "gpus": self.gpus,
            "gpu_processes": self.gpu_processes,
            "model": self.model_path,
            "architecture": self.architecture,
            "state": self.state,
        }
        if self.failure_phase and self.failure_phase.phase:
            out["failure_phase"] = self.failure_phase.phase
        if self.readings:
            out["memory_readings"] = self.readings
        if self.components:
            out["components"] = self.components
        return out


def build(parsers: list[LogParser], smi_snapshots: list, explicit_versions: list[tuple[int, str]],
          sglang_version: str | None = None, launch_text: str | None = None, model_config: str | None = None) -> Facts:
    f = Facts()
    for p in parsers:
        f.events.extend(p.events)
        f.batches.append(p.batches)
        f.advice.extend((p.input, n, flag, value) for n, flag, value in getattr(p, "advice", ()))
        f.context.update({(p.input, n): t for n, t in p.context.items()})
        f.lines_total += p.lines
        f.content_lines += p.content_lines
        counts = getattr(p.events, "counts", None)   # an EventStore counts what it did not keep; a run's list does not need to
        f.sglang_lines += p.prefixed_lines + len(p.batches) + (sum(n for k, n in counts.items() if k != "exception")
                                                               if counts is not None else sum(1 for e in p.events if e.kind != "exception"))
        for k, v in p.http.items():
            if k != "last_line":
                f.http[k] = f.http.get(k, 0) + (v or 0)
    f.events.sort(key=lambda e: (e.input, e.line))
    f.milestones = [e for e in f.events if e.kind == "milestone"]
    f.smi = smi_snapshots
    for snap in smi_snapshots:
        f.context.update(getattr(snap, "context", {}))
    _versions(f, parsers, explicit_versions, sglang_version)
    _flags(f, launch_text)
    _environment(f)
    _model(f, model_config)
    _readings(f)
    _message_readings(f)
    _failures(f)
    _known_failure(f)
    _state(f, parsers)
    _values(f, [_last_line(p) for p in parsers if p.content_lines])
    return f


def _versions(f: Facts, parsers, explicit, override) -> None:
    if override:
        f.version = VersionRange(exact=override, source="--sglang-version")
    else:
        # the wordings the parser found dating its lines (diag.parse.wording): the lines, the messages,
        # each input's first batch line, the files tracebacks name
        ranges = [(e.line, r) for key in ("dated_text", "dated_message") for e in f.events for r in e.data.get(key) or ()]
        for p in parsers:
            if p.first_batch:
                ranges += [(p.first_batch[0], r) for r in _first_batch_dated(p)]
        ranges += [(e.line, r) for e in f.events for r in e.data.get("dated_frames") or ()]
        ranges = [(line, VersionRange(low=low, high=high, source=desc)) for line, (low, high, desc) in ranges]
        ranges += _versions_from_catalog(f, parsers)
        usage = _version_from_usage(f)
        if usage:
            ranges.append((0, usage))
        named = _version_from_candidates(f)
        if named:
            ranges.append(named)
        f.version, f.version_lines, f.version_note = DV.combine(explicit, ranges)
        if f.version.describe() == "unknown":
            f.version = _version_from_command(f) or f.version
    f.catalog = F.for_version(f.version if f.version.describe() != "unknown" else None)
    for e in f.events:
        if e.kind == "version":
            f.components[e.data["component"]] = e.data["version"]


def _first_batch_dated(p) -> list:
    """The wordings of an input's first batch line (the parser's; a run of an input, diag.fleet,
    may start at a later batch line, which the parser's wording table reads the same way)."""
    dated = getattr(p, "first_batch_dated", None)
    return dated if dated is not None else wording.dated(p.first_batch[1])


def _versions_from_catalog(f: Facts, parsers) -> list[tuple[int, VersionRange]]:
    """The releases that print each SGLang message of the log, and that have the files its frames
    name: the message catalog dates a log by what it holds."""
    try:
        from .messages import Catalog
        cat = Catalog.open()
    except Exception:
        return []
    out: list[tuple[int, VersionRange]] = []
    seen: set = set()
    # what SGLang printed: not a command line someone ran (its flags may be the rejected ones)
    # and SGLang's own: a line the catalog files under another component (torch's OOM text, which a
    # later SGLang also quotes in its source) dates nothing
    texts = [(e.line, e.data.get("message") or e.text) for e in f.events
             if e.msg is not None and e.kind != "launch" and e.msg.component == "sglang"]
    texts += [p.first_batch for p in parsers if p.first_batch]      # batch lines changed their wording too
    for line, text in texts:
        text = " ".join((text or "").split())          # a message wrapped over lines reads as one
        if not text or text in seen:
            continue
        seen.add(text)
        vs = cat.printing_versions(text)
        r = _release_range(cat, vs, f"the wording of '{text[:50]}'")
        if r:
            out.append((line, r))
    sa = next((e for e in f.events if e.kind == "server_args" and e.data.get("fields")), None)
    if sa is not None:
        fit = F.versions_matching_fields(list(sa.data["fields"]))
        if fit:
            out.append((sa.line, VersionRange(low=fit[0], high=fit[-1], source="the fields of the server_args dump")))
    for e in f.events:
        if e.kind == "argparse" and e.data.get("prog") in ARGPARSE_PROG:
            low, high = ARGPARSE_PROG[e.data["prog"]]
            out.append((e.line, VersionRange(low=low, high=high, source=f"argparse's program name '{e.data['prog']}'")))
    modules: dict[str, int] = {}
    for e in f.events:
        for fr in e.data.get("frames") or []:
            tail = P._sglang_tail(fr.file.replace("\\", "/"))
            if tail:
                modules.setdefault(tail.removesuffix(".py").replace("/", "."), e.line)
    for module, line in modules.items():
        r = _release_range(cat, cat.module_versions(module), f"the file {module.replace('.', '/')}.py in a traceback")
        if r:
            out.append((line, r))
    return out


# the program name argparse prints in its errors: the entry point changed to `sglang serve` in 0.5.10
ARGPARSE_PROG = {"launch_server.py": (None, "0.5.9"), "sglang serve": ("0.5.10", None)}


def _release_range(cat, versions: list[str], why: str) -> VersionRange | None:
    """The span of releases (first to last); None when it says nothing the flag catalogs can use (no
    release, or a span that holds every release the flag catalogs cover: a file every release since
    0.2 has dates nothing)."""
    every = cat.releases("sglang")
    if not versions:
        return None
    covered = F.catalog_versions()
    first, last = V.key(versions[0]), V.key(versions[-1])
    if all(first <= V.key(v) <= last for v in covered):
        return None
    low = None if versions[0] == every[0] else versions[0]
    high = None if versions[-1] == every[-1] else versions[-1]
    if low is None and high is None:
        return None
    return VersionRange(low=low, high=high, source=why)


def _version_from_usage(f: Facts) -> VersionRange | None:
    """argparse's usage block lists every flag of the installed release."""
    usage = next((e for e in f.events if e.kind == "argparse" and e.data.get("usage_flags")), None)
    best = F.versions_matching_usage(usage.data["usage_flags"]) if usage else []
    if not best:
        return None
    return VersionRange(low=best[0], high=best[-1], source="the flags argparse's usage message lists")


def _version_from_candidates(f: Facts) -> tuple[int, VersionRange] | None:
    """argparse's 'ambiguous option: --x could match --a, --b' names flags the running release has:
    the catalog versions that accept all of them."""
    for e in f.events:
        m = getattr(e, "msg", None)
        if m is None or m.event != "argparse" or not isinstance(m.fields.get("matches"), str):
            continue
        names = [w.strip(" ,'\"") for w in m.fields["matches"].split(",")]
        names = [n for n in names if n.startswith("--")]
        if not names:
            continue
        vs = F.catalog_versions()
        ok = [v for v in vs if all(F.accepts(v, n) for n in names)]
        if ok and len(ok) < len(vs):
            return e.line, VersionRange(low=ok[0], high=ok[-1], source="the flags argparse named as candidates")
    return None


def _version_from_command(f: Facts) -> VersionRange | None:
    """With no other evidence, the versions that accept every flag of the logged launch command."""
    if any(e.kind == "argparse" or getattr(e.msg, "event", None) == "argparse" for e in f.events):
        return None  # the command was rejected: its flags say nothing about the version
    launch = next((e for e in f.events if e.kind == "launch"), None)
    if launch is None:
        return None
    names = launch.data.get("flag_names") or []
    best = F.versions_best_accepting(names)
    if not best:
        return None
    return VersionRange(low=best[0], high=best[-1], source="the versions whose parser accepts the most flags of the logged launch command")


def _flags(f: Facts, launch_text: str | None) -> None:
    cat = f.catalog
    sa = next((e for e in f.events if e.kind == "server_args" and e.data.get("fields")), None)
    if sa:
        f.server_args, f.server_args_event = sa.data["fields"], sa
        f.flags.update(server_args_to_flags(sa.data["fields"], cat))
    launches = [e for e in f.events if e.kind == "launch"]
    chosen = None
    if launch_text:
        cmd = parse_launch(launch_text, cat)
    elif launches:
        # several commands in one paste (the user's own prompt line above the log, a relaunch): the one
        # that says the most about the server, the later of equals
        parsed = [(parse_launch(e.data["command"], cat), e) for e in launches]
        cmd, chosen = max(reversed(parsed), key=lambda p: len(p[0].flags))
    else:
        cmd = None
    if cmd is not None and (cmd.flags or cmd.problems):
        f.launch = cmd
        f.launch_event = chosen
        f.flags.update(cmd.flags)
        f.env.update(cmd.env)


def _environment(f: Facts) -> None:
    for e in f.events:
        for name, value in (e.data.get("env") or {}).items():   # os.environ.get('X')='v' in a message (the parser)
            f.env.setdefault(name, value)


def _model(f: Facts, model_config: str | None = None) -> None:
    f.model_path = f.flag("--model-path") if isinstance(f.flag("--model-path"), str) else None
    load_end = next((m for m in f.milestones if m.data.get("phase") == "load_end" and m.data.get("model_class")), None)
    if load_end:
        f.architecture = load_end.data["model_class"]
    else:
        f.architecture = next((e.data["architecture"] for e in f.events if e.data.get("architecture")), None)
    for s in f.smi:
        f.gpus.extend(s.gpus_facts())
        f.gpu_processes.extend(s.processes_facts())
        f.driver_version = f.driver_version or s.driver_version
        f.cuda_version = f.cuda_version or s.cuda_version
    f.gpu_total_gib = next((o.data["total_gib"] for o in f.of_kind("oom") if o.data.get("total_gib")), None)
    try:
        from . import knowledge
    except ImportError:  # the model/GPU catalog is optional for the analysis
        return
    f.model = _model_spec(knowledge, f, model_config)
    name = next((g["name"] for g in f.gpus if g.get("name") and g["name"] != "ERR!"), None)
    # sglang.check_env's 'GPU 0: Tesla T4' when no nvidia-smi snapshot names the GPU
    name = name or next((e.data["name"] for e in f.of_kind("gpu_info") if e.data.get("name")), None)
    mib = next((g["memory_total_mib"] for g in f.gpus if g.get("memory_total_mib")), None)
    if mib is None and f.gpu_total_gib:
        mib = int(f.gpu_total_gib * 1024)
    f.gpu = knowledge.find_gpu(name, mib) if (name or mib) else None


def _model_spec(knowledge, f: Facts, model_config: str | None):
    """--model-config, else a local model folder the log names (when it exists here), else the catalog."""
    import os
    for path in (model_config, f.model_path):
        if path and os.path.exists(os.path.join(path, "config.json") if os.path.isdir(path) else path) \
                and (path == model_config or os.path.isdir(path)):
            try:
                return knowledge.model_from_config(path)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                f.model_note = f"could not read the model config {path}: {exc}"
    if f.model_path or f.architecture:
        return knowledge.find_model(f.model_path, f.architecture)
    return None


def _readings(f: Facts) -> None:
    """The memory figures SGLang printed, from the first rank that printed them (TP0 when present)."""
    ms = f.milestones
    ranks = [m.rank for m in ms]
    pick = "TP0" if "TP0" in ranks else next((r for r in ranks if r and r.endswith("TP0")), ranks[0] if ranks else None)
    mine = [m for m in ms if m.rank == pick] or ms
    r: dict = {}

    def first(phase: str) -> Event | None:
        return next((m for m in mine if m.data.get("phase") == phase), None)

    if (m := first("load_begin")) and m.data.get("avail_gib") is not None:
        r["pre_load_free_gib"] = m.data["avail_gib"]
    loads = [m for m in mine if m.data.get("phase") == "load_end"]
    if loads:
        if loads[0].data.get("avail_gib") is not None:
            r["after_load_free_gib"] = loads[0].data["avail_gib"]
        if loads[0].data.get("usage_gib") is not None:
            r["weights_gib"] = loads[0].data["usage_gib"]
        if len(loads) > 1 and loads[1].data.get("usage_gib") is not None:
            r["draft_weights_gib"] = loads[1].data["usage_gib"]
    if (m := first("kv_alloc")):
        d = m.data
        r.update({k: v for k, v in (("kv_tokens", d.get("tokens")), ("k_size_gib", d.get("k_gib")), ("v_size_gib", d.get("v_gib")),
                                    ("kv_size_gib", d.get("kv_gib")), ("kv_dtype", d.get("dtype"))) if v is not None})
    if (m := first("swa_split")):
        r["swa_tokens"] = m.data.get("swa_tokens")
    if (m := first("mamba_alloc")):
        d = m.data
        r.update({"mamba_cache_size": d["size"], "conv_state_gib": d["conv_gib"], "ssm_state_gib": d["ssm_gib"]})
        if d.get("inter_ssm_gib") is not None:
            r["intermediate_ssm_gib"] = d["inter_ssm_gib"]
            r["intermediate_conv_gib"] = d["inter_conv_gib"]
    if (m := first("pool_end")) and m.data.get("avail_gib") is not None:
        r["pool_end_avail_gib"] = m.data["avail_gib"]
    if (m := first("graph_begin")) and m.data.get("avail_gib") is not None:
        r["graph_begin_avail_gib"] = m.data["avail_gib"]
    if (m := first("graph_end")):
        if m.data.get("avail_gib") is not None:
            r["graph_end_avail_gib"] = m.data["avail_gib"]
        if m.data.get("usage_gib") is not None:
            r["graph_mem_gib"] = m.data["usage_gib"]
    cap = next((e for e in f.events if e.kind == "capacity"), None)
    if cap:
        for key, name in (("max_total_num_tokens", "max_total_num_tokens"), ("max_running_requests", "max_running_requests"),
                          ("context_len", "context_len"), ("available_gpu_mem", "available_gpu_mem_gib")):
            if key in cap.data:
                r[name] = cap.data[key]
    f.readings = r


# memory figures SGLang's own messages print: (catalog name, field) -> reading
MESSAGE_READINGS = {
    ("kv.not_enough_memory", "mem_fraction_static"): "mem_fraction_static",
    ("kv.no_memory_after_weights", "mem_fraction_static"): "mem_fraction_static",
    ("kv.no_memory_after_weights", "suggested"): "suggested_fraction",
    ("kv.no_memory_after_weights", "minimum"): "min_viable_fraction",
    ("mamba.state_cache_no_memory", "total_rest_memory"): "mamba_total_rest_gib",
    ("mamba.state_cache_no_memory", "mamba_cache_per_req"): "mamba_per_req_mib",
    ("mamba.state_cache_no_memory", "stage_per_req"): "mamba_per_req_mib",
}


def _message_readings(f: Facts) -> None:
    """The memory figures of SGLang's refusals (the fraction in use, the minimum viable one, the
    Mamba budget), from the matched messages' fields; the first of each wins."""
    from .numbers import to_float
    for e in f.events:
        m = e.msg
        if m is None or not m.name:
            continue
        for key, value in (m.fields or {}).items():
            name = MESSAGE_READINGS.get((m.name, key))
            number = to_float(str(value).strip().rstrip(".,;:)")) if name and value is not None else None
            if number is not None and name not in f.readings:
                f.readings[name] = number
                f.reading_events[name] = e


@dataclass
class KnownFailure:
    """A failure message whose meaning a person reviewed (a hand-list entry or a reviewed SGLang
    family): what the catalog says of it, for the rules that have nothing more specific."""
    event: Event
    category: str
    component: str
    name: str
    meaning: str | None
    action: str | None


QUIET_LEVELS = ("info", "debug", "warning", "print")


# the event kinds of SGLang's failure messages whose build category names a cause (capacity lines and
# device OOMs have rules of their own)
GUESS_EVENTS = frozenset(("refusal", "arch_error", "driver_error", "import_error", "model_load_error", "nccl_error",
                          "port_error", "host_oom", "error"))


def _known_failure(f: Facts) -> None:
    """The first failure the catalog knows by review: the failure event's message when it has
    one, else the first error-level message of the log. Heuristic categories (messages no one
    reviewed) and the catch-all category are left out: they say too little to name a cause."""
    from .parse.sglang import _catalog
    cat = _catalog()
    if cat is None:
        return
    order = ([f.failure_event] if f.failure_event is not None else []) + [e for e in f.events if e is not f.failure_event]
    refused: set[str] = set()     # messages already found unreviewed: an event-dense log repeats them
    for ev in order[:5000]:
        m = getattr(ev, "msg", None)
        if m is None or not m.category or "." not in m.category or m.category == "runtime.other" or m.id in refused:
            continue
        if ev is not f.failure_event and (m.level or "").lower() in QUIET_LEVELS:
            continue
        refused.add(m.id)
        entry = cat.get(m.id)
        if entry is None:
            continue
        if cat.reviewed_category(m.id) != m.category:
            # no one reviewed it: the build's category from the raising module and the message's words,
            # kept as a guess for SGLang's own failure messages (SGL-AUTO-*), never for quiet levels
            typed_failure = f.failure_event is not None and f.failure_event.kind == "exception" and f.failure_event.data.get("type")
            if f.guess is None and m.component == "sglang" and m.event in GUESS_EVENTS \
                    and (ev is f.failure_event or not typed_failure) \
                    and (m.level or "").lower() not in QUIET_LEVELS:
                f.guess = KnownFailure(ev, m.category, m.component, m.name or m.family, entry.meaning, entry.action)
            continue
        f.known = KnownFailure(ev, m.category, m.component, m.name or m.family, entry.meaning, entry.action)
        f.guess = None
        return
    # nothing failed that the log shows, and the server never came up: a warning of SGLang's that a
    # person reviewed as a failure of its kind ('Failed to load JIT QK-Norm kernel: ninja exited') is
    # the one lead (the other components' warnings are often retries and notices: never)
    phases = {m.data.get("phase") for m in f.milestones}
    if f.failure_event is None and "ready" not in phases and not any(len(b) for b in f.batches) \
            and not f.http.get("count"):
        for ev in order[:5000]:
            m = getattr(ev, "msg", None)
            if m is None or m.component != "sglang" or not m.category or "." not in m.category \
                    or m.category == "runtime.other" or (m.level or "").lower() != "warning" \
                    or cat.reviewed_category(m.id) != m.category:
                continue
            entry = cat.get(m.id)
            if entry is not None:
                f.known = KnownFailure(ev, m.category, m.component, m.name or m.family, entry.meaning, entry.action)
                f.guess = None
                return


def _failures(f: Facts) -> None:
    spec = bool(f.flag("--speculative-algorithm"))
    def kind(e) -> str:
        # a plain message line the catalog files as an error or a signal is one too (a library's
        # one-line check before its exit(1), the launcher's child-exit line)
        m = getattr(e, "msg", None)
        if e.kind == "message" and m is not None and m.event in ("error", "signal"):
            return m.event
        return e.kind
    failures = [e for e in f.events if kind(e) in ("exception", "oom", "argparse", "signal", "watchdog", "retract")
                or (kind(e) == "error" and e.data.get("source") != "traceback-header")]
    first_fail = failures[0] if failures else None
    if first_fail:
        f.failure_line = first_fail.line
    typed = [e for e in failures if e.kind == "exception" and e.data.get("type")]
    f.failure_event = typed[0] if typed else first_fail
    framed = next((e for e in typed if e.data.get("frames")), None) or \
        next((e for e in failures if e.data.get("frames")), None)
    if framed is not None:
        f.failure_where = P.where(framed.data["frames"])
    for o in f.of_kind("oom"):
        f.ooms.append(_oom_info(f, o, spec))
    target = f.ooms[0].event if f.ooms else first_fail
    if target is None:
        return
    if f.ooms:
        oi = f.ooms[0]
        f.failure_phase = P.PhaseGuess(oi.phase, oi.basis, oi.confidence, oi.notes, target.line)
        return
    frames = target.data.get("frames") or []
    phase = P.from_frames(frames)
    if phase:
        f.failure_phase = P.PhaseGuess(phase, "frames", 0.8, [], target.line)
        return
    # a wrapper that names the step it was in (the graph runner's 'Capture cuda graph failed: …'),
    # printed with or after the failure: a cut traceback or a library's own line shows no frame
    def said(e) -> str | None:
        names = (e.msg.name if e.msg is not None else None, e.data.get("outer"))
        return next((P.MESSAGE_PHASES[n] for n in names if n in P.MESSAGE_PHASES), None)
    wrapper = next((e for e in f.events if e.line >= target.line and said(e)), None)
    if wrapper is not None:
        f.failure_phase = P.PhaseGuess(said(wrapper), "message", 0.8, [], wrapper.line)
        return
    phase, ms = P.from_milestones(f.milestones, target.line, target.rank, spec, _batch_phase(f, target.line), target.ts)
    f.failure_phase = P.PhaseGuess(phase, "milestones" if phase else "none", 0.7 if phase else 0.3, [], ms.line if ms else None)


def _batch_phase(f: Facts, before_line: int) -> str | None:
    """'prefill' or 'decode' from the last batch line before a failure, when the server was serving."""
    best = None
    for b in f.batches:
        best = b.kind_before(before_line) or best
    return best


def _oom_info(f: Facts, o: Event, spec: bool) -> OomInfo:
    d = o.data
    msg = d.get("message", "")
    notes: list[str] = []
    other, others = 0.0, []
    procs = d.get("processes") or []
    if d.get("this_process_gib") is not None and procs:
        others = procs
        other = sum(p["used_gib"] for p in procs)
    elif len(procs) > 1:
        biggest = max(procs, key=lambda p: p["used_gib"])
        others = [p for p in procs if p is not biggest]
        other = sum(p["used_gib"] for p in others)
        notes.append(f"PyTorch names every process by PID (a container's PID namespace); PID {biggest['pid']} is taken to be this server")
    tried, total, free, held = d.get("tried_gib"), d.get("total_gib"), d.get("free_gib"), d.get("this_process_gib")
    if not procs and None not in (total, free, held):
        # no PID named: what is neither free nor this process is held outside it (driver reserve ~0.5 GiB aside)
        outside = total - free - held
        d["outside_gib"] = round(outside, 3)
        if outside >= max(2.0, 0.2 * total):   # a display server or the driver hold a little; this is another process
            other = outside
            notes.append(f"{outside:.1f} GiB of the GPU is neither free nor held by this process: another process holds it")
    d["larger_than_gpu"] = bool(tried is not None and total and tried > 0.95 * total)
    # phase: the message's own words, frames, milestones, numbers
    words = d.get("words_phase")
    frames_phase = P.from_frames(d.get("frames") or [])
    if words == "cuda_graph" and frames_phase == "draft":
        words = "draft"
    if words:
        guess = P.PhaseGuess(words, "message", 0.9)
    elif frames_phase:
        guess = P.PhaseGuess(frames_phase, "frames", 0.9)
    elif d["larger_than_gpu"]:
        # one allocation larger than the whole GPU is a table sized from the configuration (request slots x
        # context), made while the memory pools are set up, not an activation
        guess = P.PhaseGuess("kv_pool", "numbers", 0.7, [f"a single allocation of {tried:.1f} GiB is larger than the "
                             f"{total:.1f} GiB GPU: a table sized from the configuration (request slots × context length)"])
    else:
        ph, ms = P.from_milestones(f.milestones, o.line, o.rank, spec, _batch_phase(f, o.line), o.ts)
        if ph:
            guess = P.PhaseGuess(ph, "milestones", 0.75, [f"the last start-up step printed before it was line {ms.line}"] if ms else
                                 ["the server was already serving batches"], ms.line if ms else None)
        else:
            guess = P.from_oom_numbers(d)
    return OomInfo(o, guess.phase, guess.basis, guess.confidence, notes + guess.notes, other, others)


def _state(f: Facts, parsers) -> None:
    phases = {m.data.get("phase") for m in f.milestones}
    if not parsers and f.smi:
        f.state = "smi_only"
    elif f.content_lines == 0:
        f.state = "empty"
    elif all(e.kind == "nohup" for e in f.events) and f.events and f.content_lines == len(f.events):
        f.state = "nohup_only"
        f.nohup_only = True
    elif f.failure_line is not None:
        f.state = "failed"
    elif any(len(b) for b in f.batches) or f.http.get("count"):
        f.state = "serving"
    elif "ready" in phases:
        f.state = "ready"
    elif phases:
        f.state = "startup_incomplete"
    elif f.sglang_lines == 0:
        f.state = "not_sglang"
    else:
        f.state = "no_failure_seen"
    # does the paste look like a piece of a longer log?
    for e in f.events:
        if e.kind == "exception" and e.data.get("partial_head") and e.data.get("has_traceback"):
            f.fragment.append(f"line {e.data.get('tb_start') or e.line}: the paste starts inside a traceback")
            break
    for e in f.events:
        if e.kind == "exception" and e.data.get("partial_tail"):
            f.fragment.append(f"line {e.line}: a traceback is cut before its exception line")
            break
    for e in f.events:
        if e.data.get("loose"):
            f.fragment.append(f"line {e.line}: a message retold in other words, recognised by the names it quotes")
            break
    for p in parsers:
        if _message_cut(f, p):
            f.fragment.append("the last line stops in the middle of a message (cut when pasted)")
            break


def _message_cut(f: Facts, parser: LogParser) -> bool:
    """The paste ends inside a message (the parser's reading of its last line)."""
    return _last_line(parser).cut


def _last_line(parser):
    """The parser's reading of an input's last line (a run of one, diag.fleet, is read the same way)."""
    read = getattr(parser, "last_line", None)
    return read if read is not None else last_line(parser.last_line_text, parser.events[-3:])


def _values(f: Facts, parsers_last: list) -> None:
    v = f.values
    v["state"] = f.state
    v["failure_phase"] = f.failure_phase.phase if f.failure_phase else None
    v["oom.phase"] = f.ooms[0].phase if f.ooms else None
    v["oom.other_gib"] = max((o.other_gib for o in f.ooms), default=0.0)
    v["content_lines"] = f.content_lines
    topk = f.flag("--speculative-eagle-topk")
    try:
        v["spec.topk"] = int(topk) if topk is not None else None
    except (TypeError, ValueError):
        v["spec.topk"] = None
    v["spec.topk_error"] = any(e.data.get("spec_topk_error") for e in f.events)
    v["nccl_in_crash"] = any(("nccl" in t.lower()) for (_, n), t in f.context.items()
                             if f.failure_line is not None and abs(n - f.failure_line) <= 12)
    v["cut_forward"] = _cut_forward(f)
    v.update(_log_end(f, parsers_last))
    v["smi.faults"] = _smi_faults(f)
    v["smi.error"] = next((s.error for s in f.smi if s.error), None)
    other = _smi_other(f)
    v["smi.other"] = other
    v["smi.other_mib"] = sum(p["used_mib"] for p in other)
    v["smi.held_share"] = max((g["memory_used_mib"] / g["memory_total_mib"] for g in f.gpus
                               if g.get("memory_used_mib") and g.get("memory_total_mib")), default=0.0)
    from .lint import lint_facts
    breaking, conflicts = lint_facts(f)
    v["launch.unknown"] = breaking
    v["launch.conflicts"] = conflicts


def _log_end(f: Facts, last: list) -> dict:
    """How the (last) log ends: on a batch line, cut mid-line or not, and that batch's size."""
    out = {"end.batch": None, "end.cut": False, "end.new_tokens": None, "end.line": None}
    b = next((s for s in reversed(f.batches) if len(s)), None)
    end = last[-1] if last else None
    if b is None or end is None or not end.batch:
        return out
    row = b.last()
    out["end.batch"] = "decode" if row["kind"] == 1 else "prefill"
    out["end.cut"] = end.batch_cut
    out["end.line"] = row["line"]
    out["end.new_tokens"] = end.new_tokens
    return out


def _cut_forward(f: Facts) -> str | None:
    """'prefill'/'decode' when a traceback is cut inside a forward pass and no exception line follows."""
    cut = [e for e in f.events if e.kind == "exception" and e.data.get("partial_tail")]
    typed = [e for e in f.events if e.kind == "exception" and e.data.get("type")]
    if not cut or typed:
        return None
    frames = cut[-1].data.get("frames") or []
    if frames and _not_allocating(frames[-1]):
        return None
    phase = P.from_frames(frames)
    if phase in ("prefill", "decode"):
        return phase
    # the call the innermost frame's source line makes counts as a frame of it (a paste cut there)
    calling = frames[-1].code or "" if frames else ""
    if any(fr.func in ("_forward_raw", "forward_batch_generation") for fr in frames) or \
            any(f".{name}(" in calling or calling.lstrip().startswith(f"{name}(") for name in ("_forward_raw", "forward_batch_generation")):
        # the model runner's entry without the step's own frame: a prefill unless the log shows CUDA
        # graph capture under way (a bare forward then is the capture's); a model's own forward alone
        # says nothing about the step, so it is left unknown
        before = [m.data.get("phase") for m in f.milestones if m.line <= cut[-1].line]
        capturing = "graph_begin" in before and not any(p in ("graph_end", "ready") for p in
                                                         before[len(before) - before[::-1].index("graph_begin"):])
        if capturing and not any(len(b) for b in f.batches):
            return None
        return "prefill"
    return None


def _not_allocating(frame) -> bool:
    """The innermost frame of a cut traceback is where no activation is allocated: Triton launching
    (or compiling) a kernel, whose failures are its own (shared memory, a compile error), or the
    expert-balancing hook that runs after the forward pass."""
    file = (frame.file or "").replace("\\", "/")
    where = f"{file} {frame.func or ''} {frame.code or ''}".lower()
    return "/triton/" in file or "eplb" in where or "expert_distribution" in where or "expert_location" in where


def _smi_faults(f: Facts) -> list[dict]:
    """GPUs whose snapshot shows an error state: ERR! cells, uncorrectable ECC, pending row remaps."""
    out = []
    for snap in f.smi:
        for g in snap.gpus:
            bad = g.faults()
            if bad:
                out.append({"gpu": g.index, "name": g.name, "errors": bad, "line": g.line})
    return out


def _smi_other(f: Facts) -> list[dict]:
    """Processes on a GPU besides the largest one (the server), from an nvidia-smi snapshot."""
    by_gpu: dict = {}
    for p in f.gpu_processes:
        if p.get("used_mib"):
            by_gpu.setdefault(p.get("gpu"), []).append(p)
    out = []
    for procs in by_gpu.values():
        if len(procs) < 2:
            continue
        procs = sorted(procs, key=lambda p: -p["used_mib"])
        out.extend(p for p in procs[1:] if p["used_mib"] >= 256)
    return out


# -- the facts rules may read, by path ----------------------------------------------------
# Every condition and text placeholder that is not a matched message's field (hit.*) or an
# explainer's value names one of these paths; the rule loader rejects any other.

def _msg_attr(ev, name: str):
    m = getattr(ev, "msg", None) if ev is not None else None
    return getattr(m, name, None) if m is not None else None


def _msg_entry_text(ev, name: str) -> str | None:
    """The catalog entry's own meaning or action for the event's message (the hand lists and the
    reviews write one; extracted messages have none)."""
    m = getattr(ev, "msg", None) if ev is not None else None
    if m is None:
        return None
    from .parse.sglang import _catalog
    cat = _catalog()
    entry = cat.get(m.id) if cat is not None else None
    return (getattr(entry, name, None) or None) if entry is not None else None


def _backend_gate(f: Facts) -> list[str] | None:
    """The attention backends a failure's message allows, when SGLang's check names them in its own
    text ('Gemma4 only supports trtllm_mha, triton, or intel_xpu attention backend, got ...'): the
    words of the catalog template's literal text that are choices of --attention-backend, the one
    in use left out, in SGLang's order of preference. None for a message that is not such a gate."""
    ev = f.failure_event
    m = getattr(ev, "msg", None) if ev is not None else None
    tmpl = getattr(m, "template", None) if m is not None else None
    info = f.catalog.flag("--attention-backend") if f.catalog is not None else None
    if not tmpl or info is None or not info.choices:
        return None
    low = tmpl.lower()
    if "support" not in low or not ("attention backend" in low or "attention_backend" in low):
        return None
    literal = "".join(ch if (ch.isalnum() or ch == "_") else " " for ch in _template_literal(tmpl))
    current = str(f.flag("--attention-backend") or "")
    words = literal.split()
    # 'The hpc_ops attention backend only supports ...': the backend the check is about, not one it allows
    subject = {w for i, w in enumerate(words[:-2]) if words[i + 1:i + 3] in (["attention", "backend"], ["backend", "only"])
               and (words[i + 1] == "backend" or (i + 3 < len(words) and words[i + 3] in ("only", "does", "is", "requires")))}
    named = [w for w in dict.fromkeys(words) if w in info.choices and w != current and w not in subject]
    return _by_backend_preference(named) or None


def _by_backend_preference(names: list[str]) -> list[str]:
    """Attention backends in SGLang's order of preference (others after, in their order)."""
    from .explain.flags import BACKEND_PREFERENCE
    return sorted(names, key=lambda n: BACKEND_PREFERENCE.index(n) if n in BACKEND_PREFERENCE else len(BACKEND_PREFERENCE))


def _known_values(f: Facts, flag: str) -> list[str]:
    """The values a flag takes: its argparse choices in this version, else those of any release
    (recent releases validate some flags in a registry instead) and the builtins its help lists."""
    info = f.catalog.flag(flag) if f.catalog is not None else None
    if info is None:
        return []
    if info.choices:
        return [str(c) for c in info.choices]
    from .flags import raw_definitions
    out: list[str] = []
    for d in raw_definitions(flag):
        out += [str(c) for c in d.get("choices") or []]
    help_text = info.help or ""
    for key in ("Builtins:", "Choices:", "choices:", "One of"):
        i = help_text.find(key)
        if i >= 0:
            out += [w.strip(" .,") for w in help_text[i + len(key):].split(",") if w.strip(" .,")]
    return list(dict.fromkeys(w for w in out if w and " " not in w))


def _check_choice(f: Facts) -> tuple[str, str] | None:
    """A check that tests one flag and names the values it accepts ('Only EAGLE and DSPARK speculative
    algorithms are supported for …'): (the flag, the first value it names that is not the one in use)."""
    from . import checks
    c = checks.cached(f, "check", checks.failed_check)
    if c is None or len(c.flags) != 1:
        return None
    m = getattr(c.event, "msg", None)
    tmpl = getattr(m, "template", None) if m is not None else None
    if not tmpl:
        return None
    literal = _template_literal(tmpl)
    low = literal.lower()
    if not any(k in low for k in ("only", "support", "must be", "one of", "expected")):
        return None
    flag = c.flags[0]
    values = _known_values(f, flag)
    if not values:
        return None
    by_low = {v.lower(): v for v in values}
    current = str(f.flag(flag) or "").lower()

    def words(text: str) -> list[str]:
        return "".join(ch if (ch.isalnum() or ch in "_-") else " " for ch in text).split()

    # the accepted values are in the check's own words, or in the list it printed ('expects attention_backend
    # to be one of ['triton', …], but got flashinfer'): the value after 'got' is the one refused
    text = (c.event.data.get("message") or "") if c.event is not None else ""
    refused = {w.lower() for part in text.split(" got ")[1:] for w in words(part)[:1]}
    named = []
    for w in list(dict.fromkeys(words(literal))) + list(dict.fromkeys(words(text.split(" got ")[0]))):
        v = by_low.get(w.lower())
        if v is not None and w.lower() != current and w.lower() not in refused and v not in named:
            named.append(v)
    if flag == "--attention-backend":
        named = _by_backend_preference(named)
    return (flag, named[0]) if named else None


def _template_literal(tmpl: str) -> str:
    """A template's text without its placeholders (the values a log fills in are not the check's words)."""
    out, depth = [], 0
    for ch in tmpl:
        if ch == "{":
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    return "".join(out)


def _oom0(f: Facts):
    return f.ooms[0] if f.ooms else None


def _oom_field(name: str):
    def get(f: Facts):
        o = _oom0(f)
        return o.event.data.get(name) if o else None
    return get


def _held(f: Facts):
    o = _oom0(f)
    if not o:
        return None
    d = o.event.data
    held = d.get("this_process_gib")
    if held is None and len(d.get("processes") or []) == 1:
        held = d["processes"][0]["used_gib"]
    return held


def _other_share(f: Facts):
    o = _oom0(f)
    total = f.gpu_total_gib or (o.event.data.get("total_gib") if o else None)
    if not o or not total:
        return None
    return o.other_gib / total


TRANSFER_FILES = ("transport", "transfer_engine", "mooncake", "nixl", "rdma")
TRANSFER_COMPONENTS = ("mooncake", "nixl")


def _transfer_field(f: Facts, key: str, default=None):
    ev = _transfer_error(f)
    return ev.data.get(key, default) if ev is not None else default


def _transfer_named(f: Facts) -> str | None:
    ev = _transfer_error(f)
    t = ev.msg.fields.get("transport") if ev is not None and ev.msg is not None else None
    return f"{t}Transport" if t else ("transport" if ev is not None else None)


def _other_transfer_backend(f: Facts) -> str | None:
    ev = _transfer_error(f)
    if ev is None:
        return None
    used = f.flag("--disaggregation-transfer-backend")
    if not isinstance(used, str):
        used = "nixl" if any(w in (ev.data.get("file") or "").lower() for w in ("nixl", "ucx")) else "mooncake"
    return {"mooncake": "nixl", "mooncake_tcp": "nixl", "nixl": "mooncake"}.get(used)


def _transfer_error(f: Facts):
    """The first error of a KV-transfer engine: a glog error record from a transport source, or a line the
    catalog knows as a Mooncake/NIXL failure (a warning-level registration failure, a message pasted
    without its glog prefix). Found once per Facts: five facts read it."""
    from . import checks
    return checks.cached(f, "transfer_error", _find_transfer_error)


def _find_transfer_error(f: Facts):
    for e in f.events:
        if e.kind == "error" and e.data.get("source") == "glog" and \
                any(w in (e.data.get("file") or "").lower() for w in TRANSFER_FILES):
            return e
        m = e.msg
        if m is not None and m.component in TRANSFER_COMPONENTS and m.category == "env.nccl":
            return e
    return None


def _frames_speculative(f: Facts) -> bool:
    return any(P.in_speculative(e.data.get("frames")) for e in f.events)


def _empty_graph_buffers(f: Facts) -> int | None:
    """How many ranks' custom all-reduce registered no graph buffers at the end of a capture that
    then never ended (no 'Capture cuda graph end' or later step after it): the capture stopped at its
    first batch; None when no rank did."""
    empty = [e for e in f.of_kind("graph_buffers") if e.data.get("n") == 0]
    if not empty:
        return None
    later = [m for m in f.milestones if m.line > empty[0].line and m.data.get("phase") in ("graph_end", "ready", "http_up")]
    return None if later else len({e.rank for e in empty})


# training frameworks that run SGLang's engine beside the trainer on the same GPUs (RL rollouts),
# by the package folder their frames' files are under
TRAINER_PACKAGES = ("verl", "openrlhf", "slime", "areal", "realhf", "roll", "trl", "nemo_rl", "skyrl", "llamafactory")


def _frames_trainer(f: Facts) -> str | None:
    """The training framework whose code the log's tracebacks run through, when none of them passes
    through SGLang's own code: the failure is the trainer's, in a process beside the engine."""
    name = None
    for e in f.events:
        for fr in e.data.get("frames") or ():
            parts = (fr.file or "").replace("\\", "/").split("/")
            if "sglang" in parts:
                return None
            if name is None:
                name = next((p for p in parts[:-1] if p.lower() in TRAINER_PACKAGES), None)
    return name


def _compute_capability(f: Facts) -> float | None:
    from .numbers import to_float
    cc = next((e.data["compute_capability"] for e in f.of_kind("gpu_info") if e.data.get("compute_capability")), None)
    if cc is None and f.gpu is not None and f.gpu.arch:
        digits = "".join(ch for ch in f.gpu.arch if ch.isdigit())   # 'sm_75' -> 7.5, 'sm_120' -> 12.0
        cc = f"{digits[:-1]}.{digits[-1]}" if len(digits) >= 2 else None
    return to_float(cc) if cc else None


def _enospc_path(f: Facts) -> str | None:
    for e in f.events:
        m = getattr(e, "msg", None)
        if m is not None and m.id == "os.errno_enospc":
            return str((m.fields or {}).get("path") or "").strip("'\"")
    return None


def _failure_text(f: Facts) -> str | None:
    ev = f.failure_event
    if ev is None:
        return None
    text = (ev.data.get("message") or ev.text or "").strip()[:200]
    return None if not text or text.startswith('File "') else text


def _tp_divisibility(f: Facts) -> bool:
    ev = f.failure_event
    if ev is None or ev.data.get("type") not in ("AssertionError", "ValueError", None):
        return False
    tp = _tp(f)
    return bool(ev.data.get("tp_divides_check")) or (tp > 1 and ev.data.get("not_divisible_by") == tp)


def _tp_checked(f: Facts) -> int:
    """The TP size in use: the launch flag, else the one a failed divisibility check names."""
    tp = _tp(f)
    ev = f.failure_event
    if tp == 1 and ev is not None and ev.data.get("tp_divides_check") and ev.data.get("not_divisible_by"):
        return ev.data["not_divisible_by"]
    return tp


def _tp_dividing_heads(f: Facts) -> int | None:
    m = f.model
    heads = getattr(m, "num_attention_heads", None) if m is not None else None
    if not heads:
        # no model config: the count the failed check names ('Total number of attention heads (28) must be …')
        ev = f.failure_event
        heads = ev.data.get("divided_count") if ev is not None and ev.data.get("tp_divides_check") else None
        if not heads:
            return None
        # TP sizes are GPU counts: powers of two first
        for n in sorted(range(1, _tp_checked(f)), key=lambda n: (n & (n - 1) != 0, -n)):
            if heads % n == 0:
                return n
        return None
    kv = getattr(m, "num_key_value_heads", None) or heads
    for n in range(max(1, _tp(f)), 0, -1):
        if heads % n == 0 and (kv % n == 0 or n % kv == 0):
            return n
    return None


def _names():
    from .memory import names
    return names


def _tp(f: Facts) -> int:
    """The TP size the server was started with (the launch flags are keyed by their catalog name,
    so --tp and --tensor-parallel-size arrive as --tp-size)."""
    from .numbers import to_int
    return to_int(str(f.flag("--tp-size", default=""))) or 1


def _pp(f: Facts) -> int:
    from .numbers import to_int
    return to_int(str(f.flag("--pp-size", default=""))) or 1


def _self_share(f: Facts):
    """This process's memory at the OOM as a share of the GPU (None when the OOM does not say)."""
    o = _oom0(f)
    held = _held(f)
    total = (o.event.data.get("total_gib") if o else None) or f.gpu_total_gib
    if held is None or not total or (o and o.event.data.get("this_process_gib") is None):
        return None
    return held / total


def _chk(f: Facts, attr: str):
    from . import checks
    c = checks.cached(f, "check", checks.failed_check)
    return getattr(c, attr) if c is not None else None


def _crash(f: Facts, attr: str):
    from . import checks
    c = checks.cached(f, "crash", checks.crash_site)
    return getattr(c, attr) if c is not None else None


def _int_flag(f: Facts, name: str):
    from .numbers import to_int
    return to_int(f.flag(name))


def _graph_role(f: Facts):
    stop = f.failure_line if f.failure_line is not None else 10**12
    role = None
    for m in f.milestones:
        if m.data.get("phase") == "graph_begin" and m.line <= stop:
            role = m.data.get("role") or role
    return role


def _advised(f: Facts) -> list[dict]:
    """Flags the log's own text tells the user to add (SGLang's workaround hints), known to some
    release's parser and not already set so: [{flag, line, input, switch, value}]."""
    from .flags import raw_definitions
    out: list[dict] = []
    for inp, line, flag, value in f.advice:
        defs = raw_definitions(flag)
        if not defs or any(o["flag"] == flag for o in out):
            continue
        if defs[-1].get("switch"):
            if flag in f.flags:
                continue
            out.append({"flag": flag, "line": line, "input": inp, "switch": True, "value": None})
            continue
        # a flag with a value: only a value the flag takes ('please use --attention-backend triton
        # instead'), never a word of the sentence, and not the value already in use
        choices = {str(c) for d in defs for c in d.get("choices") or ()}
        typ = defs[-1].get("type")
        ok = value is not None and ((choices and value in choices) or
                                    (not choices and typ in ("int", "float") and _numeric(value, typ)))
        if not ok or str(f.flags.get(flag)) == value:
            continue
        out.append({"flag": flag, "line": line, "input": inp, "switch": False, "value": value})
    return out[:3]


def _numeric(value: str, typ: str) -> bool:
    try:
        (int if typ == "int" else float)(value)
        return True
    except ValueError:
        return False


def _server_kwarg(f: Facts) -> dict | None:
    """A ServerArgs keyword the installed SGLang does not have ('ServerArgs.__init__() got an unexpected
    keyword argument …'): the field, the flag it belongs to in other releases, and those releases."""
    from .flags import flag_of_dest
    for e in f.events:
        m = getattr(e, "msg", None)
        if m is None or (m.name or m.id) != "python.unexpected_keyword_argument":
            continue
        fields = m.fields or {}
        if not str(fields.get("callable") or "").startswith(("ServerArgs", "PortArgs")):
            continue
        name = str(fields.get("name") or "")
        out = {"name": name, "event": e}
        found = flag_of_dest(name)
        if found:
            flag, first, last, d = found
            out.update(flag=flag, first=first, last=last, replaced_by=d.get("replaced_by"))
        return out
    return None


def _advice_event(f: Facts):
    a = _advised(f)
    if not a:
        return None
    key = (a[0]["input"], a[0]["line"])
    return Event("advice", key[0], key[1], f.context.get(key, ""))


def _guess_where(f: Facts) -> str | None:
    m = getattr(f.guess.event, "msg", None) if f.guess else None
    if m is None or not m.module:
        return None
    return f"{m.module}:{m.function}" if m.function else m.module


def _guess_text(f: Facts) -> str | None:
    if not f.guess:
        return None
    ev = f.guess.event
    text = (ev.data.get("message") or "").strip().splitlines()
    line = text[0] if text else ev.text.strip()
    return line[:200] or None


def _running_step(f: Facts):
    """The step that follows the last start-up line printed: what was under way when the log ends."""
    if not f.milestones:
        return None
    return P.from_milestones(f.milestones, 10**12, None, bool(f.flag("--speculative-algorithm")), None)[0]


FACT_PATHS: dict[str, tuple[str, object]] = {
    "state": ("what the log shows the server did: empty, nohup_only, failed, serving, ready, startup_incomplete, "
              "not_sglang, no_failure_seen, smi_only", lambda f: f.state),
    "content_lines": ("non-blank lines in the logs", lambda f: f.content_lines),
    "failure.phase": ("the step that failed: " + ", ".join(P.PHASES), lambda f: f.failure_phase.phase if f.failure_phase else None),
    "failure.capturing": ("the failure happened while CUDA (or NPU) graphs were captured (false when another step or none is shown)",
                          lambda f: bool(f.failure_phase and f.failure_phase.phase == "cuda_graph") or _graph_role(f) is not None),
    "failure.graph_role": ("the CUDA graphs being captured when the log shows a capture under way: decode, prefill "
                           "(piecewise, by token count) or draft (the last capture line before the failure)", lambda f: _graph_role(f)),
    "failure.phase_basis": ("what shows the step: frames, message, milestones, numbers, none",
                            lambda f: f.failure_phase.basis if f.failure_phase else None),
    "failure.line": ("the line of the first failure", lambda f: f.failure_line),
    "failure.event": ("the first failure (its line is quoted)", lambda f: f.failure_event),
    "failure.text": ("the first failure's message (its line without the log prefix), at most 200 characters; "
                     "none for a traceback cut before its exception line", lambda f: _failure_text(f)),
    "messages": ("the catalog names (or families) of the messages in the log, in order, each once",
                 lambda f: list(dict.fromkeys(n for e in f.events if (m := getattr(e, "msg", None)) is not None
                                              for n in (m.name or m.family,) if n))),
    "disk_full.path": ("the path a 'No space left on device' (ENOSPC) names ('' when it names none; absent without one)",
                       lambda f: _enospc_path(f)),
    "failure.in_auto_config": ("the failure was raised in transformers' AutoConfig (models/auto/configuration_auto.py)",
                               lambda f: any((getattr(fr, "file", "") or "").replace("\\", "/").endswith("models/auto/configuration_auto.py")
                                             for fr in (f.failure_event.data.get("frames") or [] if f.failure_event else []))),
    "failure.tp_divisibility": ("the failure is a check that the tensor-parallel size divides something "
                                "(an assertion 'x % tp_size == 0', 'not divisible by' the TP size)", lambda f: _tp_divisibility(f)),
    "model.tp_dividing_heads": ("the largest TP size up to the one in use that divides the model's attention and KV heads",
                                lambda f: _tp_dividing_heads(f)),
    "failure.exception": ("the type of the first exception", lambda f: f.failure_event.data.get("type") if f.failure_event else None),
    "failure.subsystem": ("the part of SGLang the innermost SGLang frame is in (memory pool, CUDA graph runner, "
                          "speculative worker, Mamba state cache, attention backend, model loader, server-args validation, ...)",
                          lambda f: f.failure_where.subsystem),
    "failure.module": ("the module of the innermost SGLang frame", lambda f: f.failure_where.module),
    "failure.function": ("the function of the innermost SGLang frame", lambda f: f.failure_where.function),
    "failure.library": ("the library of the first frame below SGLang's (torch, triton, flashinfer, ...)",
                        lambda f: f.failure_where.library),
    "failure.message": ("the catalog name or family of the first failure's message",
                        lambda f: _msg_attr(f.failure_event, "name") or _msg_attr(f.failure_event, "family")),
    "failure.message_category": ("the category the catalog gives the first failure's message",
                                 lambda f: _msg_attr(f.failure_event, "category")),
    "failure.message_component": ("who prints that message (sglang, torch, nccl, ...)",
                                  lambda f: _msg_attr(f.failure_event, "component")),
    "failure.backend_choices": ("the attention backends the failure's own check names as allowed (the one in use left out), "
                                "SGLang's preference first", lambda f: _backend_gate(f)),
    "failure.backend_pick": ("the first of them", lambda f: (_backend_gate(f) or [None])[0]),
    "failure.backend_others": ("the others, after the first", lambda f: (_backend_gate(f) or [])[1:] or None),
    "failure.meaning": ("what the catalog says that message means (hand lists and reviews only)",
                        lambda f: _msg_entry_text(f.failure_event, "meaning")),
    "failure.action": ("what the catalog says to do about it (hand lists and reviews only)",
                       lambda f: _msg_entry_text(f.failure_event, "action")),
    "advice.flags": ("flags the log's own text tells the user to add (SGLang's workaround hints): switches, and "
                     "flags with a value they take; a list of {flag, line, switch, value}, at most 3", lambda f: _advised(f) or None),
    "server_kwarg.name": ("a ServerArgs keyword the installed SGLang does not know (a caller passed it)",
                          lambda f: (_server_kwarg(f) or {}).get("name")),
    "server_kwarg.event": ("the line that refuses it", lambda f: (_server_kwarg(f) or {}).get("event")),
    "server_kwarg.flag": ("the flag that field belongs to in the releases that have it", lambda f: (_server_kwarg(f) or {}).get("flag")),
    "server_kwarg.releases": ("those releases: first–last", lambda f: (lambda k: f"{k['first']}–{k['last']}" if k and k.get("flag") else None)(_server_kwarg(f))),
    "server_kwarg.replaced_by": ("its documented replacement, when the newest release that has it deprecates it",
                                 lambda f: (_server_kwarg(f) or {}).get("replaced_by")),
    "advice.first": ("the first of them", lambda f: (_advised(f) or [{}])[0].get("flag")),
    "advice.line": ("the line that names it", lambda f: (_advised(f) or [{}])[0].get("line")),
    "advice.event": ("that line (quoted)", lambda f: _advice_event(f)),
    "guess.category": ("when no reviewed message is found: the category SGLang's catalog build gave the first SGLang "
                       "failure message (by its module and words, unreviewed)", lambda f: f.guess.category if f.guess else None),
    "guess.event": ("that failure (its line is quoted)", lambda f: f.guess.event if f.guess else None),
    "guess.message": ("its catalog family", lambda f: f.guess.name if f.guess else None),
    "guess.where": ("where SGLang raises it (module:function)", lambda f: _guess_where(f)),
    "guess.text": ("its text (at most 200 characters)", lambda f: _guess_text(f)),
    "known.category": ("the category the catalog's review gives the first failure it knows (see KnownFailure)",
                       lambda f: f.known.category if f.known else None),
    "known.event": ("that failure (its line is quoted)", lambda f: f.known.event if f.known else None),
    "known.component": ("who prints it (sglang, torch, nccl, cuda, ...)", lambda f: f.known.component if f.known else None),
    "known.message": ("its catalog name", lambda f: f.known.name if f.known else None),
    "known.meaning": ("what the review says it means", lambda f: f.known.meaning if f.known else None),
    "known.action": ("what the review says to do", lambda f: f.known.action if f.known else None),
    "oom.phase": ("the step of the first device OOM", lambda f: _oom0(f).phase if _oom0(f) else None),
    "oom.basis": ("what shows that step", lambda f: _oom0(f).basis if _oom0(f) else None),
    "oom.event": ("the first device OOM (its line is quoted)", lambda f: _oom0(f).event if _oom0(f) else None),
    "oom.gpu": ("the GPU index the OOM names", _oom_field("gpu")),
    "oom.tried_gib": ("the allocation that failed, GiB", _oom_field("tried_gib")),
    "oom.free_gib": ("free memory on the GPU at the OOM, GiB", _oom_field("free_gib")),
    "oom.total_gib": ("the GPU's capacity the OOM reports, GiB", _oom_field("total_gib")),
    "oom.held_gib": ("memory this process held at the OOM, GiB", _held),
    "oom.other_gib": ("memory other processes held on that GPU, GiB", lambda f: max((o.other_gib for o in f.ooms), default=0.0)),
    "oom.other_share": ("other processes' memory as a share of the GPU", _other_share),
    "oom.self_share": ("this process's memory at the OOM as a share of the GPU (PyTorch's 'this process has')", _self_share),
    "oom.larger_than_gpu": ("the failed allocation alone is larger than the GPU", _oom_field("larger_than_gpu")),
    "oom.outside_gib": ("memory neither free nor held by this process (total - free - this process), GiB", _oom_field("outside_gib")),
    "oom.other_pids": ("the other processes: [{pid, used_gib}]", lambda f: _oom0(f).other_pids if _oom0(f) else None),
    "oom.other_pid_numbers": ("the PIDs of the other processes", lambda f: [p["pid"] for p in _oom0(f).other_pids] if _oom0(f) else None),
    "spec.enabled": ("a speculative algorithm is set", lambda f: bool(f.flag("--speculative-algorithm"))),
    "spec.topk": ("--speculative-eagle-topk", lambda f: f.values.get("spec.topk")),
    "spec.topk_error": ("an error says the backend supports only topk 1", lambda f: f.values.get("spec.topk_error")),
    "nccl_in_crash": ("NCCL is named near the failure", lambda f: f.values.get("nccl_in_crash")),
    "cut_forward": ("a traceback cut inside a forward pass: prefill or decode", lambda f: f.values.get("cut_forward")),
    "end.batch": ("the log ends on a batch line: prefill or decode", lambda f: f.values.get("end.batch")),
    "end.cut": ("that batch line is cut mid-line", lambda f: f.values.get("end.cut")),
    "end.new_tokens": ("#new-token of that batch line", lambda f: f.values.get("end.new_tokens")),
    "end.line": ("the line of that batch", lambda f: f.values.get("end.line")),
    "smi.faults": ("GPUs in an error state per nvidia-smi", lambda f: f.values.get("smi.faults")),
    "smi.error": ("nvidia-smi's own error (driver unreachable)", lambda f: f.values.get("smi.error")),
    "smi.other": ("processes besides the server on a GPU", lambda f: f.values.get("smi.other")),
    "smi.other_mib": ("their memory, MiB", lambda f: f.values.get("smi.other_mib")),
    "smi.held_share": ("the largest used/total share of a GPU", lambda f: f.values.get("smi.held_share")),
    "smi.given": ("an nvidia-smi snapshot was given", lambda f: bool(f.smi)),
    "launch.unknown": ("flags of the launch command this version lacks", lambda f: f.values.get("launch.unknown")),
    "launch.conflicts": ("flag combinations this version refuses", lambda f: f.values.get("launch.conflicts")),
    "launch.known": ("the launch command is known", lambda f: f.launch is not None),
    "version.known": ("the SGLang version is known (exactly or as a range)", lambda f: f.version.describe() != "unknown"),
    "version.label": ("the SGLang version as shown", lambda f: f.version.describe()),
    "version.catalog": ("the flag catalog the fixes are checked against", lambda f: f.catalog.label if f.catalog else None),
    "model.path": ("--model-path", lambda f: f.model_path),
    "model.architecture": ("the model class", lambda f: f.architecture),
    "model.known": ("the model's architecture is in the catalog", lambda f: f.model is not None),
    "model.quantized": ("the checkpoint's weights are quantized (fp8, awq, ...)",
                        lambda f: (f.model.weight_quant is not None) if f.model is not None else
                        (True if f.flag("--quantization") else None)),
    "transfer.error": ("the first error record of a KV-transfer engine's transport (Mooncake's, NIXL's glog lines)",
                       lambda f: _transfer_error(f)),
    "transfer.message": ("its message (after the glog prefix), at most 160 characters",
                         lambda f: _transfer_field(f, "message", "")[:160] or None),
    "transfer.file": ("the transport source file that reported it (the transport the message names when the glog prefix "
                      "is not in the paste)", lambda f: _transfer_field(f, "file") or _transfer_named(f)),
    "transfer.other_backend": ("the other KV-transfer engine to try: nixl where Mooncake's transport failed (the default "
                               "backend), mooncake where NIXL's did", lambda f: _other_transfer_backend(f)),
    "transfer.efault": ("its error is EFAULT ('Bad address'): a device pointer handed to a host-memory transport",
                        lambda f: bool(_transfer_field(f, "efault", False))),
    "capture.empty_buffers_ranks": ("how many ranks' custom all-reduce registered 0 graph buffers leaving a capture that never "
                                    "ended (the capture stopped at its first batch)", lambda f: _empty_graph_buffers(f)),
    "frames.trainer": ("the training framework (verl, OpenRLHF, slime, AReaL, TRL, …) whose code the log's tracebacks "
                       "run through, when none passes through SGLang's code", lambda f: _frames_trainer(f)),
    "frames.speculative": ("a traceback of the log passes through speculative decoding (a draft worker, EAGLE, MTP)",
                           lambda f: _frames_speculative(f)),
    "model.name_params_b": ("billions of parameters the model's name states ('…-70B'), for a model the catalog lacks",
                            lambda f: _names().params_b(f.model_path) if f.model is None else None),
    "model.name_weights_gib": ("the weights per GPU the name implies (parameters × bytes by the name's format / TP × PP)",
                               lambda f: _names().weights_gib(f.model_path, _tp(f), _pp(f)) if f.model is None else None),
    "model.name_tp": ("the smallest TP at which those weights leave room on this GPU (80 GiB when the GPU is unknown)",
                      lambda f: _names().tp_to_fit(f.model_path, f.gpu_total_gib or 80.0, _tp(f)) if f.model is None else None),
    "model.tp": ("the tensor-parallel size the server was started with (1 when not given; the one a failed "
                 "divisibility check names when the command is not in the input)", lambda f: _tp_checked(f)),
    "gpu.name": ("the GPU model", lambda f: getattr(f.gpu, "name", None)),
    "gpu.total_gib": ("the GPU's capacity, GiB", lambda f: f.gpu_total_gib),
    "gpu.compute_capability": ("the GPU's compute capability (sglang.check_env's line, else the GPU catalog's arch)",
                               lambda f: _compute_capability(f)),
    "http.count": ("HTTP access lines", lambda f: f.http.get("count")),
    "http.errors": ("HTTP lines with an error status", lambda f: f.http.get("errors")),
    "fragment": ("why the input looks like a piece of a longer log", lambda f: f.fragment),
    # -- config facts (rules/config) --
    "check.event": ("the start-up or configuration check that failed (quoted)", lambda f: _chk(f, "event")),
    "check.message": ("its catalog name (review name, else family id)", lambda f: _chk(f, "message")),
    "check.module": ("where it fired: the module (sglang.srt.server_args ...)", lambda f: _chk(f, "module")),
    "check.function": ("where it fired: the function", lambda f: _chk(f, "function")),
    "check.kind": ("raise or assert", lambda f: _chk(f, "kind")),
    "check.names": ("what it tests: the names its check reads (page_size, mamba_track_interval, ...)", lambda f: _chk(f, "names")),
    "check.flags": ("the flags of those names in this version", lambda f: _chk(f, "flags")),
    "check.choice_flag": ("a check of one flag that names the values it accepts: that flag",
                          lambda f: (_check_choice(f) or (None, None))[0]),
    "check.choice_pick": ("the first value it names that is not the one in use", lambda f: (_check_choice(f) or (None, None))[1]),
    "check.pair": ("the two flags its message names, when it names two", lambda f: _chk(f, "pair") or None),
    "check.bare": ("a bare AssertionError (no message)", lambda f: _chk(f, "bare")),
    "check.config": ("it fired in argument validation (server_args, arg_groups, configs) or a constructor",
                     lambda f: _chk(f, "config")),
    "crash.event": ("the first exception with a traceback (quoted)", lambda f: _crash(f, "event")),
    "crash.type": ("its exception type", lambda f: _crash(f, "type")),
    "crash.module": ("the module of its innermost frame", lambda f: _crash(f, "module")),
    "crash.function": ("the function of its innermost frame", lambda f: _crash(f, "function")),
    "crash.sglang_top_level": ("the innermost SGLang frame is a module's top level (a class or decorator there, library code "
                               "below it): it failed while that module was imported", lambda f: _crash(f, "sglang_top_level")),
    "crash.in_config": ("its innermost frame is in argument validation (server_args, arg_groups, configs)",
                        lambda f: _crash(f, "config")),
    "crash.names": ("the functions it ran through and the names their quoted lines read", lambda f: _crash(f, "names")),
    "crash.at_import": ("every frame outside the innermost runs a module's top level (SGLang's own among them): it failed "
                        "while SGLang was being imported", lambda f: _crash(f, "at_import")),
    "launch.event": ("the launch command's line in the log (quoted)", lambda f: f.launch_event),
    "launch.page_size": ("--page-size as a number", lambda f: _int_flag(f, "--page-size")),
    "spec.steps": ("--speculative-num-steps as a number", lambda f: _int_flag(f, "--speculative-num-steps")),
    "spec.draft_tokens": ("--speculative-num-draft-tokens as a number", lambda f: _int_flag(f, "--speculative-num-draft-tokens")),
    # -- env facts (rules/env) --
    "startup.last": ("the last start-up line SGLang printed (quoted)", lambda f: f.milestones[-1] if f.milestones else None),
    "startup.last_step": ("that line's step: dist_begin, load_begin, load_progress, load_end, kv_alloc, pool_end, "
                          "graph_begin, graph_end, http_up, ready ...",
                          lambda f: f.milestones[-1].data.get("phase") if f.milestones else None),
    "startup.last_line": ("the line of the last start-up line", lambda f: f.milestones[-1].line if f.milestones else None),
    "startup.running": ("the step under way after the last start-up line (" + ", ".join(P.PHASES) + ")", _running_step),
    # -- runtime facts (rules/runtime, rules/oom message rules) --
}
FACT_PREFIXES: dict[str, str] = {
    "events.": "the events of a kind (events.nohup), to quote as evidence",
    "readings.": "a memory figure the log printed (pre_load_free_gib, weights_gib, kv_tokens, ...)",
    "flag.": "a launch flag's value, by its name in the newest catalog (flag.--tp-size)",
    "env.": "an environment variable the launch command or the log shows",
}


def known_path(path: str) -> bool:
    return path in FACT_PATHS or any(path.startswith(p) and len(path) > len(p) for p in FACT_PREFIXES)


def lookup(f: Facts, path: str):
    """The value of a fact path (None when not known)."""
    entry = FACT_PATHS.get(path)
    if entry is not None:
        return entry[1](f)
    if path.startswith("readings."):
        return f.readings.get(path[len("readings."):])
    if path.startswith("flag."):
        return f.flag(path[len("flag."):])
    if path.startswith("env."):
        return f.env.get(path[len("env."):])
    if path.startswith("events."):
        return [e for e in f.events if e.kind == path[len("events."):]] or None
    raise KeyError(path)
