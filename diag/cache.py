"""A start-up cache: what diag would build on every run, kept as a pickle (the checked rules
registry, `cached`; the compiled Hyperscan database of the fast reader, `cached_by`; memos grown
as runs use them, written back at exit, `Kept`: the patterns' literal pre-checks, the catalog
rows a log's lines were matched against).

    $DIAG_CACHE_DIR, else $XDG_CACHE_HOME/diag, else ~/.cache/diag
    DIAG_NO_CACHE=1     build every time, read and write nothing

One file per cached thing (and source folder: `<name>-<crc of the folder>.pickle`), holding the
key it was built under: diag's and Python's versions and the path, size and mtime of every file
it was built from (the rule files) and of diag's own Python sources (a change to the code that
checks them invalidates it too). A missing, stale, unreadable or corrupt file is rebuilt; a cache folder that
cannot be written is no error (the thing is built, not kept). Nothing but diag writes there, and
only the user can: the folder is created 0700.
"""
from __future__ import annotations

import os
import pickle
import sys
import zlib
from pathlib import Path
from typing import Callable, Iterable, TypeVar

T = TypeVar("T")
FORMAT = 1                      # bump when the file layout changes


def cache_dir() -> Path | None:
    if os.environ.get("DIAG_NO_CACHE"):
        return None
    explicit = os.environ.get("DIAG_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if base.startswith("~"):      # no home directory to expand
        return None
    return Path(base) / "diag"


def _walk(root: str, suffixes: tuple[str, ...], out: list) -> None:
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for e in sorted(entries, key=lambda e: e.name):
        if e.is_dir(follow_symlinks=False):
            if e.name != "__pycache__" and not e.name.startswith("."):
                _walk(e.path, suffixes, out)
        elif e.name.endswith(suffixes):
            try:
                st = e.stat()
            except OSError:
                continue
            out.append(f"{e.path}\0{st.st_size}\0{st.st_mtime_ns}")


def _crc(text: str) -> str:
    """A file name's tag for a folder (a clash only costs a rebuild: the whole key is checked)."""
    return f"{zlib.crc32(text.encode('utf-8', 'surrogateescape')):08x}"


def source_key(folders: Iterable[tuple[Path, tuple[str, ...]]]) -> str:
    """diag's version, its Python sources and the given folders' files (path, size, mtime), as one text."""
    from . import __version__
    parts: list[str] = [f"format={FORMAT}", f"diag={__version__}", f"python={sys.version}"]
    _walk(str(Path(__file__).resolve().parent), (".py",), parts)
    for folder, suffixes in folders:
        parts.append(f"[{folder}]")
        _walk(str(folder), suffixes, parts)
    return "\n".join(parts)          # kept whole and compared whole (no digest: hashlib costs 2 ms to import)


def cached(name: str, folder: Path, suffixes: tuple[str, ...], build: Callable[[], T]) -> T:
    """`build()`, or what it returned before from the same sources."""
    where = cache_dir()
    if where is None:
        return build()
    folder = folder.resolve()
    key = source_key([(folder, suffixes)])
    path = where / f"{name}-{_crc(str(folder))}.pickle"
    try:
        with open(path, "rb") as f:
            stored_key, value = pickle.load(f)
        if stored_key == key:
            return value
    except Exception:       # missing, unreadable, truncated, from another layout: rebuild
        pass
    value = build()
    _store(where, path, key, value)
    return value


def cached_by(name: str, key: str, build: Callable[[], T], valid: Callable[[T], bool] = lambda v: True) -> T:
    """`build()`, or what it returned before under the same key (a text naming every input; one
    file per name). `valid` may refuse a stored value (then it is rebuilt and replaced)."""
    where = cache_dir()
    if where is None:
        return build()
    from . import __version__
    key = f"format={FORMAT}\0diag={__version__}\0python={sys.version}\0{key}"
    path = where / f"{name}.pickle"
    try:
        with open(path, "rb") as f:
            stored_key, value = pickle.load(f)
        if stored_key == key and valid(value):
            return value
    except Exception:
        pass
    value = build()
    _store(where, path, key, value)
    return value


def _store(where: Path, path: Path, key: str, value: object) -> None:
    tmp = None
    try:
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
        data = pickle.dumps((key, value), protocol=pickle.HIGHEST_PROTOCOL)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)     # readers see the old file or the new one, never half of one
        tmp = None
    except Exception:       # read-only home, full disk, an unpicklable value: not kept, no error
        pass
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


class Kept:
    """A memo kept between runs: a dict of what a run computed on first use (a pattern's literal
    pre-check, a catalog row made into an Entry), read from `<name>.pickle` on first access and
    written back at exit when the run added to it. The key names what the values were computed
    from: diag's and Python's versions and the path, size and mtime of each of `files` (the code
    that computes them, the data they come from; one file per set of paths, so two installations
    do not take turns); another key starts an empty memo. At most
    `limit` items are kept (the newest), each pickled on its own and unpickled when first asked
    for (a run uses a few of the thousands kept). A value that is missing is just computed again,
    so a lost or refused write costs time only. Threads may share it (plain dict operations); a
    forked worker that never runs atexit writes nothing."""

    def __init__(self, name: str, files: Iterable[Path | str], limit: int = 4096):
        self.files, self.limit = [str(f) for f in files], limit
        self.name = f"{name}-{_crc(chr(0).join(self.files))}"     # one file per installation
        self._data: dict | None = None      # key -> pickled value
        self._live: dict = {}               # key -> value, for the keys asked for
        self._new: dict = {}                # key -> pickled value, added by this run
        self._key: str | None = None

    def _key_text(self) -> str:
        from . import __version__
        parts = [f"format={FORMAT}", f"diag={__version__}", f"python={sys.version}"]
        for f in self.files:
            try:
                st = os.stat(f)
                parts.append(f"{f}\0{st.st_size}\0{st.st_mtime_ns}")
            except OSError:
                parts.append(f"{f}\0missing")
        return "\n".join(parts)

    def _read(self, where: Path) -> dict:
        try:
            with open(where / f"{self.name}.pickle", "rb") as f:
                stored_key, value = pickle.load(f)
            if stored_key == self._key and isinstance(value, dict):
                return value
        except Exception:       # missing, unreadable, truncated, from another layout: start empty
            pass
        return {}

    def _load(self) -> dict:
        self._data = {}
        where = cache_dir()
        if where is not None:
            self._key = self._key_text()
            self._data = self._read(where)
        return self._data

    def get(self, key, default=None):
        value = self._live.get(key, _MISSING)
        if value is not _MISSING:
            return value
        data = self._data if self._data is not None else self._load()
        blob = data.get(key)
        if blob is None:
            return default
        try:
            value = pickle.loads(blob)
        except Exception:       # a value that no longer unpickles: computed again
            del data[key]
            return default
        self._live[key] = value
        return value

    def put(self, key, value) -> None:
        if self._data is None:
            self._load()
        live = self._live
        if len(live) >= self.limit:          # bounded in a long-running process too: the oldest quarter goes
            for k in list(live)[: self.limit // 4]:
                del live[k]
        live[key] = value
        if self._key is None:               # no cache folder (DIAG_NO_CACHE): nothing to write
            return
        try:
            blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:       # not picklable: kept for this run only
            return
        if not _DIRTY:
            import atexit
            atexit.register(_write_kept)
        self._new.pop(key, None)
        self._new[key] = blob
        if len(self._new) > self.limit:
            del self._new[next(iter(self._new))]
        _DIRTY[id(self)] = self

    def write(self) -> None:
        """Store what this run added (merged with what another run stored meanwhile under the same key)."""
        if not self._new or self._key is None:
            return
        where = cache_dir()
        if where is None:
            return
        merged = self._read(where)
        for k in self._new:                  # newest last: re-inserted at the end
            merged.pop(k, None)
        merged.update(self._new)
        if len(merged) > self.limit:
            merged = dict(list(merged.items())[-self.limit:])
        self._new = {}
        _store(where, where / f"{self.name}.pickle", self._key, merged)


_MISSING = object()
_DIRTY: dict = {}           # the memos this run added to (atexit registered with the first)


def _write_kept() -> None:
    for kept in list(_DIRTY.values()):
        kept.write()
