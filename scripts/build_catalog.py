#!/usr/bin/env python3
"""Build diag/messages/data/catalog.sqlite: every message SGLang (every release on PyPI) and
CPython's argparse/subprocess can print, merged with the hand lists and reviews.

    build_catalog.py --full        download every release (cached), extract, merge, write
    build_catalog.py --hand-only   re-merge data/hand/*.toml and data/reviewed/*.toml into the
                                   shipped file, without downloading anything (`make catalog`)

Developer tool: the product reads only the shipped sqlite file. Downloads go to a cache outside
the repository (default ~/.cache/diag-build/sglang, reused across runs); extraction results are
cached per file content under ~/.cache/diag-build/extract-<hash of the extractor>.
Same inputs -> same bytes: no timestamp but the newest release's upload date is written.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import difflib
import glob
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import tarfile
import tomllib
import urllib.request
import zipfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from catalog_extract import extract  # noqa: E402
from diag.messages import template as T  # noqa: E402
from diag.messages.store import (  # noqa: E402
    CATALOG_PATH, DATA_DIR, FAMILY_PREFIX, SCHEMA, compress, family_number, hand_number, rangestr,
    toml_sources_hash,
)

PYPI_JSON = "https://pypi.org/pypi/sglang/json"
CACHE = Path(os.environ.get("DIAG_BUILD_CACHE", Path.home() / ".cache" / "diag-build"))
CPYTHON_MODULES = ("argparse", "subprocess")
CPYTHON_MINORS = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13")
FAIL_KINDS = {"raise", "assert", "parser_error", "exit"}
MIN_LITERAL = 14            # letters/digits of fixed text a message needs to be matched on
MIN_TOKENS = 2              # closed tokens (3+ characters) on its first line

# ---------------------------------------------------------------------------------------------
# Category and event kind, decided automatically. One table, first matching row wins.
# Columns: which messages ('fail': raise/assert/exit/parser error/error log; 'warn': warnings;
# 'info': info logs and prints; 'any'), module regex, exception-type/level regex, message regex
# (case-insensitive, searched in the template), then the taxonomy id (or None) and event kind.
# ---------------------------------------------------------------------------------------------
HEURISTICS: list[tuple[str, str | None, str | None, str | None, str | None, str]] = [
    # memory: static pool sizing, state pools, host memory, runtime KV exhaustion
    ("fail", None, None, r"(?:mamba|linear-attention\)) state cache|space for mamba|mamba ping pong|max_mamba_cache_size", "oom.mamba_state", "refusal"),
    ("fail", None, None, r"radix cache|extra_buffer|no_buffer|mamba[-_ ](?:scheduler|radix[-_ ]cache)[-_ ]strategy|mamba_track_interval", "config.mamba_strategy", "refusal"),
    ("fail", None, None, r"not enough (?:gpu )?memory|no gpu memory for the kv|memory pool size is too small|max_running_request is zero", "oom.kv_pool", "refusal"),
    ("any", None, None, r"kv cache pool is full\. retract|decode out of memory happened|#retracted_reqs", "oom.runtime_decode", "retract"),
    # SGLang's own token and request-slot allocators say "out of memory" when the KV pool or the slots are
    # used up: a capacity event, not a device OOM (those are torch's, CUDA's, HIP's ... messages, hand lists)
    ("fail", None, None, r"prefill out of memory", "oom.runtime_prefill", "capacity"),
    ("fail", None, None, r"decode out of memory", "oom.runtime_decode", "capacity"),
    ("fail", None, None, r"host memory|pinned memory|/dev/shm|shared memory", "env.host_memory", "host_oom"),
    ("fail", None, None, r"cuda out of memory|outofmemoryerror", "oom.runtime_prefill", "device_oom"),
    ("fail", None, None, r"out of memory|\boom\b", "oom.runtime_prefill", "capacity"),
    ("fail", r"cuda_graph|graph_runner", None, r"capture|graph", "oom.cuda_graph", "error"),
    ("fail", None, None, r"unbalanced|other processes", "oom.other_process", "refusal"),
    ("fail", None, None, r"other ranks that didn't finish loading", "oom.weights", "model_load_error"),
    # hangs, ports, communication
    ("any", None, None, r"watchdog", "runtime.watchdog_hang", "watchdog"),
    ("fail", None, None, r"port\b.*(?:in use|not available|invalid)|address already in use|\bbind\b", "env.port_in_use", "port_error"),
    ("warn", None, None, r"port\b.*in use", "env.port_in_use", "port_error"),
    ("warn", None, None, r"context.?length", "config.context_length", "warning"),
    ("fail", None, None, r"nccl|rccl|hccl|gloo|all_reduce|allreduce|torch\.distributed|process group", "env.nccl", "nccl_error"),
    ("fail", None, None, r"sigquit|signal|child process|scheduler (?:is dead|died)", "runtime.other", "signal"),
    # context length
    ("fail", None, None, r"context.?length|longer than the model|maximum context|exceeds the maximum allowed length", "config.context_length", "refusal"),
    # environment: imports, architecture, driver, model files
    ("fail", None, r"ImportError|ModuleNotFoundError", None, "env.import_error", "import_error"),
    ("fail", None, None, r"pip install|not installed|no module named|failed to import|please install|is required but", "env.import_error", "import_error"),
    ("fail", None, None, r"compute capability|\bsm_?\d\d|sm\d\d|architecture .*not supported|not supported on (?:this|your) (?:gpu|device)|hopper|blackwell|ampere", "env.cuda_arch_driver", "arch_error"),
    ("fail", None, None, r"driver|cuda version|cuda runtime|libcuda|nvrtc|cudart", "env.cuda_arch_driver", "driver_error"),
    ("fail", None, None, r"cuda error|cudaerror|illegal memory access", "runtime.other", "cuda_error"),
    ("fail", None, None, r"model path|config\.json|safetensors|checkpoint|huggingface|hf_hub|download|tokenizer .*not found|no such file|weights? (?:file|not found)", "env.model_load", "model_load_error"),
    ("fail", None, None, r"(?:architecture|model).*(?:not supported|is not supported|unsupported)|unsupported (?:model|architecture)", "env.model_load", "model_load_error"),
    # speculative decoding and its interplay with the state pools
    ("fail", r"speculative|eagle|spec_", None, None, "config.speculative", "refusal"),
    ("fail", None, None, r"speculative|eagle|draft|num_draft_tokens|eagle_topk", "config.speculative", "refusal"),
    # flag validation (server arguments): incompatibilities first, then single values
    ("fail", None, None, r"unrecognized arguments|ambiguous option|unrecognized (?:flag|option)", "config.unknown_flag", "argparse"),
    ("fail", r"server_args|arg_groups|argparse|config", None, r"not compatible|incompatible|cannot be used|together|conflict|at the same time|mutually exclusive|not allowed with|requires? --|only .* when|is disabled when", "config.incompatible_flags", "refusal"),
    ("fail", r"^argparse$", None, r"invalid choice|invalid .* value|expected .*argument|required", "config.invalid_value", "argparse"),
    ("fail", r"server_args|arg_groups", None, None, "config.invalid_value", "refusal"),
    ("fail", None, None, r"not compatible|incompatible|cannot be used together|mutually exclusive", "config.incompatible_flags", "refusal"),
    ("fail", None, None, r"not supported|unsupported|only supports?|must be|should be|is not allowed|invalid|expected one of|please (?:set|use)", "config.invalid_value", "refusal"),
    ("fail", None, None, r"jit|compil|ninja|nvcc|build", None, "build_error"),
    ("fail", None, None, None, "runtime.other", "error"),
    # information: start-up milestones, memory figures, capacities
    ("info", None, None, r"max_total_num_tokens|max_running_requests|#tokens|max_prefill_tokens|context_len|pool size|cache size|capped|reduced", None, "capacity"),
    ("info", None, None, r"begin|end\b|ends\b|allocated|avail mem|mem usage|ready to roll|capture|loading|loaded|init|started|running on", None, "milestone"),
    ("warn", None, None, r"is larger than the profiled|reduced from|capped to|is reset to|adjusted to", None, "capacity"),
    ("warn", None, None, r"deprecated", None, "warning"),
    ("warn", None, None, None, None, "warning"),
    ("info", None, None, None, None, "info"),
]
_HEUR = [(k, re.compile(m) if m else None, re.compile(lv) if lv else None, re.compile(w, re.I) if w else None, c, e)
         for k, m, lv, w, c, e in HEURISTICS]


def msg_class(kind: str, level: str) -> str:
    if kind in FAIL_KINDS or level in ("error", "critical"):
        return "fail"
    if kind == "warn" or level == "warning":
        return "warn"
    return "info"


def categorize(template: str, kind: str, level: str, module: str) -> tuple[str | None, str]:
    cls = msg_class(kind, level)
    lv = kind if kind in ("parser_error", "exit") else level
    for k, mod, lvl, words, cat, event in _HEUR:
        if k != "any" and k != cls:
            continue
        if mod and not mod.search(module):
            continue
        if lvl and not lvl.search(lv):
            continue
        if words and not words.search(template):
            continue
        return cat, event
    return None, "info"


# ---------------------------------------------------------------------------------------------
# Releases and archives
# ---------------------------------------------------------------------------------------------
def vkey(v: str):
    from packaging.version import Version
    return Version(v)


def list_releases() -> list[tuple[str, str]]:
    with urllib.request.urlopen(PYPI_JSON, timeout=60) as r:
        data = json.load(r)
    out = []
    for v, files in data["releases"].items():
        if not files:
            continue
        date = min(f["upload_time"][:10] for f in files)
        out.append((v, date))
    out.sort(key=lambda x: vkey(x[0]))
    return out


def find_archive(cache: Path, v: str) -> Path | None:
    hits = sorted(cache.glob(f"sglang-{v}-*.whl")) or sorted(cache.glob(f"sglang-{v}.tar.gz"))
    return hits[0] if hits else None


def download(cache: Path, v: str) -> tuple[str, Path | None, str]:
    hit = find_archive(cache, v)
    if hit:
        return v, hit, ""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-build-isolation", "-q",
           "-d", str(cache), f"sglang=={v}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    hit = find_archive(cache, v)
    if hit:
        return v, hit, ""
    err = (p.stderr.strip().splitlines() or ["no archive"])[-1]
    return v, None, err[:300]


def archive_sources(path: Path):
    """(path inside the package, bytes) of every sglang/*.py file in a wheel or sdist."""
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as z:
            for name in sorted(z.namelist()):
                if name.startswith("sglang/") and name.endswith(".py"):
                    yield name, z.read(name)
    else:
        with tarfile.open(path) as t:
            for m in sorted(t.getmembers(), key=lambda m: m.name):
                if not (m.isfile() and m.name.endswith(".py")):
                    continue
                parts = m.name.split("/")
                if "sglang" not in parts[1:]:
                    continue
                rel = "/".join(parts[parts.index("sglang", 1):])
                f = t.extractfile(m)
                if f:
                    yield rel, f.read()


def module_of(rel: str) -> str:
    mod = rel[:-3].replace("/", ".")
    return mod[: -len(".__init__")] if mod.endswith(".__init__") else mod


def extractor_hash() -> str:
    h = hashlib.sha1()
    for p in (ROOT / "scripts" / "catalog_extract.py", ROOT / "diag" / "messages" / "template.py"):
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


def _extract_job(args):
    sha, source, module, component, out = args
    recs = extract(source.decode("utf-8", "replace"), module, component)
    tmp = Path(str(out) + ".tmp%d" % os.getpid())
    tmp.write_text(json.dumps(recs))
    tmp.replace(out)
    return sha


class ExtractCache:
    def __init__(self, root: Path):
        self.dir = root / f"extract-{extractor_hash()}"
        self.dir.mkdir(parents=True, exist_ok=True)

    def path(self, sha: str) -> Path:
        return self.dir / sha[:2] / f"{sha}.json"

    def ensure(self, jobs: list[tuple[str, bytes, str, str]], workers: int) -> None:
        todo = []
        for sha, source, module, component in jobs:
            p = self.path(sha)
            if not p.exists():
                p.parent.mkdir(exist_ok=True)
                todo.append((sha, source, module, component, p))
        if not todo:
            return
        if workers > 1 and len(todo) > 20:
            with cf.ProcessPoolExecutor(workers) as ex:
                list(ex.map(_extract_job, todo, chunksize=16))
        else:
            for t in todo:
                _extract_job(t)

    def get(self, sha: str) -> list[dict]:
        return json.loads(self.path(sha).read_text())


def file_key(data: bytes, module: str, component: str) -> str:
    # the module path changes what is extracted (print only in server code), so it is in the key
    return hashlib.sha1(component.encode() + b"\0" + module.encode() + b"\0" + data).hexdigest()


# ---------------------------------------------------------------------------------------------
# Aggregation
# ---------------------------------------------------------------------------------------------
class Corpus:
    """Everything extracted: per component, the ordered releases and where each message is."""

    def __init__(self):
        self.releases: dict[str, list[dict]] = {}           # component -> [{version, date, status}]
        # (component, template) -> {(kind, level, module, function): {"rel": set, "names": list}}
        self.locs: dict[tuple[str, str], dict[tuple, dict]] = defaultdict(dict)
        # statement sites: (component, file key, site) -> set of templates
        self.sites: dict[tuple[str, str, str], set[str]] = defaultdict(set)
        self.per_release: dict[str, list[int]] = {}

    def add_file(self, component: str, rel_idx: int, module: str, key: str, recs: list[dict]) -> None:
        for r in recs:
            t = r["t"]
            try:
                T.parse(t)
            except T.TemplateError:
                continue
            slot = self.locs[(component, t)].setdefault((r["kind"], r["level"], module, r["func"]),
                                                         {"rel": set(), "names": []})
            slot["rel"].add(rel_idx)
            slot["names"] = r["names"]
            self.sites[(component, key, r["site"])].add(t)


def scan_sglang(corpus: Corpus, cache: Path, jobs: int, limit: list[str] | None, offline: bool) -> dict:
    dl = cache / "sglang"
    dl.mkdir(parents=True, exist_ok=True)
    if offline:
        found = sorted({p.name.split("-")[1] if p.suffix == ".whl" else p.name[len("sglang-"):-len(".tar.gz")]
                        for p in list(dl.glob("sglang-*.whl")) + list(dl.glob("sglang-*.tar.gz"))}, key=vkey)
        known = {}
        if CATALOG_PATH.exists():        # upload dates from the shipped catalog (PyPI is not asked)
            db = sqlite3.connect(f"file:{CATALOG_PATH}?mode=ro", uri=True)
            known = dict(db.execute("SELECT version, date FROM releases WHERE component = 'sglang'"))
            db.close()
        releases = [(v, known.get(v, "")) for v in found]
    else:
        releases = list_releases()
    if limit:
        releases = [r for r in releases if r[0] in limit]
    archives: dict[str, Path] = {}
    failed: dict[str, str] = {}
    with cf.ThreadPoolExecutor(4) as ex:
        for v, path, err in ex.map(lambda r: download(dl, r[0]), releases):
            if path:
                archives[v] = path
            else:
                failed[v] = err
    xc = ExtractCache(cache)
    rels = []
    for v, date in releases:
        rels.append({"version": v, "date": date, "status": "scanned" if v in archives else "failed"})
    corpus.releases["sglang"] = rels
    for idx, (v, _date) in enumerate(releases):
        if v not in archives:
            continue
        files = []
        try:
            for rel, data in archive_sources(archives[v]):
                mod = module_of(rel)
                files.append((file_key(data, mod, "sglang"), data, mod, "sglang"))
        except (zipfile.BadZipFile, tarfile.TarError, OSError) as e:
            failed[v] = f"unreadable archive: {e}"
            rels[idx]["status"] = "failed"
            continue
        xc.ensure(files, jobs)
        for key, _data, mod, comp in files:
            corpus.add_file("sglang", idx, mod, key, xc.get(key))
        print(f"  sglang {v}: {len(files)} files", file=sys.stderr)
    return failed


def cpython_libs() -> tuple[dict[str, Path], dict[str, str]]:
    """minor version -> stdlib folder: this interpreter's, and pyenv's where present."""
    found: dict[str, tuple] = {}
    cands = [Path(sys.base_prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"]
    cands += [Path(p) for p in glob.glob(str(Path.home() / ".pyenv" / "versions" / "3.*" / "lib" / "python3.*"))]
    cands += [Path(p) for p in glob.glob("/usr/lib/python3.*")]
    for lib in cands:
        minor = lib.name[len("python"):]
        if minor not in CPYTHON_MINORS or not (lib / "argparse.py").exists():
            continue
        patch = lib.parent.parent.name if lib.parent.parent.name.startswith("3.") else minor
        key = tuple(int(x) for x in re.findall(r"\d+", patch))
        if minor not in found or key > found[minor][0]:
            found[minor] = (key, lib, patch)
    return {m: found[m][1] for m in CPYTHON_MINORS if m in found}, {m: found[m][2] for m in found}


def scan_cpython(corpus: Corpus, cache: Path) -> dict:
    libs, patches = cpython_libs()
    xc = ExtractCache(cache)
    for mod in CPYTHON_MODULES:
        comp = f"python.{mod}"
        corpus.releases[comp] = [{"version": m, "date": "", "status": "scanned" if m in libs else "failed"}
                                 for m in CPYTHON_MINORS]
        for idx, minor in enumerate(CPYTHON_MINORS):
            if minor not in libs:
                continue
            data = (libs[minor] / f"{mod}.py").read_bytes()
            key = file_key(data, mod, comp)
            xc.ensure([(key, data, mod, comp)], 1)
            corpus.add_file(comp, idx, mod, key, xc.get(key))
    return patches


# ---------------------------------------------------------------------------------------------
# Messages, families, anchors
# ---------------------------------------------------------------------------------------------
def is_specific(template: str) -> bool:
    toks = [t for run in T.closed_tokens(template) for t in run]
    return T.literal_chars(template.split("\n", 1)[0]) >= MIN_LITERAL and len(toks) >= MIN_TOKENS


def _hex(text: str, n: int) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:n]


class UF:
    def __init__(self):
        self.p: dict = {}

    def find(self, x):
        self.p.setdefault(x, x)
        while self.p[x] != x:
            self.p[x] = self.p[self.p[x]]
            x = self.p[x]
        return x

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.p[max(ra, rb)] = min(ra, rb)


def _tokens(norm: str) -> list[str]:
    return re.findall(r"\{\}|\w+|[^\w\s]", norm)


def build_messages(corpus: Corpus) -> list[dict]:
    """One dict per (component, template) with its locations, versions, category and event."""
    msgs = []
    for (comp, t), locs in corpus.locs.items():
        rel = set()
        for slot in locs.values():
            rel |= slot["rel"]
        first_loc = min(locs, key=lambda k: (min(locs[k]["rel"]), k))
        kind, level, module, func = first_loc
        # the newest location decides category (modules move; the newest wording is the reference)
        newest = max(locs, key=lambda k: (max(locs[k]["rel"]), k))
        cat, event = categorize(t, newest[0], newest[1], newest[2])
        msgs.append({
            "component": comp, "template": t, "rel": rel, "first": min(rel),
            "specific": is_specific(t), "kind": newest[0], "level": newest[1],
            "category": cat, "event": event, "norm": T.normalize(t),
            "locations": [{"kind": k[0], "level": k[1], "module": k[2], "function": k[3],
                           "rel": v["rel"], "names": v["names"]} for k, v in sorted(locs.items())],
        })
    msgs.sort(key=lambda m: (m["component"], m["first"], m["template"]))
    return msgs


def oldest_location(m: dict) -> dict:
    """The place that printed a message first (a new release never changes it)."""
    return min(m["locations"], key=lambda loc: (min(loc["rel"]), loc["module"], loc["function"], loc["kind"], loc["level"]))


def group_families(corpus: Corpus, msgs: list[dict]) -> None:
    """Union messages into families (see the README): same normalized text; same statement;
    changed wording in the same function (or a same-named one after a move), never printed
    side by side in one release. Sets m['family'] and m['family_oldest']."""
    uf = UF()
    index = {(m["component"], m["template"]): i for i, m in enumerate(msgs)}
    by_norm: dict[tuple, int] = {}
    for i, m in enumerate(msgs):
        if m["specific"]:
            key = (m["component"], m["norm"])
        else:   # too generic to tie locations together: one family per place (its oldest)
            loc = oldest_location(m)
            key = (m["component"], m["norm"], loc["module"], loc["function"])
        if key in by_norm:
            uf.union(by_norm[key], i)
        else:
            by_norm[key] = i
    for (comp, _file, _site), ts in corpus.sites.items():
        ids = [index[(comp, t)] for t in ts if (comp, t) in index and msgs[index[(comp, t)]]["specific"]]
        for a in ids[1:]:
            uf.union(ids[0], a)

    def fam_rel(root_members):
        s = set()
        for j in root_members:
            s |= msgs[j]["rel"]
        return s

    # changed wording: compare specific messages that share a function name
    by_func: dict[tuple, list[int]] = defaultdict(list)
    for i, m in enumerate(msgs):
        if not m["specific"]:
            continue
        for fn in {loc["function"].rsplit(".", 1)[-1] for loc in m["locations"]}:
            by_func[(m["component"], fn)].append(i)
    # and long messages anywhere that share their opening words (a move plus a rename)
    by_open: dict[tuple, list[int]] = defaultdict(list)
    for i, m in enumerate(msgs):
        toks = _tokens(m["norm"])
        if m["specific"] and len(toks) >= 10:
            by_open[(m["component"], " ".join(toks[:6]))].append(i)
    toks_cache = {}

    def toks(i):
        if i not in toks_cache:
            toks_cache[i] = _tokens(msgs[i]["norm"])
        return toks_cache[i]

    def similar(a, b, strict):
        ta, tb = toks(a), toks(b)
        if ta[:len(tb)] == tb or tb[:len(ta)] == ta:          # a suffix added or dropped
            return min(len(ta), len(tb)) >= 5
        sm = difflib.SequenceMatcher(None, ta, tb, autojunk=False)
        if sm.real_quick_ratio() < 0.8 or sm.quick_ratio() < 0.8:
            return False
        return sm.ratio() >= (0.9 if strict else 0.8)

    members: dict[int, list[int]] = defaultdict(list)
    for i in range(len(msgs)):
        members[uf.find(i)].append(i)
    rels = {r: fam_rel(ms) for r, ms in members.items()}

    def try_join(group: list[int], strict: bool):
        if len(group) > 400:
            group = group[:400]
        for x in range(len(group)):
            for y in range(x + 1, len(group)):
                a, b = group[x], group[y]
                ra, rb = uf.find(a), uf.find(b)
                if ra == rb or rels[ra] & rels[rb]:
                    continue
                if similar(a, b, strict):
                    both = rels.pop(ra) | rels.pop(rb)
                    uf.union(ra, rb)
                    rels[uf.find(ra)] = both

    for key in sorted(by_func):
        try_join(sorted(by_func[key]), strict=False)
    for key in sorted(by_open):
        try_join(sorted(by_open[key]), strict=True)

    fams: dict[int, list[int]] = defaultdict(list)
    for i in range(len(msgs)):
        fams[uf.find(i)].append(i)
    used: set[int] = set()
    for root in sorted(fams, key=lambda r: min((msgs[j]["first"], msgs[j]["norm"]) for j in fams[r])):
        ms = fams[root]
        oldest = min(ms, key=lambda j: (msgs[j]["first"], msgs[j]["norm"], msgs[j]["template"]))
        m0 = msgs[oldest]
        seed = m0["component"] + "\0" + m0["norm"]
        if not m0["specific"]:
            loc = oldest_location(m0)
            seed += "\0" + loc["module"] + "\0" + loc["function"]
        prefix = FAMILY_PREFIX[m0["component"]]
        fid, n = f"{prefix}-{_hex(seed, 8)}", 1
        while family_number(fid) in used:          # 32-bit ids: resolve the rare clash, deterministically
            fid = f"{prefix}-{_hex(seed + f'#{n}', 8)}"
            n += 1
        used.add(family_number(fid))
        for j in ms:
            msgs[j]["family"] = fid
            msgs[j]["family_oldest"] = oldest


def choose_anchors(templates: list[tuple[int, str]], universe: list[tuple[int, str]] | None = None) -> dict[int, str]:
    """Per matchable message, the pre-filter key that the fewest other messages share (of
    `universe`'s, when given: the keys' counts over all messages)."""
    keys = {i: T.anchor_keys(t) for i, t in templates}
    df: dict[str, int] = defaultdict(int)
    for ks in (keys.values() if universe is None else (T.anchor_keys(t) for _, t in universe)):
        for k in ks:
            df[k] += 1
    out = {}
    for i, ks in keys.items():
        if ks:
            out[i] = min(ks, key=lambda k: (df[k], -len(k), k))
    return out


# ---------------------------------------------------------------------------------------------
# Hand lists and reviews
# ---------------------------------------------------------------------------------------------
HAND_KEYS = {"id", "component", "template", "regex", "event", "category", "subsystem", "severity",
             "versions", "meaning", "action", "source", "specific", "examples", "verified", "fallback", "expect"}
REVIEW_KEYS = {"id", "name", "category", "event", "fields", "meaning", "action"}


def load_toml_dir(kind: str) -> list[tuple[str, dict]]:
    out = []
    for p in sorted((DATA_DIR / kind).glob("*.toml")):
        try:
            data = tomllib.loads(p.read_text())
        except tomllib.TOMLDecodeError as e:
            sys.exit(f"{p.relative_to(ROOT)}: {e}")
        out.append((p.name, data))
    return out


def hand_entries() -> list[dict]:
    out, seen = [], set()
    for name, data in load_toml_dir("hand"):
        for e in data.get("message", []):
            where = f"data/hand/{name}: {e.get('id', '?')}"
            unknown = set(e) - HAND_KEYS
            if unknown:
                sys.exit(f"{where}: unknown keys {sorted(unknown)}")
            for k in ("id", "component", "event"):
                if not e.get(k):
                    sys.exit(f"{where}: '{k}' is required")
            if bool(e.get("template")) == bool(e.get("regex")):
                sys.exit(f"{where}: give exactly one of 'template' and 'regex'")
            if e["id"] in seen:
                sys.exit(f"{where}: duplicate id")
            seen.add(e["id"])
            if e.get("template"):
                try:
                    T.to_regex(e["template"])
                except T.TemplateError as err:
                    sys.exit(f"{where}: {err}")
            e = dict(e)
            e["file"] = name
            out.append(e)
    return out


def review_entries() -> dict[str, dict]:
    out = {}
    for name, data in load_toml_dir("reviewed"):
        for e in data.get("family", []):
            where = f"data/reviewed/{name}: {e.get('id', '?')}"
            unknown = set(e) - REVIEW_KEYS
            if unknown:
                sys.exit(f"{where}: unknown keys {sorted(unknown)}")
            if not e.get("id"):
                sys.exit(f"{where}: 'id' is required")
            if e["id"] in out:
                sys.exit(f"{where}: duplicate family")
            out[e["id"]] = e
    return out


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------
class Vocab:
    def __init__(self):
        self.ids: dict[str, int] = {}

    def __call__(self, text: str | None) -> int | None:
        if text is None:
            return None
        if text not in self.ids:
            self.ids[text] = len(self.ids) + 1
        return self.ids[text]


def make_zdict(templates: list[str]) -> bytes:
    """A deflate dictionary of the phrases that recur most in the templates (deterministic)."""
    c: dict[str, int] = defaultdict(int)
    for t in templates:
        w = re.findall(r"\S+\s*", t)
        for n in (1, 2, 3):
            for i in range(len(w) - n + 1):
                c["".join(w[i:i + n])] += 1
    out, size = [], 0
    for text, k in sorted(c.items(), key=lambda x: (-x[1] * len(x[0]), x[0])):
        if k < 3:
            break
        b = text.encode()
        if size + len(b) > 32768:
            continue
        out.append(b)
        size += len(b)
        if size > 32500:
            break
    return b"".join(reversed(out))        # deflate prefers the end of the dictionary: most common last


def write_catalog(path: Path, releases: dict, msgs: list[dict], meta: dict,
                  hand: list[dict] | None = None, reviews: dict | None = None) -> dict:
    """Write the extracted messages plus the hand lists and reviews (read from data/ unless
    given). Returns the counts."""
    hand = hand_entries() if hand is None else hand
    reviews = review_entries() if reviews is None else reviews
    tmp = path.with_suffix(".tmp")
    if tmp.exists():
        tmp.unlink()
    db = sqlite3.connect(tmp)
    db.executescript(SCHEMA)
    V = Vocab()
    for comp in sorted(releases):
        for i, r in enumerate(releases[comp]):
            db.execute("INSERT INTO releases VALUES (?,?,?,?,?)", (comp, i, r["version"], r["date"], r["status"]))

    fam: dict[str, dict] = {}
    for m in msgs:
        f = fam.setdefault(m["family"], {"component": m["component"], "members": []})
        f["members"].append(m)
    fam_ints = {family_number(fid) for fid in fam}
    for e in hand:
        if e["id"] in fam or family_number(e["id"]) in fam_ints:
            sys.exit(f"data/hand/{e['file']}: {e['id']}: the id clashes with an extracted family's")
        fam[e["id"]] = {"component": e["component"], "members": [], "hand": e}
        fam_ints.add(family_number(e["id"]))
    for fid, r in sorted(reviews.items()):
        if fid not in fam:
            sys.exit(f"data/reviewed: family {fid} is not in the catalog")
        f = fam[fid]
        if r.get("fields"):
            names = {g for m in f["members"] for g, _, _ in T.to_regex(m["template"])[1]}
            if "hand" in f and f["hand"].get("template"):
                names |= {g for g, _, _ in T.to_regex(f["hand"]["template"])[1]}
            bad = set(r["fields"]) - names
            if bad:
                sys.exit(f"data/reviewed: family {fid} renames unknown fields {sorted(bad)}")
            for old, new in r["fields"].items():
                name, _, typ = str(new).partition(":")
                if not name.isidentifier() or (typ and typ not in T.TYPES):
                    sys.exit(f"data/reviewed: family {fid}: rename {old} = {new!r} is not 'name' or 'name:type' "
                             f"(types: {', '.join(T.TYPES)})")
        db.execute("INSERT INTO reviews VALUES (?,?,?,?,?,?,?,?)", (
            family_number(fid), fid, r.get("name"), r.get("category"), r.get("event"), r.get("meaning"),
            r.get("action"), json.dumps(r["fields"], sort_keys=True) if r.get("fields") else None))

    zdict = make_zdict([m["template"] for m in msgs] + [e["template"] for e in hand if e.get("template")])
    db.execute("INSERT INTO blobs VALUES ('zdict', ?)", (zdict,))
    rows = [(int(_hex(m["component"] + chr(0) + m["template"], 12), 16), m) for m in msgs]
    rows += [(hand_number(e["id"], 12), e) for e in hand]
    rows.sort(key=lambda r: r[0])
    if len({r[0] for r in rows}) != len(rows):
        sys.exit("message id collision")
    cand = []
    family_of: dict[int, str] = {}       # an extracted message's family (for the identifiers below)
    module_rel: dict[tuple[str, str], set] = defaultdict(set)   # the releases a module (file) raises or logs in
    for _, m in rows:
        if "file" not in m:
            for loc in m["locations"]:
                module_rel[(m["component"], loc["module"])] |= set(loc["rel"])
    for (comp, module), rel in sorted(module_rel.items()):
        db.execute("INSERT OR IGNORE INTO modules VALUES (?,?,?)", (module, comp, rangestr(rel)))
    for n, m in rows:
        if "file" in m:         # a hand entry: one message, its own family
            e = m
            tmpl = e.get("template")
            spec = True if e.get("specific") is None else bool(e["specific"])   # curated
            extra = {k: e[k] for k in ("id", "subsystem", "severity", "versions", "meaning", "action", "source", "file",
                                       "examples", "fallback") if e.get(k)}
            db.execute("INSERT INTO messages VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", (
                n, V(e["component"]), family_number(e["id"]), compress(tmpl, zdict) if tmpl else None, e.get("regex"),
                int(spec), V("hand"), V(e.get("severity") or "error"), V(e.get("category")), V(e["event"]), 0, "", 0,
                json.dumps(extra, sort_keys=True)))
            if spec:
                pseudo = [tmpl] if tmpl else _regex_literals(e["regex"])
                cand += [((n, k), t, e) for k, t in enumerate(pseudo)]
            continue
        auto = int(m["family"] not in reviews)
        db.execute("INSERT INTO messages VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", (
            n, V(m["component"]), family_number(m["family"]), compress(m["template"], zdict), None, int(m["specific"]),
            V(m["kind"]), V(m["level"]), V(m["category"]), V(m["event"]), auto, rangestr(m["rel"]), len(m["rel"]), None))
        for loc in m["locations"]:
            db.execute("INSERT INTO locations VALUES (?,?,?,?,?,?,?)", (
                n, V(loc["module"]), V(loc["function"]), V(loc["kind"]), V(loc["level"]), rangestr(loc["rel"]),
                ",".join(str(V(x)) for x in loc["names"])))
        if m["specific"]:
            cand.append(((n, 0), m["template"], None))
            family_of[n] = m["family"]

    # the heads: the first two words of each template, to find the message a cut line is the start of
    for (n, _k), tmpl, e in cand:
        if tmpl and (e is None or e.get("template") == tmpl):   # hand entries with a template too
            words = T.TOKEN.findall(T.head_text(tmpl))[:2]
            if len(words) == 2:
                db.execute("INSERT OR IGNORE INTO heads VALUES (?,?)", (" ".join(words), n))
    # the identifiers: the snake_case names in a message's literal text, to find a message a person
    # retyped or paraphrased around the names they copied ('output_partition_size=48 not divisible
    # by block_n=128'); only messages a person gave a category (a hand entry or a reviewed family)
    for (n, _k), tmpl, e in cand:
        if not tmpl or (e is None and family_of.get(n) not in reviews) or \
                (e is not None and (e.get("template") != tmpl or not e.get("category"))):
            continue
        names = T.identifiers(tmpl)
        if len(names) >= 2:
            for name in names:
                db.execute("INSERT OR IGNORE INTO idents VALUES (?,?,?)", (name, n, len(names)))
    # the pre-filter: one anchor key per matchable message (per top-level alternative of a regex)
    anchors = choose_anchors([(i, t) for i, t, _ in cand])
    for i in sorted(anchors):
        db.execute("INSERT OR IGNORE INTO anchors VALUES (?,?)", (anchors[i], i[0]))
    # and a second key from the first sentence of a message of several: a paste or a log line cut
    # after it (the values and the rest dropped) is still found, whatever the whole message's
    # rarest word is
    lead = choose_anchors([(i, T.first_sentence(t)) for i, t, _ in cand if i in anchors and T.first_sentence(t)],
                          [(i, t) for i, t, _ in cand])
    for i in sorted(lead):
        if lead[i] != anchors[i]:
            db.execute("INSERT OR IGNORE INTO anchors VALUES (?,?)", (lead[i], i[0]))
    counts_lead = sum(1 for i in lead if lead[i] != anchors[i])
    found = {i[0] for i in anchors}
    unfindable = 0                                # regex alternatives with no word to find them by
    for i, _, e in cand:
        if i in anchors:
            continue
        if e is not None:
            if i[0] in found:                     # other alternatives of the regex are anchored
                unfindable += 1
                continue
            sys.exit(f"data/hand/{e['file']}: {e['id']}: no literal word to find it by (a word of 3+ letters "
                     "between spaces or punctuation); add one or set specific = false")
        db.execute("UPDATE messages SET specific = 0 WHERE n = ?", (i[0],))
    for text, n in sorted(V.ids.items(), key=lambda x: x[1]):
        db.execute("INSERT INTO vocab VALUES (?,?)", (n, text))

    # counts
    counts = {"components": {}}
    unanchored = {i[0] for i, _, e in cand if i not in anchors}
    spec_of = {id(m): m["specific"] and n not in unanchored for n, m in rows if "file" not in m}
    for comp in sorted(releases):
        ms = [m for m in msgs if m["component"] == comp]
        fail = [m for m in ms if msg_class(m["kind"], m["level"]) == "fail"]
        per_rel = defaultdict(int)
        for m in ms:
            for i in m["rel"]:
                per_rel[i] += 1
        rels = releases[comp]
        counts["components"][comp] = {
            "releases": len(rels), "scanned": sum(r["status"] == "scanned" for r in rels),
            "failed": [r["version"] for r in rels if r["status"] != "scanned"],
            "messages": len(ms), "failure_messages": len(fail),
            "specific_failure_messages": sum(spec_of[id(m)] for m in fail),
            "specific_messages": sum(spec_of[id(m)] for m in ms),
            "families": len({m["family"] for m in ms}),
            "per_release": {rels[i]["version"]: per_rel[i] for i in range(len(rels)) if rels[i]["status"] == "scanned"},
        }
    counts["hand_messages"] = len(hand)
    counts["hand_unanchored_alternatives"] = unfindable
    counts["reviewed_families"] = len(reviews)
    counts["anchors"] = len(anchors)
    counts["lead_anchors"] = counts_lead
    meta = dict(meta)
    meta["counts"] = counts
    meta["toml_sha256"] = toml_sources_hash()
    for k in sorted(meta):
        db.execute("INSERT INTO meta VALUES (?,?)", (k, json.dumps(meta[k], sort_keys=True)))
    db.commit()
    db.execute("VACUUM")
    db.close()
    tmp.replace(path)
    return counts


def _regex_literals(rx: str, cap: int = 64) -> list[str]:
    """Pseudo-templates of a hand-written regex for its anchors, one per alternative (the
    alternations in required positions are expanded, up to `cap` alternatives): the literal text
    every match of that alternative contains, with a cut ({x}) wherever the regex has anything
    else (a class, a repeat, an optional part, a case-insensitive group, an alternation past the
    cap). A word at a cut is left out by closed_tokens, since the text there depends on the
    match; \\b, ^ and $ bound a word as punctuation does. The regex is parsed (Python's parser
    reads the RE2 subset the hand lists use), so group names are never taken for literal text."""
    import re._parser as P
    from re._constants import (AT, AT_BEGINNING, AT_BEGINNING_STRING, AT_BOUNDARY, AT_END, AT_END_STRING,
                               BRANCH, CATEGORY, CATEGORY_SPACE, IN, LITERAL, MAX_REPEAT, MIN_REPEAT,
                               SUBPATTERN)
    bound = {AT_BEGINNING, AT_BEGINNING_STRING, AT_BOUNDARY, AT_END, AT_END_STRING}

    def space(seq) -> bool:
        seq = list(seq)
        return len(seq) == 1 and (seq[0] == (LITERAL, 32) or seq[0] == (IN, [(CATEGORY, CATEGORY_SPACE)]))

    def join(left, right):
        return [a[:-1] + [a[-1] + b[0]] + b[1:] for a in left for b in right]

    def alts(seq) -> list[list[str]]:
        res = [[""]]
        for op, av in seq:
            sub = None
            if op is LITERAL:
                sub = [[chr(av)]]
            elif op is AT and av in bound:
                sub = [[" "]]                     # a boundary: a word starts or ends here
            elif op is SUBPATTERN and not (av[1] & re.IGNORECASE):
                sub = alts(av[3])
            elif op in (MAX_REPEAT, MIN_REPEAT) and av[0] >= 1 and space(av[2]):
                sub = [[" "]]                     # \\s+ or ' +': whitespace, so a word bound
            elif op in (MAX_REPEAT, MIN_REPEAT) and av[0] >= 1:
                sub = alts(av[2])
                if not av[0] == av[1] == 1:
                    sub = [[""] + a + [""] for a in sub]
            elif op is BRANCH:
                sub = [a for branch in av[1] for a in alts(branch)]
            if sub is None or len(res) * len(sub) > cap:
                sub = [["", ""]]                  # a cut
            res = join(res, sub)
        return res

    try:
        tree = P.parse(rx)
    except re.error:                              # syntax Python's parser does not read: no anchor
        return ["{x}"]
    if tree.state.flags & re.IGNORECASE:
        return ["{x}"]
    return ["{x}" + "{x}".join(T.escape(r) for r in a) + "{x}" for a in alts(list(tree))]

def read_back(path: Path) -> tuple[dict, list[dict], dict]:
    """The extracted part of a shipped catalog, for --hand-only."""
    from diag.messages.store import decompress, parse_ranges
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    releases: dict[str, list[dict]] = defaultdict(list)
    for comp, _idx, v, date, status in db.execute("SELECT component, idx, version, date, status FROM releases "
                                                  "ORDER BY component, idx"):
        releases[comp].append({"version": v, "date": date, "status": status})
    vocab = dict(db.execute("SELECT n, text FROM vocab"))
    zdict = db.execute("SELECT value FROM blobs WHERE key = 'zdict'").fetchone()[0]
    locs = defaultdict(list)
    for mrow, module, function, kind, level, versions, names in db.execute(
            "SELECT message, module, function, kind, level, versions, names FROM locations"):
        locs[mrow].append({"module": vocab[module], "function": vocab[function], "kind": vocab[kind],
                           "level": vocab[level], "rel": parse_ranges(versions),
                           "names": [vocab[int(x)] for x in names.split(",") if x]})
    msgs = []
    for row in db.execute("SELECT n, component, family, template, kind, level, category, event, versions "
                          "FROM messages WHERE hand IS NULL ORDER BY n"):
        n, comp, family, blob, kind, level, cat, event, versions = row
        t = decompress(blob, zdict)
        rel = parse_ranges(versions)
        comp = vocab[comp]
        msgs.append({"component": comp, "template": t, "rel": rel, "first": min(rel), "specific": is_specific(t),
                     "kind": vocab[kind], "level": vocab[level], "category": vocab.get(cat), "event": vocab[event],
                     "norm": T.normalize(t), "family": f"{FAMILY_PREFIX[comp]}-{family:08x}",
                     "locations": sorted(locs[n], key=lambda l: (l["kind"], l["level"], l["module"], l["function"]))})
    meta = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
    db.close()
    meta.pop("counts", None)
    meta.pop("toml_sha256", None)
    msgs.sort(key=lambda m: (m["component"], m["first"], m["template"]))
    return dict(releases), msgs, meta


def print_counts(counts: dict, path: Path) -> None:
    for comp, c in counts["components"].items():
        print(f"{comp}: {c['scanned']}/{c['releases']} releases scanned, failed {c['failed'] or 'none'}; "
              f"{c['messages']} distinct messages, {c['failure_messages']} failure messages "
              f"({c['specific_failure_messages']} specific, "
              f"{100 * c['specific_failure_messages'] / max(1, c['failure_messages']):.0f}%), "
              f"{c['specific_messages']} specific in all, {c['families']} families")
        if comp == "sglang":
            per = c["per_release"]
            line = ", ".join(f"{v}: {n}" for v, n in per.items())
            print(f"  per release: {line}")
    print(f"hand messages: {counts['hand_messages']}, reviewed families: {counts['reviewed_families']}, "
          f"anchors: {counts['anchors']}")
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} ({path.stat().st_size / 1e6:.2f} MB)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--full", action="store_true", help="download every release, extract, merge, write")
    mode.add_argument("--hand-only", action="store_true", help="re-merge the TOML files into the shipped file")
    ap.add_argument("--cache", type=Path, default=CACHE, help="download and extraction cache (outside the repo)")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2)), help="extraction processes")
    ap.add_argument("--versions", nargs="*", help="only these sglang releases (for trials)")
    ap.add_argument("--offline", action="store_true", help="use the archives already in the cache, no PyPI")
    ap.add_argument("--out", type=Path, default=CATALOG_PATH)
    a = ap.parse_args(argv)

    if a.hand_only:
        if not a.out.exists():
            sys.exit(f"{a.out}: no catalog to merge into; run with --full first")
        releases, msgs, meta = read_back(a.out)
        counts = write_catalog(a.out, releases, msgs, meta)
        print_counts(counts, a.out)
        return 0

    corpus = Corpus()
    failed = scan_sglang(corpus, a.cache, a.jobs, a.versions, a.offline)
    patches = scan_cpython(corpus, a.cache)
    msgs = build_messages(corpus)
    group_families(corpus, msgs)
    rels = corpus.releases
    dates = [r["date"] for r in rels["sglang"] if r["date"]]
    meta = {
        "schema": 1,
        "built_from": "newest sglang release uploaded " + (max(dates) if dates else "?"),
        "build_date": max(dates) if dates else "",
        "sglang_versions": [r["version"] for r in rels["sglang"] if r["status"] == "scanned"],
        "sglang_failed": failed,
        "cpython_versions": patches,
        "extractor": extractor_hash(),
        "specific_rule": f">= {MIN_LITERAL} literal letters/digits and >= {MIN_TOKENS} closed tokens on the first line",
    }
    counts = write_catalog(a.out, rels, msgs, meta)
    print_counts(counts, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
