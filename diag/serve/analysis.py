"""The service's one adapter to diag's analysis pipeline and renderers.

Nothing else in diag.serve imports the pipeline, the report model or a renderer, so a change
of their API is absorbed here. What crosses this boundary is plain, picklable data (it goes
to a worker process and back):

- `Spool`: a request's bytes in temporary files of the service's own (the pipeline reads
  paths); the folder is removed when the request is answered.
- `Job` -> `run(job)` -> `Result`: analyse, redact, render the formats asked for, the exit
  code with the CLI's meaning, the report contract's four (0 clean, 1 findings at --fail-on,
  2 unreadable input, 3 inconclusive). An internal error is `status` "error" with exit code 3,
  as in the CLI: nothing was concluded (never a fifth code).
- `fingerprint(report)`: all that de-duplication keeps of a failure, a hash of the top
  finding's rule, category and first trigger line with numbers, hex and paths masked.

This module must stay importable without the [serve] extra's packages: workers import it.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field

FORMATS = ("json", "markdown", "slack", "slack-blocks", "html")
FAIL_ON = ("info", "warning", "error", "critical", "never")
NAME_LIMIT = 80
NOTHING_CONCLUDED = 3   # the contract's exit code when no diagnosis was made (an internal error, a timeout, busy)
# the chat reply to an internal error: polite, the contract's meaning, never the input's text
INTERNAL_REPLY = "⚠️ diag failed on this input (an internal error), so nothing was concluded; please report it with the log."


class TooLarge(Exception):
    """The inputs of one request went over the byte limit."""

    def __init__(self, limit: int):
        super().__init__(f"the input is larger than the limit of {human_bytes(limit)}")
        self.limit = limit


@dataclass
class Input:
    path: str                # a temporary file this service wrote; never a path from request data
    name: str                # what reports call it: the upload's base name, or "paste.log"
    kind: str | None = None  # "nvidia-smi" to force that kind; None: detected from the content


@dataclass
class Job:
    inputs: list[Input]
    formats: tuple[str, ...] = ("json",)
    redact: bool = True
    sglang_version: str | None = None
    launch: str | None = None
    fail_on: str = "error"


@dataclass
class Result:
    exit_code: int
    status: str                                      # findings | clean | inconclusive | unreadable | error
    outputs: dict[str, str] = field(default_factory=dict)
    error: str | None = None                         # one line, for the user
    fingerprint: str | None = None
    rule: str | None = None
    category: str | None = None
    title: str = ""
    categories: list[str] = field(default_factory=list)  # of every finding, for metrics


def safe_name(name: str | None, default: str = "paste.log") -> str:
    """A display name from request data: its base name only, printable, bounded."""
    base = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    base = re.sub(r"[\x00-\x1f\x7f]+", "", base).strip().lstrip(".")
    return base[:NAME_LIMIT] or default


def human_bytes(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" or n == int(n) else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} GiB"


class SpoolFile:
    def __init__(self, spool: "Spool", handle):
        self._spool, self._handle = spool, handle

    def write(self, chunk: bytes) -> None:
        self._spool.count(len(chunk))
        self._handle.write(chunk)

    def close(self) -> None:
        self._handle.close()


class Spool:
    """One request's inputs as files in a private temporary folder (mode 0700), at most
    `max_bytes` in all; `close()` (or leaving the `with` block) removes the folder."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.total = 0
        self.inputs: list[Input] = []
        self.dir = tempfile.mkdtemp(prefix="diag-serve-")

    def count(self, n: int) -> None:
        self.total += n
        if self.total > self.max_bytes:
            raise TooLarge(self.max_bytes)

    def new(self, name: str | None, kind: str | None = None) -> SpoolFile:
        path = os.path.join(self.dir, f"input-{len(self.inputs)}")
        self.inputs.append(Input(path=path, name=safe_name(name), kind=kind))
        return SpoolFile(self, open(path, "wb"))

    def add(self, name: str | None, data: bytes, kind: str | None = None) -> None:
        f = self.new(name, kind)
        try:
            f.write(data)
        finally:
            f.close()

    def drop_empty(self) -> None:
        self.inputs = [i for i in self.inputs if os.path.getsize(i.path) > 0]

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Spool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --- inside a worker --------------------------------------------------------------------

def warm_up() -> None:
    """Run one tiny analysis per worker before its first request: imports, rules, renderers."""
    with Spool(1 << 20) as spool:
        spool.add("warm-up.log", b"[2026-01-01 00:00:00] The server is fired up and ready to roll!\n")
        run(Job(inputs=list(spool.inputs), formats=FORMATS))


def ping() -> bool:
    return True


def run(job: Job) -> Result:
    """Analyse the job's inputs and render the formats it asks for (in a worker process)."""
    try:
        return _run(job)
    except Exception as exc:  # a bug in diag on this input: the type only, never the input's text
        return Result(exit_code=NOTHING_CONCLUDED, status="error",
                      error=f"internal error ({type(exc).__name__}) while analysing; nothing concluded")


def _run(job: Job) -> Result:
    from diag.analyze import Options, analyze
    from diag.read import InputError

    logs = [i for i in job.inputs if i.kind != "nvidia-smi"]
    smis = [i for i in job.inputs if i.kind == "nvidia-smi"]
    names = {i.path: i.name for i in job.inputs}
    try:
        report = analyze([i.path for i in logs], [i.path for i in smis],
                         Options(sglang_version=job.sglang_version, launch=job.launch))
    except InputError as exc:
        return Result(exit_code=2, status="unreadable", error=_rename(str(exc), names))
    for info in report.inputs:
        info.path = names.get(info.path, safe_name(info.path))
    code = exit_code(report, job.fail_on)
    shared = redact(report) if job.redact else report
    outputs = {fmt: render(shared, fmt, code) for fmt in job.formats}
    top = report.findings[0] if report.findings else None
    return Result(exit_code=code, status=report.status, outputs=outputs, fingerprint=fingerprint(report),
                  rule=top.rule if top else None, category=top.category if top else None,
                  title=(shared.findings[0].title if top else ""),
                  categories=[f.category for f in report.findings])


def _rename(message: str, names: dict[str, str]) -> str:
    for path, name in names.items():
        message = message.replace(path, name)
    return message


def exit_code(report, fail_on: str) -> int:
    from diag.cli import exit_code as cli_exit_code
    return cli_exit_code(report, fail_on)


def redact(report):
    from diag.redact import redact_report
    return redact_report(report)


def render(report, fmt: str, code: int) -> str:
    if fmt == "json":
        return json.dumps({**report.to_json(), "exit_code": code}, indent=2, ensure_ascii=False)
    from importlib import import_module
    return import_module(f"diag.render.{fmt.replace('-', '_')}").render(report)


# --- what de-duplication keeps ------------------------------------------------------------

MASKS = (
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    (re.compile(r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{6,}\b"), "<hex>"),  # ids, hashes
    (re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.@+~-]+){2,}[\\/]?|~/[\w.@+~/-]+"), "<path>"),
    (re.compile(r"\d+(?:[.,:]\d+)*"), "<n>"),
)


def normalise(line: str) -> str:
    """A log line with what differs between two occurrences of one failure masked."""
    for pattern, mask in MASKS:
        line = pattern.sub(mask, line)
    return re.sub(r"\s+", " ", line).strip()


def fingerprint(report) -> str | None:
    """A hash of the top finding's rule, category and normalised first trigger line; None
    when nothing was found (a clean or inconclusive report is never a duplicate)."""
    if not report.findings:
        return None
    top = report.findings[0]
    trigger = next((e for e in top.evidence if e.role == "trigger"), None)
    key = "\x1f".join((top.rule, top.category, normalise(trigger.text) if trigger else ""))
    return hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()[:32]
