"""The catalog's typed field renames (a review's 'name:type') and the families the runtime rules
name."""
from __future__ import annotations

import pytest

from diag.messages import Catalog, _convert


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return Catalog.open()


def test_a_typed_rename_reads_the_number_at_the_start_of_the_text():
    assert _convert("2048 self.tree_cache.evictable_size()=0", "int", leading=True) == 2048
    assert _convert("26,  self.cur_batch.reqs=[Req(", "int", leading=True) == 26
    assert _convert("0.9.", "float", leading=True) == 0.9
    assert _convert("abc", "int", leading=True) is None
    assert _convert("2048 more", "int") is None          # an extracted typed field is read whole


def test_a_typed_rename_reads_the_number_at_the_start_of_an_untyped_field(cat):
    # the allocator's message over several lines, joined: the last untyped field took the rest
    m = cat.match("Decode out of memory. Try to lower your batch size. Try to allocate 148 tokens. "
                  "Avaliable tokens: 2048 self.token_to_kv_pool_allocator.available_size()=2048 "
                  "self.tree_cache.evictable_size()=0")
    assert m.fields["needed"] == 148 and m.fields["free"] == 2048
    m = cat.match("max_total_tokens=131072 is larger than the profiled value -561981. Use the profiled value instead.")
    assert m.name == "kv.max_total_tokens_clamped" and m.fields == {"requested": 131072, "profiled": -561981}
    m = cat.match("self.cur_batch.batch_size()=26,  self.cur_batch.reqs=[Req(rid=d4424f3eb90345f0a8630689")
    assert m.name == "scheduler.watchdog_batch" and m.fields["batch_size"] == 26


def test_a_typed_rename_of_text_that_is_no_number_is_unknown(cat):
    m = cat.match("No space left for only one request, self.token_to_kv_pool_allocator.available_size()=abc")
    assert m.name == "kv.retract.no_space" and m.fields["free"] is None


def test_the_allocators_out_of_memory_is_not_a_device_oom(cat):
    for line in ("Prefill out of memory. Try to lower your batch size.",
                 "RuntimeError: Decode out of memory. Try to lower your batch size.",
                 "AssertionError: No space left for only one request, self.token_to_kv_pool_allocator.available_size()=0",
                 "alloc_req_slots runs out of memory. Please set a smaller number for `--max-running-requests`. "
                 "req_to_token_pool.available_size()=0, num_reqs=4, "):
        m = cat.match(line)
        assert m is not None and m.event == "capacity", line


def test_a_wildcard_name_with_underscores_is_known():
    from diag.messages import known_name
    assert known_name("launcher.init_failed.*") and known_name("kv.alloc.*")
    assert not known_name("launcher.init_failedx.*") and not known_name("nope_x.*")


# -- a message retold around the names it copied (Catalog.match_loose) -------------------------

def test_a_retold_message_is_found_by_the_identifiers_it_quotes():
    from diag.messages import Catalog
    cat = Catalog.open()
    m = cat.match_loose("FP8 version is not compatible with block FP8 (output_partition_size=48 not divisible by block_n=128)")
    assert m is not None and m.name == "quant.block_not_dividing_shard" and m.loose and m.partial and not m.fields


def test_names_alone_are_code_not_a_retold_message():
    from diag.messages import Catalog
    cat = Catalog.open()
    # the identifiers of a message, with none of its words: a call in a traceback's code line
    assert cat.match_loose("scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)") is None
    assert cat.match_loose("output_partition_size block_n") is None
    assert cat.match_loose("nothing to see here") is None


def test_a_retold_line_gets_the_rule_of_its_message_and_says_it_was_retold(tmp_path):
    from diag.analyze import analyze
    p = tmp_path / "retold.log"
    p.write_text("loading fails: FP8 block quantization incompatible (output_partition_size=48 not divisible by block_n=128)\n")
    report = analyze([str(p)])
    assert report.findings[0].rule == "SGL-CFG-043"
    # a traceback's code line naming the same identifiers is not the message
    q = tmp_path / "code.log"
    q.write_text('Traceback (most recent call last):\n  File "/x/sglang/srt/layers/quantization/fp8.py", line 300, in create_weights\n'
                 '    check(output_partition_size, block_n, divisible)\nKeyboardInterrupt\n')
    assert all(f.rule != "SGL-CFG-043" for f in analyze([str(q)]).findings)


def test_a_rewording_of_a_catalogued_check_is_found_near_its_template(cat):
    """A build between releases prints the same check in other words (the allowed backends as a
    tuple): nearly every literal word of the template, in order, from its first word on."""
    m = cat.match_near("Gemma4 only supports ('trtllm_mha', 'triton', 'intel_xpu') attention backend, got prefill=fa3, decode=fa3")
    assert m is not None and m.loose and m.partial and m.fields == {} and not m.versions
    assert m.category == "config.invalid_value" and "Gemma4 only supports" in m.template


def test_near_needs_the_same_first_word_and_most_of_the_words(cat):
    # the words of a known message, but starting elsewhere, or with half its words: not a rewording
    assert cat.match_near("We found that Gemma4 only supports a few attention backends, got prefill=fa3") is None
    assert cat.match_near("Gemma4 only supports attention backend") is None


def test_server_args_fields_renamed_from_their_flags_dest_map_to_the_flag():
    """ServerArgs.from_cli_args copies args.tensor_parallel_size into tp_size: a dump's tp_size and
    dp_size are --tensor-parallel-size and --data-parallel-size."""
    from diag.flags import for_version
    c = for_version("0.5.13")
    assert c.flag_for_dest("tp_size") == "--tensor-parallel-size"
    assert c.flag_for_dest("dp_size") == "--data-parallel-size"
    assert c.flag_for_dest("max_total_tokens") == "--max-total-tokens"
