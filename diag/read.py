"""Open an input (file, '-', gzip/xz/bz2), refuse what is not text, stream its lines.

Lines are yielded one at a time, decoded as UTF-8 with invalid bytes replaced (UTF-16
with a BOM is honoured); over-long lines are cut at MAX_LINE characters and the rest is
skipped without being held in memory.
"""
from __future__ import annotations

import io
import os
import sys
from dataclasses import dataclass, field
from typing import BinaryIO, Iterator

MAX_LINE = 256 * 1024
HEAD_BYTES = 64 * 1024


class InputError(Exception):
    """A one-line, user-facing reason why an input cannot be read (exit code 2)."""


@dataclass
class Opened:
    name: str
    stream: BinaryIO
    head: bytes
    encoding: str
    size: int | None
    notes: list[str] = field(default_factory=list)


def _decompress(raw: BinaryIO, head: bytes, name: str) -> tuple[BinaryIO, str | None]:
    if head[:2] == b"\x1f\x8b":
        import gzip
        return gzip.GzipFile(fileobj=raw), "gzip"
    if head[:6] == b"\xfd7zXZ\x00":
        import lzma
        return lzma.LZMAFile(raw), "xz"
    if head[:3] == b"BZh":
        import bz2
        return bz2.BZ2File(raw), "bzip2"
    return raw, None


class _Peek(io.RawIOBase):
    """A stream that replays bytes already read, then continues with the source."""

    def __init__(self, head: bytes, rest: BinaryIO):
        self._head, self._rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._rest.read(len(b))
        b[: len(data)] = data
        return len(data)


def _read_head(stream: BinaryIO) -> bytes:
    chunks, total = [], 0
    while total < HEAD_BYTES:
        data = stream.read(HEAD_BYTES - total)
        if not data:
            break
        chunks.append(data)
        total += len(data)
    return b"".join(chunks)


def open_input(path: str) -> Opened:
    """Open a path or '-' for streaming; raise InputError with a one-line reason."""
    if path == "-":
        raw: BinaryIO = sys.stdin.buffer
        name, size = "<stdin>", None
    else:
        if not os.path.exists(path):
            raise InputError(f"{path}: no such file")
        if os.path.isdir(path):
            raise InputError(f"{path}: is a directory; give the log files inside it (e.g. {path.rstrip('/')}/*.log)")
        try:
            raw = open(path, "rb")
        except PermissionError:
            raise InputError(f"{path}: permission denied") from None
        except OSError as exc:
            raise InputError(f"{path}: cannot open ({exc.strerror or exc})") from None
        name, size = path, os.path.getsize(path)
    try:
        head = _read_head(raw)
        stream, packed = _decompress(_Peek(head, raw), head, name)
        notes = []
        if packed:
            head = _read_head(stream)
            stream = _Peek(head, stream)
            notes.append(f"{packed}-compressed")
    except (OSError, EOFError) as exc:
        raise InputError(f"{name}: cannot read ({exc})") from None
    encoding = _encoding(head)
    if encoding == "binary":
        raise InputError(f"{name}: binary data, not a text log (give the server's log file or an nvidia-smi output)")
    return Opened(name=name, stream=stream, head=head, encoding=encoding, size=size, notes=notes)


def _encoding(head: bytes) -> str:
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    if head.startswith(b"\xef\xbb\xbf"):
        return "utf-8-sig"
    if not head:
        return "utf-8"
    sample = head[:8192]
    if b"\x00" in sample:
        # UTF-16 without BOM shows NULs in every other byte of ASCII text
        if sample[1::2].count(0) > len(sample) * 0.4:
            return "utf-16-le"
        if sample[0::2].count(0) > len(sample) * 0.4:
            return "utf-16-be"
        return "binary"
    control = sum(1 for b in sample if b < 32 and b not in (9, 10, 12, 13, 27))
    return "binary" if control > len(sample) * 0.1 else "utf-8"


def iter_lines(opened: Opened) -> Iterator[str]:
    """Decoded lines without line endings; CRLF and CR are handled; long lines are cut."""
    text = io.TextIOWrapper(io.BufferedReader(opened.stream, 1 << 20) if not isinstance(opened.stream, io.BufferedIOBase) else opened.stream,
                            encoding=opened.encoding, errors="replace", newline=None)
    cut = 0
    try:
        while True:
            line = text.readline(MAX_LINE)
            if not line:
                break
            if line.endswith("\n"):
                yield line[:-1]
                continue
            if len(line) < MAX_LINE:  # last line without newline
                yield line
                break
            cut += 1
            yield line
            while True:  # skip the rest of this line without keeping it
                more = text.readline(MAX_LINE)
                if not more or more.endswith("\n"):
                    break
    except (OSError, EOFError) as exc:
        opened.notes.append(f"reading stopped early: {exc}")
    if cut:
        opened.notes.append(f"{cut} line(s) longer than {MAX_LINE // 1024} KiB were cut to their first {MAX_LINE // 1024} KiB")
