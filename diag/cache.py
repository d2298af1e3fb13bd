"""A start-up cache: what diag would build on every run, kept as a pickle (the checked rules
registry, `cached`; the compiled Hyperscan database of the fast reader, `cached_by`).

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
