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
# A record prefix in the middle of a line: the paste lost its newlines (chat clients, flattened JSON)
EMBEDDED_RAY = re.compile(r" \((?:[A-Za-z_][\w.]*\s+)?pid=\d+(?:,\s*ip=[0-9A-Fa-f.:]+)?\)\s?")
EMBEDDED_SGLANG = re.compile(r" (?=\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?: [A-Z_]+\d+)*\] )")
SGLANG_START = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
COMPOSE = re.compile(r"^([A-Za-z0-9][\w.-]*?)(?:[-_]\d+)?\s+\|\s?")
# Where a new log record starts (a wrapped continuation never starts like this).
RECORD_START = re.compile(
    r"^(?:\[\d{4}-\d\d-\d\d|\[(?:gpu|gpu_id|rank|TP|DP)\S*\]|Traceback |\s+File \"|During handling|The above exception"
    r"|(?:[A-Za-z_][\w.]*)?(?:Error|Exception|Exit|Interrupt)\b|INFO|WARNING|ERROR|DEBUG|CRITICAL|\d{4}-\d\d-\d\d|[|+<])")


@dataclass
class Cleaning:
    """What the cleaner decided, for the report's input notes."""
    removed: list[str] = field(default_factory=list)
    joined: int = 0
    split: int = 0
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


def _mid_token(prev: str, nxt: str) -> bool:
    """The break falls inside a word, a flag or a number, or right at a space — as a hard wrap does
    (and not between a record's last value and an unrelated line such as 'Killed')."""
    a, b = prev[-1:], nxt[:1]
    if not a or not b:
        return False
    if b == " ":
        return (a.isalnum() or a in ",;:") and nxt[1:2].isalnum()
    if a == " ":
        return b.isalnum() or b in "-_/"
    if a.isalpha():
        return b.islower() or b.isdigit() or b in "-_/=.:"
    if a.isdigit():
        return b.isdigit() or b in "._-:/"
    return a in "-_/=" and (b.isalnum() or b in "-_")


def _wrap_width(lines: list[str], starts_record) -> int | None:
    """The width a paster hard-wrapped at: lines of exactly the maximum length that are followed
    by the rest of themselves (a line that does not start a record, often cut mid-word)."""
    lengths = [len(l) for l in lines]
    if len(lengths) < 2:
        return None
    top = max(lengths)
    if top < 60:
        return None
    full = [i for i, n in enumerate(lengths) if n >= top - 1 and i + 1 < len(lines)]
    if not full:
        return None
    follows = [i for i in full if lines[i + 1] and not starts_record(lines[i + 1])]
    mid_word = [i for i in follows if _mid_token(lines[i], lines[i + 1])]
    if len(full) >= 3 and len(follows) >= 0.6 * len(full):
        return top
    return top if mid_word and len(mid_word) == len(full) else None


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
        """(original line number, cleaned text) for every content line.

        Wrapped pastes are joined on the raw lines (the paster's terminal wrapped the text
        with its prefixes), then the joined line is cleaned.
        """
        it = iter(lines)
        sample: list[str] = []
        for raw in it:
            sample.append(_strip_ansi(raw))
            if len(sample) >= SAMPLE:
                break
        content = [l for l in sample if not FENCE.match(l)]
        self._learn(content)
        width = None if self.light else _wrap_width(content, self._starts_record)
        self.info.wrap_width = width

        def raw_lines() -> Iterator[tuple[int, str]]:
            yield from enumerate(sample, 1)
            n = len(sample)
            for raw in it:
                n += 1
                yield n, _strip_ansi(raw)

        pending: tuple[int, str] | None = None
        last_len = 0  # length of the last physical line inside `pending`
        for lineno, raw in raw_lines():
            if pending is not None:
                if width and last_len >= width - 1 and raw and not self._starts_record(raw) \
                        and not pending[1].rstrip().endswith(("|", "+", ">")):
                    pending = (pending[0], pending[1] + raw)
                    last_len = len(raw)
                    self.info.joined += 1
                    continue
                yield from self._emit(pending)
            pending, last_len = (lineno, raw), len(raw)
        if pending is not None:
            yield from self._emit(pending)

    def _starts_record(self, raw: str) -> bool:
        """A line that begins a new log record: it carries a learned prefix or a record start."""
        cleaned = self.clean_line(raw)
        return cleaned is None or cleaned != raw or bool(RECORD_START.match(raw))

    def _emit(self, item: tuple[int, str]) -> Iterator[tuple[int, str]]:
        raw = item[1]
        parts = EMBEDDED_RAY.split(raw) if EMBEDDED_RAY.search(raw) else [raw]
        out = []
        for part in parts:
            text = self.clean_line(part)
            if text is None:
                self.info.dropped += 1
                continue
            if SGLANG_START.match(text) and EMBEDDED_SGLANG.search(text):
                out.extend(EMBEDDED_SGLANG.split(text))
            else:
                out.append(text)
        self.info.split += max(0, len(out) - 1)
        for text in out:
            yield item[0], text
