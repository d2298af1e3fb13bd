"""Chat-paste and log-collector clean-up, line by line, keeping the original line numbers.

What is removed: ANSI colour codes, code fences, `> ` quote markers, prefixes added by
docker compose, docker/kubectl --timestamps, kubectl --prefix, journald, srun --label,
Ray (`(SchedulerActor pid=…) `) and any literal prefix shared by most lines (a log
shipper's tag); lines a paster hard-wrapped at a fixed width are joined again.
Which prefixes apply is decided from the first lines (`SAMPLE`), then streamed.
"""
from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Iterator

SAMPLE = 400
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
FENCE = re.compile(r"^\s*(?:```|~~~)[\w+-]*\s*$")
QUOTE = re.compile(r"^\s{0,3}(?:>\s?)+")

# Prefixes that cannot be mistaken for log content: removed wherever they appear.
ALWAYS = [
    ("ray", re.compile(r"^\((?:[A-Za-z_][\w.]*\s+)?pid=\d+(?:,\s*ip=[0-9A-Fa-f.:]+)?\)\s?")),
    ("kubectl-prefix", re.compile(r"^\[pod/[^\]\s]+\]\s")),
]
# Prefixes removed only when most sampled lines carry them.
MAJORITY = [
    ("quote", QUOTE),
    ("timestamp", re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s+(?:(?:stdout|stderr)\s+[FP]\s+)?")),
    ("journald", re.compile(r"^[A-Z][a-z]{2}\s+\d{1,2}\s\d\d:\d\d:\d\d\s\S+\s[^\s:\[]+(?:\[\d+\])?:\s")),
    ("srun-label", re.compile(r"^\s{0,3}\d{1,4}:\s")),
]
COMPOSE = re.compile(r"^([A-Za-z0-9][\w.-]*?)(?:[-_]\d+)?\s+\|\s?")
# Where a new log record starts (a wrapped continuation never starts like this).
RECORD_START = re.compile(
    r"^(?:\[\d{4}-\d\d-\d\d|\[(?:gpu|gpu_id|rank|TP|DP)\S*\]|Traceback |\s+File \"|During handling|The above exception"
    r"|[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b|INFO|WARNING|ERROR|DEBUG|CRITICAL|\d{4}-\d\d-\d\d|[|+<])")


@dataclass
class Cleaning:
    """What the cleaner decided, for the report's input notes."""
    removed: list[str] = field(default_factory=list)
    joined: int = 0
    wrap_width: int | None = None
    dropped: int = 0


def _strip_ansi(line: str) -> str:
    if "\x1b" in line:
        line = ANSI.sub("", line)
    return line.rstrip("\r")


def _majority(pattern: re.Pattern, lines: list[str]) -> bool:
    nonblank = [l for l in lines if l.strip()]
    hits = sum(1 for l in nonblank if pattern.match(l))
    return hits >= max(1 if len(nonblank) <= 2 else 2, 0.4 * len(nonblank))


def _common_literal_prefix(lines: list[str]) -> str | None:
    """A literal tag shared by most lines, ending in ']', '|' or ':' (e.g. 'app[3d8d] ord [info]')."""
    nonblank = [l for l in lines if l.strip()]
    if len(nonblank) < 3:
        return None
    first, n = Counter(l.split(None, 1)[0] for l in nonblank).most_common(1)[0]
    if n < 0.6 * len(nonblank):
        return None
    group = [l for l in nonblank if l.split(None, 1)[0] == first]
    common = os.path.commonprefix(group)[:120]
    cut = max(common.rfind("]"), common.rfind("|"), common.rfind(":"))
    if cut < 2:
        return None
    prefix = common[: cut + 1]
    if not re.search(r"[\[|]", prefix) or re.match(r"^\[\d{4}-|^(?:INFO|WARNING|ERROR|DEBUG)\b|^\s|^\[(?:gpu|TP|DP)", prefix):
        return None  # SGLang's own record prefix, a log level or indentation, not a tag
    return prefix


def _wrap_width(lines: list[str]) -> int | None:
    """The width a paster hard-wrapped at: many lines of exactly the maximum length."""
    lengths = [len(l) for l in lines if l]
    if len(lengths) < 4:
        return None
    top = max(lengths)
    if top < 60 or lengths.count(top) < 3:
        return None
    return top if lengths.count(top) >= 0.2 * len(lengths) else None


class Cleaner:
    def __init__(self, light: bool = False) -> None:
        self.light = light  # only ANSI codes, fences and quote markers (for nvidia-smi outputs)
        self.info = Cleaning()
        self._strippers: list[tuple[str, re.Pattern]] = list(ALWAYS)
        self._literal: str | None = None
        self._compose: str | None = None

    def _learn(self, sample: list[str]) -> None:
        work = sample
        if self.light:
            if _majority(QUOTE, work):
                self._strippers.append(("quote", QUOTE))
                self.info.removed.append("quote")
            return
        for name, pattern in MAJORITY:
            if _majority(pattern, work):
                self._strippers.append((name, pattern))
                self.info.removed.append(name)
                work = [pattern.sub("", l, count=1) for l in work]
        names = Counter(m.group(1) for l in work if (m := COMPOSE.match(l)))
        if names:
            svc, n = names.most_common(1)[0]
            if n >= max(2, 0.4 * sum(1 for l in work if l.strip())):
                self._compose = svc
                self.info.removed.append(f"docker compose prefix ('{svc} |')")
                work = [self._strip_compose(l) for l in work]
        literal = _common_literal_prefix(work)
        if literal:
            self._literal = literal
            self.info.removed.append(f"line prefix '{literal.strip()}'")

    def _strip_compose(self, line: str) -> str:
        m = COMPOSE.match(line)
        if m and m.group(1) == self._compose:
            return line[m.end():]
        return line

    def clean_line(self, line: str) -> str | None:
        """The line with prefixes removed, or None for a line that carries no content (a fence)."""
        line = _strip_ansi(line)
        for _ in range(3):  # prefixes stack (timestamp + compose + ray)
            before = line
            for _, pattern in self._strippers:
                line = pattern.sub("", line, count=1)
            if self._compose:
                line = self._strip_compose(line)
            if self._literal and line.startswith(self._literal):
                line = line[len(self._literal):]
            if line == before:
                break
        if FENCE.match(line):
            return None
        return line

    def run(self, lines: Iterable[str]) -> Iterator[tuple[int, str]]:
        """(original line number, cleaned text) for every content line."""
        it = iter(lines)
        sample: list[str] = []
        for raw in it:
            sample.append(_strip_ansi(raw))
            if len(sample) >= SAMPLE:
                break
        self._learn([l for l in sample if not FENCE.match(l)])
        cleaned_sample = [self.clean_line(l) for l in sample]
        width = None if self.light else _wrap_width([c for c in cleaned_sample if c is not None])
        self.info.wrap_width = width

        def numbered() -> Iterator[tuple[int, str | None]]:
            for i, c in enumerate(cleaned_sample, 1):
                yield i, c
            n = len(cleaned_sample)
            for raw in it:
                n += 1
                yield n, self.clean_line(raw)

        pending: tuple[int, str] | None = None
        last_len = 0  # length of the last physical line inside `pending`
        for lineno, text in numbered():
            if text is None:
                self.info.dropped += 1
                continue
            if pending is not None:
                if width and last_len >= width and text and not RECORD_START.match(text) \
                        and not pending[1].endswith(("|", "+", ">")):
                    pending = (pending[0], pending[1] + text)
                    last_len = len(text)
                    self.info.joined += 1
                    continue
                yield pending
            pending, last_len = (lineno, text), len(text)
        if pending is not None:
            yield pending
