"""The two options that move --mem-fraction-static, checked against what their docstrings
promise over a sweep of the fraction in use (kills the direction- and value-flipping mutants
`make mutate` found surviving in diag/memory/options.py):

- lower_fraction: None, or a value at least MFS_MIN_STEP below the one in use, above 0.3, that
  leaves CUDA graphs + draft (before 0.5.14) + activations + extra + the margin outside the
  pools, and at which the budget fits; and it is proposed whenever the fraction in use leaves
  less than that outside and such a value exists.
- raise_fraction: None, or a value at least MFS_MIN_STEP above the one in use, at most the
  highest value that leaves graphs and activations their room, at which the budget fits (with
  smaller prefill chunks only when it says so).
"""
from __future__ import annotations

import dataclasses

import pytest

from diag import mem_cmd
from diag import memory as M
from diag.memory import options as MO

STEP, MIN_STEP, MARGIN = MO.MFS_SEARCH_STEP, MO.MFS_MIN_STEP, MO.MFS_MARGIN_GIB
SWEEP = [round(0.70 + i * 0.005, 3) for i in range(59)]           # 0.700 .. 0.990


def deployment(cmd: str, gpu: str, version: str):
    dep, _, _, _ = mem_cmd._prepare(cmd.split(), gpu, None, version)
    return dep


def at(dep, fraction):
    d = dataclasses.replace(dep, mem_fraction_static=fraction)
    return d, M.budget(d)


DENSE = ("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct", "H100", "0.5.10")
SPEC = ("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --speculative-algorithm EAGLE "
        "--speculative-draft-model-path yuhuili/EAGLE-LLaMA3.1-Instruct-8B --speculative-num-steps 3 "
        "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4", "H100", "0.5.10")


def outside_needed(b, extra):
    return b.cuda_graph_gib + MO._draft_outside_gib(b) + b.activations_gib + extra


@pytest.mark.parametrize("setup", [DENSE, SPEC], ids=["dense", "eagle-0.5.10"])
@pytest.mark.parametrize("extra", [0.0, 3.0])
def test_lower_fraction_keeps_its_promise(setup, extra):
    dep = deployment(*setup)
    proposed = 0
    for was in SWEEP:
        d, b = at(dep, was)
        opt = MO._lower_fraction(d, b, extra)
        need = outside_needed(b, extra) + MARGIN
        pre = b.pre_load_free_gib
        if opt is None:
            # not proposed: the fraction in use already leaves the room, or nothing lower is worth it
            best = (1 - need / pre)
            assert (1 - was) * pre >= need - STEP * pre or best > was - MIN_STEP or best <= 0.3 \
                or not M.budget(dataclasses.replace(d, mem_fraction_static=round(best - STEP, 3))).fits, (was, need)
            continue
        proposed += 1
        (change,) = opt.changes
        assert change["flag"] == "--mem-fraction-static"
        v = float(change["value"])
        assert v == pytest.approx(opt.values["fraction"])
        assert v <= was - MIN_STEP + 1e-9, f"at {was} it proposes {v}: not lower by a step worth making"
        assert v > 0.3
        assert (1 - v) * pre >= need - 1e-6, f"at {v} only {(1 - v) * pre:.2f} GiB stay outside, {need:.2f} needed"
        assert abs(v / STEP - round(v / STEP)) < 1e-6, v
        assert M.budget(dataclasses.replace(d, mem_fraction_static=v)).fits
    assert proposed >= 5, "the sweep reaches fractions that leave too little outside: a lower one must be proposed"


@pytest.mark.parametrize("setup", [
    ("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct --quantization fp8", "H100", "0.5.10"),
    DENSE,
], ids=["70b-fp8", "8b"])
def test_raise_fraction_keeps_its_promise(setup):
    dep = deployment(*setup)
    proposed = 0
    for was in SWEEP:
        d, b = at(dep, was)
        opt = MO._raise_fraction(d, b)
        cap = MO._mfs_max(b)
        if opt is None:
            if not b.fits and cap and cap >= was + MIN_STEP:
                x = round(min(cap, 0.999) // STEP * STEP, 3)
                assert not M.budget(dataclasses.replace(d, mem_fraction_static=x)).fits, \
                    f"at {was} nothing is proposed though {x} fits"
            continue
        proposed += 1
        flags = {c["flag"]: c["value"] for c in opt.changes}
        v = float(flags["--mem-fraction-static"])
        assert v >= was + MIN_STEP - 1e-9, f"at {was} it proposes {v}: not higher by a step worth making"
        chunk = flags.get("--chunked-prefill-size")
        nd = dataclasses.replace(d, mem_fraction_static=v)
        if chunk is not None:
            assert int(chunk) < (b.chunked_prefill_size or 0)
            nd = dataclasses.replace(nd, chunked_prefill_size=int(chunk))
            cap = MO._mfs_max(M.budget(dataclasses.replace(d, chunked_prefill_size=int(chunk))))
            assert opt.cost == MO.COST_THROUGHPUT
        else:
            assert opt.cost == MO.COST_FLAG
        assert v <= cap + 1e-9, f"{v} leaves graphs and activations less than their room (highest {cap})"
        assert opt.values["cap"] == pytest.approx(cap)
        nb = M.budget(nd)
        assert nb.fits
        if b.fits:
            assert (nb.max_total_num_tokens or 0) > (b.max_total_num_tokens or 0)
    assert proposed >= 3
