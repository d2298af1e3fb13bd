"""The edges of two memory fixes that the mutation run left unpinned (benchmarks/MUTANTS.md):

- graph_bs (`--cuda-graph-max-bs-decode`, options._opts_cuda_graph): offered only when smaller
  graphs can be the fix (a batch size above 1, graphs that take memory, room outside the
  activations' reserve); the value is always lower, at most half the one in use, a size SGLang
  captures, whose graphs fit the room, and the largest such size; the numbers its text quotes
  are the budget's.
- raise_fraction's prefill-chunk fallback (options._raise_fraction / _search_fraction): the
  fraction rises by a step worth making, stays at or under the cap that leaves graphs and
  activations their room, fits; smaller chunks only when no fraction fits at the chunk in use,
  halved at most three times and never below 2048, the first such chunk that lets a fraction fit;
  the value is the smallest one holding the full context, else the largest that fits.

Each property is checked over a grid of real deployments (the memory model's own catalog) and at
exact edges built by changing one field of a real budget.
"""
from __future__ import annotations

import dataclasses
import math

import pytest

from diag import mem_cmd
from diag import memory as M
from diag.memory import options as MO
from diag.memory.formulas import decode_graph_batch_sizes

STEP, MIN_STEP = MO.MFS_SEARCH_STEP, MO.MFS_MIN_STEP


def deployment(cmd: str, gpu: str, version: str = "0.5.10"):
    dep, _, _, _ = mem_cmd._prepare(cmd.split(), gpu, None, version)
    return dep


LLAMA8 = "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct"
LLAMA70 = "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct --quantization fp8"
QWEN32 = "python -m sglang.launch_server --model-path Qwen/Qwen3-32B"
EAGLE = (LLAMA8 + " --speculative-algorithm EAGLE --speculative-draft-model-path yuhuili/EAGLE-LLaMA3.1-Instruct-8B"
         " --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4")


# -- graph_bs ---------------------------------------------------------------------------------

def graph_bs(dep, b):
    return next((o for o in MO._opts_cuda_graph(dep, b) if o.kind == "graph_bs"), None)


def check_graph_bs(dep, b):
    """The promises of the graph batch-size option for one budget; returns whether it was offered."""
    opts = MO._opts_cuda_graph(dep, b)
    disable = [o for o in opts if o.kind == "disable_graph"]
    assert len(disable) == 1 and disable[0].changes == [MO._set("--cuda-graph-backend-decode", "disabled")]
    assert disable[0].values["graph_gib"] == b.cuda_graph_gib
    opt = next((o for o in opts if o.kind == "graph_bs"), None)
    bs = b.cuda_graph_max_bs or 0
    room = (b.headroom_gib or 0) - MO._draft_outside_gib(b) - b.activations_gib
    captured = decode_graph_batch_sizes(bs, bool(dep.spec)) if bs else []
    per_bs = b.cuda_graph_gib / min(bs, b.max_running_requests or bs) if bs else 0.0
    if not (bs > 1 and room > 0 and b.cuda_graph_gib > 0):
        assert opt is None, (bs, room, b.cuda_graph_gib, opt)
        return False
    assert opt is not None, f"graphs of batch size {bs} and {room:.3f} GiB of room: smaller graphs are the fix"
    (change,) = opt.changes
    assert change["flag"] == "--cuda-graph-max-bs-decode" and change["action"] == "set"
    new = int(change["value"])
    assert new == opt.values["bs"]
    assert 1 <= new <= bs // 2 < bs, f"{new} is not a smaller graph than {bs}"          # always lower
    assert new in captured, f"{new} is not a batch size SGLang captures ({captured[:12]}...)"
    assert new == 1 or new * per_bs <= room + 1e-9, f"graphs up to {new} need {new * per_bs:.3f} GiB, {room:.3f} there"
    bigger = [s for s in captured if s > new]
    if bigger:   # the largest size that is at most half and whose graphs fit the room
        assert bigger[0] > bs // 2 or bigger[0] * per_bs > room, (new, bigger[0], bs, room, per_bs)
    assert opt.values["was"] == bs
    assert opt.values["per_bs_mib"] == pytest.approx(per_bs * 1024)
    assert opt.values["room_gib"] == pytest.approx(room)
    assert opt.fits is None                      # a smaller graph is not re-checked: the option says so
    ranked = MO.options_for("cuda_graph", dep, b)
    kinds = [o.kind for o in ranked]
    assert "graph_bs" in kinds and kinds[-1] == "disable_graph", kinds   # disabling graphs comes last
    return True


@pytest.mark.parametrize("cmd", [LLAMA8, EAGLE], ids=["dense", "eagle"])
def test_graph_bs_over_batch_sizes_and_room(cmd):
    dep = deployment(cmd, "H100")
    b0 = M.budget(dep)
    assert b0.cuda_graph_gib > 0 and b0.pre_load_free_gib
    offered = 0
    for bs in (1, 2, 3, 4, 9, 24, 48, 160, 512):
        per = b0.cuda_graph_gib / bs
        for running in (None, max(1, bs // 3), bs * 4):
            for k in (-1.0, 0.4, 1.0, 1.5, 2.0, 3.3, 7.0, 50.0, 1e4):
                per_bs = b0.cuda_graph_gib / min(bs, running or bs)
                headroom = b0.activations_gib + MO._draft_outside_gib(b0) + k * per_bs
                b = dataclasses.replace(b0, cuda_graph_max_bs=bs, max_running_requests=running, headroom_gib=headroom)
                offered += check_graph_bs(dep, b)
        assert per > 0
    assert offered > 100


@pytest.mark.parametrize("cmd", [LLAMA8, EAGLE], ids=["dense", "eagle"])
def test_graph_bs_at_its_edges(cmd):
    dep = deployment(cmd, "H100")
    b0 = M.budget(dep)
    base = b0.activations_gib + MO._draft_outside_gib(b0)
    big = dataclasses.replace(b0, cuda_graph_max_bs=160, max_running_requests=None, headroom_gib=base + 100.0)
    assert check_graph_bs(dep, big) and int(graph_bs(dep, big).changes[0]["value"]) == 80   # half of 160
    # a batch size of 1 cannot get smaller; no graphs, no room (exactly none, or less), no headroom known
    for b in (dataclasses.replace(big, cuda_graph_max_bs=1), dataclasses.replace(big, cuda_graph_max_bs=None),
              dataclasses.replace(big, cuda_graph_gib=0.0), dataclasses.replace(big, headroom_gib=base),
              dataclasses.replace(big, headroom_gib=base - 0.5), dataclasses.replace(big, headroom_gib=None),
              dataclasses.replace(big, headroom_gib=None, activations_gib=0.1)):
        assert not check_graph_bs(dep, b)
        assert graph_bs(dep, b) is None
    # a batch size of 2 halves to 1; room for less than one batch size still offers the smallest graph
    assert graph_bs(dep, dataclasses.replace(big, cuda_graph_max_bs=2)).values["bs"] == 1
    per_bs = big.cuda_graph_gib / 160
    tight = dataclasses.replace(big, headroom_gib=base + 0.5 * per_bs)
    assert check_graph_bs(dep, tight) and graph_bs(dep, tight).values["bs"] == 1
    # room for just under two batch sizes: 1, not 2
    assert graph_bs(dep, dataclasses.replace(big, headroom_gib=base + 1.9 * per_bs)).values["bs"] == 1
    assert graph_bs(dep, dataclasses.replace(big, headroom_gib=base + 2.1 * per_bs)).values["bs"] == 2
    # fewer running requests than the graph batch size: graphs are paid per request that runs
    few = dataclasses.replace(big, max_running_requests=16, headroom_gib=base + 5.5 * big.cuda_graph_gib / 16)
    assert check_graph_bs(dep, few) and few.cuda_graph_max_bs == 160
    assert graph_bs(dep, few).values["per_bs_mib"] == pytest.approx(big.cuda_graph_gib / 16 * 1024)
    assert graph_bs(dep, few).values["bs"] == max(s for s in decode_graph_batch_sizes(5, bool(dep.spec)))


# -- raise_fraction and its prefill-chunk fallback ----------------------------------------------

def start(was: float) -> float:
    """The first value on the 0.005 grid at least MIN_STEP above the one in use."""
    return round(math.ceil(round((was + MIN_STEP) / STEP, 6)) * STEP, 3)


def top(cap: float) -> float:
    return round(math.floor(round(cap / STEP, 6)) * STEP, 3)


def with_(dep, **kw):
    d = dataclasses.replace(dep, **kw)
    return d, M.budget(d)


def ladder(chunk: int | None) -> list[int]:
    return [chunk >> k for k in (1, 2, 3) if (chunk or 0) >> k >= 2048]


def check_raise(dep, b) -> str:
    """The promises of raise_fraction for one budget; returns what it did (none/flag/chunk)."""
    opt = MO._raise_fraction(dep, b)
    was, pre, chunk = b.mem_fraction_static, b.pre_load_free_gib, b.chunked_prefill_size
    tokens = lambda nb: nb.max_total_num_tokens or 0      # noqa: E731
    ctx = b.context_len or 0
    tried = [None] + ladder(chunk)
    if opt is None:
        for c in tried:   # nothing fits at the highest value the cap allows, at any chunk tried
            dc, bc = (dep, b) if c is None else with_(dep, chunked_prefill_size=c)
            cap = MO._mfs_max(bc)
            if not cap or top(cap) < start(was):
                continue
            _, nb = with_(dc, mem_fraction_static=top(cap))
            if c is None and b.fits:
                assert tokens(nb) <= tokens(b) or not nb.fits or tokens(b) >= ctx, (was, top(cap))
                return "none"
            assert not nb.fits, f"at {was} (chunk {c}) nothing is proposed though {top(cap)} fits"
        return "none"
    flags = {c["flag"]: c["value"] for c in opt.changes}
    v = float(flags["--mem-fraction-static"])
    c = int(flags["--chunked-prefill-size"]) if "--chunked-prefill-size" in flags else None
    assert c in tried, f"chunk {c} from {chunk}: halved at most three times, never below 2048"
    for earlier in tried[:tried.index(c)]:   # the chunk in use (and larger cuts) let no fraction fit
        dc, bc = (dep, b) if earlier is None else with_(dep, chunked_prefill_size=earlier)
        cap = MO._mfs_max(bc)
        if cap and top(cap) >= start(was):
            assert not with_(dc, mem_fraction_static=top(cap))[1].fits, (was, earlier, c)
    dc, bc = (dep, b) if c is None else with_(dep, chunked_prefill_size=c)
    cap = MO._mfs_max(bc)
    assert start(was) <= v <= cap + 1e-9, f"{was} -> {v}: a raise by a step worth making, at most the cap {cap}"
    assert abs(v / STEP - round(v / STEP)) < 1e-6
    _, nb = with_(dc, mem_fraction_static=v)
    assert nb.fits
    if b.fits:
        assert tokens(nb) > tokens(b)
    if ctx and tokens(nb) >= ctx:            # the smallest value that holds the full context
        if v - STEP >= start(was) - 1e-9:
            lower = with_(dc, mem_fraction_static=round(v - STEP, 3))[1]
            assert not lower.fits or tokens(lower) < ctx, (was, v)
    elif v + STEP <= cap + 1e-9:             # else the largest that fits
        assert not with_(dc, mem_fraction_static=round(v + STEP, 3))[1].fits, (was, v, cap)
    assert opt.fits is True                  # re-checked: the budget fits at it
    vals = opt.values
    assert vals["fraction"] == v and vals["was"] == was and vals["cap"] == pytest.approx(cap)
    assert vals["pre_free_gib"] == pre and vals["after"] == MO.after(nb)
    assert vals["static_gib"] == pytest.approx(v * pre) and vals["outside_gib"] == pytest.approx((1 - v) * pre)
    assert vals["static_gib"] + vals["outside_gib"] == pytest.approx(pre)
    assert vals["margin_gib"] == pytest.approx((cap - v) * pre)
    assert vals["graph_gib"] == pytest.approx(bc.cuda_graph_gib) and vals["act_gib"] == pytest.approx(bc.activations_gib)
    if c is None:
        assert opt.cost == MO.COST_FLAG and "chunk" not in vals
        return "flag"
    assert opt.cost == MO.COST_THROUGHPUT and vals["chunk"] == c and vals["was_chunk"] == chunk
    return "chunk"


@pytest.mark.parametrize("cmd,gpu", [(LLAMA8, "RTX 4090"), (LLAMA8, "H100"), (LLAMA70, "H100"), (QWEN32, "H100")],
                         ids=["8b-4090", "8b-h100", "70b-fp8-h100", "qwen32-h100"])
def test_raise_fraction_and_the_chunk_ladder(cmd, gpu):
    dep = deployment(cmd, gpu)
    seen = []
    for chunk in (None, 2048, 4096, 8192, 32768, 65536):
        for i in range(0, 30, 3):
            kw = {"mem_fraction_static": round(0.70 + i * 0.01, 3)}
            if chunk:
                kw["chunked_prefill_size"] = chunk
            seen.append(check_raise(*with_(dep, **kw)))
    assert "flag" in seen and "chunk" in seen, seen


def test_the_chunk_ladder_stops_at_an_eighth_and_at_2048():
    dep = deployment(LLAMA8, "RTX 4090")
    # the 4090 needs chunks of 2048 for a raise from 0.70: from 16384 that is an eighth, from 32768 a
    # sixteenth (not offered), from 2048 nothing smaller (not offered)
    assert check_raise(*with_(dep, mem_fraction_static=0.7, chunked_prefill_size=16384)) == "chunk"
    assert MO._raise_fraction(*with_(dep, mem_fraction_static=0.7, chunked_prefill_size=16384)).values["chunk"] == 2048
    for chunk in (32768, 2048):
        d, b = with_(dep, mem_fraction_static=0.7, chunked_prefill_size=chunk)
        raised = MO._raise_fraction(d, b)
        assert raised is None or "--chunked-prefill-size" not in raised.flags, (chunk, raised)
        assert check_raise(d, b) in ("none", "flag")
    # 4096 halves once to 2048
    d, b = with_(dep, mem_fraction_static=0.7, chunked_prefill_size=4096)
    assert MO._raise_fraction(d, b).values["chunk"] == 2048


def test_a_chunk_of_2048_is_never_cut():
    """With no fraction fitting at the chunk in use (here: activations that leave the cap too low),
    a chunk of 2048 has no smaller rung: nothing is proposed, though 1024 would fit."""
    dep = deployment(LLAMA8, "RTX 4090")
    d, b = with_(dep, mem_fraction_static=0.7, chunked_prefill_size=2048)
    squeezed = dataclasses.replace(b, activations_gib=b.activations_gib + 0.5 * b.pre_load_free_gib)
    assert MO._search_fraction(d, squeezed, 0.7) is None
    assert MO._raise_fraction(*with_(dep, mem_fraction_static=0.7, chunked_prefill_size=1024)) is not None
    assert MO._raise_fraction(d, squeezed) is None


def test_no_raise_when_it_adds_no_kv_tokens():
    """--max-total-tokens caps the pool: a higher fraction gives it nothing, so none is proposed."""
    dep = deployment(LLAMA8 + " --max-total-tokens 20000", "H100")
    for f in (0.7, 0.75, 0.8):
        d, b = with_(dep, mem_fraction_static=f)
        assert b.fits and b.max_total_num_tokens == 20000
        assert MO._raise_fraction(d, b) is None
        assert check_raise(d, b) == "none"
    free = deployment(LLAMA8, "H100")
    assert MO._raise_fraction(*with_(free, mem_fraction_static=0.7)) is not None


@pytest.mark.parametrize("cmd,gpu", [(LLAMA8, "RTX 4090"), (LLAMA70, "H100")], ids=["8b-4090", "70b-fp8-h100"])
def test_without_a_context_length_the_largest_fitting_fraction(cmd, gpu):
    dep = deployment(cmd, gpu)
    proposed = 0
    for f in (0.7, 0.75, 0.8, 0.85):
        d, b = with_(dep, mem_fraction_static=f)
        b = dataclasses.replace(b, context_len=None)
        opt = MO._raise_fraction(d, b)
        if opt is None:
            continue
        proposed += 1
        check_raise(d, b)
        v, cap = opt.values["fraction"], opt.values["cap"]
        assert v + STEP > cap + 1e-9 or not with_(d, mem_fraction_static=round(v + STEP, 3))[1].fits
    assert proposed


def test_no_raise_without_a_fraction_in_use_or_free_memory():
    dep = deployment(LLAMA70, "H100")
    d, b = with_(dep, mem_fraction_static=0.7)
    assert not b.fits and MO._raise_fraction(d, b) is not None
    for bad in ({"mem_fraction_static": None}, {"mem_fraction_static": 0.0}, {"mem_fraction_static": 1.0},
                {"pre_load_free_gib": None}):
        assert MO._raise_fraction(d, dataclasses.replace(b, **bad)) is None, bad


# -- cap_requests_context (options._opts_decode) ----------------------------------------------

def test_cap_requests_to_what_the_pool_holds_at_full_context():
    """--max-running-requests is lowered to the most requests the KV pool holds at the full context
    (at least 1), and only when that is lower than the number in use."""
    dep = deployment(LLAMA8, "H100")
    b0 = M.budget(dep)
    ctx = b0.context_len
    offered = 0
    for running in (1, 2, 3, 8, 48):
        for tokens in (ctx // 2, ctx, ctx + 1, 2 * ctx - 1, 2 * ctx, 3 * ctx, 8 * ctx, 48 * ctx, 100 * ctx):
            b = dataclasses.replace(b0, max_total_num_tokens=tokens, max_running_requests=running)
            opt = next((o for o in MO._opts_decode(dep, b) if o.kind == "cap_requests_context"), None)
            holds = max(1, tokens // ctx)
            if holds >= running:
                assert opt is None, (running, tokens)            # nothing to lower
                continue
            offered += 1
            assert opt is not None, (running, tokens)
            assert opt.changes == [MO._set("--max-running-requests", holds)]
            n = int(opt.changes[0]["value"])
            assert 1 <= n < running                              # always lower
            assert n == 1 or n * ctx <= tokens                   # each request can hold its full context ...
            assert (n + 1) * ctx > tokens                        # ... and no more requests would
            assert opt.values == {"requests": n, "was": running, "kv_tokens": tokens, "context": ctx}
            assert opt.fits is True and opt.cost == MO.COST_THROUGHPUT
    assert offered >= 10
    for missing in ({"max_total_num_tokens": None}, {"context_len": None}, {"max_running_requests": None}):
        b = dataclasses.replace(b0, **{"max_running_requests": 48, "max_total_num_tokens": ctx, **missing})
        assert not [o for o in MO._opts_decode(dep, b) if o.kind == "cap_requests_context"], missing
