"""SGLang's command-line flags and environment variables per version (bundled catalog).

A `Catalog` answers for one SGLang version, or for every version a log might come from
(a range read off message templates): a flag counts as present only when it is present
in all of them. Suggested fixes go through `Catalog.translate`, which maps renamed flags
to the spelling of that version and drops flags the version lacks.
"""
from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from . import rx
from . import versions as V

DATA = Path(__file__).parent / "data" / "flags.json"

# Renames whose new form is not a plain flag (value-style replacements, and pairs the
# catalog records only as help text). old flag -> (new flag, value for the new flag).
VALUE_RENAMES = {
    "--disable-cuda-graph": [("--cuda-graph-backend-decode", "disabled"), ("--cuda-graph-backend-prefill", "disabled")],
    "--disable-piecewise-cuda-graph": [("--cuda-graph-backend-prefill", "disabled")],
    "--enforce-piecewise-cuda-graph": [("--cuda-graph-backend-prefill", "tc_piecewise")],
    "--enable-breakable-cuda-graph": [("--cuda-graph-backend-prefill", "breakable")],
}
# Plain renames (old -> new), both directions are used. The catalog's replaced_by adds more.
RENAMES = {
    "--mamba-scheduler-strategy": "--mamba-radix-cache-strategy",
    "--cuda-graph-max-bs": "--cuda-graph-max-bs-decode",
    "--cuda-graph-bs": "--cuda-graph-bs-decode",
    "--piecewise-cuda-graph-max-tokens": "--cuda-graph-max-bs-prefill",
    "--piecewise-cuda-graph-tokens": "--cuda-graph-bs-prefill",
    "--piecewise-cuda-graph-compiler": "--cuda-graph-tc-compiler",
    "--stream-output": "--incremental-streaming-output",
    "--nsa-prefill-backend": "--dsa-prefill-backend",
    "--nsa-decode-backend": "--dsa-decode-backend",
    "--speculative-dflash-draft-window-size": "--speculative-draft-window-size",
    "--enable-hierarchical-cache": "--enable-hicache",
}


# Flags of releases older than the catalog's oldest (0.4.6.post5) that a fix must still be spelled
# with for a log of those releases: flag -> (the releases that accept it, what replaced it). The
# ends come from the message catalog: 0.3.1-0.3.5.post2 print "The option '--disable-flashinfer'
# will be deprecated in the next release. Please use '--attention-backend triton' instead." (and the
# same for '--disable-flashinfer-sampling' / '--sampling-backend pytorch'), and 0.3.6 removed both;
# FlashInfer's sampling kernels (and so the sampling switch) came with 0.1.24 ("Sampling failed,
# fallback to top_k=1 strategy" is printed from 0.1.24 on).
LEGACY_FLAGS: dict[str, tuple[str, str]] = {
    "--disable-flashinfer": ("<0.3.6", "--attention-backend triton"),
    "--disable-flashinfer-sampling": (">=0.1.24,<0.3.6", "--sampling-backend pytorch"),
}


# Flags people carry over from other servers (vLLM) or from SGLang releases older than the
# catalog, and what SGLang calls the same setting. None: SGLang has no such setting (drop it).
FOREIGN: dict[str, str | None] = {
    "--gpu-memory-utilization": "--mem-fraction-static",
    "--max-model-len": "--context-length",
    "--max-num-seqs": "--max-running-requests",
    "--max-num-batched-tokens": "--max-prefill-tokens",
    "--enforce-eager": "--disable-cuda-graph",
    "--block-size": "--page-size",
    "--speculative-model": "--speculative-draft-model-path",
    "--num-speculative-tokens": "--speculative-num-draft-tokens",
    "--enable-reasoning": "--reasoning-parser",
    "--enable-prefix-caching": None,      # SGLang's radix cache is on by default
    "--use-v2-block-manager": None,
    "--swap-space": None,
    "--disable-log-requests": None,
    "--ngram-prompt-lookup-max": None,
}


@lru_cache(maxsize=1)
def _data() -> dict:
    return json.loads(DATA.read_text())


def catalog_versions() -> list[str]:
    return list(_data()["versions"])


def newest() -> str:
    return catalog_versions()[-1]


@dataclass
class FlagInfo:
    name: str
    type: str | None
    default: object
    choices: list[str] | None
    switch: bool
    nargs: str | None
    deprecated: bool
    replaced_by: str | None
    help: str
    negatable: bool = False
    dest: str | None = None


# ServerArgs fields whose flag's argparse dest is another name: ServerArgs.from_cli_args copies
# args.tensor_parallel_size into tp_size (and so on), so a server_args dump prints tp_size=8
FIELD_OF_DEST = {"tp_size": "tensor_parallel_size", "pp_size": "pipeline_parallel_size",
                 "dp_size": "data_parallel_size", "ep_size": "expert_parallel_size"}


def _derived_build(idx: tuple[int, ...]):
    """What a Catalog of these versions looks flags up in: per version name -> (primary, definition),
    the names every one accepts, and the flag of each dest (read only; shared by every Catalog of
    the same versions)."""
    accepted = [_accepted(vi) for vi in idx]
    newest = accepted[-1]
    common = frozenset(n for n in newest if all(n in acc for acc in accepted))
    dest: dict[str, str] = {}
    for name, (primary, d) in newest.items():
        if name == primary and d.get("dest") and not d.get("deprecated"):
            dest.setdefault(d["dest"], name)
    for name, (primary, d) in newest.items():
        if name == primary and d.get("dest"):
            dest.setdefault(d["dest"], name)
    return accepted, common, dest


_DERIVED: dict[tuple[int, ...], tuple] = {}


def _derived(idx: tuple[int, ...]):
    got = _DERIVED.get(idx)
    if got is None:
        if len(_DERIVED) >= 64:        # version sets a run meets are few; bounded all the same
            _DERIVED.clear()
        got = _DERIVED[idx] = _derived_build(idx)
    return got


@dataclass
class Catalog:
    """The flags of one SGLang version, or the flags common to a set of versions."""
    versions: list[str]
    requested: str = "unknown"     # what the log or the user said
    note: str = ""                 # how the versions were chosen
    found: "V.VersionRange | str | None" = None   # the version the log shows (None: unknown)
    _idx: list[int] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        all_v = catalog_versions()
        self._idx = [all_v.index(v) for v in self.versions]
        self._accepted, self._common, self._dest = _derived(tuple(self._idx))


    # -- lookups ---------------------------------------------------------------
    @property
    def label(self) -> str:
        if len(self.versions) == 1:
            return self.versions[0]
        return f"{self.versions[0]}–{self.versions[-1]}"

    def _def(self, entry: dict) -> dict | None:
        """The definition valid in every chosen version (env entries), or None."""
        found = None
        for vi in self._idx:
            d = next((x["def"] for x in entry["defs"] if x["v"][0] <= vi <= x["v"][1]), None)
            if d is None:
                return None
            found = found or d
        return found

    def primary(self, name: str) -> str | None:
        """The newest version's catalog name for a flag or alias accepted by every chosen version."""
        if name not in self._common:
            return None
        return self._accepted[-1][name][0]

    def has(self, name: str) -> bool:
        if name.startswith("--no-"):
            base = self.flag("--" + name[5:])
            if base and base.negatable:
                return True
        return name in self._common

    def flag(self, name: str) -> FlagInfo | None:
        if name not in self._common:
            return None
        primary, d = self._accepted[-1][name]
        help_text = _data()["flags"].get(primary, {}).get("help", "")
        deprecated = any(acc[name][1].get("deprecated") for acc in self._accepted)
        return FlagInfo(name=primary, type=d.get("type"), default=d.get("default"), choices=d.get("choices"),
                        switch=bool(d.get("switch")), nargs=d.get("nargs"), deprecated=deprecated,
                        replaced_by=d.get("replaced_by"), help=help_text,
                        negatable=bool(d.get("negatable")), dest=d.get("dest"))

    def legacy(self, name: str) -> bool:
        """Whether `name` is a flag of releases older than the catalog (LEGACY_FLAGS) that the log's
        version can be (an unknown version can be any)."""
        entry = LEGACY_FLAGS.get(name)
        if entry is None:
            return False
        if self.found is None:
            return True
        if isinstance(self.found, str):
            return V.parse_spec(entry[0]).contains(self.found)
        return V.could_be(self.found, entry[0])

    def has_env(self, name: str) -> bool:
        entry = _data()["env"].get(name)
        return entry is not None and self._def(entry) is not None

    def env_default(self, name: str) -> object:
        entry = _data()["env"].get(name)
        d = self._def(entry) if entry else None
        return d.get("default") if d else None

    def flag_for_dest(self, dest: str) -> str | None:
        """ServerArgs field name -> flag name (server_args dumps use field names)."""
        return self._dest.get(dest) or self._dest.get(FIELD_OF_DEST.get(dest, ""))

    def other_spellings(self, name: str) -> list[str]:
        """The other names (primary and aliases) this version accepts for the same flag."""
        if name not in self._common:
            return []
        primary, d = self._accepted[-1][name]
        names = [primary] + list(d.get("aliases", []))
        return [n for n in names if n != name and n in self._common]

    def all_flags(self) -> list[str]:
        return sorted(self._common)

    def abbreviations(self, prefix: str) -> list[str]:
        """Flags that argparse would accept for an unambiguous prefix (allow_abbrev)."""
        return sorted(n for n in self.all_flags() if n.startswith(prefix))

    def did_you_mean(self, name: str, limit: int = 3) -> list[str]:
        """Closest flag names: another server's name for it, dash/underscore spelling, renames, edit distance."""
        base = name.split("=", 1)[0]
        candidates = []
        foreign = FOREIGN.get(base)
        if foreign and self.translate_name(foreign):
            candidates.append(self.translate_name(foreign))
        dashed = "--" + base.lstrip("-").replace("_", "-").lower()
        if self.has(dashed):
            candidates.append(self.primary(dashed) or dashed)
        renamed = self.translate_name(dashed)
        if renamed and renamed not in candidates:
            candidates.append(renamed)
        pool = self.all_flags()
        for c in difflib.get_close_matches(dashed, pool, n=limit, cutoff=0.75):
            if c not in candidates:
                candidates.append(c)
        return candidates[:limit]

    # -- renames ---------------------------------------------------------------
    def _rename_graph(self) -> dict[str, set[str]]:
        graph: dict[str, set[str]] = {}

        def link(a: str, b: str) -> None:
            graph.setdefault(a, set()).add(b)
            graph.setdefault(b, set()).add(a)

        for old, new in RENAMES.items():
            link(old, new)
        for name, entry in _data()["flags"].items():
            for x in entry["defs"]:
                rb = x["def"].get("replaced_by")
                if rb and rb.startswith("--") and " " not in rb and "{" not in rb:
                    link(name, rb)
        return graph

    def translate_name(self, name: str) -> str | None:
        """This version's spelling of a flag (itself, a renamed form, or None)."""
        info = self.flag(name)
        if info and not info.deprecated:
            return name
        graph = self._rename_graph()
        seen, todo = {name}, [name]
        while todo:
            cur = todo.pop()
            for nxt in graph.get(cur, ()):
                if nxt in seen:
                    continue
                seen.add(nxt)
                nxt_info = self.flag(nxt)
                if nxt_info and not nxt_info.deprecated:
                    return nxt
                todo.append(nxt)
        return name if info else None

    def translate(self, name: str, value: str | None) -> list[tuple[str, str | None]]:
        """[(flag, value)] spelled for this version; [] when the version has no equivalent."""
        spelled = self.translate_name(name)
        if spelled and not self.flag(spelled).deprecated:
            return [(spelled, value)]
        for old, targets in VALUE_RENAMES.items():
            if name == old:
                out = [(t, v) for t, v in targets if self.has(t)]
                if out:
                    return out
            for t, v in targets:
                if name == t and value == v and self.has(old):
                    return [(old, None)]
        return [(spelled, value)] if spelled else []  # deprecated but still accepted

    # -- values ----------------------------------------------------------------
    def check_value(self, name: str, value: str | None) -> str | None:
        """A problem with this value for this flag, argparse-style, or None."""
        info = self.flag(name)
        if info is None or info.switch or value is None:
            return None
        values = value.split() if info.nargs in ("+", "*") else [value]
        for v in values:
            if info.choices and v not in info.choices:
                return f"invalid choice: {v!r} (choose from {', '.join(repr(c) for c in info.choices)})"
            if info.type == "int":
                try:
                    int(v)
                except ValueError:
                    return f"invalid int value: {v!r}"
            if info.type == "float":
                try:
                    float(v)
                except ValueError:
                    return f"invalid float value: {v!r}"
        return None


@lru_cache(maxsize=512)
def accepted_by_all(name: str) -> bool:
    """Whether every catalogued release's parser accepts this option string (deprecated or not)."""
    return all(name in _accepted(vi) for vi in range(len(catalog_versions())))


def widest_spelling(name: str, value: str | None) -> tuple[str, str | None] | None:
    """A spelling of this change that every catalogued release accepts: the flag itself, or the older
    name it replaced ('--cuda-graph-backend-decode disabled' -> '--disable-cuda-graph'); None when
    no spelling is accepted by all of them."""
    if accepted_by_all(name):
        return name, value
    for old, targets in VALUE_RENAMES.items():
        if (name, value) in targets and accepted_by_all(old):
            return old, None
    for old, new in RENAMES.items():
        if new == name and accepted_by_all(old):
            return old, value
    return None


def broadest_spelling(name: str, value: str | None) -> tuple[str, str | None] | None:
    """When no spelling is accepted by every release: the one the most catalogued releases accept
    (the older name a newest release split or renamed, '--cuda-graph-max-bs' beside 0.5.23's
    '--cuda-graph-max-bs-decode'), or None when no release accepts any of them."""
    n = len(catalog_versions())
    cands = [(name, value)] + [(old, value) for old, new in RENAMES.items() if new == name] + \
        [(old, None) for old, targets in VALUE_RENAMES.items() if (name, value) in targets]
    counts = [sum(1 for vi in range(n) if c[0] in _accepted(vi)) for c in cands]
    best = max(range(len(cands)), key=lambda i: (counts[i], i == 0))
    return cands[best] if counts[best] else None


def flag_of_dest(dest: str) -> tuple[str, str, str, dict] | None:
    """The flag whose ServerArgs field is `dest` in any catalog release: (flag, first release, last
    release, its newest definition), or None."""
    vs = catalog_versions()
    for name, entry in _data()["flags"].items():
        spans = [x for x in entry["defs"] if x["def"].get("dest") == dest]
        if spans:
            return name, vs[spans[0]["v"][0]], vs[spans[-1]["v"][1]], spans[-1]["def"]
    return None


def raw_definitions(name: str) -> list[dict]:
    """A flag's definitions across every catalog release (oldest first); [] for an unknown flag."""
    entry = _data()["flags"].get(name)
    return [x["def"] for x in entry["defs"]] if entry else []


@lru_cache(maxsize=32)
def _accepted(vi: int) -> dict[str, tuple[str, dict]]:
    """Every option string version `vi` accepts -> (its catalog name, definition)."""
    out: dict[str, tuple[str, dict]] = {}
    for name, entry in _data()["flags"].items():
        d = next((x["def"] for x in entry["defs"] if x["v"][0] <= vi <= x["v"][1]), None)
        if d is None:
            continue
        out[name] = (name, d)
    for name, (primary, d) in list(out.items()):
        for a in d.get("aliases", []):
            out.setdefault(a, (primary, d))
    return out


def versions_best_accepting(flag_names: list[str]) -> list[str]:
    """The catalog versions whose parser accepts the most of these flags (names, aliases, unique
    prefixes as argparse allows); [] when every version accepts equally many (no information)."""
    scores = []
    for vi in range(len(catalog_versions())):
        names = _accepted(vi)
        ok = 0
        for n in flag_names:
            base = "--" + n[5:] if n.startswith("--no-") else n
            if n in names or base in names or len([x for x in names if x.startswith(n)]) == 1:
                ok += 1
        scores.append(ok)
    best = max(scores, default=0)
    if not best or min(scores) == best:
        return []
    return [v for v, sc in zip(catalog_versions(), scores) if sc == best]


def versions_matching_usage(usage_flags: list[str]) -> list[str]:
    """Catalog versions most like the release whose argparse usage block listed these flags: a flag
    the usage lists but a version lacks counts against it (the block may be cut, so absences do not)."""
    listed = {f for f in usage_flags if f.startswith("--")}
    if len(listed) < 5:
        return []
    scores = [sum(1 if f in _accepted(vi) else -1 for f in listed) for vi in range(len(catalog_versions()))]
    best = max(scores)
    if min(scores) == best:
        return []
    return [v for v, sc in zip(catalog_versions(), scores) if sc == best]


def versions_matching_fields(fields: list[str]) -> list[str]:
    """Catalog versions whose ServerArgs has every field a server_args dump shows (the dump lists every
    field of its release, so a field a version lacks rules that version out); [] when none or all fit."""
    names = {f for f in fields if f and not f.startswith("_")}
    if len(names) < 10:
        return []
    fitting = []
    for vi, v in enumerate(catalog_versions()):
        dests = {d.get("dest") for _, (_, d) in _accepted(vi).items()}
        missing = len(names - dests)
        fitting.append((missing, v))
    best = min(m for m, _ in fitting)
    if best > 0.05 * len(names):          # a fork or a release between the examined ones: too far to say
        return []
    out = [v for m, v in fitting if m == best]
    return [] if len(out) == len(fitting) else out


def _versions_in(rng: V.VersionRange) -> list[str]:
    return [v for v in catalog_versions() if rng.contains(v)]


def for_version(version: str | V.VersionRange | None) -> Catalog:
    """The catalog to check fixes against, with a note on how it was chosen."""
    cat = _for_version(version)
    if isinstance(version, V.VersionRange) and version.describe() != "unknown":
        cat.found = version
    elif isinstance(version, str):
        cat.found = version
    return cat


def _basis(source: str | None, keep: int = 4) -> str:
    """What dated the log, shortest first: a few reasons, and how many more agree."""
    parts = list(dict.fromkeys(p.strip() for p in (source or "").split("; ") if p.strip()))
    if not parts:
        return "log templates"
    parts.sort(key=len)
    shown = "; ".join(parts[:keep])
    return shown + (f"; and {len(parts) - keep} more line(s) that agree" if len(parts) > keep else "")


def _for_version(version: str | V.VersionRange | None) -> Catalog:
    all_v = catalog_versions()
    if version is None or (isinstance(version, V.VersionRange) and version.describe() == "unknown"):
        return Catalog([all_v[-1]], "unknown", f"SGLang version not found in the input; flags checked against the newest catalog ({all_v[-1]})")
    if isinstance(version, V.VersionRange) and not version.exact:
        inside = _versions_in(version)
        if inside:
            return Catalog(inside, version.describe(),
                           f"SGLang version {version.describe()} (from {_basis(version.source)}); flags checked against every catalog version in that range")
        below = [v for v in all_v if version.high and V.key(v) <= V.key(version.high)]
        pick = below[-1] if below else (all_v[0] if version.high else all_v[-1])   # a range wholly before the catalog: its oldest release
        return Catalog([pick], version.describe(), f"SGLang version {version.describe()}; nearest catalog version {pick} used")
    exact = version.exact if isinstance(version, V.VersionRange) else version
    if exact in all_v:
        return Catalog([exact], exact, f"SGLang {exact}")
    k = V.key(exact)
    older = [v for v in all_v if V.key(v) <= k]
    newer = [v for v in all_v if V.key(v) > k]
    if not older:
        return Catalog([all_v[0]], exact, f"SGLang {exact} is older than the catalog; checked against {all_v[0]}, the oldest examined release")
    if not newer:
        return Catalog([older[-1]], exact, f"SGLang {exact}; checked against {older[-1]}, the newest examined release")
    # same minor release line (0.5.10.post1 -> 0.5.10): that release alone
    if V.key(older[-1])[:3] == k[:3]:
        return Catalog([older[-1]], exact, f"SGLang {exact}; checked against the {older[-1]} catalog")
    pair = [older[-1], newer[0]]
    return Catalog(pair, exact, f"SGLang {exact} is not in the catalog; flags must exist in both neighbours {pair[0]} and {pair[1]}")


# -- a flag's history across the catalog's versions ------------------------------------------------
# (what a flag the user's release rejects became: its documented replacement, or the flag that took
# its place when it was removed)

def accepts(version: str, name: str) -> bool:
    """Whether that catalog version's parser accepts this option string (a name or an alias)."""
    return name in _accepted(catalog_versions().index(version))


def history(name: str) -> tuple[str, str] | None:
    """(first, last) catalog versions whose parser accepts this option string, or None."""
    vs = catalog_versions()
    idx = [vi for vi in range(len(vs)) if name in _accepted(vi)]
    return (vs[idx[0]], vs[idx[-1]]) if idx else None


# over the catalog's help texts (data, not input), through diag.rx like every pattern
_USE = rx.compile(r"(?:\b[Uu]se|[Aa]lias for)\s+(--[a-z][a-z0-9-]*)(?:[= ](<[\w-]+>|[A-Za-z0-9_.]+))?")
_RETIRED = rx.compile(r"(?i)deprecat|removed|\balias\b")
_NOT_A_VALUE = {"instead", "with", "and", "or", "to", "for", "in", "if", "when", "the", "of"}


def documented_replacement(name: str) -> tuple[str, str | None] | None:
    """What the catalog's help text (or deprecation record) of a flag says to use instead:
    ('--expert-balancedness-report-mode', None), ('--image-processor-backend', 'pil'), or None."""
    entry = _data()["flags"].get(name)
    if entry is None:
        return None
    for x in reversed(entry["defs"]):
        rb = x["def"].get("replaced_by")
        if rb and rb.startswith("--") and " " not in rb and "{" not in rb:
            flag, _, value = rb.partition("=")
            return flag, value or None
    text = entry.get("help") or ""
    if not _RETIRED.search(text):
        return None
    m = _USE.search(text)
    if m is None or m[1] == name:
        return None
    value = m[2].rstrip(".") if m[2] else None
    return m[1], (value if value and value.lower() not in _NOT_A_VALUE else None)


def successor(name: str) -> str | None:
    """The flag that took this one's place when it was removed: added in the next catalog version,
    with the same help text, or the same dest once one word of it is dropped
    (--kt-amx-method -> --kt-method). None when no single flag fits."""
    data = _data()["flags"]
    entry = data.get(name)
    if entry is None:
        return None
    last = max(x["v"][1] for x in entry["defs"])
    if last >= len(catalog_versions()) - 1:
        return None
    help_text = (entry.get("help") or "").strip()
    dest = (entry["defs"][-1]["def"].get("dest") or name.lstrip("-").replace("-", "_")).split("_")
    shorter = {"_".join(dest[:i] + dest[i + 1:]) for i in range(len(dest))} if len(dest) > 1 else set()
    found = []
    for other, e in data.items():
        if other == name or min(x["v"][0] for x in e["defs"]) != last + 1:
            continue
        d = e["defs"][0]["def"].get("dest") or other.lstrip("-").replace("-", "_")
        if (help_text and (e.get("help") or "").strip() == help_text) or d in shorter:
            found.append(other)
    return found[0] if len(found) == 1 else None
