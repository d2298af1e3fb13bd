"""Chat-paste and log-collector clean-up, line by line, keeping the original line numbers.

What is removed: ANSI colour codes, code fences, the backticks of a line pasted as inline code, `> ` quote markers, prefixes added by
docker compose, docker/kubectl --timestamps, kubectl --prefix, journald, srun --label,
Ray (`(SchedulerActor pid=…) `) and any literal prefix shared by most lines (a log
shipper's tag); lines a paster hard-wrapped at a fixed width are joined again.
Which prefixes apply is decided from the first lines (`SAMPLE`), then streamed.
"""
from __future__ import annotations

import functools
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from . import rx

SAMPLE = 400
# CSI sequences (colours, cursor moves) and OSC sequences (titles, hyperlinks) ended by BEL or ST
ANSI = rx.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
FENCE = rx.compile(r"^\s*(?:```|~~~)[\w+-]*\s*$")
QUOTE = rx.compile(r"^\s{0,3}(?:>\s?)+")


@dataclass(frozen=True)
class Stripper:
    """A line prefix to remove: its name, its pattern, and a cheap test that the line may carry it."""
    name: str
    pattern: object
    may: Callable[[str], bool]

    def strip(self, line: str) -> str:
        return self.pattern.sub("", line, count=1) if self.may(line) else line


@dataclass(frozen=True)
class RichStripper(Stripper):
    """Python rich's logging handler layout: a time (blank when it repeats), the level padded to a
    column, the message, and the caller's file:line right-aligned at the terminal's edge. Learned
    from the lines that carry the file:line column (`may`); the level column is then removed from
    every line that has it, and the file:line column with its padding where it is there (a line
    cut by the paste has none)."""
    suffix: object = None

    def strip(self, line: str) -> str:
        out = self.pattern.sub("", line, count=1)
        return self.suffix.sub("", out, count=1) if len(out) != len(line) else line


def _may_torch_log(line: str) -> bool:
    """Whether the line may start with PyTorch's glog-form prefix (ALWAYS's 'torch-log')."""
    c = line[:1]
    if c == "[":
        if not line.startswith("[rank"):
            return False
        cut = line.find("]:", 5, 12)
        c = line[cut + 2: cut + 3] if cut > 0 else ""
    return c in ("I", "W", "E", "F") and ".py:" in line[:300]


def _lead(line: str) -> str:
    return line.lstrip()[:1]


# Prefixes that cannot be mistaken for log content: removed wherever they appear.
ALWAYS = [
    # '(SchedulerActor pid=123)', '(EngineCore pid=7, ip=10.0.0.2)', a framework's '(head, rank=0, pid=8292)'
    Stripper("ray", rx.compile(r"^\((?:[A-Za-z_][\w.]*(?:=\w+)?,?\s+){0,4}pid=\d+(?:,\s*ip=[0-9A-Fa-f.:]+)?\)\s?"),
             lambda l: l.startswith("(") and "pid=" in l),
    Stripper("kubectl-prefix", rx.compile(r"^\[pod/[^\]\s]+\]\s"), lambda l: l.startswith("[pod/")),
    # PyTorch's Python logging in glog form (a .py location), a rank's tag before it and torch.compile's
    # frame id after it ('[rank0]:E0908 20:08:48.141000 119942 torch/_subclasses/fake_tensor.py:2721]
    # [0/2] '): the lines of a traceback it logs are the traceback's lines. C++ components' glog
    # records (Mooncake's 'E1104 … tcp_transport.cpp:140] …') keep their prefix: rules read it
    Stripper("torch-log", rx.compile(r"^(?:\[rank\d+\]:)?[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^\s\]]+\.py:\d+\] "
                                     r"(?:\[\d+/\d+(?:_\d+)?\] )?"),
             lambda l: _may_torch_log(l)),
]
QUOTE_STRIPPER = Stripper("quote", QUOTE, lambda l: _lead(l) == ">")
RICH_PATH = rx.compile(r" {2,}[\w.-]+\.py:\d+ *$")
# Prefixes removed only when most sampled lines carry them.
MAJORITY = [
    QUOTE_STRIPPER,
    # one space after the stamp: what follows is the line as written, its indentation included
    Stripper("timestamp", rx.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?[ \t]"
                                     r"(?:(?:stdout|stderr)[ \t][FP][ \t])?"), lambda l: l[:1].isdigit()),
    # a cloud log console's copy (Google Cloud Logging, and the like): 'ERROR 2025-04-05T00:01:19.509514570Z msg'
    Stripper("severity-timestamp", rx.compile(r"^(?:DEFAULT|DEBUG|INFO|NOTICE|WARNING|WARN|ERROR|CRITICAL|ALERT|EMERGENCY)\s+"
                                              r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s+"),
             lambda l: l[:1].isupper()),
    Stripper("journald", rx.compile(r"^[A-Z][a-z]{2}\s+\d{1,2}\s\d\d:\d\d:\d\d\s\S+\s[^\s:\[]+(?:\[\d+\])?:\s"),
             lambda l: l[:1].isupper()),
    Stripper("srun-label", rx.compile(r"^\s{0,3}\d{1,4}:\s"), lambda l: _lead(l).isdigit()),
    RichStripper("rich logging columns",
                 rx.compile(r"^(?:\[?(?:\d\d/\d\d/\d\d(?:\d\d)? )?\d\d:\d\d:\d\d\]? +)?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) +"),
                 lambda l: l[-1:].isdigit() and ".py:" in l[-48:] and RICH_PATH.search(l) is not None,
                 suffix=RICH_PATH),
]
# A record prefix in the middle of a line: the paste lost its newlines (chat clients, flattened JSON)
EMBEDDED_RAY = rx.compile(r" \((?:[A-Za-z_][\w.]*\s+)?pid=\d+(?:,\s*ip=[0-9A-Fa-f.:]+)?\)\s?")
EMBEDDED_SGLANG = rx.compile(r" \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?: [A-Z_]+\d+)*\] ")
SGLANG_START = rx.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
COMPOSE = rx.compile(r"^([A-Za-z0-9][\w.-]*?)(?:[-_]\d+)?\s+\|\s?")
# Where a new log record starts (a wrapped continuation never starts like this).
RECORD_START = rx.compile(
    r"^(?:\[\d{4}-\d\d-\d\d|\[(?:gpu|gpu_id|rank|TP|DP)\S*\]|Traceback |\s+File \"|During handling|The above exception"
    r"|(?:[A-Za-z_][\w.]*)?(?:Error|Exception|Exit|Interrupt)\b|INFO|WARNING|ERROR|DEBUG|CRITICAL|\d{4}-\d\d-\d\d|[|+<])")
TAG_CHARS = rx.compile(r"[\[|]")
NOT_A_TAG = rx.compile(r"^\[\d{4}-|^(?:INFO|WARNING|ERROR|DEBUG)\b|^\s|^\[(?:gpu|TP|DP)")


# a line holding nothing but a timestamp: a log viewer's row header pasted between the records
VIEWER_STAMP = rx.compile(r"^\s*\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s*$")
JSON_TEXT_KEYS = ("log", "message", "msg", "MESSAGE", "text")


# What a line must hold for VIEWER_STAMP / COMPOSE to match it (RE2's \s and \d are ASCII): tested
# first, so that learning from a log's first lines calls the engine only on the lines that may match
def _may_stamp(line: str) -> bool:
    return line.lstrip(" \t\n\f\r")[:1].isdigit()


def _may_compose(line: str) -> bool:
    return line[:1].isalnum() and "|" in line


def _json_text(line: str) -> str | None:
    """The log text of a collector's JSON record ({"log": "...", "stream": ...}), or None."""
    s = line.strip()
    if not (s.startswith("{") and s.endswith("}")) or len(s) > 1_000_000:
        return None
    import json
    try:
        obj = json.loads(s)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    for key in JSON_TEXT_KEYS:
        v = obj.get(key)
        if isinstance(v, str):
            return v.rstrip("\n")
    return None


def _split_embedded(text: str) -> list[str]:
    """A line cut before every SGLang record prefix that follows a space."""
    parts, start = [], 0
    for m in EMBEDDED_SGLANG.finditer(text):
        parts.append(text[start:m.start()])
        start = m.start() + 1
    parts.append(text[start:])
    return parts


# Where a record started in a paste that lost every newline (copied from a rendered page, where
# the line breaks of an unfenced log became spaces): a traceback's head, its frames, its closing
# exception, a record prefix of SGLang or of torch's ranks, a log level at a line's start
_FLAT_RECORDS = (r" (?:Traceback \(most recent call last\):|File \"[^\"]{1,300}\", line \d+|During handling of the above exception"
                 r"|The above exception was the direct cause|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d|\[rank\d+\]:"
                 r"|\[(?:gpu_id|gpu|TP|DP|PP|EP)=?\d+[^\]\s]{0,20}\] |(?:INFO|WARNING|ERROR|CRITICAL) \d{2}-\d{2})")
# what tells a flattened paste: record starts inside a line with text after them (an exception type
# inside a message, 'hit an exception: Traceback (most recent call last):' at a line's end, is normal)
FLAT_RECORD = rx.compile(_FLAT_RECORDS)
# where it is cut once it is one: those, and the exception that closes a traceback
FLAT_MARK = rx.compile(_FLAT_RECORDS[:-1] + r"|(?:[a-z_][a-z0-9_]*\.)*[A-Z][A-Za-z0-9_]*(?:Error|Exception|Exit|Interrupt): "
                       r"|(?:CUDA|NCCL|HIP) [Ee]rror: )")
FLAT_MIN = 120          # a line this long holding two record starts, in a paste of at most FLAT_LINES lines
FLAT_LINES = 3


# an exception quoted after prose or code on the same line ("sglang installs the latest vllm
# `ModuleNotFoundError: No module named …`", "track_index = req.kv.buf[...].item() TypeError: …")
INLINE_EXC = rx.compile(r"[\s`'\"(](?:[a-z_][a-z0-9_]*\.)*[A-Z][A-Za-z0-9_]*(?:Error|Exception): \S")


def _inline_exception(line: str) -> int | None:
    """Where an exception quoted inside a line starts, when the line itself is not a record (a
    log prefix, an exception of its own, a level word: those carry exceptions in their messages)."""
    if RECORD_START.match(line.lstrip()) or len(line) > 2000:
        return None
    m = INLINE_EXC.search(line)
    if m is None or m.start() == 0:
        return None
    if line[:m.start() + 1].rstrip(" `'\"(").endswith(":"):
        return None         # 'Capture cuda graph failed: RuntimeError: …': the exception is that message's detail
    return m.start() + 1


def _flattened(nonblank: list[str]) -> bool:
    """A paste that lost its newlines: at most FLAT_LINES lines, one of them long and holding at
    least two record starts (its own start counts: a traceback's head and its frames, or several
    prefixes)."""
    if not nonblank or len(nonblank) > FLAT_LINES:
        return False
    def records(line: str) -> int:
        inside = sum(1 for m in FLAT_RECORD.finditer(line) if len(line) - m.end() >= 20)
        return inside + bool(RECORD_START.match(line))

    return any(len(l) >= FLAT_MIN and records(l) >= 2 for l in nonblank)


def _split_flat(text: str) -> list[str]:
    """A line cut before every record start FLAT_MARK finds (the space before it dropped)."""
    if len(text) < FLAT_MIN:
        return [text]
    parts, start = [], 0
    for m in FLAT_MARK.finditer(text):
        if m.start() > start:
            parts.append(text[start:m.start()])
            start = m.start() + 1
    parts.append(text[start:])
    # a frame's code came after its location on the same line: 'File "x.py", line 3, in f    code'
    out = []
    for part in parts:
        if part.startswith("File \"") and "  " in part:
            head, _, code = part.partition("  ")
            out += ["  " + head, "    " + code.strip()] if code.strip() else ["  " + head]
        elif part.startswith("File \""):
            out.append("  " + part)
        else:
            out.append(part)
    return out


@dataclass
class Cleaning:
    """What the cleaner decided, for the report's input notes."""
    removed: list[str] = field(default_factory=list)
    joined: int = 0
    split: int = 0
    wrap_width: int | None = None
    dropped: int = 0


# What a web page, a chat client or a word processor puts in place of the characters a log holds:
# no-break and other Unicode spaces, zero-width characters and a byte-order mark, typographic quotes
# ("smart quotes"), and a dash an editor made of the two hyphens of a flag ('—mem-fraction-static')
_TEXT = str.maketrans({**{c: " " for c in (0xa0, *range(0x2000, 0x200b), 0x202f, 0x205f, 0x3000)},
                       **{c: None for c in (0x200b, 0x200c, 0x200d, 0x2060, 0xfeff)},
                       **{c: "'" for c in (0x2018, 0x2019, 0x201a, 0x201b, 0x2032)},
                       **{c: '"' for c in (0x201c, 0x201d, 0x201e, 0x2033)}})
_FLAG_DASH = rx.compile("(^|[\\s=(\\[])[\u2013\u2014]([a-z])")


def _strip_ansi(line: str) -> str:
    """The line as text: ANSI codes removed, and what a paste put in place of plain characters
    (see _TEXT) put back."""
    if "\x1b" in line:
        line = ANSI.sub("", line)
    if not line.isascii():
        line = line.translate(_TEXT)
        if "\u2013" in line or "\u2014" in line:
            line = _FLAG_DASH.sub(r"\1--\2", line)
    return line.rstrip("\r")


_ENTITY = ("&lt;", "&gt;", "&quot;", "&#39;", "&#x27;", "&amp;")


def _html_text(line: str) -> str:
    if "&" not in line:
        return line
    import html
    return html.unescape(line)


def _inline_code(line: str) -> str:
    """A line pasted as Markdown inline code ('`ModuleNotFoundError: No module named …`', the closing
    backtick sometimes lost) is the line inside it."""
    s = line.lstrip()
    if s[:1] != "`" or s[:2] == "``":
        return line
    inner = s[1:]
    if inner.endswith("`"):
        inner = inner[:-1]
    return inner if inner[:1].isalnum() or inner[:1] in "[(" else line


def _fence(line: str) -> bool:
    return ("```" in line or "~~~" in line) and bool(FENCE.match(line))


def _majority(stripper: Stripper, lines: list[str]) -> bool:
    nonblank = [l for l in lines if l.strip()]
    hits = sum(1 for l in nonblank if stripper.may(l) and stripper.pattern.match(l))
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
    if not TAG_CHARS.search(prefix) or NOT_A_TAG.match(prefix):
        return None  # SGLang's own record prefix, a log level or indentation, not a tag
    return prefix


def _strip_always(line: str) -> str:
    for stripper in ALWAYS:
        line = stripper.strip(line)
    return line


@functools.lru_cache(maxsize=32)
def _indent_stripper(char: str, width: int) -> Stripper:
    """Up to `width` leading `char`s (a space or a tab) removed."""
    kind = "tab" if char == "\t" else "space"
    return Stripper(f"indentation of {width} {kind}{'s' if width > 1 else ''}",
                    rx.compile("^" + ("\\t" if char == "\t" else " ") + "{1," + str(width) + "}"),
                    lambda l: l[:1] == char)


def _common_indent(lines: list[str]) -> Stripper | None:
    """The indentation every content line shares: a paste indented as a block (Markdown's code
    block, a forum's quote, an e-mail), removed so that records start the line again. Not the
    indentation of a bare traceback fragment, whose least indented lines are all its frames."""
    nonblank = [l for l in lines if l.strip()]
    if not nonblank:
        return None
    lead = min((l[: len(l) - len(l.lstrip(" \t"))] for l in nonblank), key=len)
    if not lead or (lead.strip(" ") and lead.strip("\t")):    # none, or spaces and tabs mixed
        return None
    if not all(l.startswith(lead) for l in nonblank):
        return None
    least = [l[len(lead):] for l in nonblank if not l[len(lead):][:1].isspace()]
    if all(l.startswith(("File \"", "^", "~")) for l in least):
        return None
    return _indent_stripper(lead[0], len(lead))


LINE_NO = rx.compile(r"^ {0,6}(\d{1,7})(?:\t| |: |\| )")


def _line_numbers(lines: list[str]) -> "Stripper | None":
    """Line numbers a viewer or `cat -n` put before every line: at least three lines, nearly all of
    them numbered, the numbers counting up one per line (a log's own leading numbers do not)."""
    if len(lines) < 3:
        return None
    nums = []
    for i, l in enumerate(lines):
        m = LINE_NO.match(l)
        nums.append((i, int(m.group(1))) if m else None)
    got = [x for x in nums if x is not None]
    if len(got) < max(3, 0.9 * len(lines)):
        return None
    offsets = {n - i for i, n in got}
    if len(offsets) != 1:
        return None
    return Stripper("line numbers", LINE_NO, lambda l: l[:1].isdigit() or l[:1] == " ")


def _double_spaced(lines: list[str]) -> bool:
    """A blank line after every line of text: no two lines of text are neighbours and at least
    three are separated so (a paste's spacing, not the log's own blank lines)."""
    text = [i for i, l in enumerate(lines) if l.strip()]
    if len(text) < 3:
        return False
    return all(b - a >= 2 and not lines[a + 1].strip() for a, b in zip(text, text[1:])) and \
        sum(1 for a, b in zip(text, text[1:]) if b - a == 2) >= 0.8 * (len(text) - 1)


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
        # (a flag starting the next line follows a space the wrap took: 'under' / '--mem-fraction-static')
        return (b.islower() or b.isdigit() or b in "-_/=.:") and not nxt.startswith("--")
    if a.isdigit():
        return b.isdigit() or b in "._-:/"
    return a in "-_/=" and (b.isalnum() or b in "-_")


def _repeats(line: str, nxt: str) -> bool:
    """The next line begins as this one does: a repeated record (a message every rank prints,
    a check in a loop), not the rest of this one wrapped onto a new line."""
    return len(nxt) >= 24 and nxt[:24] == line[:24]


WRAP_PARTS = 1024        # physical lines one wrapped record may span (a ServerArgs dump wraps over 100)
MAX_JOINED = 64 << 10    # and characters


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
    follows = [i for i in full if lines[i + 1] and not starts_record(lines[i + 1])
               and not _repeats(lines[i], lines[i + 1])]
    mid_word = [i for i in follows if _mid_token(lines[i], lines[i + 1])]
    # many full-width lines, most followed by their rest, and the breaks falling inside words as a
    # terminal's fixed width puts them (a log's own longest lines end where their records end)
    if len(full) >= 3 and len(follows) >= 0.6 * len(full) and len(mid_word) >= 0.3 * len(full):
        return top
    # few full-width lines: each is followed by the rest of itself, and one at least breaks mid-word
    return top if mid_word and len(follows) == len(full) else None


class Cleaner:
    def __init__(self, light: bool = False) -> None:
        self.light = light  # only ANSI codes, fences and quote markers (for nvidia-smi outputs)
        self.info = Cleaning()
        self._strippers: list[Stripper] = list(ALWAYS)
        self._literal: str | None = None
        self._compose: str | None = None
        self._json = False          # records are JSON objects from a log collector
        self._viewer = False        # a viewer's timestamp-only lines sit between the records
        self._bare = False          # learned nothing but the ALWAYS prefixes (set by learn)
        self._indent: Stripper | None = None   # the indentation every line of the paste shares
        self._inner_indent: Stripper | None = None   # ... under the prefixes removed
        self._html = False          # the text was copied HTML-escaped ('&lt;module&gt;', '&quot;')
        self._double = False        # a blank line after every line (a forum's or e-mail's spacing)
        self._flat = False          # the paste lost its newlines: records are cut apart again
        self._inline = False        # a short paste quotes an exception after prose or code on one line
        self._numbers: Stripper | None = None   # a viewer's line numbers before every line

    def _learn(self, sample: list[str]) -> None:
        work = sample
        nonblank = [l for l in work if l.strip()]
        if not self.light and nonblank:
            escaped = sum(1 for l in nonblank if "&" in l and any(e in l for e in _ENTITY))
            # an escaped copy holds no raw '<' or '>' ('<module>' became '&lt;module&gt;'); a log that
            # does, and quotes an entity, is left as it is
            if escaped and (escaped >= 0.1 * len(nonblank) or not any("<" in l or ">" in l for l in nonblank)):
                self._html = True
                self.info.removed.append("HTML escapes (&lt; &gt; &quot; &#39; &amp;)")
                work = [_html_text(l) for l in work]
                nonblank = [l for l in work if l.strip()]
            if _flattened(nonblank):
                self._flat = True
                self.info.removed.append("the paste's lost line breaks (records cut apart again)")

            if _double_spaced(work):
                self._double = True
                self.info.removed.append("the blank line after every line")
            decoded = [_json_text(l) for l in nonblank]
            if sum(d is not None for d in decoded) >= max(1, 0.6 * len(nonblank)):
                self._json = True
                self.info.removed.append("JSON log records (the text of their log/message field)")
                work = [d if d is not None else l for d, l in zip(decoded, nonblank)]
                nonblank = work
            stamps = sum(1 for l in nonblank if _may_stamp(l) and VIEWER_STAMP.match(l))
            if stamps >= 2 and stamps >= 0.25 * len(nonblank) and stamps < len(nonblank):
                self._viewer = True
                self.info.removed.append("a log viewer's timestamp-only lines")
                work = [l for l in work if not (_may_stamp(l) and VIEWER_STAMP.match(l))]
        if self.light:
            if _majority(QUOTE_STRIPPER, work):
                self._strippers.append(QUOTE_STRIPPER)
                self.info.removed.append("quote")
            return
        # what is removed wherever it appears (a Ray actor's tag) is removed before the others are
        # learned: '(EngineActor pid=…) sglang-1  | …' carries a compose prefix under the tag
        work = [_strip_always(l) for l in work]
        numbered = _line_numbers(work) if not self.light else None
        if numbered:
            self._numbers = numbered        # removed once per line, before the rest
            self.info.removed.append(numbered.name)
            work = [numbered.strip(l) for l in work]
        indent = _common_indent(work)
        if indent:
            self._indent = indent           # removed once per line (the others repeat: prefixes stack)
            self.info.removed.append(indent.name)
            work = [indent.strip(l) for l in work]
        for stripper in MAJORITY:
            if _majority(stripper, work):
                self._strippers.append(stripper)
                self.info.removed.append(stripper.name)
                work = [stripper.strip(l) for l in work]
        names = Counter(m.group(1) for l in work if _may_compose(l) and (m := COMPOSE.match(l)))
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
            work = [l[len(literal):] if l.startswith(literal) else l for l in work]
        short = [l for l in work if l.strip()]
        if not self._flat and len(short) <= FLAT_LINES and any(_inline_exception(l.strip()) is not None for l in short):
            self._inline = True
            self.info.removed.append("the text before an exception quoted on the same line")
        if self._strippers != ALWAYS or self._compose or self._literal:
            # an indented paste under a collector's prefix ('2026-…Z     RuntimeError: …')
            inner = _common_indent(work)
            if inner:
                self._inner_indent = inner
                self.info.removed.append(inner.name)

    def _strip_compose(self, line: str) -> str:
        m = COMPOSE.match(line)
        if m and m.group(1) == self._compose:
            return line[m.end():]
        return line

    def clean_line(self, line: str) -> str | None:
        """The line with prefixes removed, or None for a line that carries no content (a fence)."""
        line = _strip_ansi(line)
        if self._html:
            line = _html_text(line)
        if self._json:
            text = _json_text(line)
            if text is not None:
                line = _strip_ansi(text)
        if self._viewer and VIEWER_STAMP.match(line):
            return None
        if self._numbers is not None:
            line = self._numbers.strip(_strip_always(line))
        if self._indent is not None:
            line = _strip_always(line)
            line = self._indent.strip(line)
        for _ in range(3):  # prefixes stack (timestamp + compose + ray)
            before = line
            for stripper in self._strippers:
                line = stripper.strip(line)
            if self._compose:
                line = self._strip_compose(line)
            if self._literal and line.startswith(self._literal):
                line = line[len(self._literal):]
            if line == before:
                break
        if self._inner_indent is not None:
            line = self._inner_indent.strip(line)
        if _fence(line):
            return None
        return _inline_code(line)

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
        width = self.learn(sample)

        def raw_lines() -> Iterator[tuple[int, str]]:
            yield from enumerate(sample, 1)
            n = len(sample)
            for raw in it:
                n += 1
                yield n, _strip_ansi(raw)

        pending: tuple[int, str] | None = None
        last_len = 0  # length of the last physical line inside `pending`
        parts = 0     # physical lines joined into `pending`
        for lineno, raw in raw_lines():
            if pending is not None:
                # a terminal wraps a line at exactly its width (a longer line was not wrapped there), and
                # a record wrapped over WRAP_PARTS lines or MAX_LINE characters is not one record: the
                # join stops (each join copies the record so far, so an unbounded chain is quadratic)
                if width and width - 1 <= last_len <= width and parts < WRAP_PARTS and len(pending[1]) < MAX_JOINED \
                        and raw and not self._starts_record(raw) \
                        and not pending[1].rstrip().endswith(("|", "+", ">")) and not _repeats(pending[1], raw):
                    # a part that ends in spaces (a terminal's padding, a wrap at a space) joins with one
                    head = pending[1]
                    pending = (pending[0], head.rstrip() + " " + raw.lstrip() if head[-1:].isspace() else head + raw)
                    last_len = len(raw)
                    parts += 1
                    self.info.joined += 1
                    continue
                yield from self._emit(pending)
            pending, last_len, parts = (lineno, raw), len(raw), 1
        if pending is not None:
            yield from self._emit(pending)

    def learn(self, sample: list[str]) -> int | None:
        """Decide from the first lines (ANSI codes already removed) which prefixes to remove and the
        width a paste was wrapped at (returned; None when it was not)."""
        content = [l for l in sample if not _fence(l)]
        self._learn(content)
        width = None if self.light else _wrap_width(content, self._starts_record)
        self.info.wrap_width = width
        self._bare = self.plain and not self._json and not self._viewer
        return width

    @property
    def plain(self) -> bool:
        """Nothing learned: a line without ANSI codes, Ray or kubectl prefixes, fences or embedded
        records is its own cleaned text (the fast reader, diag/scan.py, relies on this)."""
        return (not self.light and self._strippers == ALWAYS and self._compose is None and self._literal is None
                and self._indent is None and not self._html and not self._double and not self._flat
                and not self._inline and self._numbers is None and self.info.wrap_width is None)

    def emit(self, lineno: int, raw: str) -> Iterator[tuple[int, str]]:
        """One raw line, cleaned (split where records ran together; nothing for a fence)."""
        return self._emit((lineno, _strip_ansi(raw)))

    def _starts_record(self, raw: str) -> bool:
        """A line that begins a new log record: it carries a learned prefix or a record start."""
        cleaned = self.clean_line(raw)
        return cleaned is None or cleaned != raw or bool(RECORD_START.match(raw))

    def _emit(self, item: tuple[int, str]) -> Iterator[tuple[int, str]]:
        raw = item[1]
        if self._double and not raw.strip():
            return
        if self._bare and "pid=" not in raw and not raw.startswith(("(", "[pod/")) and "`" not in raw and "~~~" not in raw \
                and not _may_torch_log(raw):
            # nothing learned and nothing ALWAYS strips: the line is its own cleaned text (most lines
            # of an event-dense log take this path; the same answer as below, without its calls)
            if raw.startswith("[") and " [" in raw and SGLANG_START.match(raw) and EMBEDDED_SGLANG.search(raw):
                out = _split_embedded(raw)
                self.info.split += max(0, len(out) - 1)
                for text in out:
                    yield item[0], text
            else:
                yield item
            return
        parts = EMBEDDED_RAY.split(raw) if "pid=" in raw and EMBEDDED_RAY.search(raw) else [raw]
        if self._flat:
            parts = [p for part in parts for p in _split_flat(part)]

        out = []
        for part in parts:
            text = self.clean_line(part)
            if text is None:
                self.info.dropped += 1
                continue
            if self._inline and (at := _inline_exception(text)) is not None:
                head, text = text[:at].rstrip(" `'\"("), text[at:].rstrip("`")
                if head.strip():
                    out.append(head)
            if text.startswith("[") and " [" in text and SGLANG_START.match(text) and EMBEDDED_SGLANG.search(text):
                out.extend(_split_embedded(text))
            else:
                out.append(text)
        self.info.split += max(0, len(out) - 1)
        for text in out:
            yield item[0], text
