"""Where the catalog lives and how its columns are written (shared by the builder and the runtime)."""
from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
CATALOG_PATH = DATA_DIR / "catalog.sqlite"

# Strings that repeat (components, kinds, levels, categories, events, modules, functions, the
# names a check reads) are interned in `vocab`; version sets are index ranges over `releases`
# ("0-14,17"); templates are deflated against a shared dictionary (blobs.zdict); a message's
# regex is derived from its template (template.to_regex) unless a hand entry gives one.
# Ids are hashes: message n = the 48-bit number of "m-<12 hex>", family = the 32-bit number of
# "<prefix>-<8 hex>"; a hand entry's own id is kept in its `hand` JSON.
SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;
CREATE TABLE blobs (key TEXT PRIMARY KEY, value BLOB) WITHOUT ROWID;
CREATE TABLE releases (component TEXT, idx INTEGER, version TEXT, date TEXT, status TEXT,
                       PRIMARY KEY (component, idx)) WITHOUT ROWID;
CREATE TABLE vocab (n INTEGER PRIMARY KEY, text TEXT);
CREATE TABLE messages (n INTEGER PRIMARY KEY, component INTEGER, family INTEGER, template BLOB, regex TEXT,
                       specific INTEGER, kind INTEGER, level INTEGER, category INTEGER, event INTEGER,
                       auto INTEGER, versions TEXT, n_releases INTEGER, hand TEXT);
CREATE INDEX messages_family ON messages(family);
CREATE TABLE reviews (family INTEGER PRIMARY KEY, id TEXT, name TEXT, category TEXT, event TEXT,
                      meaning TEXT, action TEXT, fields TEXT);
CREATE INDEX reviews_name ON reviews(name);
CREATE TABLE locations (message INTEGER, module INTEGER, function INTEGER, kind INTEGER, level INTEGER,
                        versions TEXT, names TEXT,
                        PRIMARY KEY (message, module, function, kind, level)) WITHOUT ROWID;
CREATE TABLE anchors (key TEXT, message INTEGER, PRIMARY KEY (key, message)) WITHOUT ROWID;
CREATE TABLE modules (module TEXT PRIMARY KEY, component TEXT, versions TEXT) WITHOUT ROWID;
CREATE TABLE heads (key TEXT, message INTEGER, PRIMARY KEY (key, message)) WITHOUT ROWID;
CREATE TABLE idents (key TEXT, message INTEGER, n INTEGER, PRIMARY KEY (key, message)) WITHOUT ROWID;
"""

FAMILY_PREFIX = {"sglang": "sgl", "python.argparse": "pyarg", "python.subprocess": "pysub"}


def message_number(mid: str) -> int | None:
    """'m-0123456789ab' -> its number; a hand id ('torch.cuda_oom') -> the hash of it."""
    if mid.startswith("m-") and len(mid) == 14:
        try:
            return int(mid[2:], 16)
        except ValueError:
            return None
    return hand_number(mid, 12)


def family_number(fid: str) -> int:
    prefix, _, hexpart = fid.rpartition("-")
    if prefix in FAMILY_PREFIX.values() and len(hexpart) == 8:
        try:
            return int(hexpart, 16)
        except ValueError:
            pass
    return hand_number(fid, 8)


def hand_number(hid: str, digits: int) -> int:
    import hashlib
    return int(hashlib.sha1(("hand\0" + hid).encode()).hexdigest()[:digits], 16)


def compress(text: str, zdict: bytes) -> bytes:
    import zlib
    c = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, zdict)
    return c.compress(text.encode()) + c.flush()


def decompress(blob: bytes, zdict: bytes) -> str:
    import zlib
    d = zlib.decompressobj(-15, zdict)
    return (d.decompress(blob) + d.flush()).decode()


def rangestr(indices) -> str:
    """{0, 1, 2, 5, 7, 8} -> '0-2,5,7-8' (release indices of one component, in order)."""
    out = []
    run = None
    for i in sorted(indices):
        if run and i == run[1] + 1:
            run[1] = i
        else:
            if run:
                out.append(run)
            run = [i, i]
    if run:
        out.append(run)
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in out)


def parse_ranges(text: str) -> set[int]:
    out: set[int] = set()
    for part in (text or "").split(","):
        if not part:
            continue
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def toml_sources() -> list[Path]:
    return sorted(list((DATA_DIR / "hand").glob("*.toml")) + list((DATA_DIR / "reviewed").glob("*.toml")))


def toml_sources_hash() -> str:
    """The hash of the hand lists and reviews that the shipped file was merged from."""
    import hashlib
    h = hashlib.sha256()
    for p in toml_sources():
        h.update(f"{p.parent.name}/{p.name}\0".encode())
        h.update(p.read_bytes())
        h.update(b"\0")
    return h.hexdigest()
