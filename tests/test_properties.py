"""Property tests (hypothesis): every parser and the whole pipeline take any text without a crash.

Seeded and bounded in the suite (tests/conftest.py); `make fuzz` runs thousands of examples.
The strategies mix arbitrary text with the pieces real logs are made of, so that the examples
reach past the first `if`.
"""
from __future__ import annotations

import gzip
import io
import json
import sys
from pathlib import Path

from hypothesis import assume, given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from hostile import diag  # noqa: E402

from diag.clean import Cleaner  # noqa: E402
from diag.jsonout import dumps  # noqa: E402
from diag.launch import parse_launch, parse_server_args, split_command  # noqa: E402
from diag.parse import smi as smi_mod  # noqa: E402
from diag.parse.sglang import LogParser  # noqa: E402
from diag.read import InputError, Opened, _encoding, iter_lines, open_input  # noqa: E402
from diag.redact import Redactor, redact_text  # noqa: E402

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "qwen36-27b-mtp-extra-buffer.log"
SMI = Path(__file__).resolve().parent.parent / "samples" / "rtx-pro-6000-smi.txt"
REAL_LINES = SAMPLE.read_text().splitlines() + SMI.read_text().splitlines()
NUMBERS = st.sampled_from(["0", "1", "-1", "1.2.3", "1e999", "inf", "nan", "0x" + "f" * 40, "9" * 5000, "0.755",
                           "1,234", "", " ", "١٢٣", "4096.0"])
WORDS = st.sampled_from(["[2026-05-14 09:12:05 TP0] ", "Load weight begin. avail mem=", " GB", "KV Cache is allocated. #tokens: ",
                         "max_total_num_tokens=", "server_args=ServerArgs(", "tp_size=", "{", "}", "(", ")", "'", '"', ",",
                         "Traceback (most recent call last):", '  File "x.py", line ', "RuntimeError: ", "Killed",
                         "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ", " MiB", "| ", "+----", " : ",
                         "\x1b[31m", "\x1b]", "--api-key ", "http://", "@", "node17", ".internal", "-", "=", ":", "\t", "\r"])
PIECE = st.one_of(WORDS, NUMBERS, st.text(max_size=20), st.sampled_from(REAL_LINES))
LINE = st.lists(PIECE, max_size=12).map("".join)
LOG = st.lists(st.one_of(LINE, st.sampled_from(REAL_LINES)), max_size=40).map("\n".join)


@given(st.binary(max_size=4096))
def test_read_any_bytes(data):
    opened = Opened(name="x", stream=io.BytesIO(data), head=data[:65536], encoding=_encoding(data[:65536]), size=len(data))
    if opened.encoding == "binary":
        return
    for line in iter_lines(opened):
        assert "\n" not in line


@given(st.binary(max_size=2048), st.sampled_from([b"", b"\x1f\x8b", b"\xfd7zXZ\x00", b"BZh91AY&SY", b"\xff\xfe", b"\xff\xfe\x00\x00"]))
def test_open_any_file(tmp_path_factory, data, magic):
    path = tmp_path_factory.mktemp("r") / "x.log"
    path.write_bytes(magic + data)
    try:
        opened = open_input(str(path))
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    list(iter_lines(opened))


@given(st.binary(max_size=3000), st.sampled_from(["gzip", "xz", "bzip2"]))
def test_compressed_and_plain_read_the_same(tmp_path_factory, data, packed):
    """The same bytes, plain or compressed, give the same lines (or the same refusal)."""
    import bz2
    import lzma
    folder = tmp_path_factory.mktemp("c")
    plain, packed_path = folder / "x.log", folder / "x.log.z"
    plain.write_bytes(data)
    packed_path.write_bytes({"gzip": gzip.compress, "xz": lzma.compress, "bzip2": bz2.compress}[packed](data))

    def read(path):
        try:
            return list(iter_lines(open_input(str(path))))
        except InputError as exc:
            return str(exc).split(": ", 1)[1]
    a, b = read(plain), read(packed_path)
    if _sniffed(data) is None:
        assert a == b


def _sniffed(data):
    from diag.read import _sniff_packed
    return _sniff_packed(data[:16])


@given(st.lists(LINE, max_size=30))
def test_clean_any_lines(lines):
    for n, text in Cleaner().run(lines):
        assert isinstance(text, str) and n >= 1
    for n, text in Cleaner(light=True).run(lines):
        assert isinstance(text, str)


@given(LOG)
def test_parse_any_log(log):
    p = LogParser()
    for n, line in Cleaner().run(log.splitlines()):
        p.feed(n, line)
    p.finish()


@given(st.lists(st.one_of(LINE, st.sampled_from(SMI.read_text().splitlines())), max_size=40))
def test_smi_any_lines(lines):
    smi_mod.looks_like_smi("\n".join(lines))
    smi_mod.parse_smi(lines)
    smi_mod.find_smi_blocks(lines)


@given(st.recursive(st.one_of(NUMBERS, st.text(max_size=8), st.sampled_from(["None", "True", "'a'", '"b"', "x=1", "-" * 50, "not not 1"])),
                    lambda inner: st.one_of(st.lists(inner, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
                                            st.lists(inner, max_size=4).map(lambda xs: "(" + ", ".join(xs) + ")"),
                                            st.lists(st.tuples(inner, inner), max_size=3).map(
                                                lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}")),
                    max_leaves=20),
       st.sampled_from(["ServerArgs(tp_size=", "ServerArgs(", "{'tp_size': ", "{", "{{", "ServerArgs(bb,"]),
       st.booleans())
def test_server_args_any_dump(value, head, cut):
    text = head + value + ("" if cut else (")" if head.startswith("ServerArgs") else "}"))
    fields = parse_server_args(text)
    assert isinstance(fields, dict)
    dumps(fields)


@given(LINE)
def test_launch_any_command(line):
    from diag import flags as F
    argv = split_command("python -m sglang.launch_server " + line)
    parse_launch(argv, F.for_version(None))


SECRETS = ["hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "ghp_0123456789abcdefghijABCDEFGHIJ012345",
           "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123",
           "xoxb-123456789012-abcdefghijKL", "xapp-1-A0123456789-1234567890123-abcdef0123456789",
           "xoxe.xoxp-1-Mi0yLTE0NTc1NzI3", "AKIAIOSFODNN7EXAMPLE", "sk-live-9f8e7d6c5b4a39281716",
           "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV",
           "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"]
SEPARATORS = st.sampled_from([" ", "\t", " token ", "=", ": ", "(", ") ", ", ", "'", '"', "\n", " | "])


@given(st.lists(st.one_of(st.sampled_from(SECRETS), PIECE), max_size=12), SEPARATORS)
def test_redaction_leaks_no_token_wherever_it_stands(parts, sep):
    text = sep.join(parts)
    out = redact_text(text)
    for s in SECRETS:
        if s in text:
            assert s not in out, (s, out)


@given(st.lists(st.sampled_from(["node17", "gpu-node-7.corp.example.com", "10.1.2.3", "alice@example.org"]), min_size=1, max_size=6),
       st.lists(LINE, max_size=4))
def test_redaction_aliases_are_stable(names, noise):
    r = Redactor()
    first = r.redact("--host " + " ".join(names) + " --port 1")
    again = r.redact("--host " + " ".join(names) + " --port 1")
    assert first == again
    for line in noise:
        r.redact(line)


@given(st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                              st.text(), st.sampled_from(["\udcff", "a\ud800b", "x\udc80.log"])),
                    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)),
                    max_leaves=20))
def test_json_writer_is_strict(obj):
    text = dumps(obj)
    text.encode("utf-8")  # every string valid UTF-8

    def no_constants(x):
        raise ValueError(f"non-finite {x}")
    json.loads(text, parse_constant=no_constants)


@given(LOG, st.sampled_from(["json", "markdown", "text", "sarif", "github"]))
def test_whole_pipeline(tmp_path_factory, log, fmt):
    path = tmp_path_factory.mktemp("p") / "server.log"
    path.write_text(log, encoding="utf-8", errors="surrogatepass")
    run = diag("analyze", str(path), "--format", fmt)
    assert run.code in (0, 1, 2, 3), run.err
    assert "internal error" not in run.err and "Traceback" not in run.err, run.err
    if fmt in ("json", "sarif") and run.code != 2:
        json.loads(run.out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
