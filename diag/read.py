"""Open an input (file, '-', gzip/xz/bz2), refuse what is not text, stream its lines, bounded.

Lines are yielded one at a time, decoded as UTF-8 with invalid bytes replaced (UTF-16 and
UTF-32 with a BOM, and UTF-16 without one, are honoured); over-long lines are cut at
MAX_LINE characters and the rest is skipped without being held in memory.

Everything is bounded, whatever the input is:
- a regular file is read up to the size it had when it was opened (a log that is still being
  written, even faster than it is read, ends there);
- at most `Limits.max_bytes` bytes of text (after decompression: a decompression bomb stops
  at the cap) and `Limits.max_lines` lines are read; reaching a cap adds a note to the input
  and the diagnosis is made on what was read;
- character devices (`/dev/zero`), FIFOs and sockets are refused, except standard input;
- a compressed body that turns corrupt after some text ends the input there with a note; one
  that is corrupt from the start is an input error;
- binary data (NUL-heavy, control characters) is refused.
"""
from __future__ import annotations

import io
import os
import stat
import sys
from dataclasses import dataclass, field
from typing import BinaryIO, Iterator

MAX_LINE = 256 * 1024
HEAD_BYTES = 64 * 1024
DEFAULT_MAX_BYTES = 1 << 30       # 1 GiB of text per input
DEFAULT_MAX_LINES = 2_000_000     # lines per input


class InputError(Exception):
    """A one-line, user-facing reason why an input cannot be read (exit code 2)."""


@dataclass(frozen=True)
class Limits:
    max_bytes: int = DEFAULT_MAX_BYTES
    max_lines: int = DEFAULT_MAX_LINES


@dataclass
class Opened:
    name: str
    stream: BinaryIO
    head: bytes
    encoding: str
    size: int | None
    notes: list[str] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)
    packed: str | None = None  # gzip | xz | bzip2


def _decompress_errors() -> tuple[type[BaseException], ...]:
    return (OSError, EOFError, CorruptData)


def _sniff_packed(head: bytes) -> str | None:
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if head[:6] == b"\xfd7zXZ\x00":
        return "xz"
    # 'BZh' alone is three letters a text log can start with: ask for the block magic too
    if head[:3] == b"BZh" and head[3:4] in b"123456789" and head[4:10] in (b"1AY&SY", b"\x17rE8P\x90"):
        return "bzip2"
    return None


class CorruptData(Exception):
    """A compressed body that cannot be decoded (any codec's error, with its message)."""


class _ByRead(io.RawIOBase):
    """A raw stream whose `read` hands out the bytes as they come; `readinto` only copies them
    (RawIOBase.read would copy every chunk through a buffer once more)."""

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


class _Decompressing(_ByRead):
    """gzip / xz / bzip2, decoded incrementally: output bounded per read (a bomb never expands in
    memory), concatenated members followed, and the text before a corrupt spot kept."""

    # compressed bytes per step: small at first, so that the text before an early corrupt spot
    # is kept, then larger
    FIRST_CHUNK, MAX_CHUNK = 128, 16 * 1024

    def __init__(self, src: BinaryIO, packed: str):
        self._src, self._packed = src, packed
        self._d = self._new()
        self._input_done = False
        self._done = False
        self._members = 0
        self._chunk = self.FIRST_CHUNK
        self._pending = b""

    def _new(self):
        if self._packed == "gzip":
            import zlib
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        if self._packed == "xz":
            import lzma
            return lzma.LZMADecompressor()
        import bz2
        return bz2.BZ2Decompressor()

    def _feed(self) -> bytes:
        if self._pending:  # what followed the end of the last member
            data, self._pending = self._pending, b""
            return data
        if self._input_done:
            return b""
        data = self._src.read(self._chunk)
        self._chunk = min(self.MAX_CHUNK, self._chunk * 2)
        if not data:
            self._input_done = True
        return data

    def read(self, size: int = -1) -> bytes:
        # bytes as they come (RawIOBase.read would copy them through a buffer once more)
        if size is None or size < 0:
            return self.readall()
        want = max(size, 1)
        while not self._done:
            out = self._step(want)
            if out:
                return out
        return b""

    def _step(self, want: int) -> bytes:
        d = self._d
        try:
            if self._packed == "gzip":
                out = d.decompress(d.unconsumed_tail or self._feed(), want)
            else:
                out = d.decompress(self._feed() if d.needs_input else b"", want)
        except Exception as exc:  # zlib.error, lzma.LZMAError, OSError (bz2): all mean corrupt data
            self._done = True
            raise CorruptData(_reason(exc)) from None
        if d.eof:  # end of one member: another may follow (concatenated .gz, multi-stream .xz/.bz2)
            self._members += 1
            rest = d.unused_data or self._feed()
            if rest.strip(b"\0"):
                self._d = self._new()
                self._pending = rest
            else:
                self._done = True  # the end, or tar-style zero padding
            return out
        if not out and self._input_done and not self._pending:
            pending = d.unconsumed_tail if self._packed == "gzip" else not d.needs_input
            if not pending:
                self._done = True
                raise CorruptData("the compressed data ends before its end marker (cut short?)")
        return out


class _Peek(_ByRead):
    """A stream that replays bytes already read, then continues with the source."""

    def __init__(self, head: bytes, rest: BinaryIO):
        self._head, self._at, self._rest = memoryview(head), 0, rest

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            return self.readall()
        if self._at < len(self._head):     # an offset, not a slice: replaying many MiB stays linear
            n = min(size, len(self._head) - self._at)
            data = bytes(self._head[self._at:self._at + n])
            self._at += n
            return data
        return self._rest.read(size)


class _Upto(_ByRead):
    """At most `limit` bytes of the source (the size a file had when it was opened)."""

    def __init__(self, raw: BinaryIO, limit: int):
        self._raw, self._left = raw, limit

    def read(self, size: int = -1) -> bytes:
        if self._left <= 0:
            return b""
        if size is None or size < 0:
            return self.readall()
        data = self._raw.read(min(size, self._left))
        self._left -= len(data)
        return data

    def close(self) -> None:
        self._raw.close()
        super().close()


class _Guarded(_ByRead):
    """The text bytes of an input: decompression errors end it with a note; the byte cap ends it."""

    def __init__(self, source: BinaryIO, opened: "Opened", already: int):
        self._src, self._opened, self.count = source, opened, already
        self.capped = False
        self._errors = _decompress_errors()

    def read(self, size: int = -1) -> bytes:
        """At most `size` bytes (the bytes as the source gave them: no copy through a buffer)."""
        if size is None or size < 0:
            return self.readall()
        left = self._opened.limits.max_bytes - self.count
        if left <= 0:
            if not self.capped:
                self.capped = True
                self._opened.notes.append(
                    f"stopped reading at the cap of {_size(self._opened.limits.max_bytes)} of text (--max-bytes); "
                    "the diagnosis is on what was read")
            return b""
        try:
            data = self._src.read(min(size, left))
        except self._errors as exc:
            what = f"{self._opened.packed} data" if self._opened.packed else "the input"
            self._opened.notes.append(f"{what} is corrupt after {_size(self.count)} ({_reason(exc)}); "
                                      "the diagnosis is on what was read")
            return b""
        if not data:
            return b""
        self.count += len(data)
        return data


def _size(n: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor:
            return f"{n / factor:.3g} {unit}"
    return f"{n} bytes"


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:120]


def read_up_to(stream: BinaryIO, size: int) -> bytes:
    """`size` bytes (fewer only at the end): reads until that much came or the stream ended."""
    chunks, total = [], 0
    while total < size:
        data = stream.read(size - total)
        if not data:
            break
        chunks.append(data)
        total += len(data)
    return b"".join(chunks)


def _read_head(stream: BinaryIO) -> bytes:
    return read_up_to(stream, HEAD_BYTES)


def _read_head_tolerant(stream: BinaryIO) -> tuple[bytes, BaseException | None]:
    """The head of a decompressed stream and the error that cut it, if any."""
    chunks, total = [], 0
    errors = _decompress_errors()
    while total < HEAD_BYTES:
        try:
            data = stream.read(min(8192, HEAD_BYTES - total))
        except errors as exc:
            return b"".join(chunks), exc
        if not data:
            break
        chunks.append(data)
        total += len(data)
    return b"".join(chunks), None


def _kind_refused(mode: int) -> str | None:
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return None


def _open_stdin() -> BinaryIO:
    stdin = sys.stdin
    try:
        if stdin is None or stdin.closed:
            raise ValueError
        raw = stdin.buffer
        os.fstat(raw.fileno())
    except (ValueError, OSError, AttributeError):
        raise InputError("<stdin>: standard input is closed") from None
    return raw


def open_input(path: str, limits: Limits | None = None) -> Opened:
    """Open a path or '-' for streaming; raise InputError with a one-line reason."""
    limits = limits or Limits()
    size: int | None = None
    if path == "-":
        raw: BinaryIO = _open_stdin()
        name = "<stdin>"
    else:
        name = display_name(path)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise InputError(f"{name}: no such file") from None
        except PermissionError:
            raise InputError(f"{name}: permission denied") from None
        except (OSError, ValueError) as exc:
            raise InputError(f"{name}: cannot open ({getattr(exc, 'strerror', None) or exc})") from None
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"{name}: is a directory; give the log files inside it (e.g. {name.rstrip('/')}/*.log)")
        refused = _kind_refused(st.st_mode)
        if refused:
            raise InputError(f"{name}: is {refused}, not a file; to read a stream, pipe it to standard input "
                             f"(… | diag analyze -)")
        try:
            f = open(path, "rb")
            size = os.fstat(f.fileno()).st_size
        except PermissionError:
            raise InputError(f"{name}: permission denied") from None
        except OSError as exc:
            raise InputError(f"{name}: cannot open ({exc.strerror or exc})") from None
        raw = _Upto(f, size)
    opened = Opened(name=name, stream=raw, head=b"", encoding="utf-8", size=size, limits=limits)
    try:
        head = _read_head(raw)
    except OSError as exc:
        raise InputError(f"{name}: cannot read ({exc.strerror or exc})") from None
    packed = _sniff_packed(head)
    stream: BinaryIO = _Peek(head, raw)
    if packed:
        opened.packed = packed
        inner: BinaryIO = _Decompressing(stream, packed)
        head, error = _read_head_tolerant(inner)
        if error is not None and not head:
            raise InputError(f"{name}: {packed} data is corrupt ({_reason(error)})")
        opened.notes.append(f"{packed}-compressed")
        if error is not None:
            opened.notes.append(f"{packed} data is corrupt after {_size(len(head))} ({_reason(error)}); "
                                "the diagnosis is on what was read")
            inner = io.BytesIO(b"")
        stream = _Peek(head, inner)
    encoding = _encoding(head)
    if encoding == "binary":
        raise InputError(f"{name}: binary data, not a text log (give the server's log file or an nvidia-smi output)")
    opened.head = head[: limits.max_bytes]
    opened.encoding = encoding
    opened.stream = _Guarded(stream, opened, 0)
    return opened


def display_name(path: str) -> str:
    """A path as text that any output can carry: bytes the file system name could not decode
    (kept by Python as lone surrogates) are written \\xNN."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _encoding(head: bytes) -> str:
    if head.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        return "utf-32"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    if head.startswith(b"\xef\xbb\xbf"):
        return "utf-8-sig"
    if not head:
        return "utf-8"
    sample = head[:8192]
    if b"\x00" in sample:
        # UTF-16 without BOM: NULs in every other byte of ASCII text, and text in the others
        odd, even = sample[1::2], sample[0::2]
        if odd.count(0) > len(odd) * 0.4 and even.count(0) < len(even) * 0.1:
            return "utf-16-le"
        if even.count(0) > len(even) * 0.4 and odd.count(0) < len(odd) * 0.1:
            return "utf-16-be"
        return "binary"
    control = sum(1 for b in sample if b < 32 and b not in (9, 10, 12, 13, 27))
    return "binary" if control > len(sample) * 0.1 else "utf-8"


def iter_lines(opened: Opened) -> Iterator[str]:
    """Decoded lines without line endings; CRLF and CR are handled; long lines are cut; caps honoured."""
    stream = opened.stream
    buffered = stream if isinstance(stream, io.BufferedIOBase) else io.BufferedReader(stream, 1 << 20)
    text = io.TextIOWrapper(buffered, encoding=opened.encoding, errors="replace", newline=None)
    cut = 0
    n = 0
    max_lines = opened.limits.max_lines
    try:
        while True:
            line = text.readline(MAX_LINE)
            if not line:
                break
            n += 1
            if n > max_lines:
                opened.notes.append(f"stopped reading at the cap of {max_lines:,} lines (--max-lines); "
                                    "the diagnosis is on what was read")
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
    except (OSError, EOFError, ValueError) as exc:
        opened.notes.append(f"reading stopped early: {_reason(exc)}")
    if cut:
        opened.notes.append(f"{cut} line(s) longer than {MAX_LINE // 1024} KiB were cut to their first {MAX_LINE // 1024} KiB")
