"""The config group's knowledge and values: a flag's history in the catalog, what a rejected flag
becomes, the flags explainer's values, the failing check and crash site, and the consistency of
rules/config with the catalog and the lint."""
from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from diag import flags as F
from diag.explain import flags as X
from diag.rules.registry import registry

ROOT = Path(__file__).resolve().parent.parent


# -- a flag's history ---------------------------------------------------------------------------

def test_history_and_accepts():
    assert F.history("--kt-amx-method") == ("0.5.4.post3", "0.5.5")
    assert F.history("--no-such-flag") is None
    assert F.accepts("0.5.23", "--cuda-graph-max-bs-decode") and not F.accepts("0.5.23", "--cuda-graph-max-bs")


@pytest.mark.parametrize("flag,want", [
    ("--enable-expert-distribution-metrics", ("--expert-balancedness-report-mode", None)),   # "Removed. Use ... with one of"
    ("--disable-fast-image-processor", ("--image-processor-backend", "pil")),
    ("--elastic-ep-rejoin", ("--elastic-ep-join-mode", "recover")),
    ("--enable-dp-attention", ("--attn-dp-size", "<dp-size>")),
    ("--mamba-scheduler-strategy", ("--mamba-radix-cache-strategy", None)),                  # the deprecation record
    ("--enable-piecewise-cuda-graph", None),                                                 # deprecated, nothing to use
    ("--tp-size", None),
])
def test_documented_replacement(flag, want):
    assert F.documented_replacement(flag) == want


def test_successor_same_help_or_dest_less_a_word():
    assert F.successor("--kt-amx-method") == "--kt-method"
    assert F.successor("--kt-amx-weight-path") == "--kt-weight-path"
    assert F.successor("--tp-size") is None              # still there
    assert F.successor("--enable-ep-moe") is None        # removed, nothing took its place


# -- what a rejected flag becomes ----------------------------------------------------------------

class _Facts:
    model_path = "moonshotai/Kimi-K2-Thinking"
    model = None


@pytest.mark.parametrize("version,written,reason,flag", [
    ("0.5.23", "--reasoning_parser", "underscore", "--reasoning-parser"),
    ("0.5.23", "--mamba-scheduler-strategy", "renamed", "--mamba-radix-cache-strategy"),
    ("0.5.23", "--enable-expert-distribution-metrics", "documented", "--expert-balancedness-report-mode"),
    ("0.5.23", "--kt-amx-method", "successor", "--kt-method"),
    ("0.5.23", "--max-model-len", "foreign", "--context-length"),
    ("0.5.23", "--enable-prefix-caching", "foreign_none", None),
    ("0.4.6.post5", "--max-loaded-loras", "newer", None),
    ("0.5.9", "--tensor-parallel-size", "alias", "--tp-size"),
    ("0.5.23", "--mem-fractoin-static", "spelling", "--mem-fraction-static"),
    ("0.5.23", "--enable-ep-moe", "removed", None),
    ("0.5.23", "--zzz-not-a-flag-at-all", "none", None),
])
def test_resolve_unknown(version, written, reason, flag):
    item = X.resolve_unknown(F.for_version(version), _Facts, written, None, "server")
    assert (item["reason"], item["flag"]) == (reason, flag)


def test_a_replacement_takes_a_value_from_the_error_a_choice_or_a_placeholder():
    cat = F.for_version("0.5.23")
    assert X.resolve_unknown(cat, _Facts, "--reasoning_parser", "qwen3", "server")["value"] == "qwen3"
    assert X.resolve_unknown(cat, _Facts, "--reasoning_parser", None, "server")["value"] == "kimi_k2"   # named like the model
    class NoModel(_Facts):
        model_path = None
    item = X.resolve_unknown(cat, NoModel, "--max-model-len", None, "server")
    assert item["value"] == "<context-length>" and not item["switch"]
    assert X.resolve_unknown(cat, NoModel, "--Enable-Metrics", None, "server")["switch"] is True


def test_the_router_does_not_get_server_spellings():
    item = X.resolve_unknown(F.for_version("0.5.23"), _Facts, "--tp-size", "2", "router")
    assert item["reason"] == "server_flag" and item["flag"] is None


@pytest.mark.parametrize("prog,parser", [
    ("launch_server.py", "server"), ("sglang serve", "server"), ("sglang", "server"), (None, "server"),
    ("launch_router.py", "router"), ("sglang-router", "router"), ("sglang generate", "diffusion"), ("areal.py", "other"),
])
def test_parser_of_the_program(prog, parser):
    assert X.parser_of(prog, []) == parser


def test_split_args():
    assert X.split_args("--a x --b --c y z --d=1 '--e'") == [("--a", "x"), ("--b", None), ("--c", "y z"), ("--d", "1"), ("--e", None)]
    assert X.split_args('--max-loaded-loras 1"') == [("--max-loaded-loras", "1")]


@pytest.mark.parametrize("value,choices,want", [
    ("triton", ["sdpa", "fa3", "triton_attn", "ascend_attn"], "triton_attn"),
    ("awq_marlinx", ["awq", "awq_marlin", "fp8"], "awq_marlin"),
    ("extra-buffer", ["auto", "no_buffer", "extra_buffer"], "extra_buffer"),
    ("torch_sdpa", ["triton", "torch_native", "flashinfer"], "torch_native"),
    ("zzz", ["auto", "fp8"], None),
])
def test_closest_choice(value, choices, want):
    assert X.closest(value, choices) == want


@pytest.mark.parametrize("text,want", [
    ('{"rope_scaling":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}}', 131072),
    ("{\n\"rope_scaling\": {\n\"factor\": 2,\n\"original_max_position_embeddings\": 8192}}", 16384),
    ('{"max_position_embeddings": 65536}', 65536),
    ("{'rope_scaling': {'factor': 4.0, 'original_max_position_embeddings': 32768}}", 131072),
    ('{"architectures": ["X"]}', None),
    ("not json", None),
    (None, None),
])
def test_rope_context(text, want):
    assert X.rope_context(text) == want


# -- the failing check and the crash site ----------------------------------------------------------

def _facts(tmp_path, text, **kw):
    from diag.analyze import Options, analyze_with_facts
    p = tmp_path / "x.log"
    p.write_text(text, encoding="utf-8")
    return analyze_with_facts([str(p)], options=Options(**kw))[1]


def test_a_messaged_check_reads_its_names_from_the_catalog(tmp_path):
    from diag.facts import lookup
    f = _facts(tmp_path, "ValueError: --disaggregation-decode-enable-radix-cache is incompatible with speculative decoding "
                         "(--speculative-algorithm EAGLE)\n")
    assert lookup(f, "check.message") == "pair.disaggregation_decode_enable_radix_cache.speculative_algorithm"
    assert lookup(f, "check.pair") == ["--disaggregation-decode-enable-radix-cache", "--speculative-algorithm"]
    assert "speculative_algorithm" in lookup(f, "check.names") and lookup(f, "check.config") is True
    assert lookup(f, "check.bare") is False


def test_a_bare_check_and_its_crash_site(tmp_path):
    from diag.facts import lookup
    f = _facts(tmp_path, '''Traceback (most recent call last):
  File "/x/sglang/srt/arg_groups/speculative_hook.py", line 221, in handle_speculative_decoding
    assert cfg.speculative_num_draft_tokens <= cfg.speculative_num_steps + 1
AssertionError
''', sglang_version="0.5.19")
    assert lookup(f, "check.bare") is True and lookup(f, "check.message") is None
    assert lookup(f, "check.module") == "sglang.srt.arg_groups.speculative_hook"
    assert lookup(f, "check.names") == ["speculative_num_draft_tokens", "speculative_num_steps"]
    assert lookup(f, "check.flags") == ["--speculative-num-draft-tokens", "--speculative-num-steps"]
    assert lookup(f, "crash.in_config") is True and "handle_speculative_decoding" in lookup(f, "crash.names")


# -- rules/config against the catalog and the lint -------------------------------------------------

def _config_rules():
    return [r for r in registry().rules if r.family == "config"]


def test_check_message_conditions_and_tables_name_catalog_messages():
    from diag.messages import known_name
    bad = []
    for r in _config_rules():
        for c in r.conditions():
            if c.subject == "fact" and c.target == "check.message" and c.op in ("eq", "ne", "in", "not_in"):
                names = c.arg if isinstance(c.arg, list) else [c.arg]
                bad += [f"{r.id}: {n}" for n in names if not known_name(n)]
        for table in r.tables.values():
            bad += [f"{r.id}: table key {k}" for k in table if "." in k and not known_name(k)]
    assert not bad


def test_every_lint_check_has_its_texts():
    import re
    tables = tomllib.loads((ROOT / "rules" / "_text" / "config-lint.toml").read_text(encoding="utf-8"))
    codes = re.findall(r'code="(\w+)"', (ROOT / "diag" / "lint.py").read_text(encoding="utf-8"))
    assert len(codes) >= 15 and len(set(codes)) == len(codes)
    reported = set(codes) - {"spec_radix_disabled"}           # a warning: the rules read errors only
    assert reported <= set(tables["conflict"])
    with_fixes = reported - {"mem_fraction_range", "heads_tp"}
    assert with_fixes <= set(tables["conflict_fix"])


def test_every_v1_config_rule_has_a_v2_rule():
    v1 = {p.stem for p in (ROOT / "rules").glob("SGL-CFG-*.toml")}
    v2 = {r.id for r in _config_rules()}
    assert v1 <= v2
