"""Configuration checks and crash sites, from event fields: where a failure fired and what it tested.

The failing check of a log is the first SGLang raise/assert the catalog recognised (by its
wording, or for a bare AssertionError by its place and the names its source line reads, see
diag/messages/sites.py). What it tests is the names that check reads: for a catalog message the
names its `if`/`assert` test reads in every release, for a bare assertion the names of the quoted
source line. A crash site is the traceback of the first exception: the functions it ran through
and the names their quoted source lines read. Values only; rules/config read them as facts.
"""
from __future__ import annotations

from dataclasses import dataclass, field

FAIL_EVENTS = {"refusal", "argparse", "error", "cuda_error", "arch_error", "import_error", "model_load_error", "device_oom",
               "host_oom", "nccl_error", "comm_error", "build_error", "driver_error", "port_error"}
CONFIG_MODULES = ("sglang.srt.server_args", "sglang.srt.arg_groups", "sglang.srt.configs", "sglang.srt.entrypoints.engine",
                  "sglang.cli", "sglang.srt.utils.common", "sglang.multimodal_gen.runtime.server_args")
CONSTRUCTORS = ("__init__", "__post_init__")


@dataclass
class Check:
    event: object
    message: str | None           # the catalog name (review name, else family id) of the check
    module: str | None
    function: str | None
    kind: str | None              # raise | assert
    names: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)     # the command-line flags of those names
    pair: list[str] = field(default_factory=list)      # two flags the message itself names
    bare: bool = False
    config: bool = False          # fired in argument validation or a constructor


@dataclass
class CrashSite:
    event: object
    type: str | None
    module: str | None
    function: str | None
    names: list[str] = field(default_factory=list)     # functions run through and names their lines read
    config: bool = False          # the innermost frame is in argument validation
    at_import: bool = False       # every outer frame runs a module's top level: it failed while being imported
    sglang_top_level: bool = False  # the innermost SGLang frame is a module's top level (not an entry script's)


def _last(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _catalog():
    try:
        from .messages import Catalog
        return Catalog.open()
    except Exception:           # no catalog: no checks by site
        return None


def _in_config(module: str | None, function: str | None) -> bool:
    if module and module.startswith(CONFIG_MODULES):
        return True
    return bool(function) and _last(function) in CONSTRUCTORS


def failed_check(facts) -> Check | None:
    """The first configuration or start-up check that stopped the server, or None."""
    from .messages.sites import NOISE, module_of, source_names, template_flags
    cat = None
    for e in facts.events:
        m = getattr(e, "msg", None)
        frames = e.data.get("frames") or [] if e.kind == "exception" else []
        bare = e.kind == "exception" and not (e.data.get("message") or "").strip() and \
            str(e.data.get("type") or "").endswith("AssertionError")
        if m is not None and m.component == "sglang" and m.kind in ("raise", "assert") and m.event in FAIL_EVENTS:
            pass
        elif bare and frames:
            m = m if m is not None and m.component == "sglang" else None
        else:
            continue
        cat = cat or _catalog()
        names: list[str] = []
        module = function = None
        if frames:
            module, function = module_of(frames[-1].file), frames[-1].func
            if bare:
                names += source_names(frames[-1].code)
        if m is not None:
            module, function = module or m.module, function or m.function
            entry = cat.get(m.id) if cat is not None else None
            if entry is not None:
                for loc in cat.locations(entry):
                    names += [_last(n) for n in loc["names"]]
        names = [n for n in dict.fromkeys(names) if n and n not in NOISE and not n.endswith("()")]
        flags = []
        if facts.catalog is not None:
            for n in names:
                flag = facts.catalog.flag_for_dest(n)
                if flag and flag not in flags:
                    flags.append(flag)
        pair = template_flags(m.template or "")[:2] if m is not None else []
        return Check(event=e, message=(m.name or m.family) if m is not None else None, module=module,
                     function=function, kind=m.kind if m is not None else "assert", names=names, flags=flags,
                     pair=pair if len(pair) == 2 else [], bare=bare, config=_in_config(module, function))
    return None


# SGLang's modules that run as the program (python -m): their top level is the program, not an import
ENTRY_SCRIPTS = ("sglang.launch_server", "sglang.bench_", "sglang.check_env", "sglang.cli", "sglang.eval", "sglang.test")

RUNPY = ("_run_module_as_main", "_run_code", "_get_module_details", "<frozen runpy>")     # python -m's own frames


def crash_site(facts) -> CrashSite | None:
    """The traceback of the first exception that has one."""
    from .messages.sites import module_of, source_names
    for e in facts.events:
        if e.kind == "exception" and not e.data.get("frames") and e.data.get("code") and e.data.get("type"):
            # no frames, only the source line pasted above the exception: the names it reads
            return CrashSite(event=e, type=e.data.get("type"), module=None, function=None,
                             names=[n for n in dict.fromkeys(source_names(e.data["code"])) if n])
        if e.kind != "exception" or not e.data.get("frames"):
            continue
        frames = e.data["frames"]
        names: list[str] = []
        for fr in frames:
            names.append(_last(fr.func or ""))
            names += source_names(fr.code or "")
        module = module_of(frames[-1].file)
        outer = [fr for fr in frames[:-1] if (fr.func or "") not in RUNPY and (fr.file or "") not in RUNPY]
        # the script Python runs is not imported: the first frame, unless runpy is still importing the
        # package of a `python -m pkg.mod` (its _get_module_details, no _run_code yet: pkg/__init__ failed)
        importing_pkg = any(fr.func == "_get_module_details" for fr in frames) and \
            not any(fr.func == "_run_code" for fr in frames)
        imports = outer if importing_pkg else outer[1:]
        ours = sum(1 for fr in outer if (module_of(fr.file) or "").startswith("sglang"))
        at_import = bool(imports) and all(fr.func == "<module>" for fr in outer) and \
            any((module_of(fr.file) or "").startswith("sglang") for fr in imports) and (ours >= 2 or importing_pkg)
        # the library code below it (a dataclass decorator, a base class's __init_subclass__) ran because
        # SGLang's module defined a class or called it at its top level: an import, not a request
        inner_ours = next((fr for fr in reversed(frames) if (module_of(fr.file) or "").startswith("sglang.")), None)
        top_level = inner_ours is not None and inner_ours.func == "<module>" and \
            not (module_of(inner_ours.file) or "").startswith(ENTRY_SCRIPTS)
        return CrashSite(event=e, type=e.data.get("type"), module=module, function=frames[-1].func,
                         names=[n for n in dict.fromkeys(names) if n],
                         config=bool(module and module.startswith(CONFIG_MODULES)), at_import=at_import,
                         sglang_top_level=top_level)
    return None


def cached(facts, key: str, fn):
    """A value computed once per Facts (kept in facts.values under a private key)."""
    slot = f"_{key}"
    if slot not in facts.values:
        facts.values[slot] = fn(facts)
    return facts.values[slot]
