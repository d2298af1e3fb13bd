"""The catalog's template language and the ast extractor of scripts/catalog_extract.py."""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import re2

from diag.messages import template as T

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from catalog_extract import extract  # noqa: E402


def ex(src: str, module: str = "sglang.srt.server_args", component: str = "sglang") -> list[dict]:
    return extract(textwrap.dedent(src), module, component)


def templates(src: str, **kw) -> list[str]:
    return [r["t"] for r in ex(src, **kw)]


# -- template language -----------------------------------------------------------------------

def test_types_and_fields():
    t = "Load weight end. avail mem={avail:float} GB, n={n:int}, x={x:hex} size {s:size} id {i:ident} w {w:word}"
    rx, fields = T.to_regex(t)
    m = re2.compile(rx).search("[2025-01-01 TP0] Load weight end. avail mem=41.38 GB, n=-3, x=0x1f size 1.5 GiB "
                               "id pkg.mod w tok_7")
    assert m.groupdict() == {"avail": "41.38", "n": "-3", "x": "0x1f", "s": "1.5 GiB", "i": "pkg.mod", "w": "tok_7"}
    assert [(g, ty) for g, _, ty in fields] == [("avail", "float"), ("n", "int"), ("x", "hex"), ("s", "size"),
                                                ("i", "ident"), ("w", "word")]


def test_whitespace_braces_and_repeated_names():
    rx, fields = T.to_regex("a  {{literal}} {x} and {x} end")
    m = re2.compile(rx).search("a {literal}\tone and two end")
    assert m.groupdict() == {"x": "one", "x_2": "two"}
    assert [g for g, _, _ in fields] == ["x", "x_2"]


def test_plain_field_at_line_end_takes_the_rest():
    rx, _ = T.to_regex("Capture cuda graph failed: {e}")
    assert re2.compile(rx).search("Capture cuda graph failed: CUDA out of memory. Tried").group("e") == \
        "CUDA out of memory. Tried"


def test_multiline_template_matches_its_first_line_alone():
    t = "Prefill out of memory. Try to lower your batch size.\nTry to allocate {n:int} tokens.\n{rest}"
    rx = re2.compile(T.to_regex(t)[0])
    assert rx.search("Prefill out of memory. Try to lower your batch size.").group("n") is None
    assert rx.search("Prefill out of memory. Try to lower your batch size.\nTry to allocate 12 tokens.\nx").group("n") == "12"
    # anchors come from the first line only
    assert "allocate" not in T.anchor_keys(t) and "Prefill out" in T.anchor_keys(t)


@pytest.mark.parametrize("bad", ["a { b", "a } b", "{x:nosuchtype}", "{1x}"])
def test_template_errors(bad):
    with pytest.raises(T.TemplateError):
        T.parse(bad)


def test_closed_tokens_leave_out_words_that_touch_a_value():
    # "GB" touches the number in "{x}GB"; "avail" is bounded by the template start and a space
    runs = T.closed_tokens("avail mem {x}GB left")
    assert runs == [["avail", "mem"], ["left"]]
    assert T.line_keys("avail mem 12GB left") == ["avail", "mem", "left", "avail mem", "mem left"]
    assert T.anchor_keys("avail mem {x}GB left") == {"avail", "mem", "avail mem", "left"}


def test_line_keys_are_bounded():
    keys = T.line_keys("word " * 100000)
    assert len(keys) <= 400


# -- extractor ---------------------------------------------------------------------------------

def test_raise_forms():
    src = '''
    LIMIT_MSG = "Please lower the limit."
    def check(server_args, x, n):
        if server_args.mem_fraction_static > 0.9 and x:
            raise ValueError(f"mem_fraction_static={server_args.mem_fraction_static:.3f} is too high. " "Use less.")
        if n < 0:
            raise RuntimeError("n is %d but must be at least %s" % (n, server_args.min_n))
        raise ValueError("bad {} of {name}".format(x, name=n))
        raise KeyError(f"{LIMIT_MSG} Current: {x!r}")
    '''
    rs = ex(src)
    assert [r["t"] for r in rs] == [
        "mem_fraction_static={mem_fraction_static:float} is too high. Use less.",
        "n is {n:int} but must be at least {min_n}",
        "bad {x} of {n}",
        "Please lower the limit. Current: {x}",
    ]
    assert rs[0]["kind"] == "raise" and rs[0]["level"] == "ValueError" and rs[0]["func"] == "check"
    assert rs[0]["names"] == ["server_args.mem_fraction_static", "x"]
    assert rs[1]["names"] == ["n"]


def test_fstring_debug_form_keeps_the_expression_text():
    (t,) = templates('''
    def f(self):
        raise RuntimeError(f"Not enough memory. Current value: {self.server_args.mem_fraction_static=}")
    ''')
    assert t == "Not enough memory. Current value: self.server_args.mem_fraction_static={mem_fraction_static}"


def test_local_variable_with_conditional_suffix_gives_both_variants():
    rs = ex('''
    class MemoryPoolConfig:
        def __post_init__(self):
            if self.max_total_num_tokens <= 0:
                msg = "Not enough memory. Please try to increase --mem-fraction-static."
                if self.mem_fraction_static is not None:
                    msg += f" Current value: mem_fraction_static={self.mem_fraction_static}"
                raise RuntimeError(msg)
    ''')
    assert [r["t"] for r in rs] == [
        "Not enough memory. Please try to increase --mem-fraction-static.",
        "Not enough memory. Please try to increase --mem-fraction-static. Current value: "
        "mem_fraction_static={mem_fraction_static}",
    ]
    assert {r["site"] for r in rs} == {rs[0]["site"]}          # one statement: one family later
    assert rs[0]["func"] == "MemoryPoolConfig.__post_init__"
    assert rs[0]["names"] == ["self.max_total_num_tokens"]


def test_assert_log_parser_exit_warn_print():
    rs = ex('''
    import logging, sys, warnings
    logger = logging.getLogger(__name__)
    def run(args, parser):
        assert args.page_size % 2 == 0, f"page_size {args.page_size} must be even"
        assert args.x                                   # no message: nothing to match
        logger.info("max_total_num_tokens=%d, context_len=%s", args.tokens, args.context_len)
        logger.warning(f"Disabling radix cache for {args.arch}")
        logger.debug("never shown by default")
        parser.error(f"unknown model {args.model!r}")
        sys.exit("Fatal: could not start")
        warnings.warn("--foo is deprecated", DeprecationWarning)
        print(f"Load weight begin. avail mem={args.mem:.2f} GB", flush=True)
        log_info_on_rank0(logger, f"Capture cuda graph bs {args.bs}")
    ''', module="sglang.srt.model_executor.model_runner")
    got = [(r["kind"], r["level"], r["t"]) for r in rs]
    assert got == [
        ("assert", "AssertionError", "page_size {page_size} must be even"),
        ("log", "info", "max_total_num_tokens={tokens:int}, context_len={context_len}"),
        ("log", "warning", "Disabling radix cache for {arch}"),
        ("parser_error", "error", "unknown model {model}"),
        ("exit", "exit", "Fatal: could not start"),
        ("warn", "DeprecationWarning", "--foo is deprecated"),
        ("print", "print", "Load weight begin. avail mem={mem:float} GB"),
        ("log", "info", "Capture cuda graph bs {bs}"),
    ]
    assert rs[0]["names"] == ["args.page_size"]


def test_print_only_in_server_code():
    src = 'def f(x):\n    print(f"throughput {x:.2f} tok/s")\n'
    assert templates(src, module="sglang.bench_serving") == []
    assert templates(src, module="sglang.srt.server") == ["throughput {x:float} tok/s"]


def test_gettext_and_exception_str_in_the_standard_library():
    rs = ex('''
    class ArgumentParser:
        def error(self, message):
            self.exit(2, _('%(prog)s: error: %(message)s\\n') % {'prog': self.prog, 'message': message})
        def _check(self, action, value):
            msg = _('invalid choice: %(value)r (choose from %(choices)s)')
            raise ArgumentError(action, msg % {'value': value, 'choices': ', '.join(action.choices)})
            self.error(_('unrecognized arguments: %s') % ' '.join(argv))
    class CalledProcessError(Exception):
        def __str__(self):
            return "Command '%s' returned non-zero exit status %d." % (self.cmd, self.returncode)
    ''', module="argparse", component="python.argparse")
    got = [(r["kind"], r["level"], r["t"]) for r in rs]
    assert ("exit", "exit", "{prog}: error: {message}") in got
    assert ("raise", "ArgumentError", "invalid choice: {value} (choose from {choices})") in got
    assert ("parser_error", "error", "unrecognized arguments: {argv}") in got
    assert ("raise", "CalledProcessError", "Command '{cmd}' returned non-zero exit status {returncode:int}.") in got


def test_unknown_message_is_a_bare_placeholder():
    (t,) = templates("def f(e):\n    raise RuntimeError(e)\n")
    assert t == "{e}"


def test_unparsable_source_gives_nothing():
    assert extract("def (:\n", "sglang.x") == []


# -- families (the builder's grouping, on a small corpus) ------------------------------------------

def _families(releases: list[list[tuple[str, str, str]]]) -> dict[str, str]:
    """releases: per release, (module, function, template) raised there -> {template: family id}."""
    import build_catalog as B
    corpus = B.Corpus()
    for idx, msgs in enumerate(releases):
        for k, (module, func, t) in enumerate(msgs):
            corpus.add_file("sglang", idx, module, f"{module}:{idx}",
                            [{"t": t, "kind": "raise", "level": "ValueError", "func": func, "names": [], "site": f"{k}:0"}])
    msgs = B.build_messages(corpus)
    B.group_families(corpus, msgs)
    return {m["template"]: m["family"] for m in msgs}


OLD = ("sglang.srt.server_args", "ServerArgs._handle_mamba", "mamba extra_buffer is not supported for {arch} model")
MOVED = ("sglang.srt.arg_groups.mamba_hook", "_handle_mamba", "mamba extra_buffer is not supported for {arch} model yet.")
OTHER = ("sglang.srt.server_args", "ServerArgs._handle_mamba", "mamba no_buffer does not support page_size {p:int} here")


def test_family_survives_a_move_plus_a_rewording_and_keeps_the_oldest_id():
    two = _families([[OLD, OTHER], [OLD, OTHER]])
    three = _families([[OLD, OTHER], [OLD, OTHER], [MOVED, OTHER]])
    assert three[MOVED[2]] == three[OLD[2]] == two[OLD[2]]          # joined, and the id did not change
    assert three[OTHER[2]] == two[OTHER[2]] != three[OLD[2]]        # side by side in one release: apart


def test_similar_messages_printed_side_by_side_stay_apart():
    a = ("m", "f", "--foo must be a positive integer, got {x}")
    b = ("m", "f", "--bar must be a positive integer, got {x}")
    fams = _families([[a, b], [a, b]])
    assert fams[a[2]] != fams[b[2]]
