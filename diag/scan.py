"""The fast reader for large logs: raw bytes in large newline-aligned chunks, classified vectorised.

A serving log is mostly batch statistics, successful HTTP access lines and blank lines. Here a
chunk of CHUNK bytes at a time (decompressed as it streams, through diag.read's guards) is split
into lines and classified by polars; one multi-pattern pass over the raw bytes (Hyperscan, or
polars' regex engine where the `hyperscan` package does not import) flags every line that
carries a failure signature (every rule's line pattern and the parser's failure words). Then:

- well-formed batch lines of the kept rank become rows of the parser's BatchSeries in bulk
  (diag/parse/batches.py, `add_frame`); batch lines of other ranks, successful HTTP access lines
  and blank lines are counted; the parser is told about them with `LogParser.skip(Gap)`, which
  leaves its state as feeding them would have (counts, prefix facts, the lines kept around
  events, an exception message closed by a batch or blank line);
- a prefixed line of a skeleton the parser was seen to read as a plain line (the memo of line
  classes, `_Memo`: the message with number words masked) is accounted for like an access line
  while the parser is between records;
- every other line, and any line of those classes that carries a failure signature, is cleaned
  (diag.clean) and fed to the parser line by line, exactly as the line-by-line reader does.

Where the optional C module diag._lines was built (diag/_lines.c; DIAG_NO_NATIVE=1 turns it off),
each chunk is classified there instead, in one pass over its bytes, with the same classes, rows and
gaps (FastReader._native_chunk); polars is then not loaded. tests/test_native.py checks its
matchers against this module's regexes.

The contract is checked by tests/test_scan.py: every log under tests/data gives the same report
JSON through both readers. The fast reader is used when the input has at least FAST_MIN_BYTES of
UTF-8 text whose first lines need no clean-up (no collector prefix, no wrapped paste); anything
else (a small paste, UTF-16, a docker-timestamped log) is read line by line as before, and so is
a chunk whose first batch line needs clean-up before the kept rank is known.
"""
from __future__ import annotations

import os
import re
import sys
import time
from bisect import bisect_left
from collections import deque
from itertools import compress, repeat
from operator import add, itemgetter, methodcaller, not_
from dataclasses import dataclass, field
from typing import Callable, Iterator

from . import rx
from .clean import SAMPLE, Cleaner
from .parse.batches import NAN, ts_seconds
from .read import MAX_LINE, Opened, _Peek, _reason, iter_lines, read_up_to

CHUNK = 2 << 20              # bytes of text per chunk (peak memory grows with it)
FAST_MIN_BYTES = 4 << 20     # smaller inputs are read line by line (polars' start-up costs more)
CONTEXT = 12                 # LogParser.CONTEXT_BEFORE / CONTEXT_AFTER
TAIL = 80                    # LogParser.TAIL

# Polars' regex engine has Unicode \d and \s: the classes are spelled out (RE2's are ASCII).
_SP = r"[\t\n\f\r ]"
TS = r"[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?"
RANKS = r"(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP|CP)[0-9]+)*"
PREFIX = r"^\[(" + TS + r")(" + RANKS + r")\]" + _SP + "?"          # diag.parse.sglang.PREFIX
BATCH = PREFIX + r"(?:Decode|Prefill) batch"
ACCESS = (r"(?:INFO:" + _SP + r"+)?[0-9.:\[\]a-f]*:?[0-9]* ?- \"(?:GET|POST|PUT|DELETE|HEAD|OPTIONS) [^\t\n\f\r ]+ "
          r"HTTP/[0-9.]+\" [23][0-9]{2}")                               # sglang.RE_ACCESS, 2xx/3xx
HTTP_OK = r"^(?:\[" + TS + RANKS + r"\]" + _SP + "?" + r"|(?:INFO:" + _SP + r"))" + ACCESS
BLANK = r"^[ \t]*$"
# what the cleaner would change or split (ANSI codes, Ray pid tags, fences, records run together)
DIRTY_WORDS = ["\x1b", "pid=", "```", "~~~"]
EMBEDDED = r" \[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}"
NUMBER = r"^[0-9]{1,30}(?:\.[0-9]{1,30})?$"     # a value diag.numbers.to_float reads the same way

# failure words of the parser (diag/parse/sglang.py), looked for in batch and access lines too
FAILURE_WORDS = [
    "out of memory", "Out of memory", "OutOfMemoryError", "OUT_OF_MEMORY", "CUBLAS_STATUS_ALLOC_FAILED",
    "cudaErrorMemoryAllocation", "Traceback", "Error", "Exception", "Killed", "Aborted", "Segmentation fault",
    "Bus error", "Fatal Python error", "NCCL", "CUDA error", "atchdog", "sigquit", "SIGQUIT", "scheduler is dead",
    "scheduler died", "Retract", "Initialization failed", "exit code", "Exit code", "Warning", "WARNING", "ERROR",
]
# failure phrases without one of those words that can sit inside a batch or access line (a line a
# collector joined, or SGLang's own bookkeeping): the same signatures benchmarks/signatures.txt gives grep
FAILURE_PHRASES = [
    r"KV cache pool is full", r"(Prefill|Decode) out of memory", r"Not enough memory",
    r"an illegal memory access was encountered", r"device-side assert triggered", r"misaligned address",
    r"unspecified launch failure", r"[Aa]ddress already in use", r"SIGSEGV", r"SIGABRT",
    r'"(GET|POST) /(health|health_generate)[^ ]* HTTP/[0-9.]+" 5[0-9][0-9]',
]
# batch statistics: the column and the keys whose value it takes, in order of preference (batches.row_of)
FIELDS = {
    "running": ("#running-req",), "queue": ("#queue-req",), "usage": ("token usage", "full token usage"),
    "tokens": ("#token", "#full token", "#new-token"),
    "throughput": ("gen throughput (token/s)", "input throughput (token/s)"),
    "mamba_usage": ("mamba usage",), "accept_len": ("accept len",),
}
MAX_PARTS = 16
FEW_GAPS = 16             # a block with fewer lines fed reduces its gaps one by one
FIRST_BLOCK = 2048         # the input's first block (the memo of line classes learns there)
BLOCK_ROWS = 65536          # lines classified at a time (short lines: a chunk is cut in blocks, memory stays flat)

# The small reader (pure Python, no polars): the same classes with Python's `re`, one call per line
# (the patterns are anchored and unambiguous: linear, timed by tests/test_linear.py), and the
# failure signatures in one RE2 pass over the input's bytes.
_PREFIX_RE = re.compile(PREFIX)
_HTTP_RE = re.compile(HTTP_OK)
_EMBEDDED_RE = re.compile(EMBEDDED)
_MASK_RE = re.compile(r"\b[A-Fa-f]*+[0-9][0-9A-Fa-f]*+\b")    # MASK, possessive: linear in Python's re
_SIGNATURES_RE = rx.compile_bytes("|".join(f"(?:{p})" for p in FAILURE_PHRASES + [re.escape(w) for w in FAILURE_WORDS]))
# a batch value the parser reads with float() (batches._f: at most 30 digits a side, True/False)
_VALUE = r"([0-9]{1,15}(?:\.[0-9]{1,15})?|True|False)"
_NUMBER = r"[0-9]{1,15}(?:\.[0-9]{1,15})?"
MAX_LAYOUTS = 8             # batch-line layouts learned per input (decode, prefill and variants)

# The memo of line classes: a prefixed line that is none of the classes above ("Cache flushed
# successfully! request id 3fa2…", "Receive: obj=…") is the same line to the parser, between two
# records, as the earlier lines of its skeleton (its message with every word that is a decimal or
# hex number masked). Once LEARN lines of a skeleton were fed between records and each left the
# parser between records with no event, traceback or version made, the later ones are accounted
# for like access lines (class 4: counted, their prefix facts and evidence windows kept) while
# the parser is between records; otherwise they are fed. A line with a failure signature, a word
# the cleaner acts on, or one of MEMO_EXCLUDE (a version named, an nvidia-smi output) never is.
MASK = r"\b[A-Fa-f]*[0-9][0-9A-Fa-f]*\b"
MEMO_EXCLUDE = ["glang", "SGLang", "NVIDIA-SMI ", "==NVSMI LOG==", "<nvidia_smi_log", "memory.used", "KMD Version"]
LEARN = 2
MEMO_KEYS = 4096           # skeletons known at most (the memo is bounded whatever the log)
KEY_MAX = 2048             # longer lines are always fed


@dataclass
class Gap:
    """Lines the fast reader accounted for between two fed lines (LogParser.skip reads this)."""
    count: int = 0
    content: int = 0
    closes: bool = False
    blank: bool = False
    prefixed: int = 0
    first_ts: str | None = None
    last_ts: str | None = None
    ranks: tuple = ()
    http: int = 0
    http_last: int | None = None
    first_batch: tuple | None = None
    last_text: str | None = None
    last_msg: str | None = None
    _head: Callable[[int], list] = field(default=lambda k: [], repr=False)
    _recent: list = field(default_factory=list, repr=False)

    def head(self, k: int) -> list[tuple[int, str]]:
        return self._head(k)

    def recent(self) -> list[tuple[int, str]]:
        return self._recent


class _Memo:
    """The skeletons the parser was seen to read as plain lines (see MASK), bounded."""

    def __init__(self) -> None:
        self.known: set[str] = set()
        self._seen: dict[str, int] = {}
        self._bad: set[str] = set()

    def learned(self, key: str, plain: bool) -> None:
        """One line of this skeleton was fed between records: `plain` when it made nothing."""
        if not plain:
            self.known.discard(key)
            self._seen.pop(key, None)
            if len(self._bad) < 8 * MEMO_KEYS:
                self._bad.add(key)
            return
        if key in self._bad or key in self.known:
            return
        n = self._seen.get(key, 0) + 1
        if n >= LEARN and len(self.known) < MEMO_KEYS:
            self.known.add(key)
            del self._seen[key]
            return
        if len(self._seen) >= 8 * MEMO_KEYS:
            self._seen.clear()
        self._seen[key] = n


# -- the multi-pattern pass -------------------------------------------------------------------

class Signatures:
    """Which lines of a chunk carry a failure signature (the parser's failure words and phrases),
    and which of the words the cleaner acts on (DIRTY_WORDS) the chunk holds: one pass."""

    def __init__(self) -> None:
        self.patterns = FAILURE_PHRASES + [_escape(w) for w in FAILURE_WORDS]
        self.engine = "polars"
        self._db = None
        self._words: dict[int, str] = {}     # Hyperscan ids of the cleaner's words
        rest = self.patterns
        try:
            import hyperscan
        except Exception:  # not installed, or no build for this machine
            hyperscan = None
        if hyperscan is not None:
            words = [_hs_literal(w) for w in DIRTY_WORDS]
            ok, db = _hs_database(hyperscan, self.patterns + words)
            if ok:
                self._db, self.engine = db, "hyperscan"
                rest = [p for p in self.patterns if p not in ok]   # refused (or matching the empty string)
                self._words = {i: DIRTY_WORDS[words.index(p)] for i, p in enumerate(ok) if p in words}
        self._alternation = "|".join(f"(?:{p})" for p in rest) if rest else None

    def scan(self, chunk: bytes, lines) -> tuple["object", list[str]]:
        """(a boolean polars Series over the chunk's lines, True where a signature is; the cleaner's
        words the chunk holds)."""
        import polars as pl
        out = None
        found: set[str] = set()
        if self._db is not None:
            ends: list[int] = []
            words = self._words

            def hit(i, _f, to, _fl, _c):
                if i in words:
                    found.add(words[i])
                else:
                    ends.append(to)

            self._db.scan(chunk, match_event_handler=hit)
            rows: list[int] = []
            if ends:
                ends.sort()
                row, pos = 0, 0
                for end in ends:
                    at = max(pos, end - 1)       # the match's last byte
                    row += chunk.count(b"\n", pos, at)
                    pos = at
                    if not rows or rows[-1] != row:
                        rows.append(row)
            out = pl.repeat(False, len(lines), dtype=pl.Boolean, eager=True)
            if rows:
                out = out.scatter([r for r in rows if r < len(lines)], True)
        if self._alternation is not None:
            more = lines.str.contains(self._alternation)
            out = more if out is None else (out | more)
        # words Hyperscan did not take are looked for in the bytes
        taken = set(self._words.values())
        found.update(w for w in DIRTY_WORDS if w not in taken and w.encode() in chunk)
        return out, [w for w in DIRTY_WORDS if w in found]

    def marks(self, chunk: bytes) -> tuple[bytes, list[str]] | None:
        """For the C classifier: (the offsets, as int64 bytes, of a byte of each signature's match,
        the cleaner's words the chunk holds), in one pass over the bytes; None where a pattern is
        left to polars (Hyperscan refused it). Without Hyperscan, RE2 finds the same lines."""
        from array import array
        found: set[str] = set()
        at = array("q")
        if self._db is not None:
            if self._alternation is not None:
                return None
            words = self._words
            push = at.append

            def hit(i, _f, to, _fl, _c):
                if i in words:
                    found.add(words[i])
                else:
                    push(to - 1)       # the match's last byte

            self._db.scan(chunk, match_event_handler=hit)
            taken = set(words.values())
        else:
            for m in _SIGNATURES_RE.finditer(chunk):
                at.append(m.start())
                at.append(max(m.start(), m.end() - 1))
            taken = set()
        found.update(w for w in DIRTY_WORDS if w not in taken and w.encode() in chunk)
        return at.tobytes(), [w for w in DIRTY_WORDS if w in found]

    def rows(self, chunk: bytes, lines) -> "object":
        """A boolean polars Series over the chunk's lines: True where a signature is."""
        return self.scan(chunk, lines)[0]


def _hs_literal(word: str) -> str:
    """A literal as a Hyperscan pattern (bytes outside printable ASCII as \\xNN)."""
    return "".join(f"\\x{ord(ch):02x}" if not (32 < ord(ch) < 127) or not ch.isalnum() else ch for ch in word)


def _hs_database(hyperscan, patterns: list[str]):
    """(the patterns Hyperscan takes, their compiled database): compiling costs ~0.2 s, so the
    database is kept serialised in the start-up cache (diag/cache.py), keyed by the patterns and
    Hyperscan's version; one that does not load on this machine is compiled again."""
    def build():
        ok = patterns if _hs_compiles(hyperscan, *patterns) else [p for p in patterns if _hs_compiles(hyperscan, p)]
        if not ok:
            return ok, None
        db = hyperscan.Database()
        db.compile(expressions=[p.encode() for p in ok], ids=list(range(len(ok))), elements=len(ok),
                   flags=[0] * len(ok))
        return ok, hyperscan.dumpb(db)

    def load(value):
        ok, blob = value
        if blob is None:
            return None
        db = hyperscan.loadb(blob, hyperscan.HS_MODE_BLOCK)
        db.scratch = hyperscan.Scratch(db)
        return db

    loaded = {}

    def valid(value) -> bool:
        try:
            loaded["db"] = load(value)
            return True
        except Exception:   # another CPU, a corrupt blob
            return False

    import platform
    from .cache import cached_by
    version = getattr(hyperscan, "__version__", "") or str(getattr(hyperscan, "HS_VERSION", ""))
    key = "\0".join([f"hyperscan={version}", platform.machine(), *patterns])
    value = cached_by("hyperscan", key, build, valid)
    if "db" not in loaded:
        loaded["db"] = load(value)
    return value[0], loaded["db"]


def _hs_compiles(hyperscan, *patterns: str) -> bool:
    try:
        hyperscan.Database().compile(expressions=[p.encode() for p in patterns], ids=list(range(len(patterns))),
                                     elements=len(patterns), flags=[0] * len(patterns))
        return True
    except Exception:
        return False


def _escape(text: str) -> str:
    import re
    return re.escape(text)


# -- reading ---------------------------------------------------------------------------------

class FastReader:
    """Reads one SGLang log: `run()` feeds `on_line` the lines the parser must see and tells the
    parser about the others; False when the input is read line by line instead (`cleaner` is then
    the one that did it)."""

    def __init__(self, opened: Opened, parser, on_line: Callable, signatures: Callable[[], Signatures] | None,
                 min_bytes: int = FAST_MIN_BYTES, progress: bool | None = None, small: bool = True) -> None:
        self.opened, self.parser, self.on_line = opened, parser, on_line
        self._make_signatures = signatures
        self.signatures: Signatures | None = None
        self.chars = 0
        self.min_bytes = min_bytes
        self.cleaner = Cleaner()
        self.fast = False
        self.small = small                # inputs under min_bytes: the small reader (else line by line)
        self.lines = 0                    # lines read so far
        self._tail: deque = deque(maxlen=TAIL)
        self._last_content: tuple | None = None   # (lineno, text, fed) of the last non-blank line
        self._carry_kind: int | None = None       # kind of the last kept-rank batch line so far
        self._cut = 0
        self._memo = _Memo()
        self._layouts: list = []          # batch-line layouts learned (_frame_layout), for every chunk
        self._learned = 0
        self._ranked_for = None
        self._progress = _Progress(opened) if (progress if progress is not None else _tty()) else None

    # the line-by-line reader, for everything the fast one does not take
    def _slow(self, replay: bytes) -> None:
        opened = self.opened
        if replay:
            opened.stream = _Peek(replay, opened.stream)
        for lineno, text in self.cleaner.run(iter_lines(opened)):
            self.on_line(lineno, text, None, False)

    def run(self) -> bool:
        opened = self.opened
        if opened.encoding not in ("utf-8", "utf-8-sig"):
            self._slow(b"")
            return False
        try:
            # enough to decide (a min_bytes past 64 MiB means: line by line whatever the size)
            first = read_up_to(opened.stream, max(CHUNK, min(self.min_bytes, 64 << 20)))
        except (OSError, EOFError, ValueError) as exc:
            opened.notes.append(f"reading stopped early: {_reason(exc)}")
            return False
        if len(first) < self.min_bytes:
            # the whole input is in `first` when it came short of what was asked
            whole = len(first) < max(CHUNK, min(self.min_bytes, 64 << 20))
            if not (self.small and whole and self._small(first)):
                self._slow(first)
            return False
        if _native() is None and not _polars():
            self._slow(first)
            return False
        body = first[3:] if opened.encoding == "utf-8-sig" and first.startswith(b"\xef\xbb\xbf") else first
        sample = body[:1 << 20].decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n").split("\n")[:SAMPLE]
        if sample and sample[-1] == "" and len(body) <= 1 << 20:
            sample.pop()      # the empty piece after the last newline is no line (the line reader yields none)
        from .clean import _strip_ansi
        self.cleaner.learn([_strip_ansi(l) for l in sample])
        if not self.cleaner.plain:
            self.cleaner = Cleaner()
            self._slow(first)
            return False
        self.fast = True
        self.signatures = self._make_signatures() if self._make_signatures else None
        self._loop(body)
        return True

    # -- the small reader: an input under min_bytes, read whole, in pure Python ---------------------
    def _small(self, data: bytes) -> bool:
        """The fast reader's contract without polars, for a paste or a small log: every line classified
        in one pass (Python's `re`, one anchored call per line), the failure signatures and the
        cleaner's trigger words found over the whole input at once; well-formed batch lines of the
        kept rank become rows in bulk (BatchSeries.add_rows), and the parser is told about them,
        other ranks' batch lines, successful access lines and blank lines with skip(Gap). Every
        other line is cleaned and fed, in order. False, with nothing done, where it does not
        apply (a cleaner that is not plain, a long line, a cap): then the input is read line by line."""
        opened = self.opened
        if opened.encoding == "utf-8-sig" and data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        text = data.decode("utf-8", "replace")
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()        # the empty piece after the last newline is no line
        n = len(lines)
        if not n or n > opened.limits.max_lines or max(map(len, lines)) >= MAX_LINE // 2:
            return False
        from .clean import _strip_ansi
        cleaner = self.cleaner
        cleaner.learn([_strip_ansi(l) for l in lines[:SAMPLE]])
        if not cleaner.plain:
            self.cleaner = Cleaner()
            return False
        # the kept rank: the first line naming a batch must be a batch line as the parser reads it
        # (one that clean-up turns into a batch line is left to the line-by-line reader)
        rank = None
        at = [p for p in (text.find("Decode batch"), text.find("Prefill batch")) if p >= 0]
        if at:
            first = lines[text.count("\n", 0, min(at))]
            m = _PREFIX_RE.match(first)
            if m is None or not first.startswith(("Decode batch", "Prefill batch"), m.end()):
                self.cleaner = Cleaner()
                return False
            rank = m[2].strip(" ")
        # lines fed whatever they are: a failure signature, or something the cleaner acts on
        sig = _line_set(data, (b for m in _SIGNATURES_RE.finditer(data) for b in (m.start(), max(m.start(), m.end() - 1))), b"\n")
        words = [w for w in DIRTY_WORDS if w in text]
        spots = [m.start() for m in _EMBEDDED_RE.finditer(text)]
        for w in words:
            p = text.find(w)
            while p >= 0:
                spots.append(p)
                p = text.find(w, p + 1)
        unclean = sig | _line_set(text, spots, "\n") if spots else sig
        self._small_lines(lines, rank, unclean, sig)
        self.lines = n
        return True

    def _small_lines(self, lines: list[str], rank: str | None, unclean: set, sig: set) -> None:
        parser, on_line, emit = self.parser, self.on_line, self.cleaner.emit
        n = len(lines)
        cls = bytearray(n)             # 0 fed, 1 batch line, 2 access line, 3 blank, 4 a known skeleton (as in _block)
        tss: list = [None] * n         # the prefix's timestamp and ranks, where the line has one
        rks: list = [None] * n
        # the kept-rank batch lines in a layout known, read column by column before the loop (_small_rows)
        rows = _small_rows(lines, rank, unclean)
        todo = bytearray(b"\x01") * n  # the lines the loop looks at: all but those rows
        skipped = 0                    # characters of the lines not fed (what on_line would have counted)
        if rows is not None:
            at, row_ts, row_ranks = rows[0], rows[-2], rows[-1]
            for i, t, r in zip(at, row_ts, row_ranks):
                cls[i] = 1
                tss[i] = t
                rks[i] = r
                todo[i] = 0
            skipped = sum(map(len, map(lines.__getitem__, at))) + len(at)
        done = 0                       # rows handed to the series so far
        match, http = _PREFIX_RE.match, _HTTP_RE.match
        heads = ("Decode batch", "Prefill batch")
        gap = 0                        # the first line of the current gap
        batch_seen = parser.batch_rank is not None
        memo, known, between, mask = self._memo, self._memo.known, self._between, _MASK_RE.sub
        events = parser.events
        # the last content line is fed whatever it is (a message cut at the input's end is matched on it)
        last_content = next((i for i in range(n - 1, -1, -1) if lines[i].strip(" \t")), -1)
        for i in compress(range(n), todo):
            l = lines[i]
            c = 0
            m = None
            key = None
            if i not in unclean:
                if l[:1] == "[":
                    m = match(l)
                    if m is not None:
                        e = m.end()
                        if l.startswith(heads, e):
                            # another rank's batch line is accounted for; one of the kept rank that is not
                            # among the rows (a layout not learned, a value the parser reads otherwise) is fed
                            if m[2].strip(" ") != rank:
                                c = 1
                        elif " HTTP/" in l and http(l):
                            c = 2
                        elif i != last_content and len(l) <= KEY_MAX and not any(w in l for w in MEMO_EXCLUDE):
                            key = mask("#", l[e:])
                            if key in known and between():
                                c = 4
                elif not l.strip(" \t"):
                    c = 3
                elif " HTTP/" in l and http(l):
                    c = 2
            if c:
                cls[i] = c
                if m is not None:
                    tss[i] = m[1]
                    rks[i] = m[2]
                skipped += len(l) + 1
                continue
            if gap < i:
                if rows is not None and done < len(rows[0]) and rows[0][done] < i:
                    upto = bisect_left(rows[0], i, done)
                    _add_columns(parser.batches, rows, done, upto)
                    done = upto
                batch_seen = self._gap_lists(lines, cls, tss, rks, gap, i, rank, batch_seen)
            gap = i + 1
            seen = False
            if i in sig:
                p = match(l) if l[:1] == "[" else None
                seen = bool((p is not None and l.startswith(heads, p.end())) or (" HTTP/" in l and http(l)))
            if key is not None and between():
                made = (events.total, len(parser.tracebacks), len(parser.versions))
                for k, t in emit(i + 1, l):
                    on_line(k, t, None, False)
                memo.learned(key, between() and made == (events.total, len(parser.tracebacks), len(parser.versions)))
            else:
                for k, t in emit(i + 1, l):
                    on_line(k, t, None, seen)
            if not batch_seen and parser.batch_rank is not None:
                batch_seen = True
        if rows is not None and done < len(rows[0]):
            _add_columns(parser.batches, rows, done, len(rows[0]))
        if gap < n:
            self._gap_lists(lines, cls, tss, rks, gap, n, rank, batch_seen)
        self.chars += skipped
        for i in range(max(0, n - TAIL), n):
            self._tail.append((i + 1, lines[i], cls[i] != 0))
        last = next((i for i in range(n - 1, -1, -1) if cls[i] != 3), None)
        if last is not None and (cls[last] != 0 or lines[last].strip()):
            self._last_content = (last + 1, lines[last], cls[last] == 0)
        self._end()

    def _split_gap(self, ls, cl, tss, rks, kind_of, base: int, rank, batch_seen: bool) -> bool:
        """A gap (these lists of its lines) holding lines of known skeletons (class 4) while a record
        is open: those are fed, with the batch kind before them (kind_of), until the parser is between
        records again; the rest is told to the parser as usual. True once the first batch line is known."""
        count, pos = len(ls), 0
        while pos < count:
            k = -1 if self._between() else cl.find(4, pos)
            end = count if k < 0 else k
            if end > pos:
                batch_seen = self._gap_lists(ls, cl, tss, rks, pos, end, rank, batch_seen, base)
            if k < 0:
                return batch_seen
            kind = kind_of(k)
            for n, text in self.cleaner.emit(base + k, ls[k]):
                self.on_line(n, text, kind, False)
            pos = k + 1
        return batch_seen

    def _gap_lists(self, lines, cls, tss, rks, a: int, b: int, rank, batch_seen: bool, base: int = 1) -> bool:
        """Tell the parser about lines a..b-1 of these lists (none of them fed; line a is number
        base + a); True once the first batch line is known."""
        count = b - a
        blanks = cls.count(3, a, b)
        batches = cls.count(1, a, b)
        http = cls.count(2, a, b)
        ts = [t for t in tss[a:b] if t is not None]
        ranks = {r.strip(" ") for r in rks[a:b] if r}
        ranks.discard("")
        fb = None
        if not batch_seen and batches:
            bi = cls.find(1, a, b)
            fb = (base + bi, rank or None, _msg(lines[bi]))
            batch_seen = True
        head = lambda k, a=a, count=count: [(base + a + j, lines[a + j]) for j in range(min(k, count))]  # noqa: E731
        self.parser.skip(Gap(count=count, content=count - blanks, closes=bool(blanks or batches), blank=bool(blanks),
                             prefixed=len(ts), first_ts=ts[0] if ts else None, last_ts=ts[-1] if ts else None,
                             ranks=tuple(ranks), http=http, http_last=base + cls.rfind(2, a, b) if http else None,
                             first_batch=fb, _head=head,
                             _recent=[(base + j, lines[j]) for j in range(max(a, b - CONTEXT), b)]))
        return batch_seen

    def _pieces(self, data: bytes) -> Iterator[bytes]:
        """The text in pieces of at most CHUNK bytes: what was read to decide, then the stream."""
        for at in range(0, len(data), CHUNK):
            yield data[at:at + CHUNK]
        while True:
            try:
                data = read_up_to(self.opened.stream, CHUNK)
            except (OSError, EOFError, ValueError) as exc:
                self.opened.notes.append(f"reading stopped early: {_reason(exc)}")
                return
            if not data:
                return
            yield data

    def _loop(self, data: bytes) -> None:
        opened, carry = self.opened, b""
        max_lines = opened.limits.max_lines
        pieces = self._pieces(data)
        data = next(pieces, b"")
        skipping = False          # inside a line already cut to MAX_LINE: drop up to its newline
        while True:
            if data and skipping:
                nl = data.find(b"\n")
                if nl < 0:
                    data = next(pieces, b"")
                    if not data:
                        break
                    continue
                data, skipping = data[nl + 1:], False
                if not data:
                    data = next(pieces, b"")
                    if not data:
                        break
                    continue
            if data:
                data = carry + data
                cut = data.rfind(b"\n") + 1
                carry, data = data[cut:], data[:cut]
                if len(carry) > 4 * MAX_LINE:
                    # a line longer than any kept: its first MAX_LINE characters go on as a line of
                    # their own (counted as cut); the rest is skipped, never held (memory stays flat)
                    data, carry, skipping = data + carry[:4 * MAX_LINE] + b"\n", b"", True
            else:  # the end: a last line without a newline
                data, carry = (carry + b"\n" if carry else b""), b""
            if data:
                if b"\r" in data:
                    data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
                if self._chunk(data, max_lines):
                    break
                if self._progress:
                    self._progress.update(self.lines)
            if not data and not carry:
                break
            data = next(pieces, b"")
            if not data and not carry:
                break
        self._end()

    def _end(self) -> None:
        parser = self.parser
        if self._last_content is not None and not self._last_content[2]:
            lineno, text, _ = self._last_content
            parser.skip(Gap(last_text=text, last_msg=_msg(text)))
        parser.last_lines([(n, t) for n, t, accounted in self._tail if accounted])
        if self._cut:
            self.opened.notes.append(f"{self._cut} line(s) longer than {MAX_LINE // 1024} KiB were cut to their first "
                                     f"{MAX_LINE // 1024} KiB")
        if self._progress:
            self._progress.done()

    # -- one chunk ------------------------------------------------------------------------
    def _chunk(self, data: bytes, max_lines: int) -> bool:
        if self.lines == 0:
            # the input's first FIRST_BLOCK lines on their own (the memo of line classes learns there)
            cut = -1
            for _ in range(FIRST_BLOCK):
                cut = data.find(b"\n", cut + 1)
                if cut < 0:
                    break
            if 0 <= cut < len(data) - 1 and self._native_chunk(data[:cut + 1], max_lines):
                return self._chunk(data[cut + 1:], max_lines)
        if self._native_chunk(data, max_lines):
            return False
        _polars()
        import polars as pl
        text = data.decode("utf-8", "replace")
        self.chars += len(text)
        lines = pl.Series("l", [text]).str.split("\n").explode()
        lines = lines.slice(0, len(lines) - 1)          # the chunk ends with a newline
        start = self.lines + 1                          # the first line's number
        stopped = False
        if self.lines + len(lines) > max_lines:
            lines = lines.slice(0, max(0, max_lines - self.lines))
            self.opened.notes.append(f"stopped reading at the cap of {max_lines:,} lines (--max-lines); "
                                     "the diagnosis is on what was read")
            stopped = True
        n = len(lines)
        if not n:
            return stopped
        self.lines += n
        # the words the cleaner acts on are looked for per line only in a chunk that holds one (found
        # in the same pass over the bytes as the signatures)
        if self.signatures is not None:
            flagged, words = self.signatures.scan(data, lines)
        else:
            flagged, words = pl.repeat(False, n, dtype=pl.Boolean, eager=True), [w for w in DIRTY_WORDS if w.encode() in data]
        if len(flagged) != n:
            flagged = flagged.slice(0, n)
        at = 0
        while at < n:
            # the input's first lines in a short block: the skeletons learned there apply to the rest
            size = FIRST_BLOCK if start + at == 1 else BLOCK_ROWS
            self._block(lines.slice(at, size), flagged.slice(at, size), start + at, words)
            at += size
        return stopped

    # -- one chunk in C (diag/_lines.c) -----------------------------------------------------------
    def _native_chunk(self, data: bytes, max_lines: int) -> bool:
        """This chunk classified by the C classifier (the classes _block and _block_known give, the kept
        rank found and layouts learned as they do; then the memo of line classes, the rows, the lines
        fed and the gaps as _finish_block makes them): False, with nothing done, where it does not
        apply (no module, a signature left to polars, the line cap within the chunk, more ranks than
        it counts, a line before the first batch line that clean-up may turn into one)."""
        native = _native()
        parser = self.parser
        if native is None or self.signatures is None:
            return False
        got = self.signatures.marks(data)
        if got is None:
            return False
        marks, words = got
        start = self.lines + 1
        wb = tuple(w.encode() for w in words)
        rank = parser.batch_rank
        first_batch_done = rank is not None
        # before the kept rank is known no line is of it (b"\0" is no rank)
        res = native.classify(data, marks, wb, rank.encode() if rank is not None else b"\0",
                              [lay[4] for lay in self._layouts], start, MAX_LINE)
        if res is None or self.lines + res[0] > max_lines:
            return False
        offs = memoryview(res[1]).cast("q")

        def line(i: int) -> str:
            return data[offs[i]:offs[i + 1] - 1].decode("utf-8", "replace")

        if rank is None:
            # the kept rank: the first batch line's (as _block finds it); a line before it that clean-up
            # may turn into a batch line of another rank sends the chunk to _block (line by line)
            flags = res[3]
            fb = flags.translate(_BATCH_BIT).find(1)
            if fb >= 0:
                dirty = flags.translate(_DIRTY_BIT)
                j = dirty.find(1, 0, fb)
                while j >= 0:
                    t = line(j)
                    if "Decode batch" in t or "Prefill batch" in t:
                        return False
                    j = dirty.find(1, j + 1, fb)
                rank = res[6][res[5][fb] - 1].decode("ascii", "replace") if res[5][fb] else ""
                res = native.classify(data, marks, wb, rank.encode(), [lay[4] for lay in self._layouts], start, MAX_LINE)
                if res is None:
                    return False
        rb = rank.encode() if rank is not None else b"\0"

        # a kept-rank batch line no layout took: a layout learned from the first of them (as _rows does)
        while 6 in res[2]:
            if len(self._layouts) >= MAX_LAYOUTS or self._learned >= 4 * MAX_LAYOUTS:
                break
            self._learned += 1
            lay = _frame_layout(line(res[2].find(6)))
            if lay is None:
                break
            self._layouts.append(lay)
            res = native.classify(data, marks, wb, rb, [lay[4] for lay in self._layouts], start, MAX_LINE)
            if res is None:
                return False
        n, _, cls, flags, tse_b, rk, ranks, kb, last_kind, rows = res
        tse = memoryview(tse_b).cast("i")
        self.lines += n
        self.chars += len(data) if data.isascii() else len(data.decode("utf-8", "replace"))
        g = cls.translate(_GAP_CLASS)        # 1 batch, 2 access, 3 blank, 0 the rest (4: the memo, below)
        if rows[0]:
            parser.batches.add_arrays(rows)
        # the memo of line classes (as _memo_classes): prefixed lines that are none of the classes
        learn: dict[int, str] = {}
        if g.find(0) >= 0:
            known = self._memo.known
            last = next((j for j in range(n - 1, -1, -1) if g[j] != 3), -1)
            for i in _zeros(g):
                f = flags[i]
                if f & _CANDIDATE != _PREFIXED or offs[i + 1] - offs[i] - 1 > KEY_MAX:
                    continue
                t = line(i)
                if any(w in t for w in MEMO_EXCLUDE):
                    continue
                key = _MASK_RE.sub("#", t[_PREFIX_RE.match(t).end():])
                if key in known and i != last:
                    g[i] = 4
                else:
                    learn[i] = key
        pf = flags.translate(_PREFIX_BIT)
        carry = self._carry_kind

        def ts(j: int) -> str:
            return data[offs[j] + 1:offs[j] + tse[j]].decode("ascii", "replace")

        def rank_of(j: int) -> str | None:
            return ranks[rk[j] - 1].decode("ascii", "replace") if rk[j] else ("" if pf[j] else None)

        def gap(a: int, b: int) -> None:
            nonlocal first_batch_done
            if g.find(4, a, b) >= 0 and not self._between():
                split(a, b)
                return
            count = b - a
            blanks, batches, http = g.count(3, a, b), g.count(1, a, b), g.count(2, a, b)
            first = None
            if batches and not first_batch_done:
                bi = g.find(1, a, b)
                first = (start + bi, rank or None, _msg(line(bi)))
                first_batch_done = True
            prefixed = pf.count(1, a, b)
            first_ts = last_ts = None
            if prefixed:
                first_ts, last_ts = ts(pf.find(1, a, b)), ts(pf.rfind(1, a, b))
            ids = set(rk[a:b])
            ids.discard(0)
            parser.skip(Gap(count=count, content=count - blanks, closes=bool(blanks or batches), blank=bool(blanks),
                            prefixed=prefixed, first_ts=first_ts, last_ts=last_ts,
                            ranks=tuple(ranks[k - 1].decode("ascii", "replace") for k in ids), http=http,
                            http_last=start + g.rfind(2, a, b) if http else None, first_batch=first,
                            _head=lambda k, a=a, count=count: [(start + a + j, line(a + j)) for j in range(min(k, count))],
                            _recent=[(start + j, line(j)) for j in range(max(a, b - CONTEXT), b)]))

        def split(a: int, b: int) -> None:
            """A gap with lines of known skeletons while a record is open (as _feed's split)."""
            nonlocal first_batch_done
            ls = [line(j) for j in range(a, b)]
            cl = bytearray(g[a:b])
            tss = [ts(j) if pf[j] else None for j in range(a, b)]
            rks = [rank_of(j) for j in range(a, b)]
            first_batch_done = self._split_gap(
                ls, cl, tss, rks, lambda k: kb[a + k] if kb[a + k] != 2 else (carry if carry is not None else -1),
                start + a, rank, first_batch_done)

        prev = 0
        for i in _zeros(g):      # (after the memo's classes: a line it accounts for is no longer 0)
            if prev < i:
                gap(prev, i)
            prev = i + 1
            lineno = start + i
            kind = kb[i] if kb[i] != 2 else (carry if carry is not None else -1)
            raw = line(i)
            f = flags[i]
            if f & _BATCH:
                first_batch_done = True
            if f & _LONG:
                self._cut += len(raw) >= MAX_LINE
                raw = raw[:MAX_LINE]
            self._feed_kept(lineno, raw, kind, learn.get(i), bool(f & _SIG and f & (_BATCH | _HTTP)))
        if prev < n:
            gap(prev, n)
        if last_kind != 2:
            self._carry_kind = last_kind
        self._tail.extend((start + j, line(j), g[j] != 0) for j in range(max(0, n - TAIL), n))
        j = next((j for j in range(n - 1, -1, -1) if g[j] != 3), None)
        if j is not None:
            t = line(j)
            if g[j] != 0 or t.strip():
                self._last_content = (start + j, t, g[j] == 0)
        return True

    def _block(self, lines, flagged, start: int, words: list[str] = DIRTY_WORDS) -> None:
        import polars as pl
        df = pl.DataFrame({"l": lines, "sig": flagged}).with_row_index("i")
        c = pl.col("l")
        long = c.str.len_bytes() >= MAX_LINE
        dirty = c.str.contains(EMBEDDED) | long
        if words:
            dirty = c.str.contains_any(words) | dirty
        rank = self.parser.batch_rank
        if rank is not None and self._layouts:
            self._block_known(df, dirty, long, start, rank)
            return
        df = df.with_columns(
            batch=c.str.contains(BATCH), http=c.str.contains(HTTP_OK), blank=c.str.contains(BLANK), dirty=dirty,
            long=long)
        if rank is None:
            firsts = df.filter(pl.col("batch"))
            if firsts.height:
                first_row = firsts["i"][0]
                # a line before it that the cleaner may turn into a batch line of another rank
                early = df.filter((pl.col("i") < first_row) & pl.col("dirty")
                                  & c.str.contains_any(["Decode batch", "Prefill batch"]))
                if early.height:
                    self._slow_chunk(df, start)
                    return
                rank = (firsts["l"].str.extract(PREFIX, 2)[0] or "").strip()
        df = _prefixed(df)
        clean = ~pl.col("dirty") & ~pl.col("sig")
        mine = pl.col("batch") & (pl.col("rank").fill_null("") == (rank or "")) if rank is not None else pl.lit(False)
        df = df.with_columns(mine=mine)
        rows, good = self._rows(df.filter(pl.col("mine") & clean), start)
        df = df.with_columns(cls=_classes(good))
        self._finish_block(df, rows, start, rank)

    def _block_known(self, df, dirty, long, start: int, rank: str) -> None:
        """A block once the kept rank and its layouts are known: the batch lines those layouts take
        whole (three lines in four of a serving log) are found first, their timestamps sliced from
        the prefix; only the other lines are classified and their prefixes read."""
        import polars as pl
        c = pl.col("l")
        regexes = self._ranked(rank)
        which = pl.lit(None, dtype=pl.Int8)
        for k in range(len(regexes) - 1, -1, -1):
            which = pl.when(c.str.contains(regexes[k])).then(pl.lit(k, dtype=pl.Int8)).otherwise(which)
        df = df.with_columns(dirty=dirty, long=long, _k=which)
        good = pl.col("_k").is_not_null() & ~pl.col("dirty") & ~pl.col("sig")
        df = df.with_columns(_good=good)
        hit = df.filter(pl.col("_good"))
        rest = df.filter(~pl.col("_good")).drop("_good", "_k")
        width = 1 + len(rank) + 1 if rank else 1      # ' TP0' and ']' after the timestamp
        hit = hit.with_columns(ts=c.str.slice(1, c.str.find("]", literal=True) - width))
        out = []
        for k, (_, slots, kind, _, _) in enumerate(self._layouts):
            part = hit.filter(pl.col("_k") == k)
            if part.height:
                out.append(_values(part, slots, kind))
        # the other lines as in _block (a batch line of the kept rank in a new layout is learned there)
        c = pl.col("l")
        rest = _prefixed(rest.with_columns(batch=c.str.contains(BATCH), http=c.str.contains(HTTP_OK),
                                           blank=c.str.contains(BLANK)))
        clean = ~pl.col("dirty") & ~pl.col("sig")
        rest = rest.with_columns(mine=pl.col("batch") & (pl.col("rank").fill_null("") == rank))
        more, good = self._rows(rest.filter(pl.col("mine") & clean), start)
        rest = rest.with_columns(cls=_classes(good))
        hit = hit.select("i", "l", "sig", "dirty", "long", "ts", batch=pl.lit(True), http=pl.lit(False), blank=pl.lit(False),
                         rank=pl.lit(rank, dtype=pl.String), mine=pl.lit(True), cls=pl.lit(1, dtype=pl.Int32))
        df = pl.concat([hit, rest.select(hit.columns)]).sort("i")
        rows = _seconds(pl.concat(out), start) if out else None
        if more is not None:
            rows = more if rows is None else pl.concat([rows, more]).sort("i")
        elif rows is not None and len(out) > 1:
            rows = rows.sort("i")
        self._finish_block(df, rows, start, rank)

    def _finish_block(self, df, rows, start: int, rank) -> None:
        df, learn = self._memo_classes(df)
        if rows is not None and rows.height:
            self.parser.batches.add_frame(rows)
        self._feed(df, start, rank, learn)

    def _memo_classes(self, df):
        """Class 4 for the lines of known skeletons (see MASK; the last content line of the block is
        fed whatever it is: a message cut at the input's end is matched on it), and the skeletons of
        the other candidate lines to learn from as they are fed: {row: skeleton}."""
        import polars as pl
        cand = df.filter((pl.col("cls") == 0) & pl.col("ts").is_not_null() & ~pl.col("batch") & ~pl.col("http")
                         & ~pl.col("dirty") & ~pl.col("sig"))
        if not cand.height:
            return df, {}
        c = pl.col("l")
        cand = cand.filter((c.str.len_bytes() <= KEY_MAX) & ~c.str.contains_any(MEMO_EXCLUDE))
        keys = cand.select("i", key=c.str.replace(PREFIX, "").str.replace_all(MASK, "#"))
        known = self._memo.known
        if known and keys.height:
            last = df.select(pl.col("i").filter(pl.col("cls") != 3).last()).item()
            hit = pl.col("key").is_in(pl.Series(list(known), dtype=pl.String).implode()) & (pl.col("i") != last)
            rows = keys.filter(hit)["i"]
            if rows.len():
                df = df.with_columns(cls=pl.when(pl.col("i").is_in(rows.implode())).then(4).otherwise(pl.col("cls")))
                keys = keys.filter(~hit)
        return df, dict(zip(keys["i"].to_list(), keys["key"].to_list()))

    def _rows(self, df, start: int):
        """The batch statistics of well-formed batch lines of the kept rank: (rows as COLUMNS, their
        row indexes). Each line is matched whole against the layouts learned so far (one regex
        each, built by _small_layout from a line: a line it takes is read the same by the parser);
        lines no layout takes go to the parser instead."""
        import polars as pl
        none = (None, pl.Series("i", [], dtype=pl.UInt32))
        if not df.height:
            return none
        todo = df.select("i", "l", "ts")
        layouts = self._layouts
        out = []
        k = 0
        while todo.height:
            if k == len(layouts):
                if len(layouts) >= MAX_LAYOUTS or self._learned >= 4 * MAX_LAYOUTS:
                    break
                self._learned += 1
                got = _frame_layout(todo["l"][0])
                if got is None:
                    break
                layouts.append(got)
            regex, slots, kind, _, _ = layouts[k]
            k += 1
            todo = todo.with_columns(_hit=pl.col("l").str.contains(regex))
            hit = todo.filter(pl.col("_hit"))
            if not hit.height:      # a layout learned from another chunk's lines
                continue
            todo = todo.filter(~pl.col("_hit")).drop("_hit")
            out.append(_values(hit, slots, kind))
        if not out:
            return none
        rows = _seconds(pl.concat(out).sort("i") if len(out) > 1 else out[0], start)
        return rows, rows["i"]

    def _ranked(self, rank: str):
        """The layouts learned so far as regexes of the kept rank's lines (the prefix's ranks spelled
        out: a line one of them takes is a batch line of that rank in that layout)."""
        got = self._ranked_for
        if got is None or got[0] != (rank, len(self._layouts)):
            ranks = re.escape(" " + rank) if rank else ""
            head = r"^\[" + TS + ranks + r"\]" + _SP + "?"
            got = self._ranked_for = ((rank, len(self._layouts)), [head + body for _, _, _, body, _ in self._layouts])
        return got[1]

    def _slow_chunk(self, df, start: int) -> None:
        """This chunk line by line (the cleaner is plain, so only its per-line clean-up applies)."""
        for i, raw in enumerate(df["l"].to_list()):
            lineno = start + i
            self._tail.append((lineno, raw, False))
            fed = False
            for n, text in self.cleaner.emit(lineno, raw[:MAX_LINE]):
                self.on_line(n, text, None, False)
                fed = True
            if raw.strip():
                self._last_content = (lineno, raw, fed)
            if len(raw) >= MAX_LINE:
                self._cut += 1

    def _feed_kept(self, lineno: int, raw: str, kind, key, signal_in_batch: bool) -> None:
        """One kept line to the cleaner and the parser. A line whose skeleton the memo is learning
        (key) is fed as plain text, and the memo learns whether it made anything (an event, a
        traceback, a version) or ended outside a record; both readers (C and polars) share this."""
        parser, events = self.parser, self.parser.events
        if key is not None and self._between():
            made = (events.total, len(parser.tracebacks), len(parser.versions))
            for m, text in self.cleaner.emit(lineno, raw):
                self.on_line(m, text, kind, False)
            self._memo.learned(key, self._between() and made == (events.total, len(parser.tracebacks), len(parser.versions)))
            return
        for m, text in self.cleaner.emit(lineno, raw):
            self.on_line(m, text, kind, signal_in_batch)

    def _between(self) -> bool:
        """Whether a line of a known skeleton may be accounted for now (see _Memo)."""
        return self.parser.between_records and not getattr(self.on_line, "capturing", False)

    def _feed(self, df, start: int, rank: str | None, learn: dict | None = None) -> None:
        """Feed the parser this chunk's lines of class 0 and tell it about the others, in order."""
        import polars as pl
        parser = self.parser
        kept = pl.col("cls") == 0
        # the kind of the last kept-rank batch line before each line (for the parser's events)
        kinds = pl.when(pl.col("mine") | (pl.col("batch") & kept & (pl.col("rank").fill_null("") == (rank or ""))))\
            .then(pl.col("l").str.contains("Decode batch", literal=True).cast(pl.Int8)).otherwise(None)
        df = df.with_columns(_kind=kinds).with_columns(seg=kept.cast(pl.UInt32).cum_sum() - kept.cast(pl.UInt32),
                                                       kind_before=pl.col("_kind").forward_fill().shift(1))
        carry = self._carry_kind
        fed = df.select("i", "l", "kind_before", "long", "sig", "batch", "http", "cls").filter(kept).drop("cls")
        acc = df.select("i", "l", "cls", "ts", "rank", "seg").filter(~kept)
        gaps = {}
        aggs = dict(
            n=pl.len(), content=(pl.col("cls") != 3).sum(), closes=((pl.col("cls") == 1) | (pl.col("cls") == 3)).any(),
            blank=(pl.col("cls") == 3).any(),
            prefixed=pl.col("ts").is_not_null().sum(), first_ts=pl.col("ts").drop_nulls().first(),
            last_ts=pl.col("ts").drop_nulls().last(), ranks=pl.col("rank").filter(pl.col("rank") != "").unique(),
            http=(pl.col("cls") == 2).sum(), http_last=pl.col("i").filter(pl.col("cls") == 2).max(),
            first=pl.col("i").first(), memo=(pl.col("cls") == 4).any(),
            batch_first=pl.col("i").filter(pl.col("cls") == 1).first(),
        )
        if acc.height and fed.height < FEW_GAPS:
            # few lines fed (the memo of line classes leaves most blocks with none): each gap is a
            # run of rows, reduced on its own (a group_by and a window over the block cost more)
            one = {**aggs, "ranks": aggs["ranks"].implode()}     # one row per gap (unique() alone is a column)
            cuts = [-1] + fed["i"].to_list() + [df.height]
            pos = 0                           # gaps are runs of acc's rows too, in order
            for seg in range(len(cuts) - 1):
                count = cuts[seg + 1] - cuts[seg] - 1
                if count <= 0:
                    continue
                part = acc.slice(pos, count)
                pos += count
                row = part.select(**one).row(0, named=True)
                tail = part.slice(max(0, count - CONTEXT))
                gaps[seg] = (row, [(start + i, t) for i, t in zip(tail["i"].to_list(), tail["l"].to_list())])
        elif acc.height:
            g = acc.group_by("seg", maintain_order=True).agg(**aggs)
            recent = acc.filter(pl.int_range(pl.len()).reverse().over("seg") < CONTEXT).select("seg", "i", "l")
            near: dict[int, list] = {}
            for s, i, t in recent.iter_rows():
                near.setdefault(s, []).append((start + i, t))
            for row in g.iter_rows(named=True):
                gaps[row["seg"]] = (row, near.get(row["seg"], []))
        lines = df["l"]
        first_batch_done = parser.batch_rank is not None

        def gap_of(row: dict, near: list) -> Gap:
            nonlocal first_batch_done
            first = row["first"]

            def head(k: int, first=first, count=row["n"]) -> list:  # a gap's lines are consecutive
                k = min(k, count)
                return [(start + first + j, t) for j, t in enumerate(lines.slice(first, k).to_list())] if k else []

            fb = None
            if not first_batch_done and row["batch_first"] is not None:
                bi = row["batch_first"]
                t = lines[bi]
                fb = (start + bi, rank or None, _msg(t))
                first_batch_done = True
            return Gap(count=row["n"], content=row["content"], closes=row["closes"], blank=row["blank"], prefixed=row["prefixed"],
                       first_ts=row["first_ts"], last_ts=row["last_ts"], ranks=tuple(r for r in row["ranks"] if r),
                       http=row["http"], http_last=None if row["http_last"] is None else start + row["http_last"],
                       first_batch=fb, _head=head, _recent=near)

        def split(first: int, count: int) -> None:
            """A gap with lines of known skeletons while a record is open: those are fed until the
            parser is between records again, the rest accounted for as usual."""
            nonlocal first_batch_done
            sub = df.slice(first, count)
            ls, cl = sub["l"].to_list(), bytearray(sub["cls"].to_list())
            tss, rks, kb = sub["ts"].to_list(), sub["rank"].to_list(), sub["kind_before"].to_list()
            first_batch_done = self._split_gap(
                ls, cl, tss, rks, lambda k: kb[k] if kb[k] is not None else (carry if carry is not None else -1),
                start + first, rank, first_batch_done)

        def skip(seg: int) -> None:
            got = gaps.get(seg)
            if got is None:
                return
            row, near = got
            if row["memo"] and not self._between():
                split(row["first"], row["n"])
            else:
                parser.skip(gap_of(row, near))

        seg = 0
        for i, raw, kind, is_long, sig, is_batch, is_http in fed.iter_rows():
            skip(seg)
            seg += 1
            lineno = start + i
            if kind is None:
                kind = carry if carry is not None else -1
            if is_long:
                self._cut += len(raw) >= MAX_LINE
                raw = raw[:MAX_LINE]
            if is_batch and not first_batch_done:
                first_batch_done = True
            self._feed_kept(lineno, raw, kind, learn.get(i) if learn else None, bool(sig and (is_batch or is_http)))
        skip(seg)
        # what the next chunk needs: the kind of the last kept-rank batch line, the tail, the last content line
        last_kind = df.select(pl.col("_kind").drop_nulls().last()).item()
        if last_kind is not None:
            self._carry_kind = last_kind
        n = df.height
        tail = df.slice(max(0, n - TAIL))
        self._tail.extend((start + i, t, c != 0) for i, t, c in zip(tail["i"], tail["l"], tail["cls"]))
        content = df.select("i", "l", "cls").filter(pl.col("cls") != 3).tail(1)
        if content.height:
            i, t, c = content.row(0)
            if c != 0 or t.strip():
                self._last_content = (start + i, t, c == 0)

# the C classifier's flags and classes (diag/_lines.c)
_BATCH, _HTTP, _SIG, _LONG, _DIRTY, _MINE, _PREFIXED = 1, 2, 4, 8, 16, 32, 64
_CANDIDATE = _BATCH | _HTTP | _SIG | _DIRTY | _PREFIXED       # a memo candidate has only _PREFIXED of these
_GAP_CLASS = bytes([0, 1, 2, 3, 4, 1, 0] + [0] * 249)           # 5 another rank's batch line, 6 a line fed
_PREFIX_BIT = bytes(1 if k & _PREFIXED else 0 for k in range(256))
_BATCH_BIT = bytes(1 if k & _BATCH else 0 for k in range(256))
_DIRTY_BIT = bytes(1 if k & _DIRTY else 0 for k in range(256))


def _zeros(buf) -> Iterator[int]:
    """Where buf (a bytearray of classes) holds 0, in order (a generator: a chunk of a million lines
    fed holds no list of them)."""
    i = buf.find(0)
    while i >= 0:
        yield i
        i = buf.find(0, i + 1)


def _native():
    from .native import lines
    return lines()


def _line_set(data, positions, nl) -> set[int]:
    """The 0-based lines (separated by `nl`) that hold these offsets of `data`."""
    out: set[int] = set()
    row, pos = 0, 0
    for at in sorted(positions):
        row += data.count(nl, pos, at)
        pos = at
        out.add(row)
    return out


def _small_rows(lines: list[str], rank: str | None, unclean: set):
    """The kept-rank batch lines (not in `unclean`) whose batch statistics are read without the
    parser, as columns in line order: (line indexes, kinds, line numbers, seconds, the 7 value
    columns, timestamps, ranks as the prefix spells them); None when there are none.

    Layouts are learned as the line-by-line path learns them: from the first such line no layout
    known takes (at most MAX_LAYOUTS, after at most 4 * MAX_LAYOUTS tries); a line a layout is
    not learned from cannot be taken by one learned later (the layout is the line's own heads),
    so each layout is matched against all the lines left at once, in C. A line no layout takes
    is fed to the parser."""
    if rank is None:
        return None
    ranks = " " + rank if rank else ""          # the PREFIX group that strips to the kept rank
    kept = re.compile(r"\[" + TS + re.escape(ranks) + r"\]" + _SP + "?(?:Decode|Prefill) batch").match
    left = list(compress(range(len(lines)), map(kept, lines)))
    if unclean:
        left = [i for i in left if i not in unclean]
    got: list = []                                # (layout's whole-line fullmatch, place, kind, indexes, matches)
    learned = 0
    while left:
        if len(got) >= MAX_LAYOUTS or learned >= 4 * MAX_LAYOUTS:
            break
        learned += 1
        first = lines[left[0]]
        e = _PREFIX_RE.match(first).end()
        layout = _small_layout(first[e:])
        if layout is None or layout[0](first, e) is None:
            left = left[1:]                       # read by the parser
            continue
        full, place, kind = _whole_line(layout, ranks)
        found = list(map(full, map(lines.__getitem__, left)))
        got.append((place, kind, list(compress(left, found)), list(filter(None, found))))
        left = list(compress(left, map(not_, found)))
    got = [g for g in got if g[2]]
    if not got:
        return None
    at: list = []
    kinds: list = []
    secs: list = []
    ts_all: list = []
    rk_all: list = []
    values: list = [[] for _ in range(7)]
    for place, kind, idx, found in got:
        cols = list(zip(*map(_GROUPS, found)))
        ts, rk, vals = cols[0], cols[1], cols[2:]
        floats = []
        for col in vals:
            try:
                floats.append(list(map(float, col)))
            except ValueError:                    # True / False (cuda graph)
                floats.append([1.0 if v == "True" else 0.0 if v == "False" else float(v) for v in col])
        nan = [NAN] * len(idx)
        floats.append(nan)
        for dst, src in zip(values, place(floats)):
            dst.extend(src)
        at.extend(idx)
        kinds.extend([kind] * len(idx))
        secs.extend(_ts_columns(ts))
        ts_all.extend(ts)
        rk_all.extend(rk)
    if len(got) > 1:                              # layouts interleave: back into line order (2+ rows)
        pick = itemgetter(*sorted(range(len(at)), key=at.__getitem__))
        at, kinds, secs, ts_all, rk_all = (list(pick(col)) for col in (at, kinds, secs, ts_all, rk_all))
        values = [list(pick(col)) for col in values]
    return [at, kinds, list(map(add, at, repeat(1))), secs, *values, ts_all, rk_all]


_GROUPS = re.Match.groups


def _ts_columns(ts) -> list[float]:
    """Seconds of these timestamps as batches.ts_seconds computes them (the day's start, then the
    hours, minutes and seconds added in that order), a day at a time."""
    days = set(map(itemgetter(slice(0, 10)), ts))
    if len(days) == 1:
        base = ts_seconds(next(iter(days)) + " 00:00:00")
        if base == base:
            # the day's start, its hours and its minutes: one sum per minute the rows name, added
            # in ts_seconds' order (whole seconds: exact), then each row's seconds
            minute = list(map(itemgetter(slice(11, 16)), ts))
            start = {k: base + int(k[:2]) * 3600 + int(k[3:]) * 60 for k in set(minute)}
            rest = map(itemgetter(slice(17, None)), ts)
            if "," in "".join(ts):
                rest = map(methodcaller("replace", ",", "."), rest)
            return list(map(add, map(start.__getitem__, minute), map(float, rest)))
    out = []
    day = [None, NAN]
    for t in ts:
        if t[:10] != day[0]:
            day[0], day[1] = t[:10], ts_seconds(t[:10] + " 00:00:00")
        base = day[1]
        out.append(base + int(t[11:13]) * 3600 + int(t[14:16]) * 60 + float(t[17:].replace(",", ".") or 0) if base == base
                   else ts_seconds(t))
    return out


def _add_columns(series, rows: list, a: int, b: int) -> None:
    """Rows a..b-1 of _small_rows' columns into the series."""
    _, kinds, lines, secs, *rest = rows
    series.add_rows(kinds[a:b], lines[a:b], secs[a:b], [col[a:b] for col in rest[:7]])


def _layout_of(msg: str):
    """The layout (heads, keys) of a batch message split at ', ', or None (too many parts, or not one)."""
    parts = msg.split(", ")
    if len(parts) >= 4 * MAX_PARTS:
        return None
    return _layout(parts)


def _small_layout(msg: str):
    """(fullmatch of a batch message in this line's layout, the series each group fills, kind): the
    parser's reading of the same line (batches.row_of) for every line the pattern takes."""
    got = _layout_of(msg)
    if got is None:
        return None
    heads, keys = got
    slot_of = {}
    for si, wanted in enumerate(FIELDS.values()):
        j = next((keys[k] for k in wanted if k in keys), None)
        if j is not None:
            slot_of[j] = si
    pieces, slots = [], []
    for j, head in enumerate(heads):
        if not head.endswith(": "):
            pieces.append(re.escape(head))
        elif j in slot_of:
            pieces.append(re.escape(head) + _VALUE)
            slots.append(slot_of[j])
        else:
            pieces.append(re.escape(head) + "[^,:]*")      # a value no column takes (cuda graph: True)
    body = ", ".join(pieces)
    return re.compile(body).fullmatch, tuple(slots), 1 if heads[0].startswith("Decode") else 0, body


def _whole_line(layout, ranks: str):
    """(fullmatch of a whole line: the prefix with these ranks, then the layout's message; an
    itemgetter putting its values, then NAN, into the 7 columns; kind) of a _small_layout."""
    _, slots, kind, body = layout
    at = {slot: j for j, slot in enumerate(slots)}
    place = itemgetter(*[at.get(col, len(slots)) for col in range(7)])
    head = r"\[(" + TS + r")(" + re.escape(ranks) + r")\]" + _SP + "?"
    return re.compile(head + body).fullmatch, place, kind


def _frame_layout(line: str):
    """(a regex that a whole batch line in this line's layout matches, {column: (part, characters
    before its value)}, kind, the regex's message part, the layout as the C classifier takes it:
    (heads as bytes, each head's column or -1 for a value no column takes or -2 for none, kind)),
    for the fast reader's chunks: the layout _small_layout reads, the line split at ', ' (the
    prefix holds no ', ')."""
    m = _PREFIX_RE.match(line)
    if m is None:
        return None
    got = _layout_of(line[m.end():])
    if got is None:
        return None
    heads, keys = got
    slots, slot_at = {}, {}
    for col, wanted in FIELDS.items():
        j = next((keys[k] for k in wanted if k in keys), None)
        if j is not None:
            slots[col] = (j, len(heads[j]))
            slot_at[j] = col
    pieces, spec = [], []
    columns = list(FIELDS)
    for j, head in enumerate(heads):
        if not head.endswith(": "):
            pieces.append(re.escape(head))
            spec.append(-2)
        elif j in slot_at:      # a number (True or False there is rare: the parser reads that line)
            pieces.append(re.escape(head) + _NUMBER)
            spec.append(columns.index(slot_at[j]))
        else:
            pieces.append(re.escape(head) + "[^,:]*")
            spec.append(-1)
    body = ", ".join(pieces) + "$"
    regex = PREFIX + body
    if re.match(regex, line) is None:     # deterministic (no part of it can take another length): linear
        return None
    kind = 1 if heads[0].startswith("Decode") else 0
    return regex, slots, kind, body, (tuple(h.encode() for h in heads), tuple(spec), kind)


def _prefixed(df):
    """The timestamp and the ranks (stripped) of each line with a PREFIX, in one pass of it."""
    import polars as pl
    prefix = pl.col("_prefix")
    return df.with_columns(_prefix=pl.col("l").str.extract_groups(PREFIX)).with_columns(
        rank=prefix.struct.field("2").str.strip_chars(" "), ts=prefix.struct.field("1")).drop("_prefix")


def _classes(good):
    """Each line's class: 0 fed to the parser, 1 batch, 2 access line, 3 blank (4: _memo_classes).
    `good`: the rows whose batch statistics were read (_rows)."""
    import polars as pl
    clean = ~pl.col("dirty") & ~pl.col("sig")
    return (pl.when(~clean).then(0)
            .when(pl.col("batch") & (~pl.col("mine") | pl.col("i").is_in(good.implode()))).then(1)
            .when(pl.col("batch")).then(0)
            .when(pl.col("http")).then(2)
            .when(pl.col("blank")).then(3)
            .otherwise(0))


def _values(hit, slots: dict, kind: int):
    """The series of batch lines in one layout (rows i, ts, l): their values split at ', ' once."""
    import polars as pl
    hit = hit.select("i", "ts", _p=pl.col("l").str.split(", "))     # split once (an eager select does not share it)
    parts = pl.col("_p")
    values = {}
    for col in FIELDS:
        got = slots.get(col)
        if got is None:
            values[col] = pl.lit(None, dtype=pl.Float64)
            continue
        j, width = got
        part = parts.list.get(j)
        # the first part holds the prefix too ('… Decode batch. #running-req: 2'): its value is after the last ': '
        v = part.str.slice(width) if j else part.str.split(": ").list.last()
        values[col] = v.cast(pl.Float64)
    return hit.select("i", "ts", *(e.alias(c) for c, e in values.items()), kind=pl.lit(kind, dtype=pl.Int8))


def _seconds(rows, start: int):
    """Rows of _values as COLUMNS: line numbers, and seconds as batches.ts_seconds computes them."""
    import polars as pl
    from .parse.batches import COLUMNS
    ts = pl.col("ts")
    day = ts.str.slice(0, 10).str.to_date("%Y-%m-%d", strict=False).cast(pl.Int64) * 86400
    sec = (day + ts.str.slice(11, 2).cast(pl.Int64, strict=False) * 3600 + ts.str.slice(14, 2).cast(pl.Int64, strict=False) * 60
           ).cast(pl.Float64) + ts.str.slice(17).str.replace(",", ".", literal=True).cast(pl.Float64, strict=False).fill_null(0.0)
    rows = rows.with_columns(line=(pl.col("i").cast(pl.Int64) + start), ts=sec)
    return rows.select("i", *COLUMNS)


def _layout(parts: list) -> tuple[list[str], dict[str, int]] | None:
    """A batch message's layout from one line split at ', ': the text before each value ('#running-req: ')
    and where each key is (the last part with it, as batch_fields reads it)."""
    heads, keys = [], {}
    for j, part in enumerate(parts):
        if part is None:
            break
        key, sep, _ = part.rpartition(": ")
        if sep:
            heads.append(key + sep)
            keys[key.rsplit(". ", 1)[-1]] = j
        else:
            heads.append(part)
    if not heads or not heads[0].startswith(("Decode batch", "Prefill batch")):
        return None
    return heads, keys


def _msg(text: str) -> str:
    """The message after a PREFIX-form prefix (as the parser splits it)."""
    from .parse.sglang import PREFIX as RX
    m = RX.match(text)
    return text[m.end():] if m else text


# polars' allocator (jemalloc) keeps freed pages for 10 s by default, which at 10k lines per chunk
# is most of the process's peak; 200 ms keeps memory flat at no measurable CPU cost (0 ms costs
# ~50% more system time). One arena and no thread caches: polars' two threads otherwise each hold
# pages of their own (peak 145 -> 135 MiB at 128 MiB, the same CPU). Set before polars loads; a
# value the user set is left alone.
JEMALLOC_CONF = "dirty_decay_ms:200,muzzy_decay_ms:0,narenas:1,tcache:false"


def _polars() -> bool:
    if "polars" not in sys.modules:
        os.environ.setdefault("_RJEM_MALLOC_CONF", JEMALLOC_CONF)
    try:
        import polars  # noqa: F401
        return True
    except Exception:
        return False


def _tty() -> bool:
    try:
        return sys.stderr is not None and sys.stderr.isatty() and not os.environ.get("DIAG_NO_PROGRESS")
    except (ValueError, AttributeError):
        return False


class _Progress:
    """Lines, bytes and an ETA on stderr while a large input is read (a TTY only; after 2 s)."""

    def __init__(self, opened: Opened) -> None:
        self.opened, self.t0, self.shown, self.last = opened, time.monotonic(), False, 0.0

    def update(self, lines: int) -> None:
        now = time.monotonic()
        if now - self.t0 < 2 or now - self.last < 0.5:
            return
        self.last = now
        done = _bytes_read(self.opened)
        size = self.opened.size if not self.opened.packed else None
        eta = ""
        if size and done:
            rate = done / (now - self.t0)
            eta = f", {done / size:.0%}, about {max(0, (size - done) / rate):.0f} s left"
        sys.stderr.write(f"\rdiag: reading {self.opened.name}: {lines:,} lines, {done / 2**20:,.0f} MiB{eta}   ")
        sys.stderr.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\r" + " " * 100 + "\r")
            sys.stderr.flush()


def _bytes_read(opened: Opened) -> int:
    s = opened.stream
    while s is not None:
        if hasattr(s, "count") and isinstance(getattr(s, "count"), int):
            return s.count
        s = getattr(s, "_rest", None)
    return 0


__all__ = ["FastReader", "Signatures", "Gap", "CHUNK", "FAST_MIN_BYTES"]
