"""The pipeline: inputs -> lines -> events -> facts -> rules -> findings -> Report."""
from __future__ import annotations

import datetime
from dataclasses import dataclass

from . import __version__
from . import facts as facts_mod
from . import report_build
from . import scan
from .clean import Cleaner
from .parse import smi as smi_mod
from .parse.sglang import LogParser
from .read import InputError, Limits, Opened, iter_lines, open_input
from .report import InputInfo, Report

SMI_MARKERS = ("NVIDIA-SMI ", "==NVSMI LOG==", "<nvidia_smi_log", "memory.used", "KMD Version")
SMI_CAPTURE = 400


def _smi_marker(text: str) -> bool:
    """Whether the line may begin an nvidia-smi output (SMI_MARKERS; one test per line of the log)."""
    return ("NVIDIA-SMI " in text or "==NVSMI LOG==" in text or "<nvidia_smi_log" in text or "memory.used" in text
            or "KMD Version" in text)
SMI_CONTEXT_LINES = 5000


@dataclass
class Options:
    sglang_version: str | None = None
    launch: str | None = None       # a launch command given on the command line
    model_config: str | None = None
    strict: bool = False            # a fix the version lacks, or one that points the wrong way, raises (the tests)
    limits: Limits | None = None    # caps on what is read of each input (diag.read)
    fast_min_bytes: int | None = None  # inputs with at least this much text take the fast reader (diag.scan)
    small_reader: bool = True       # smaller ones the small reader (diag.scan); False: line by line


def _kind(opened: Opened, forced: str | None) -> str:
    if forced:
        return forced
    head = opened.head.decode(opened.encoding if opened.encoding.startswith("utf") else "utf-8", errors="replace")
    return "nvidia-smi" if smi_mod.looks_like_smi(head) else "sglang-log"


def _read_smi(index: int, opened: Opened, info: InputInfo) -> list:
    cleaner = Cleaner(light=True)
    numbered = list(cleaner.run(iter_lines(opened)))
    lines = [t for _, t in numbered]
    info.lines = len(lines)
    snap = smi_mod.parse_smi(lines)
    if snap is None:
        info.notes.append("no nvidia-smi output recognised in this input")
        return []
    snap.context = {(index, n): t for n, t in numbered[:SMI_CONTEXT_LINES]}  # lines to quote as evidence
    return [snap]


def _read_log(index: int, opened: Opened, info: InputInfo, explicit: list[tuple[int, str]], smi_found: list,
              fast_min_bytes: int | None = None, small_reader: bool = True) -> LogParser:
    parser = LogParser(index)
    on_line = _LineSink(index, parser, explicit, smi_found)
    reader = scan.FastReader(opened, parser, on_line, scan.Signatures,
                             min_bytes=scan.FAST_MIN_BYTES if fast_min_bytes is None else fast_min_bytes,
                             small=small_reader)
    reader.run()
    on_line.finish()
    parser.finish()
    # the fast reader counts what it decoded; the others the lines fed, and the small one the rest too
    _input_notes(info, reader.cleaner, parser, reader.chars if reader.fast else on_line.chars + reader.chars)
    return parser


class _LineSink:
    """What happens to each line the parser is fed (by either reader): the parser (the SGLang
    versions it finds named are collected per input), then nvidia-smi output embedded in the log.

    `kind` is the kind of the last batch line before this one (the fast reader knows it; None:
    the series' last row); `seen` marks a batch or access line fed because it carries a failure
    signature."""

    def __init__(self, index: int, parser: LogParser, explicit: list, smi_found: list) -> None:
        self.index, self.parser = index, parser
        self.explicit, self.smi_found = explicit, smi_found
        self.capture: list[str] = []
        self.capture_start = 0
        self.chars = 0

    def __call__(self, lineno: int, text: str, kind: int | None = None, seen: bool = False) -> None:
        parser = self.parser
        self.chars += len(text) + 1
        n_events, n_versions = len(parser.events), len(parser.versions)
        cls = parser.feed(lineno, text)
        if len(parser.events) > n_events:
            parser.batches.mark(lineno, kind)
        if len(parser.versions) > n_versions:   # the parser's version events, with the input they came from (diag.fleet)
            self.explicit.extend((e.line, e.data["version"]) for e in parser.versions[n_versions:])
        if cls in ("batch", "http", "blank") and not seen:
            return
        if self.capture:
            self.capture.append(text)
            if len(self.capture) >= SMI_CAPTURE:
                _embedded_smi(self.capture, self.capture_start, self.smi_found)
                self.capture = []
        elif _smi_marker(text):
            self.capture, self.capture_start = [text], lineno

    @property
    def capturing(self) -> bool:
        """Inside an nvidia-smi output: every line is kept (the fast reader's memo stands aside)."""
        return bool(self.capture)

    def finish(self) -> None:
        if self.capture:
            _embedded_smi(self.capture, self.capture_start, self.smi_found)
            self.capture = []


def _input_notes(info: InputInfo, cleaner: Cleaner, parser: LogParser, chars: int) -> None:
    info.lines = cleaner.info.dropped + parser.lines + cleaner.info.joined
    if info.bytes == 0:
        info.bytes = chars
    if cleaner.info.removed:
        info.notes.append("removed: " + ", ".join(cleaner.info.removed))
    if cleaner.info.split:
        info.notes.append(f"split {cleaner.info.split} log record(s) that the paste had run together on one line")
    if cleaner.info.joined:
        info.notes.append(f"joined {cleaner.info.joined} line(s) the paste had wrapped at {cleaner.info.wrap_width} characters")


def _embedded_smi(lines: list[str], start: int, out: list) -> None:
    for a, b in smi_mod.find_smi_blocks(lines):
        snap = smi_mod.parse_smi(lines[a:b], start_line=start + a)
        if snap is not None and (snap.gpus or snap.processes):
            out.append(snap)


def analyze(paths: list[str], smi_paths: list[str] | None = None, options: Options | None = None) -> Report:
    """The report of these inputs. Raise InputError for an input that cannot be read at all."""
    return analyze_with_facts(paths, smi_paths, options)[0]


def analyze_with_facts(paths: list[str], smi_paths: list[str] | None = None,
                       options: Options | None = None) -> tuple[Report, "facts_mod.Facts"]:
    """(the report, the facts it was built from): for tests and tools that look inside."""
    options = options or Options()
    inputs: list[InputInfo] = []
    parsers: list[LogParser] = []
    snapshots: list = []
    explicit: list[tuple[int, str]] = []
    jobs = [(p, None) for p in paths] + [(p, "nvidia-smi") for p in (smi_paths or [])]
    owners: tuple[list, list] = ([], [])   # the input each snapshot / explicit version line came from
    for index, (path, forced) in enumerate(jobs):
        opened = open_input(path, options.limits)
        kind = _kind(opened, forced)
        info = InputInfo(path=opened.name, kind=kind, bytes=opened.size or 0, notes=list(opened.notes))
        inputs.append(info)
        before = len(snapshots), len(explicit)
        if kind == "nvidia-smi":
            snapshots.extend(_read_smi(index, opened, info))
        else:
            parsers.append(_read_log(index, opened, info, explicit, snapshots, options.fast_min_bytes,
                                     options.small_reader))
            if parsers[-1].prefixed_lines == 0 and not parsers[-1].events and parsers[-1].content_lines:
                info.kind = "unknown"
        owners[0].extend([None if kind == "nvidia-smi" else index] * (len(snapshots) - before[0]))
        owners[1].extend([index] * (len(explicit) - before[1]))
        info.notes.extend(n for n in opened.notes if n not in info.notes)
        _close(opened)

    def diagnose(parsers, snapshots, explicit):
        return _conclude(parsers, snapshots, explicit, options, inputs)

    # several servers, or several runs of one (a restart in the same log): each diagnosed alone
    from .fleet import servers as S
    collected = S.Collected(parsers, snapshots, owners[0], explicit, owners[1], {i: n.path for i, n in enumerate(inputs)})
    return S.conclude(S.plan(collected), collected, diagnose)


def _conclude(parsers, snapshots, explicit, options: Options, inputs) -> tuple[Report, "facts_mod.Facts"]:
    f = facts_mod.build(parsers, snapshots, explicit, options.sglang_version, options.launch, options.model_config)
    report = Report(status="clean", inputs=inputs, findings=[], facts=f.to_json(), tool_version=__version__,
                    generated_at=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    from . import findings as FD
    from .rules import engine as E
    from .rules.registry import registry
    FD.finalize(report, E.evaluate(registry(), f), f, strict=options.strict)
    report_build.build(report, f)
    return report, f


def _close(opened: Opened) -> None:
    try:
        if opened.name != "<stdin>":
            opened.stream.close()
    except Exception:  # closing a half-read compressed stream can raise; nothing to do
        pass


__all__ = ["analyze", "analyze_with_facts", "Options", "InputError"]
