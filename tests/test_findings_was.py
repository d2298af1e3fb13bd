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
