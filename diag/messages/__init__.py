"""The message catalog at run time: what a log message is (README.md beside this file).

    from diag.messages import Catalog
    cat = Catalog.open()
    m = cat.match("Not enough memory. Please try to increase --mem-fraction-static.")
    m.family, m.category, m.event, m.fields, cat.versions_of(m)

The catalog is one read-only SQLite file in the package. Opening it reads nothing but the
connection; each line costs one indexed look-up of its words in the pre-filter table and then
the regexes of the few messages anchored on those words (compiled on first use with RE2, and
cached). Start-up and per-line cost do not grow with the number of messages.
"""
from __future__ import annotations

import re
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path

from .store import CATALOG_PATH, FAMILY_PREFIX, decompress, family_number, message_number, parse_ranges
from . import template as _template
from .template import line_keys, literal_chars, needles, to_regex

__all__ = ["Catalog", "Match", "Entry", "CatalogError"]

MEMO_SIZE = 8192            # distinct message texts remembered (a repeated line costs one match)
MEMO_MAX_LEN = 2048         # longer texts are matched each time (the memo stays bounded in bytes)
CAND_SIZE = 8192            # distinct word sets remembered (lines that differ only in numbers)
REGEX_SIZE = 512            # compiled regexes kept (RE2 keeps up to ~50 KB of DFA cache per pattern in use)
ENTRY_SIZE = 4096           # catalog rows kept
MAX_CANDIDATES = 256        # catalog rows looked at per line at most
KEY_SIZE = 8192             # line keys whose messages are remembered (one key each: a request id is new)
KEPT_ENTRIES = 1024         # entries kept between runs (diag/cache.py; ~1 KB each, the file is read whole)
PREFIX_MIN = 30             # literal characters a cut message must show to be matched by its start
PREFIX_TRIES = 16           # templates tried for a cut message


class CatalogError(RuntimeError):
    pass


# words too common in messages to tie a retold line to one (see Catalog.match_loose)
_COMMON = frozenset(("error", "failed", "value", "should", "which", "there", "please", "found", "given", "expected",
                     "cannot", "could", "while", "using", "their", "other", "only", "must", "about", "after"))


@dataclass(frozen=True)
class Entry:
    """One message of the catalog (a template and where it comes from)."""
    n: int
    id: str
    family: str
    component: str
    template: str | None
    regex: str
    fields: tuple[tuple[str, str], ...]     # (group, type)
    specific: bool
    kind: str
    level: str
    category: str | None
    event: str
    auto: bool                               # category/event decided by the build's heuristics
    versions: frozenset[str]
    n_releases: int
    origin: str                              # extracted | hand
    name: str | None = None                  # the family's review alias
    meaning: str | None = None
    action: str | None = None
    renames: dict = field(default_factory=dict)
    module: str | None = None                # where the newest release raises it
    function: str | None = None
    family_releases: int = 0
    needles: tuple[str, ...] = ()            # literal pieces every rendering holds verbatim
    max_score: int = 0                       # literal characters (no whitespace): the best score it can get
    fallback: bool = False                   # a hand wrapper that yields to any other entry matching the line

    @property
    def exception(self) -> str | None:
        return self.level if self.kind in ("raise", "assert") else None


@dataclass(frozen=True)
class Match:
    id: str
    family: str
    name: str | None
    template: str | None
    fields: dict
    category: str | None
    event: str
    component: str
    module: str | None
    function: str | None
    kind: str
    level: str                               # exception type, or log level
    versions: frozenset[str]
    span: tuple[int, int]
    score: int                               # literal characters matched (whitespace not counted)
    partial: bool = False                    # the text ends inside the message (a cut paste): its start matched
    loose: bool = False                      # retold around the message's identifiers, not its wording


TAIL_MIN = 12        # literal characters of a message cut only inside its last value


def _prefix_cuts(template: str, text: str, limit: int = 4):
    """Where to cut a template so that its start is what a cut text shows: right after an occurrence
    (last first) of the last word of the text (3+ letters) that stands in the template's first line
    outside its placeholders."""
    first = template.split("\n", 1)[0]
    literal = []
    depth = 0
    for ch in first:                      # the template with its placeholders blanked out
        depth += ch == "{"
        literal.append(" " if depth else ch)
        depth -= ch == "}" and depth > 0
    lit = "".join(literal)
    end = len(first.rstrip())
    for word in reversed(_template.TOKEN.findall(text[-400:])):
        spots = [m.end() for m in re.finditer(re.escape(word), lit)]
        if spots:
            for c in [c for c in reversed(spots) if 0 < c < end][:limit]:
                # the value right after the word ('--mem-fraction-static={mfs}.' cut after '0.9.'): the cut
                # that takes the placeholder too comes first, so its field is read
                brace = first.find("{", c, c + 3)
                if brace >= 0 and first[brace:brace + 2] != "{{" and not first[c:brace].strip(" =:'\"`(["):
                    close = first.find("}", brace)
                    if 0 < close < end:
                        yield close + 1
                yield c
            return


def _convert(value: str | None, typ: str, leading: bool = False):
    """A field's text as its type. With `leading` (a type a review gave to an untyped field), a
    number is read from the start of the text: an untyped field that ends its template takes the
    rest of the line ('2048 self.tree_cache.evictable_size()=0' when a message's lines were joined)."""
    if value is None:
        return None
    from ..numbers import to_bytes, to_float, to_int
    if leading and typ in ("int", "hex", "float", "num"):
        head = value.strip().split(None, 1)
        value = head[0].rstrip(".,;:)") if head else ""
    if typ in ("int", "hex"):
        return to_int(value)
    if typ in ("float", "num"):
        return to_float(value)
    if typ == "size":
        return to_bytes(value)
    return value


def _nonspace(text: str) -> int:
    """Characters that are not whitespace as RE2's \\s sees it (ASCII)."""
    return len(text) - text.count(" ") - text.count("\t") - text.count("\n") - text.count("\r") - text.count("\f")


NEAR_MIN = 0.8       # share of a template's literal words a rewording keeps (Catalog.match_near)
NEAR_WORDS = 6       # and the fewest words for the test to mean anything


def _lcs(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence of two word lists (both short: a message's words)."""
    if len(a) * len(b) > 40_000:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


class _LRU(dict):
    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def put(self, key, value):
        if len(self) >= self.size:
            # drop the oldest quarter (dicts keep insertion order): amortised O(1)
            for k in list(self)[: self.size // 4]:
                del self[k]
        self[key] = value


_ROW = "n, component, family, template, regex, specific, kind, level, category, event, auto, versions, n_releases, hand"


class Catalog:
    _cached: dict[str, "Catalog"] = {}
    _lock = threading.Lock()

    def __init__(self, path: Path | str = CATALOG_PATH):
        self.path = Path(path)
        if not self.path.exists():
            raise CatalogError(f"message catalog not found: {self.path}")
        try:
            self.db = sqlite3.connect(f"file:{self.path}?mode=ro&immutable=1", uri=True, check_same_thread=False)
            self.db.execute("SELECT 1 FROM meta LIMIT 1")
        except sqlite3.Error as e:
            raise CatalogError(f"message catalog unreadable: {self.path}: {e}") from None
        self._memo = _LRU(MEMO_SIZE)
        self._memo_all = _LRU(MEMO_SIZE // 8)
        self._cand = _LRU(CAND_SIZE)
        self._anchor = _LRU(KEY_SIZE)
        self._regex = _LRU(REGEX_SIZE)
        self._cut = _LRU(REGEX_SIZE // 4)
        self._entries = _LRU(ENTRY_SIZE)
        self._releases: dict[str, list[str]] | None = None
        self._reviews = _LRU(ENTRY_SIZE)
        self._famrel = _LRU(ENTRY_SIZE)
        self._vocab = _LRU(ENTRY_SIZE)
        self._zd: bytes | None = None
        self._compile = None
        self._ids: dict[str, int] = {}      # entry id -> row, of the entries built or read from the memo
        self._kept = self._kept_anchors = None
        if self.path.resolve() == Path(CATALOG_PATH).resolve():
            # the rows the lines of earlier runs needed, as entries, and the anchor words' messages,
            # kept between runs (diag/cache.py): building an entry from its row costs ~0.2 ms
            from ..cache import Kept
            here = Path(__file__).resolve().parent
            sources = [self.path, here / "__init__.py", here / "template.py", here / "store.py"]
            self._kept = Kept("catalog-entries", sources, limit=KEPT_ENTRIES)
            self._kept_anchors = Kept("catalog-anchors", sources, limit=KEY_SIZE)

    @classmethod
    def open(cls, path: Path | str | None = None) -> "Catalog":
        key = str(path or CATALOG_PATH)
        with cls._lock:
            cat = cls._cached.get(key)
            if cat is None:
                cat = cls._cached[key] = cls(key)
            return cat

    # -- rows ------------------------------------------------------------------------------
    def releases(self, component: str) -> list[str]:
        if self._releases is None:
            rel: dict[str, list[str]] = {}
            for comp, _idx, v in self.db.execute("SELECT component, idx, version FROM releases ORDER BY component, idx"):
                rel.setdefault(comp, []).append(v)
            self._releases = rel
        return self._releases.get(component, [])

    def _word(self, n: int | None) -> str | None:
        if n is None:
            return None
        w = self._vocab.get(n)
        if w is None:
            row = self.db.execute("SELECT text FROM vocab WHERE n = ?", (n,)).fetchone()
            w = row[0] if row else ""
            self._vocab.put(n, w)
        return w

    def _zdict(self) -> bytes:
        if self._zd is None:
            row = self.db.execute("SELECT value FROM blobs WHERE key = 'zdict'").fetchone()
            self._zd = row[0] if row else b""
        return self._zd

    def _review(self, fn: int):
        """(name, category, event, meaning, action, fields) of a reviewed family, else Nones."""
        row = self._reviews.get(fn)
        if row is None:
            row = self.db.execute("SELECT name, category, event, meaning, action, fields FROM reviews WHERE family = ?",
                                  (fn,)).fetchone() or (None,) * 6
            self._reviews.put(fn, row)
        return row

    def _family_releases(self, fn: int, comp: str) -> int:
        k = self._famrel.get(fn)
        if k is None:
            rel: set[int] = set()
            for (vers,) in self.db.execute("SELECT versions FROM messages WHERE family = ?", (fn,)):
                rel |= parse_ranges(vers)
            k = len(rel)
            self._famrel.put(fn, k)
        return k

    def _entry(self, row) -> Entry:
        import json
        n, comp, fn, blob, regex, specific, kind, level, category, event, auto, versions, n_rel, hand = row
        comp = self._word(comp)
        name, rcat, revent, meaning, action, renames = self._review(fn)
        template = decompress(blob, self._zdict()) if blob is not None else None
        module = function = None
        if hand is not None:
            extra = json.loads(hand)
            mid = fam = extra.get("id", "")
            vs = frozenset([extra["versions"]]) if extra.get("versions") else frozenset()
            meaning = meaning or extra.get("meaning")
            action = action or extra.get("action")
            module = extra.get("source")
        else:
            mid = f"m-{n:012x}"
            fam = f"{FAMILY_PREFIX.get(comp, 'msg')}-{fn:08x}"
            rel = self.releases(comp)
            vs = frozenset(rel[i] for i in parse_ranges(versions) if i < len(rel))
            best = -1
            for mod, fnc, vers in self.db.execute("SELECT module, function, versions FROM locations WHERE message = ?", (n,)):
                newest = max(parse_ranges(vers), default=-1)
                if newest > best:
                    best, module, function = newest, mod, fnc
            module, function = self._word(module), self._word(function)
        if regex is None:
            regex, fields = to_regex(template)
            fields = tuple((g, t) for g, _, t in fields)
        else:
            import re
            try:
                fields = tuple((g, "str") for g in re.compile(regex).groupindex)
            except re.error:
                fields = ()
        return Entry(
            n=n, id=mid, family=fam, component=comp, template=template, regex=regex, fields=fields,
            specific=bool(specific), kind=self._word(kind), level=self._word(level),
            category=rcat or self._word(category), event=revent or self._word(event),
            auto=bool(auto) and not (rcat or revent), versions=vs, n_releases=n_rel,
            origin="hand" if hand is not None else "extracted", name=name, meaning=meaning, action=action,
            renames=json.loads(renames) if renames else {}, module=module, function=function,
            family_releases=self._family_releases(fn, comp) if hand is None else 0,
            needles=needles(template) if template else (),
            max_score=literal_chars(template, spaces=False) if template else len(regex),
            fallback=bool(hand is not None and extra.get("fallback")))

    def _entries_for(self, ns: list[int]) -> list[Entry]:
        out, missing = [], []
        kept = self._kept
        for n in ns:
            e = self._entries.get(n)
            if e is None and kept is not None:
                e = kept.get(n)
                if e is not None:
                    self._entries.put(n, e)
                    self._ids[e.id] = n
            if e is None:
                missing.append(n)
            else:
                out.append(e)
        if missing:
            q = ",".join("?" * len(missing))
            for row in self.db.execute(f"SELECT {_ROW} FROM messages WHERE n IN ({q})", missing):
                e = self._entry(row)
                self._entries.put(e.n, e)
                self._ids[e.id] = e.n
                if kept is not None:
                    kept.put(e.n, e)
                out.append(e)
        return out

    def get(self, mid: str) -> Entry | None:
        """A message by its id ('m-…' or a hand entry's id)."""
        n = self._ids.get(mid)              # an entry built already (a match's): no hash of a hand id
        if n is None:
            n = message_number(mid)
        if n is None:
            return None
        got = self._entries_for([n])
        if not got:
            return None
        return got[0] if got[0].id == mid else None

    def reviewed_category(self, mid: str) -> str | None:
        """The category a person gave a message: a hand-list entry's, or its family review's when
        the review sets one (a review that only names a family leaves the build's guess, which
        this does not return)."""
        e = self.get(mid)
        if e is None:
            return None
        if e.origin == "hand":
            return e.category
        fn = self._family_n(e.family)
        return self._review(fn)[1] if fn is not None else None

    def _family_n(self, fid: str) -> int | None:
        row = self.db.execute("SELECT family FROM reviews WHERE name = ? OR id = ?", (fid, fid)).fetchone()
        return row[0] if row else family_number(fid)

    def family(self, fid: str) -> list[Entry]:
        """The messages of a family (by id or review name), oldest first."""
        fn = self._family_n(fid)
        rows = self.db.execute(f"SELECT {_ROW} FROM messages WHERE family = ?", (fn,)).fetchall()
        entries = [e for e in (self._entry(r) for r in rows) if e.family == fid or e.name == fid]
        order = {v: i for comp in {e.component for e in entries} for i, v in enumerate(self.releases(comp))}
        return sorted(entries, key=lambda e: (min((order.get(v, 1 << 30) for v in e.versions), default=1 << 30), e.id))

    def family_info(self, fid: str) -> dict | None:
        entries = self.family(fid)
        if not entries:
            return None
        e0 = entries[0]
        vs = set().union(*(e.versions for e in entries))
        spec = [e for e in entries if e.specific] or entries
        newest = max(spec, key=lambda e: (max((self.releases(e.component).index(v) for v in e.versions
                                               if v in self.releases(e.component)), default=-1), e.id))
        return {"id": e0.family, "component": e0.component, "name": e0.name, "category": newest.category,
                "event": newest.event, "reviewed": not newest.auto and e0.origin == "extracted",
                "meaning": e0.meaning, "action": e0.action, "fields": e0.renames,
                "versions": [v for v in self.releases(e0.component) if v in vs] or sorted(vs),
                "messages": [e.id for e in entries]}

    def search(self, words: str | list[str], limit: int = 50) -> list[Entry]:
        """Messages whose template contains every word (case-insensitive), most widespread first.
        A scan of the whole file: for people at a terminal, not for the per-line path."""
        ws = [w.lower() for w in (words.split() if isinstance(words, str) else list(words))]
        if not ws:
            return []
        zd = self._zdict()
        hits = []
        for n, blob, regex, nrel in self.db.execute("SELECT n, template, regex, n_releases FROM messages"):
            text = (decompress(blob, zd) if blob is not None else regex or "").lower()
            if all(w in text for w in ws):
                hits.append((-(nrel or 0), n))
        hits.sort()
        ns = [n for _, n in hits[:limit]]
        by_n = {e.n: e for e in self._entries_for(ns)}
        return [by_n[n] for n in ns if n in by_n]

    def meta(self) -> dict:
        import json
        return {k: json.loads(v) for k, v in self.db.execute("SELECT key, value FROM meta")}

    def locations(self, entry: Entry) -> list[dict]:
        rel = self.releases(entry.component)
        out = []
        for module, function, kind, level, versions, names in self.db.execute(
                "SELECT module, function, kind, level, versions, names FROM locations WHERE message = ?", (entry.n,)):
            out.append({"module": self._word(module), "function": self._word(function), "kind": self._word(kind),
                        "level": self._word(level),
                        "versions": [rel[i] for i in sorted(parse_ranges(versions)) if i < len(rel)],
                        "names": [self._word(int(x)) for x in names.split(",") if x]})
        return out

    def module_versions(self, module: str) -> list[str]:
        """The releases in which a module (a file: 'sglang.srt.mem_cache.memory_pool') raises or logs
        any message, in release order; [] when the catalog does not know it."""
        try:
            row = self.db.execute("SELECT component, versions FROM modules WHERE module = ?", (module,)).fetchone()
        except sqlite3.Error:           # a catalog built before the table existed
            return []
        if not row:
            return []
        rel = self.releases(row[0])
        return [rel[i] for i in sorted(parse_ranges(row[1])) if i < len(rel)]

    def printing_versions(self, message: str) -> list[str]:
        """The releases that can print this text: every message that matches it as well as the best one."""
        matches = [m for m in self.match_all(message) if m.versions and m.component == "sglang"]
        if not matches:          # a hand entry may name the line better, but only extracted messages carry releases
            return []
        best = max(m.score for m in matches)
        vs = set().union(*(m.versions for m in matches if m.score == best))
        return [v for v in self.releases("sglang") if v in vs]

    def versions_of(self, match: Match | Entry) -> list[str]:
        """The releases that print this message, in release order."""
        comp = match.component
        order = self.releases(comp)
        if not order:
            return sorted(match.versions)
        return [v for v in order if v in match.versions]

    # -- matching --------------------------------------------------------------------------
    def _regex_of(self, e: Entry):
        rx = self._regex.get(e.n)
        if rx is None:
            if self._compile is None:
                try:
                    import re2
                    self._compile = re2.compile
                except ImportError:       # google-re2 missing: the patterns are plain re syntax too
                    import re
                    self._compile = re.compile
            try:
                rx = self._compile(e.regex)
            except Exception:             # a bad hand-written regex never breaks a run
                rx = False
            self._regex.put(e.n, rx)
        return rx

    def _candidates(self, message: str) -> list[Entry]:
        keys = tuple(line_keys(message))
        if not keys:
            return []
        ns = self._cand.get(keys)
        if ns is None:
            # the messages of each key, remembered per key: a line that differs from earlier ones in one
            # token (a request id) asks the database about that token only
            anchor, kept = self._anchor, self._kept_anchors
            new = [k for k in keys if k not in anchor]
            if new and kept is not None:
                for k in new:
                    v = kept.get(k)
                    if v is not None:
                        anchor.put(k, v)
                new = [k for k in new if k not in anchor]
            if new:
                got: dict[str, list[int]] = {k: [] for k in new}
                q = ",".join("?" * len(new))
                for k, n in self.db.execute(f"SELECT key, message FROM anchors WHERE key IN ({q})", new):
                    got[k].append(n)
                for k, v in got.items():
                    anchor.put(k, v)
                    if v and kept is not None:      # a catalog word (a word no message holds is not kept: request ids)
                        kept.put(k, v)
            found: set[int] = set()
            for k in keys:
                v = anchor.get(k)
                if v is None:       # pushed out of the memo by this very line's keys (a hostile line)
                    v = [r[0] for r in self.db.execute("SELECT message FROM anchors WHERE key = ?", (k,))]
                found.update(v)
            ns = sorted(found)[:MAX_CANDIDATES]          # bounded for hostile lines
            self._cand.put(keys, ns)
        return self._entries_for(ns) if ns else []

    def _try(self, e: Entry, message: str) -> Match | None:
        rx = self._regex_of(e)
        if not rx:
            return None
        m = rx.search(message)
        if m is None:
            return None
        gd = m.groupdict()
        types = dict(e.fields)
        fields = {}
        captured = 0
        for g, v in gd.items():
            if v:
                captured += _nonspace(v)
            name, _, typed = e.renames.get(g, g).partition(":")
            fields[name] = _convert(v, typed or types.get(g, "str"), leading=bool(typed))
        span = m.span()
        return Match(id=e.id, family=e.family, name=e.name, template=e.template, fields=fields,
                     category=e.category, event=e.event, component=e.component,
                     module=e.module, function=e.function,
                     kind=e.kind, level=e.level, versions=e.versions, span=span,
                     score=_nonspace(m.group(0)) - captured)

    def _prefix_match(self, message: str, cands: list[Entry]) -> Match | None:
        """A message cut mid-way (the paste or the line ends inside it): the longest start of a
        template, cut at a word boundary of its literal text, that matches up to the end of the
        text, with enough literal text (PREFIX_MIN characters) to be sure. Tried only when nothing
        matched whole."""
        text = message.rstrip()
        if len(text) < TAIL_MIN:
            return None
        best = None
        for e in cands[:PREFIX_TRIES]:
            if not e.specific or e.template is None or not any(p in text for p in e.needles):
                continue
            for cut in _prefix_cuts(e.template, text):
                found = self._try_prefix(e, cut, text)
                # a short message cut only in its last value ('No module named 'vllm.x', the closing quote lost)
                # is all there: it needs no PREFIX_MIN of literal text
                whole = not e.template[cut:].split("\n", 1)[0].strip(" '\"`).,;:]")
                need = TAIL_MIN if whole else PREFIX_MIN
                if found is not None and found.score >= need and (best is None or found.score > best[0]):
                    best = (found.score, found)
                    break
        return best[1] if best else None

    def _head_candidates(self, message: str) -> list[Entry]:
        """The messages whose first two words the text starts with (also after an 'ExceptionType: ')."""
        keys = []
        for part in (message, message.split(": ", 1)[1] if ": " in message[:80] else ""):
            words = _template.TOKEN.findall(part[:200])[:2]
            if len(words) == 2:
                keys.append(" ".join(words))
        if not keys:
            return []
        q = ",".join("?" * len(keys))
        try:
            ns = [r[0] for r in self.db.execute(f"SELECT message FROM heads WHERE key IN ({q}) LIMIT 64", keys)]
        except sqlite3.Error:          # a catalog built before the table existed
            return []
        return [e for e in self._entries_for(ns) if e.specific]

    def _try_prefix(self, e: Entry, cut: int, text: str) -> Match | None:
        if True:
            key = ("\0prefix", e.n, cut)
            rx = self._regex.get(key)
            if rx is None:
                pat, _ = to_regex(e.template[:cut])
                try:
                    rx = self._compile_rx(pat + r"\S{0,40}\s*$")     # the word after it may be cut too
                except Exception:
                    rx = False
                self._regex.put(key, rx)
            if not rx:
                return None
            m = rx.search(text)
            if m is None:
                return None
            score = _nonspace(m.group(0)) - sum(_nonspace(v) for v in m.groupdict().values() if v)
            types = dict(e.fields)
            fields = {}
            for g, v in m.groupdict().items():
                name, _, typed = e.renames.get(g, g).partition(":")
                fields[name] = _convert(v, typed or types.get(g, "str"), leading=bool(typed))
            return Match(id=e.id, family=e.family, name=e.name, template=e.template, fields=fields,
                         category=e.category, event=e.event, component=e.component, module=e.module,
                         function=e.function, kind=e.kind, level=e.level, versions=e.versions,
                         span=m.span(), score=score, partial=True)

    def _compile_rx(self, pattern: str):
        if self._compile is None:
            from .. import rx as RX
            self._compile = lambda p: RX._engine().compile(p)
        return self._compile(pattern)

    def _scan(self, message: str, best_only: bool) -> tuple[Match, ...]:
        cands = [e for e in self._candidates(message)
                 if e.specific and all(p in message for p in e.needles)]
        # most literal text first: once a match is found, no shorter template can beat it
        cands.sort(key=lambda e: (-e.max_score, e.n))
        out = []
        best = -1
        for e in cands:
            if best_only and e.max_score < best:
                break
            m = self._try(e, message)
            if m is not None:
                out.append((m, e))
                if not e.fallback:          # a fallback never stops the search for a specific entry
                    best = max(best, m.score)
        # a hand fallback (a generic wrapper such as 'undefined symbol: {symbol}') yields to every
        # other hand entry that matches the same line, whatever their scores; against extracted
        # messages the scores decide as usual
        curated = any(not e.fallback and e.origin == "hand" for _, e in out)
        out.sort(key=lambda x: (x[1].fallback and curated, -x[0].score, -x[1].family_releases, x[0].id))
        return tuple(m for m, _ in out)

    def match_loose(self, message: str) -> Match | None:
        """The message a line that matches no template retells around the names it copied: every
        snake_case identifier of a reviewed or hand-listed message's text (two at least) is in the
        line ('FP8 ... incompatible (output_partition_size=48 not divisible by block_n=128)').
        A Match with no fields, `partial` and `loose` set (it is not SGLang's wording)."""
        if "_" not in message:
            return None
        key = ("\0loose", message[:4000])
        hit = self._memo.get(key, 0)
        if hit != 0:
            return hit
        names = _template.identifiers(message[:4000])
        if len(names) < 2:
            self._memo.put(key, None)
            return None
        q = ",".join("?" * len(names))
        try:
            rows = self.db.execute(f"SELECT message, n, count(*) FROM idents WHERE key IN ({q}) GROUP BY message",
                                   names).fetchall()
        except sqlite3.Error:            # a catalog built before the table existed
            rows = []
        full = [(c, n) for n, total, c in rows if c == total]
        hit = None
        if full:
            best = max(c for c, _ in full)
            entries = sorted(self._entries_for([n for c, n in full if c == best]),
                             key=lambda e: (-(e.family_releases or 0), e.id))
            low = message.lower()
            # and a word of the message's own text besides the names ('divisible'): names alone are
            # code ('Scheduler(server_args, port_args, gpu_id, tp_rank)')
            e = next((x for x in entries if self.reviewed_category(x.id) is not None and x.template
                      and any(w.lower() in low for w in _template.TOKEN.findall(_template.FIELD.sub(" ", x.template))
                              if len(w) >= 5 and "_" not in w and w.isalpha() and w.lower() not in _COMMON)), None)
            if e is not None:
                hit = Match(id=e.id, family=e.family, name=e.name, template=e.template, fields={}, category=e.category,
                            event=e.event, component=e.component, module=e.module, function=e.function, kind=e.kind,
                            level=e.level, versions=frozenset(), span=(0, 0), score=0, partial=True, loose=True)
        self._memo.put(key, hit)
        return hit

    def match_near(self, message: str) -> Match | None:
        """The message an exception's text is a rewording of, when it matches no template: a build from
        source between releases (a list printed as a tuple, a word added), the same check in other
        words. The template's literal words, nearly all of them, appear in the text in their order
        (NEAR_MIN of them, at least NEAR_WORDS words), it begins with the same word, and no other
        family fits as well. A Match with no fields and no versions, `partial` and `loose` set."""
        text = message[:2000]
        key = ("\0near", text)
        hit = self._memo.get(key, 0)
        if hit != 0:
            return hit
        hit = None
        words = [w.lower() for w in _template.TOKEN.findall(text)]
        if len(words) >= NEAR_WORDS:
            scored = []
            for e in self._candidates(text):
                if not e.template or not e.specific:
                    continue
                lit = [w.lower() for w in _template.TOKEN.findall(_template.FIELD.sub(" ", e.template))]
                if len(lit) < NEAR_WORDS or lit[0] != words[0]:
                    continue
                common = _lcs(lit, words)
                if common >= NEAR_MIN * len(lit) and len(lit) - common <= 3:
                    scored.append((common / len(lit), common, e))
            if scored:
                scored.sort(key=lambda t: (-t[0], -t[1], -(t[2].family_releases or 0), t[2].id))
                best = scored[0]
                rival = next((t for t in scored[1:] if t[2].family != best[2].family), None)
                if rival is None or rival[0] < best[0] - 0.1:
                    e = best[2]
                    hit = Match(id=e.id, family=e.family, name=e.name, template=e.template, fields={}, category=e.category,
                                event=e.event, component=e.component, module=e.module, function=e.function, kind=e.kind,
                                level=e.level, versions=frozenset(), span=(0, 0), score=0, partial=True, loose=True)
        self._memo.put(key, hit)
        return hit

    def match_cut(self, message: str) -> Match | None:
        """The message a text that stops mid-way (the last line of a cut paste) is the start of."""
        whole = self.match(message)
        if whole is not None and whole.score >= PREFIX_MIN:
            return whole
        key = ("\0cut", message)
        hit = self._memo.get(key, 0)
        if hit == 0:
            hit = self._prefix_match(message, self._head_candidates(message))
            other = self._match_cut_anchored(message)
            if other is not None and (hit is None or other.score > hit.score):
                hit = Match(**{**other.__dict__, "partial": True})
            self._memo.put(key, hit)
        if whole is not None and (hit is None or whole.score >= hit.score):
            return whole
        return hit

    def match_all(self, message: str) -> list[Match]:
        """Every catalog message that matches, best first (most literal text matched, then the
        family seen in the most releases)."""
        hit = self._memo_all.get(message)
        if hit is None:
            hit = self._scan(message, best_only=False)
            if len(message) <= MEMO_MAX_LEN:
                self._memo_all.put(message, hit)
        return list(hit)

    def check_at(self, module: str | None, function: str | None, names: list[str]) -> Match | None:
        """The check a failure without a message is, from where it fired and the names it tests
        (diag/messages/sites.py): a Match with no fields and score 0, or None."""
        from .sites import resolve
        key = ("\0site", module, function, tuple(names))
        hit = self._memo.get(key, 0)
        if hit == 0:
            e = resolve(self, module, function, names)
            hit = None if e is None else Match(
                id=e.id, family=e.family, name=e.name, template=e.template, fields={}, category=e.category,
                event=e.event, component=e.component, module=e.module, function=e.function, kind=e.kind,
                level=e.level, versions=frozenset(), span=(0, 0), score=0)   # not its wording: no versions
            self._memo.put(key, hit)
        return hit

    def _match_cut_anchored(self, message: str) -> Match | None:
        """The best match of a line that stops inside a message (the last line of a paste that
        was cut): an extracted (or hand-listed, templated) message whose leading part (40+ letters of literal text) matches
        and runs to the end of the line. None when no long message fits."""
        from .template import to_cut_regex
        best = None
        for e in self._candidates(message):
            if not e.specific or e.origin not in ("extracted", "hand") or not e.template:
                continue
            rx = self._cut.get(e.n)
            if rx is None:
                cut = to_cut_regex(e.template)
                rx = False
                if cut is not None:
                    try:
                        import re2
                        rx = re2.compile(cut[0])
                    except ImportError:
                        import re
                        rx = re.compile(cut[0])
                    except Exception:
                        rx = False
                self._cut.put(e.n, rx)
            if not rx:
                continue
            m = rx.search(message)
            if m is None:
                continue
            gd = m.groupdict()
            types = dict(e.fields)
            captured = sum(_nonspace(x) for x in gd.values() if x)
            score = _nonspace(m.group(0)) - captured
            if best is not None and score <= best.score:
                continue
            fields = {e.renames.get(g, g): _convert(x, types.get(g, "str")) for g, x in gd.items() if x}
            best = Match(id=e.id, family=e.family, name=e.name, template=e.template, fields=fields,
                         category=e.category, event=e.event, component=e.component, module=e.module,
                         function=e.function, kind=e.kind, level=e.level, versions=e.versions, span=m.span(), score=score)
        return best

    def match(self, message: str) -> Match | None:
        """The best match: the most literal characters matched; ties go to the family seen in
        the most releases. Repeated lines are answered from a memo."""
        hit = self._memo.get(message, 0)
        if hit == 0:
            ms = self._scan(message, best_only=True)
            hit = ms[0] if ms else None
            if len(message) <= MEMO_MAX_LEN:
                self._memo.put(message, hit)
        return hit


def known_name(name: str) -> bool:
    """Whether a rule may name this message: a review name, a family or message id, a hand entry's
    id, or 'prefix.*' covering any of them (or a component)."""
    cat = Catalog.open()
    db = cat.db
    if name.endswith(".*"):
        prefix = name[:-1]
        like = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        if db.execute("SELECT 1 FROM reviews WHERE name LIKE ? ESCAPE '\\' LIMIT 1", (like,)).fetchone():
            return True
        comp = name[:-2]
        return any(cat.releases(comp)) or bool(db.execute(
            "SELECT 1 FROM messages WHERE hand LIKE ? LIMIT 1", (f'%"id": "{prefix}%',)).fetchone())
    if db.execute("SELECT 1 FROM reviews WHERE name = ? LIMIT 1", (name,)).fetchone():
        return True
    if cat.family(name):
        return True
    if cat.get(name) is not None:
        return True
    return bool(db.execute("SELECT 1 FROM messages WHERE hand LIKE ? LIMIT 1", (f'%"id": "{name}"%',)).fetchone())
