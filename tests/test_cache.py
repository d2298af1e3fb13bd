"""The start-up cache (diag/cache.py): the same value as a fresh build, rebuilt when its sources
change, and never an error when its file is corrupt or its folder cannot be written."""
from __future__ import annotations

import os

from diag import cache
from diag.rules import registry as R


def _counting(value):
    calls = []

    def build():
        calls.append(1)
        return value
    return build, calls


def test_cached_value_is_kept_and_rebuilt_when_a_source_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("DIAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("DIAG_NO_CACHE", raising=False)
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.toml").write_text("x = 1\n")
    build, calls = _counting({"v": 1})
    assert cache.cached("thing", src, (".toml",), build) == {"v": 1}
    assert cache.cached("thing", src, (".toml",), build) == {"v": 1}
    assert len(calls) == 1                                   # the second came from the file
    (src / "a.toml").write_text("x = 22\n")                  # another size: stale
    assert cache.cached("thing", src, (".toml",), build) == {"v": 1}
    assert len(calls) == 2
    (src / "b.toml").write_text("")                          # a new file: stale
    cache.cached("thing", src, (".toml",), build)
    assert len(calls) == 3
    (src / "notes.txt").write_text("not a source")           # another suffix: not a source
    cache.cached("thing", src, (".toml",), build)
    assert len(calls) == 3


def test_corrupt_or_unwritable_cache_falls_back_to_building(tmp_path, monkeypatch):
    where = tmp_path / "cache"
    monkeypatch.setenv("DIAG_CACHE_DIR", str(where))
    monkeypatch.delenv("DIAG_NO_CACHE", raising=False)
    src = tmp_path / "src"
    src.mkdir()
    build, calls = _counting([1, 2, 3])
    cache.cached("thing", src, (".toml",), build)
    (file,) = [p for p in where.iterdir() if p.suffix == ".pickle"]
    file.write_bytes(b"\x80\x05not a pickle")
    assert cache.cached("thing", src, (".toml",), build) == [1, 2, 3]
    assert len(calls) == 2
    file.write_bytes(b"")
    assert cache.cached("thing", src, (".toml",), build) == [1, 2, 3]
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the folder should be")
    monkeypatch.setenv("DIAG_CACHE_DIR", str(blocker / "sub"))
    assert cache.cached("thing", src, (".toml",), build) == [1, 2, 3]
    assert not [p for p in tmp_path.rglob("*.tmp")]          # no half-written file left behind


def test_no_cache_switch_reads_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("DIAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DIAG_NO_CACHE", "1")
    build, calls = _counting(5)
    assert cache.cached("thing", tmp_path, (".toml",), build) == 5
    assert cache.cached("thing", tmp_path, (".toml",), build) == 5
    assert len(calls) == 2 and not (tmp_path / "cache").exists()


def test_registry_from_the_cache_is_the_loaded_one(tmp_path, monkeypatch):
    monkeypatch.setenv("DIAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("DIAG_NO_CACHE", raising=False)
    fresh = R.load(check_messages=False)
    R.registry.cache_clear()
    try:
        first = R.registry()                                 # built and stored
        R.registry.cache_clear()
        second = R.registry()                                # read back
        assert os.listdir(tmp_path / "cache")
        for reg in (first, second):
            assert [r.id for r in reg.rules] == [r.id for r in fresh.rules]
            assert reg.rules == fresh.rules
            assert reg.library == fresh.library and reg.tables == fresh.tables
    finally:
        R.registry.cache_clear()


def test_hyperscan_database_from_the_cache_flags_the_same_lines(tmp_path, monkeypatch):
    import pickle

    import pytest
    pytest.importorskip("hyperscan")
    from diag.scan import Signatures
    monkeypatch.setenv("DIAG_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("DIAG_NO_CACHE", raising=False)
    text = b"ok line\n[2026-05-14 10:00:00 TP0] Decode batch, #running-req: 1 Traceback here\nKilled\nfine\n"

    def flagged(sig):
        ends = []
        sig._db.scan(text, match_event_handler=lambda _i, _f, to, _fl, _c: ends.append(to))
        return sorted({text.count(b"\n", 0, e - 1) for e in ends})

    built = Signatures()                       # compiled, stored
    assert built.engine == "hyperscan" and (tmp_path / "hyperscan.pickle").exists()
    again = Signatures()                       # loaded
    assert again.engine == "hyperscan" and flagged(again) == flagged(built) == [1, 2]
    key, (ok, _blob) = pickle.loads((tmp_path / "hyperscan.pickle").read_bytes())
    (tmp_path / "hyperscan.pickle").write_bytes(pickle.dumps((key, (ok, b"not a database"))))
    broken = Signatures()                      # refused on load: compiled again
    assert broken.engine == "hyperscan" and flagged(broken) == [1, 2]


def test_kept_memo_grows_across_runs_and_starts_over_when_its_sources_change(tmp_path, monkeypatch):
    monkeypatch.setenv("DIAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("DIAG_NO_CACHE", raising=False)
    src = tmp_path / "code.py"
    src.write_text("v = 1\n")
    first = cache.Kept("memo", [src], limit=3)
    assert first.get("a") is None
    first.put("a", (1, "x"))
    first.put("b", frozenset({2}))
    assert first.get("a") == (1, "x")
    first.write()                                            # what atexit does
    second = cache.Kept("memo", [src], limit=3)              # the next run
    assert second.get("a") == (1, "x") and second.get("b") == frozenset({2})
    second.put("c", 3)
    second.put("d", 4)
    second.write()
    third = cache.Kept("memo", [src], limit=3)
    assert third.get("a") is None and [third.get(k) for k in "bcd"] == [frozenset({2}), 3, 4]   # the newest 3
    src.write_text("v = 22\n")                               # the code that computed them changed
    assert cache.Kept("memo", [src], limit=3).get("b") is None
    next((tmp_path / "cache").glob("memo-*.pickle")).write_bytes(b"\x80\x05garbage")
    broken = cache.Kept("memo", [src])
    assert broken.get("b") is None
    broken.put("b", 5)
    broken.write()
    assert cache.Kept("memo", [src]).get("b") == 5
    monkeypatch.setenv("DIAG_NO_CACHE", "1")
    off = cache.Kept("other", [src])
    off.put("k", 1)
    assert off.get("k") == 1                                 # a memo for this run only
    off.write()
    assert not list((tmp_path / "cache").glob("other-*.pickle"))


def test_catalog_entries_from_the_kept_memo_match_like_fresh_ones(tmp_path, monkeypatch):
    from diag.messages import Catalog
    monkeypatch.setenv("DIAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("DIAG_NO_CACHE", raising=False)
    line = "Not enough memory. Please try to increase --mem-fraction-static."
    fresh = Catalog()
    want = fresh.match(line)
    assert want is not None and fresh._kept is not None
    fresh._kept.write()
    again = Catalog()                                        # a new run: rows from the memo, no SQL row built
    built = []
    monkeypatch.setattr(again, "_entry", lambda row: built.append(row) or Catalog._entry(again, row))
    assert again.match(line) == want and not built
    assert again.get(want.id) is not None and again.get(want.id).id == want.id


def test_required_literals_come_from_the_kept_memo(tmp_path, monkeypatch):
    from diag import rx
    monkeypatch.setenv("DIAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("DIAG_NO_CACHE", raising=False)
    monkeypatch.setattr(rx, "_KEPT", None)
    want = rx.required(r"foo(bar|baz)\d+", 0)
    assert want and rx._required_kept(r"foo(bar|baz)\d+", 0) == want
    assert rx._required_kept(r"(?i)x", 0) is None
    rx._KEPT.write()
    monkeypatch.setattr(rx, "_KEPT", None)
    monkeypatch.setattr(rx, "required", lambda p, f=0: 1 / 0)   # not computed again
    assert rx._required_kept(r"foo(bar|baz)\d+", 0) == want
    assert rx._required_kept(r"(?i)x", 0) is None

