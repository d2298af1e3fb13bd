"""The value in use of a fix's flag, whichever of its names the launch command used."""
from __future__ import annotations

from diag.analyze import Options, analyze


def test_was_is_found_under_an_alias(tmp_path):
    log = tmp_path / "a.log"
    log.write_text(
        "[2025-09-01 10:00:00 TP0] Load weight begin. avail mem=78.50 GB\n"
        "[2025-09-01 10:01:00 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=3.50 GB, mem usage=75.00 GB.\n"
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: self.server_args.mem_fraction_static=0.95\n")
    launch = "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct --mem-fraction-static 0.95 --tp-size 2"
    r = analyze([str(log)], options=Options(launch=launch, sglang_version="0.5.6", strict=True))
    tp = next(f for f in r.findings[0].fix if f.flag in ("--tp-size", "--tensor-parallel-size"))
    assert tp.was == "2" and int(tp.value) > 2


def test_a_fix_keeps_the_spelling_the_command_used(tmp_path):
    """The command says --tp; the fix raises it under that name (the catalog's name is --tp-size)."""
    log = tmp_path / "a.log"
    log.write_text("python -m sglang.launch_server --model-path /models/acme-llama-70b-chat --tp 1\n"
                   "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB\n")
    r = analyze([str(log)], options=Options(sglang_version="0.5.6", strict=True))
    tp = next(f for f in r.findings[0].fix if f.flag in ("--tp", "--tp-size"))
    assert tp.flag == "--tp" and tp.was == "1" and int(tp.value) > 1
    assert any(c["changes"] == [f"--tp {tp.value}"] for c in r.findings[0].commands if c["option"] == tp.option)


def test_a_direction_without_a_value_in_use_says_what_it_is_relative_to(tmp_path):
    log = tmp_path / "a.log"
    log.write_text("RuntimeError: CUDA error: out of memory\n")
    f = analyze([str(log)], options=Options(sglang_version="0.5.23", strict=True)).findings[0]
    mfs = next(x for x in f.fix if x.flag == "--mem-fraction-static")
    assert mfs.was is None and mfs.direction == "lower"
    note = next(n for n in f.confidence_notes if n.startswith("the input shows no value in use for --mem-fraction-static"))
    assert f"{mfs.value} is lower than" in note and "lower that instead" in note
