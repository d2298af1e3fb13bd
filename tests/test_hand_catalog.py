"""The reviewed hand lists of what the C/C++ side, the runtimes and the OS print into SGLang logs.

Self-contained: it reads diag/messages/data/hand/*.toml with tomllib, checks the entry schema of
diag/messages/README.md, compiles every regex with RE2 (google-re2) and every template with the
reference implementation in tests/catalog_template.py, and checks that each entry matches its
own examples (with the typed fields read back) and that real log lines from the corpus match
the entry they are filed under and no entry of another event kind.
"""
from __future__ import annotations

import functools
import re
import tomllib
from pathlib import Path

import pytest
import re2

from diag.taxonomy import CATEGORIES
from catalog_template import TemplateError, compile_template, convert

ROOT = Path(__file__).resolve().parent.parent
HAND = ROOT / "diag" / "messages" / "data" / "hand"
README = ROOT / "diag" / "messages" / "README.md"
NOTICE = ROOT / "NOTICE"
LINES = Path(__file__).resolve().parent / "data" / "hand" / "lines.txt"

REQUIRED = {"id", "component", "event", "category", "subsystem", "severity", "meaning", "action", "source",
            "examples"}
OPTIONAL = {"template", "regex", "versions", "verified", "fallback", "expect"}
SEVERITIES = {"error", "warning", "info"}
LICENCES = ("BSD-3-Clause", "BSD-2-Clause", "MIT", "Apache-2.0", "PSF-2.0", "LGPL-2.1", "GPL-2.0", "GPL-3.0",
            "NVIDIA proprietary", "AMD proprietary", "Intel proprietary", "BSD-style", "NCSA", "MPL-2.0",
            "no licence stated")
FAMILIES = {c.split(".")[0] for c in CATEGORIES}


def event_kinds() -> set[str]:
    """The event kinds the README lists (its "Event kinds" section), so the two cannot drift apart."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Event kinds", 1)[1].split("\n## ", 1)[0]
    kinds = set(re.findall(r"`([a-z_]+)`", section))
    assert len(kinds) >= 15, "the README's Event kinds section could not be read"
    return kinds


@functools.cache
def load() -> tuple[tuple[str, dict], ...]:
    out = []
    for path in sorted(HAND.glob("*.toml")):
        with path.open("rb") as f:
            data = tomllib.load(f)
        assert set(data) == {"message"}, f"{path.name}: only [[message]] tables belong in a hand list"
        for entry in data["message"]:
            out.append((path.name, entry))
    return tuple(out)


@functools.cache
def compiled(entry_id: str):
    """(RE2 pattern, field types) of one entry."""
    entry = by_id()[entry_id]
    if "template" in entry:
        pattern, types = compile_template(entry["template"])
    else:
        pattern = entry["regex"]
        types = {name: None for name in re2.compile(pattern).groupindex}
    return re2.compile(pattern), types


@functools.cache
def by_id() -> dict[str, dict]:
    return {e["id"]: e for _, e in load()}


def fields(entry_id: str, line: str) -> dict | None:
    """The typed fields an entry reads from a line, or None when it does not match."""
    rx, types = compiled(entry_id)
    m = rx.search(line)
    if m is None:
        return None
    return {name: convert(kind, m.group(name)) if m.group(name) is not None else None
            for name, kind in types.items()}


def ids() -> list[str]:
    return [e["id"] for _, e in load()]


def test_hand_lists_exist_and_are_large():
    files = {name for name, _ in load()}
    assert {"torch.toml", "cuda.toml", "nccl.toml", "rccl.toml", "gloo.toml", "triton.toml", "ptxas.toml",
            "jit.toml", "cudnn_cublas.toml", "hf_hub.toml", "rocm.toml", "os.toml", "python.toml"} <= files
    assert len(load()) >= 300


def test_ids_unique_and_stable_form():
    seen: dict[str, str] = {}
    for name, entry in load():
        eid = entry.get("id", "")
        assert re.fullmatch(r"[a-z][a-z0-9_]*\.[a-z0-9_]+(?:\.[a-z0-9_]+)*", eid), f"{name}: bad id {eid!r}"
        assert eid not in seen, f"{eid} in both {seen[eid]} and {name}"
        seen[eid] = name
        assert eid.split(".")[0] == entry.get("component"), f"{eid}: the id must start with its component"


def _entry_schema(entry_id):
    entry = by_id()[entry_id]
    keys = set(entry)
    assert REQUIRED <= keys, f"missing {sorted(REQUIRED - keys)}"
    assert keys <= REQUIRED | OPTIONAL, f"unknown keys {sorted(keys - REQUIRED - OPTIONAL)}"
    assert ("template" in entry) != ("regex" in entry), "exactly one of template and regex"
    assert entry["event"] in event_kinds(), f"unknown event kind {entry['event']!r}"
    cat = entry["category"]
    assert cat in CATEGORIES or cat in FAMILIES, f"unknown category {cat!r}"
    assert entry["severity"] in SEVERITIES
    for key in ("meaning", "action", "subsystem", "source"):
        assert isinstance(entry[key], str) and entry[key].strip(), f"{key} is empty"
    assert len(entry["meaning"]) >= 40 and len(entry["action"]) >= 20, "meaning and action say what and why"
    assert entry["meaning"].strip() != entry["action"].strip()
    assert any(lic in entry["source"] for lic in LICENCES), "the source names its licence"
    assert isinstance(entry.get("fallback", False), bool)
    examples = entry["examples"]
    assert isinstance(examples, list) and examples and all(isinstance(x, str) and x.strip() for x in examples)
    assert all("\n" not in x for x in examples), "an entry matches one line; examples are single lines"


def _pattern_is_re2(entry_id):
    entry = by_id()[entry_id]
    if "regex" in entry:
        re2.compile(entry["regex"])  # raises on backreferences, look-around, bad syntax
    else:
        pattern, _ = compile_template(entry["template"])
        re2.compile(pattern)


def _entry_matches_its_examples(entry_id):
    entry = by_id()[entry_id]
    for example in entry["examples"]:
        got = fields(entry_id, example)
        assert got is not None, f"does not match its example {example!r}"
        for name, value in got.items():
            if value is None and "regex" in entry:
                continue  # an optional group of a regex that this example does not use
            assert value is not None and value != "", f"field {name!r} not read from {example!r}"
    for name, want in entry.get("expect", {}).items():
        got = fields(entry_id, entry["examples"][0])
        assert name in got, f"expect names {name!r}, which the pattern does not capture"
        assert got[name] == want, f"{name}: {got[name]!r} != {want!r}"


def conflicts(line: str, entry_id: str) -> list[str]:
    """Other entries that match a line with another event kind, unless one side is a fallback."""
    entry = by_id()[entry_id]
    out = []
    for other in ids():
        if other == entry_id:
            continue
        o = by_id()[other]
        if o["event"] == entry["event"] or o.get("fallback") or entry.get("fallback"):
            continue
        if compiled(other)[0].search(line):
            out.append(f"{other} ({o['event']})")
    return out


def _examples_do_not_read_as_another_event(entry_id):
    for example in by_id()[entry_id]["examples"]:
        assert not conflicts(example, entry_id), f"{example!r} also matches {conflicts(example, entry_id)}"


def files() -> list[str]:
    return sorted({name for name, _ in load()})


def _every_entry(check, file: str) -> None:
    """Run one check over every entry of a hand list; a failure names each entry it fails on (one
    test per list and check, not per entry: the per-test overhead was most of these checks' cost)."""
    failures = []
    for name, entry in load():
        if name != file:
            continue
        try:
            check(entry["id"])
        except AssertionError as e:
            failures.append(f"{entry['id']}: {e}".splitlines()[0])
    assert not failures, f"{len(failures)} entries of {file}:\n" + "\n".join(failures)


EVERY_ENTRY = {"schema": _entry_schema, "re2": _pattern_is_re2, "examples": _entry_matches_its_examples,
               "no_other_event": _examples_do_not_read_as_another_event}


@pytest.mark.parametrize("file", files())
@pytest.mark.parametrize("check", EVERY_ENTRY)
def test_every_entry(check, file):
    """Each hand list's entries: the schema, RE2-compatible patterns, their examples read back,
    and no example read as another event kind."""
    _every_entry(EVERY_ENTRY[check], file)


def corpus_lines() -> list[tuple[str, str]]:
    out = []
    for raw in LINES.read_text(encoding="utf-8").splitlines():
        if not raw.strip() or raw.startswith("#"):
            continue
        entry_id, _, line = raw.partition("\t")
        out.append((entry_id.strip(), line))
    return out


def test_corpus_lines_file():
    lines = corpus_lines()
    assert len(lines) >= 60
    assert len({i for i, _ in lines}) >= 50
    unknown = sorted({i for i, _ in lines} - set(ids()))
    assert not unknown, f"lines.txt files lines under unknown ids {unknown}"


def test_corpus_lines_match_their_entry_only():
    failures = []
    for entry_id, line in corpus_lines():
        try:
            _corpus_line_matches_its_entry_only(entry_id, line)
        except AssertionError as e:
            failures.append(str(e).splitlines()[0])
    assert not failures, "\n".join(failures)


def _corpus_line_matches_its_entry_only(entry_id, line):
    assert fields(entry_id, line) is not None, f"{entry_id} does not match {line!r}"
    got = fields(entry_id, line)
    regex = "regex" in by_id()[entry_id]
    assert all((v is None and regex) or (v is not None and v != "") for v in got.values()), \
        f"{entry_id} reads {got} from {line!r}"
    assert not conflicts(line, entry_id), f"{line!r} also matches {conflicts(line, entry_id)}"


def test_notice_names_every_source():
    text = NOTICE.read_text(encoding="utf-8")
    assert "Hand-written message lists" in text
    part = text.split("Hand-written message lists", 1)[1]
    for _, entry in load():
        project = re.sub(r"\s*\(.*\)$", "", entry["source"].split(":")[0].strip())
        assert project in part, f"NOTICE does not name {project!r} ({entry['id']})"


# The reference implementation of the template language itself.

def _match(template: str, line: str):
    pattern, types = compile_template(template)
    m = re2.compile(pattern).search(line)
    return None if m is None else {k: convert(t, m.group(k)) for k, t in types.items()}


def test_template_types():
    got = _match("Tried to allocate {tried:size}. GPU {gpu:int} has {cap:size} at {addr:hex} in {mod:ident} {rest:text}",
                 "x: Tried to allocate 20.00 MiB. GPU 3 has 79.15 GiB at 0x7f1a in torch.cuda memory  is low")
    assert got == {"tried": 20 << 20, "gpu": 3, "cap": int(round(79.15 * (1 << 30))), "addr": 0x7F1A,
                   "mod": "torch.cuda", "rest": "memory  is low"}


def test_template_lazy_text_whitespace_and_braces():
    assert _match("a {x} b", "a one two b b") == {"x": "one two"}
    assert _match("size {n:size} free", "size 0 bytes free") == {"n": 0}
    assert _match("ratio {r:float}", "ratio 1.5e-3") == {"r": 0.0015}
    assert _match("{{literal}} {*} end {w:word}", "{literal} skipped here end tok.en") == {"w": "tok.en"}
    assert _match("two  words", "two\t words") == {}
    assert _match("two words", "twowords") is None


@pytest.mark.parametrize("bad", ["a { b", "a } b", "{x:nope}", "{x} {x}", "   "])
def test_template_errors(bad):
    with pytest.raises(TemplateError):
        compile_template(bad)
