"""The shipped message catalog (diag/messages/data/catalog.sqlite) and its runtime API."""
from __future__ import annotations

import io
import itertools
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import re2

from diag.messages import Catalog
from diag.messages import template as T
from diag.messages.__main__ import main as cli
from diag.messages.store import CATALOG_PATH, DATA_DIR, decompress, toml_sources_hash

ROOT = Path(__file__).resolve().parent.parent
LINES = Path(__file__).resolve().parent / "data" / "catalog" / "lines.tsv"


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return Catalog.open()


def all_rows(cat):
    zd = cat._zdict()
    for n, blob, regex, specific in cat.db.execute("SELECT n, template, regex, specific FROM messages ORDER BY n"):
        yield n, (decompress(blob, zd) if blob is not None else None), regex, specific


# -- every entry -------------------------------------------------------------------------------

CHUNKS = 4      # the entries in four parts, so the parallel runners share them


@pytest.mark.parametrize("part", range(CHUNKS))
def test_every_specific_entry_compiles_and_matches_a_rendering_of_itself(cat, part):
    checked = 0
    for n, tmpl, regex, specific in itertools.islice(all_rows(cat), part, None, CHUNKS):
        if tmpl is None:        # a hand entry that gives a regex: its examples are tested with the hand lists
            re2.compile(regex)
            continue
        pattern, fields = T.to_regex(tmpl)
        rx = re2.compile(pattern)
        if not specific:
            continue
        sample = T.render(tmpl)
        # the whole rendering first (anchored: five times faster on RE2 than a search), else anywhere in it
        m = rx.fullmatch(sample) or rx.search(sample)
        assert m is not None, f"m-{n:012x}: {tmpl!r} does not match {sample!r}"
        got = m.groupdict()
        # the fields read back re-render the text they came from, and typed ones convert
        assert T.render(tmpl, got).strip() == m.group(0).strip() == sample.strip(), (tmpl, got)
        for g, _, typ in fields:
            if typ in ("int", "float", "num", "size", "hex") and got[g] is not None:
                from diag.messages import _convert
                assert _convert(got[g], typ) is not None, (tmpl, g, got[g])
        checked += 1
    assert checked > 20000 // CHUNKS


def test_the_prefilter_finds_each_entry_by_its_anchor(cat):
    """A sample of entries: catalog.match_all on a rendering finds the entry itself (so its anchor
    key is in the index and on the rendered line)."""
    rows = [r for r in all_rows(cat) if r[3] and r[1] is not None]
    sample = rows[:: max(1, len(rows) // 1500)]
    missing = []
    for n, tmpl, _, _ in sample:
        line = "[2026-01-01 10:00:00 TP0] " + T.render(tmpl)
        every = cat.match_all(line)
        if n not in {cat.get(m.id).n for m in every}:
            missing.append(tmpl)
        # match() stops early (longest templates first) and must agree with the full scan
        best = cat.match(line)
        assert best is not None and (best.score, best.id) == (every[0].score, every[0].id), tmpl
    assert not missing, missing[:5]


def test_generic_messages_are_kept_but_never_matched(cat):
    rows = cat.db.execute("SELECT COUNT(*) FROM messages WHERE specific = 0").fetchone()[0]
    assert rows > 100
    anchored = cat.db.execute("SELECT COUNT(*) FROM anchors a JOIN messages m ON m.n = a.message "
                              "WHERE m.specific = 0").fetchone()[0]
    assert anchored == 0
    assert cat.match("KeyError: 'model.layers.3.mlp'") is None        # '{e}' and its like match nothing


# -- contents agree with the reference -----------------------------------------------------------

def versions(cat, words: str) -> dict[str, list[str]]:
    return {e.template: cat.versions_of(e) for e in cat.search(words, limit=500)}


def test_not_enough_memory_variants_and_versions(cat):
    fam = {e.template: cat.versions_of(e) for e in cat.family("kv.not_enough_memory")}
    plain = "Not enough memory. Please try to increase --mem-fraction-static."
    dbg = plain + " Current value: self.server_args.mem_fraction_static={mem_fraction_static}"
    new = plain + " Current value: mem_fraction_static={mem_fraction_static}"
    assert {plain, dbg, new} <= set(fam)
    # 0.4.6.post5-0.4.10.post2 plain; 0.5.4.post3-0.5.9 with the debug form; 0.5.10+ both (suffix when known)
    for v in ("0.4.6.post5", "0.4.10.post2", "0.5.10", "0.5.23"):
        assert v in fam[plain]
    for v in ("0.5.4.post3", "0.5.9"):
        assert v in fam[dbg] and v not in fam[plain]
    assert "0.5.10" in fam[new] and "0.5.9" not in fam[new] and "0.5.10" not in fam[dbg]


def test_loaded_weights_leave_no_memory_only_from_0_5_14(cat):
    (e,) = cat.family("kv.no_memory_after_weights")
    vs = cat.versions_of(e)
    assert vs[0] == "0.5.14" and "0.5.19" in vs and vs[-1] == cat.releases("sglang")[-1]
    assert e.category == "oom.kv_pool" and e.exception == "ValueError"


def test_mamba_state_cache_message_from_0_5_13(cat):
    hits = [e for e in cat.search("Not enough GPU memory for hybrid state cache", limit=20)]
    first = min(cat.releases("sglang").index(cat.versions_of(e)[0]) for e in hits)
    assert cat.releases("sglang")[first] == "0.5.13"


def test_speculative_radix_no_buffer_error_in_0_5_10_to_0_5_13(cat):
    (e, *_) = cat.family("mamba.spec_radix_no_buffer")
    vs = set().union(*(cat.versions_of(x) for x in cat.family("mamba.spec_radix_no_buffer")))
    assert {"0.5.10", "0.5.11", "0.5.12", "0.5.13"} <= vs and "0.5.9" not in vs and "0.5.14" not in vs
    assert e.category == "config.mamba_strategy"


# -- families ---------------------------------------------------------------------------------------

def test_a_message_that_moved_files_stays_one_family(cat):
    """chunked_prefill_size's check left server_args.py for arg_groups/ in 0.5.19."""
    (e,) = [x for x in cat.search("chunked_prefill_size must be divisible by page_size")
            if x.template == "chunked_prefill_size must be divisible by page_size"]
    locs = {loc["module"]: loc["versions"] for loc in cat.locations(e)}
    assert "0.5.18" in locs["sglang.srt.server_args"]
    assert "0.5.19" in locs["sglang.srt.arg_groups.validation_hook"]
    assert "0.5.19" not in locs["sglang.srt.server_args"]


def test_a_reworded_and_moved_message_joins_the_family_of_its_oldest_wording(cat):
    old = "Disable --enable-flashinfer-allreduce-fusion because deterministic inference is enabled."
    new = "Disable --flashinfer-allreduce-fusion-backend because deterministic inference is enabled."
    (eo,) = [e for e in cat.search(old.split()[:3] + ["deterministic"], limit=200) if e.template == old]
    (en,) = [e for e in cat.search(new.split()[:3] + ["deterministic"], limit=200) if e.template == new]
    assert eo.family == en.family
    assert eo.module == "sglang.srt.server_args" and en.module.startswith("sglang.srt.arg_groups")
    assert [e.template for e in cat.family(eo.family)][0] == old      # the family is named after the oldest


def test_two_checks_printed_side_by_side_stay_apart(cat):
    a = [e for e in cat.search("Currently FlashMLA only supports topk=1")]
    b = [e for e in cat.search("Currently Flashinfer MLA only supports topk=1")]
    assert a and b and {e.family for e in a}.isdisjoint({e.family for e in b})


# -- matching real lines ------------------------------------------------------------------------------

def lines():
    out = []
    for raw in LINES.read_text().splitlines():
        if raw.strip() and not raw.startswith("#"):
            want, line = raw.split("\t", 1)
            out.append((want, line))
    return out


@pytest.mark.parametrize("want,line", lines())
def test_real_log_lines_match_the_expected_family(cat, want, line):
    m = cat.match(line)
    if want == "-":
        assert m is None, f"{line!r} matched {m.id} {m.template!r}"
        return
    assert m is not None, f"{line!r} matched nothing"
    assert want in (m.name, m.family, m.id), f"{line!r} -> {m.name or m.family} {m.template!r}"


def test_fields_are_typed_and_renamed(cat):
    m = cat.match("[2025-03-03 06:49:28 TP1] Input length (160062 tokens) exceeds the maximum allowed length "
                  "(59862 tokens). Use a shorter input or enable --allow-auto-truncate.")
    assert m.fields == {"input_tokens": "160062", "max_input_tokens": "59862"}
    m = cat.match("[2024-12-13 01:44:59 TP0] Memory pool end. avail mem=2.44 GB")
    assert m.fields == {"avail_mem_gb": 2.44} and m.event == "milestone"
    m = cat.match("ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.8. "
                  "Raise --mem-fraction-static above 0.912 (minimum viable = 1 - available/pre = 0.9116). "
                  "If using speculative decoding, draft weights are now counted.")
    assert m.fields["suggested"] == 0.912 and m.fields["minimum"] == 0.9116
    assert m.span[0] == len("ValueError: ")


def test_a_matched_message_dates_the_log(cat):
    m = cat.match("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
                  "Current value: self.server_args.mem_fraction_static=0.2")
    vs = cat.versions_of(m)
    assert vs[0] == "0.5.3rc2" or vs[0].startswith("0.5.")
    assert "0.5.9" in vs and "0.5.10" not in vs and "0.4.10.post2" not in vs


def test_best_match_is_the_most_specific(cat):
    line = "Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.7"
    ms = cat.match_all(line)
    assert len(ms) >= 2
    assert ms[0].template.endswith("mem_fraction_static={mem_fraction_static}")
    assert ms[0].score > ms[1].score


def test_a_fallback_yields_to_a_specific_entry_whatever_the_scores(cat):
    # the generic wrappers (README: fallback = true) come after every specific hand entry that matches
    abi = "ImportError: /x/sgl_kernel/common_ops.abi3.so: undefined symbol: _ZN5torch3jit17parseSchemaOrNameERKSsb"
    ms = cat.match_all(abi)
    assert [m.id for m in ms][:2] == ["python.undefined_symbol_torch_abi", "python.undefined_symbol"]
    # os.errno_enoent matches more literal text than ninja.not_installed, and still yields
    ninja = "FileNotFoundError: [Errno 2] No such file or directory: 'ninja'"
    ms = {m.id: m for m in cat.match_all(ninja)}
    assert ms["os.errno_enoent"].score > ms["ninja.not_installed"].score
    assert cat.match(ninja).id == "ninja.not_installed"
    assert cat.match("ImportError: libnvrtc.so.12: cannot open shared object file: No such file or directory").id \
        == "python.libnvrtc_missing"
    # a fallback alone still matches
    assert cat.match("ImportError: /x/ext.so: undefined symbol: some_function_v2").id == "python.undefined_symbol"
    # it yields to hand entries only: against an extracted message the scores decide
    assert cat.match("OSError: libnuma.so.1: cannot open shared object file: No such file or directory").id \
        == "python.cannot_open_shared_object"


def test_hand_entries_are_merged(cat):
    m = cat.match("ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): "
                  "address already in use")
    assert m.id == "uvicorn.bind_address_in_use" and m.component == "uvicorn"
    assert m.fields["errno"] == 98 and m.category == "env.port_in_use" and m.event == "port_error"
    assert cat.get("uvicorn.bind_address_in_use").meaning


def test_memo_returns_the_same_answer(cat):
    line = "[2025-06-22 16:13:55 TP0] Watchdog timeout (self.watchdog_timeout=300)"
    assert cat.match(line) == cat.match(line)
    assert line in cat._memo


def test_hostile_lines_are_bounded(cat):
    assert cat.match("x" * 2_000_000) is None
    assert cat.match("word " * 200_000) is None
    assert cat.match("\x00\udcff\u202e" * 1000) is None
    assert cat.match("") is None


# -- the shipped file ----------------------------------------------------------------------------------

def test_shipped_file_is_in_sync_with_the_toml_sources(cat):
    assert cat.meta()["toml_sha256"] == toml_sources_hash(), "run `make catalog` after editing data/hand or data/reviewed"


def test_toml_sources_parse_and_reviews_name_existing_families(cat):
    for p in sorted((DATA_DIR / "reviewed").glob("*.toml")):
        for f in tomllib.loads(p.read_text())["family"]:
            info = cat.family_info(f["id"])
            assert info is not None, f["id"]
            assert info["name"] == f.get("name") and info["reviewed"]
    for p in sorted((DATA_DIR / "hand").glob("*.toml")):
        for e in tomllib.loads(p.read_text())["message"]:
            assert cat.get(e["id"]) is not None


def test_counts_are_recorded(cat):
    meta = cat.meta()
    c = meta["counts"]["components"]["sglang"]
    assert c["releases"] >= 150 and c["scanned"] == c["releases"] - len(c["failed"])
    assert c["messages"] > 20000 and c["failure_messages"] > 15000
    assert set(c["per_release"]) == set(meta["sglang_versions"])
    assert c["per_release"]["0.5.23"] > c["per_release"]["0.5.14"] > c["per_release"]["0.4.6.post5"]
    assert meta["counts"]["components"]["python.argparse"]["releases"] == 6


def test_catalog_is_small_and_in_package_data():
    assert CATALOG_PATH.stat().st_size < 12_000_000
    assert "data/catalog.sqlite" in (ROOT / "pyproject.toml").read_text()


def test_writing_is_deterministic(tmp_path):
    """The writer gives the same bytes for the same inputs (a small catalog, written twice)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import build_catalog as B
    releases = {"sglang": [{"version": v, "date": "2025-01-0%d" % i, "status": "scanned"}
                           for i, v in enumerate(["0.1.0", "0.2.0"], 1)]}
    msgs = [{"component": "sglang", "template": t, "rel": rel, "first": min(rel), "specific": B.is_specific(t),
             "kind": "raise", "level": "ValueError", "category": "config.invalid_value", "event": "refusal",
             "norm": T.normalize(t), "family": fam,
             "locations": [{"kind": "raise", "level": "ValueError", "module": "sglang.srt.server_args",
                            "function": "ServerArgs.check", "rel": rel, "names": ["self.page_size"]}]}
            for t, rel, fam in [("page_size {p:int} must be a power of two", {0, 1}, "sgl-00000001"),
                                ("tp_size must divide the number of heads", {1}, "sgl-00000002")]]
    out = []
    for k in range(2):
        path = tmp_path / f"c{k}.sqlite"
        B.write_catalog(path, releases, [dict(m) for m in msgs], {"schema": 1}, hand=B.hand_entries(), reviews={})
        out.append(path.read_bytes())
    assert out[0] == out[1]
    small = Catalog(tmp_path / "c0.sqlite")
    m = small.match("page_size 3 must be a power of two")
    assert m.fields == {"p": 3} and small.versions_of(m) == ["0.1.0", "0.2.0"]
    assert small.match("uvicorn: ERROR:    Application startup failed. Exiting.").id == "uvicorn.startup_failed"


# -- light import and the CLI --------------------------------------------------------------------------

def test_import_is_light():
    code = ("import sys, diag.messages as m; c = m.Catalog.open(); "
            "print(sorted(k for k in ('re2', 'polars', 'regex', 'diag.numbers') if k in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"


def run_cli(*args) -> tuple[int, str]:
    buf = io.StringIO()
    rc = cli(list(args), out=buf)
    return rc, buf.getvalue()


def test_cli_show_search_stats(capsys):
    rc, out = run_cli("show", "kv.not_enough_memory")
    assert rc == 0 and "oom.kv_pool" in out and "pool_configurator" in out and "0.5.23" in out
    rc, out = run_cli("search", "Loaded", "weights", "leave")
    assert rc == 0 and "sgl-" in out
    rc, out = run_cli("stats")
    assert rc == 0 and "sglang:" in out and "releases" in out
    rc, out = run_cli("match", "Watchdog timeout (self.watchdog_timeout=300)")
    assert rc == 0 and "runtime.watchdog_hang" in out


def test_cli_bad_input_is_one_line(capsys):
    assert run_cli("show", "no-such-thing")[0] == 1
    assert capsys.readouterr().err.count("\n") == 1
    assert run_cli("frobnicate", "x")[0] == 2
    assert run_cli()[0] == 2


# -- checks by site: failures without a message ---------------------------------------------------

@pytest.mark.parametrize("code,names", [
    ("assert self.mamba_track_interval >= self.speculative_num_draft_tokens", ["mamba_track_interval", "speculative_num_draft_tokens"]),
    ("assert view.mamba_track_interval % view.page_size == 0", ["mamba_track_interval", "page_size"]),
    ("assert self.page_size == 1, (", ["page_size"]),
    ("assert is_cuda() or self.disable_radix_cache", ["disable_radix_cache"]),
    ("assert (", []),
    ("x = torch.tensor([r.mamba_ping_pong_track_buffer for r in reqs])", ["x", "mamba_ping_pong_track_buffer", "r", "reqs"]),
])
def test_source_names(code, names):
    from diag.messages.sites import source_names
    assert source_names(code) == names


def test_module_of_a_frame_file():
    from diag.messages.sites import module_of
    assert module_of("/usr/local/lib/python3.10/dist-packages/sglang/srt/server_args.py") == "sglang.srt.server_args"
    assert module_of("/sgl/python/sglang/srt/mem_cache/__init__.py") == "sglang.srt.mem_cache"
    assert module_of("srt/managers/schedule_batch.py") == "sglang.srt.managers.schedule_batch"
    assert module_of("<string>") is None


@pytest.mark.parametrize("module,function,code,family", [
    # 0.5.14 dropped the messages of these two checks: the same names, another function
    ("sglang.srt.server_args", "_validate_mamba_extra_buffer",
     "assert self.mamba_track_interval >= self.speculative_num_draft_tokens", "sgl-9a4b23e8"),
    ("sglang.srt.arg_groups.mamba_hook", "validate_mamba_extra_buffer",
     "assert view.mamba_track_interval % view.page_size == 0", "sgl-c4dd74c1"),
    # the same place, two wordings over the releases: the newest
    ("sglang.srt.mem_cache.mamba_radix_cache", "__init__", "assert self.page_size == 1, (", "sgl-c5e6551d"),
    # one common name somewhere else: no guess
    ("sglang.srt.layers.foo", "bar", "assert self.page_size == 1", None),
    ("sglang.srt.server_args", "__post_init__", "assert self.some_new_field", None),
])
def test_a_bare_assert_resolves_to_the_check_it_is(cat, module, function, code, family):
    from diag.messages.sites import source_names
    m = cat.check_at(module, function, source_names(code))
    assert (m.family if m else None) == family
    if m:
        assert m.fields == {} and m.versions == frozenset()


def test_the_parser_gives_a_bare_assertion_its_check():
    from diag.clean import Cleaner
    from diag.parse.sglang import LogParser
    text = '''Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py", line 2210, in _validate_mamba_extra_buffer
    assert self.mamba_track_interval >= self.speculative_num_draft_tokens
AssertionError
'''
    p = LogParser()
    for n, line in Cleaner().run(text.splitlines()):
        p.feed(n, line)
    p.finish()
    exc = [e for e in p.events if e.kind == "exception"]
    assert len(exc) == 1 and exc[0].msg is not None and exc[0].msg.family == "sgl-9a4b23e8"


def test_a_line_cut_inside_a_long_message_matches_its_leading_part(cat):
    line = ("ValueError: metrics_port at 40290 is not available in 30 seconds. metrics_port is used by a process "
            "already. process.name()='sglang' process.cmdline()=")
    assert cat.match(line) is None                        # the whole template does not match a cut line
    m = cat.match_cut(line)
    assert m.name == "port.wait_timeout" and m.fields["port"] == "40290" and m.fields["port_name"] == "metrics_port"
    # too little of it (fewer than 40 letters of literal text), or cut inside a word: no match
    assert cat.match_cut("metrics_port at 40290 is not available in 30 seconds.") is None
    assert cat.match_cut("metrics_port at 40290 is not available in 30 seconds. metrics_port is us") is None
    # a value may not swallow the text after it
    assert cat.match_cut("metrics_port at 40290 is not available in 30 seconds. metrics_port is used by "
                         "a process already. process.name()=x and then something else entirely") is None


def test_a_line_cut_after_a_sentence_is_found_by_its_first_sentence(cat):
    """The paster kept the message up to the end of a sentence and dropped the values after it:
    the message is found by a key of its first sentence and matched up to that sentence."""
    line = "ValueError: port_base at 30234 is not available in 30 seconds. port_base is used by a process already."
    m = cat.match_cut(line)
    assert m is not None and m.name == "port.wait_timeout" and m.fields["port"] == "30234" and m.partial
    # the cut must still fall at a sentence's end, not inside one
    assert cat.match_cut("ValueError: port_base at 30234 is not available in 30 seconds. port_base is used by a") is None
