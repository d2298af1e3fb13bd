"""The memory fixes that the second mutation run found unpinned (benchmarks/MUTANTS.md): the
weights goal (more GPUs, FP8 while loading, no vision tower), the Mamba goal (fewer requests,
a Mamba pool sized in slots, bf16 state, the no_buffer strategy) and the values the lowered
fraction quotes.

Each option is checked on real deployments from the memory model's catalog against what its
docstring and its texts (rules/_fixes/memory.toml) promise: which flags it changes and to what,
that the re-checked budget at those flags is the one it reports, what it costs (the ranking), and
that every number its texts quote is there (a value the text asks for and the option lacks renders
as '?').
"""
from __future__ import annotations

import dataclasses

import pytest

from diag import knowledge as K
from diag import mem_cmd
from diag import memory as M
from diag.memory import options as MO
from diag.memory.common import DTYPE_BYTES, GIB, MIB
from diag.rules.fixlib import option_text
from diag.versions import key as vkey

CMD = "python -m sglang.launch_server --model-path "
SPEC = (" --speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1"
        " --speculative-num-draft-tokens 4")
EXTRA = " --mamba-scheduler-strategy extra_buffer"


def deployment(args: str, gpu: str, version: str = "0.5.12"):
    dep, _, _, _ = mem_cmd._prepare((CMD + args).split(), gpu, None, version)
    return dep


def recheck(dep, **changes):
    return M.budget(dataclasses.replace(dep, **changes))


def check_texts(opt) -> None:
    """Every number the option's texts quote is known: nothing renders as '?'."""
    t = option_text("memory", opt.kind, opt.values)
    for where, text in [("title", t.title), ("arithmetic", t.arithmetic)] + [("note", n) for n in t.notes] + \
            [(f"why of {f}", t.whys[f]) for f in opt.flags]:
        assert "?" not in text, f"{opt.kind} {where}: {text!r} ({opt.values})"


# -- the Mamba goal -----------------------------------------------------------------------------

def check_mamba(dep, b) -> list[str]:
    """_opts_mamba's promises for one budget (a catalog deployment: no log readings to keep)."""
    opts = MO._opts_mamba(dep, b)
    got = {o.kind: o for o in opts}
    assert len(got) == len(opts)
    ratio = b.mamba_slots_per_request
    assert ratio, "a hybrid budget knows its slots per request"
    want = b.requested_running_requests or b.max_running_requests or 1
    common = {"slots_per_request": ratio, "strategy": b.mamba_strategy, "slot_mib": b.mamba_bytes_per_slot / MIB,
              "draft_tokens": b.draft_tokens or None}

    def serves(nb, n):
        return nb.fits and (nb.max_running_requests or 0) >= n

    # 1) fewer running requests: the largest N <= the requests wanted whose slots (and scratch) fit,
    #    offered when it changes something (the budget did not fit, or the KV pool moves)
    best = next((n for n in range(want, 0, -1) if serves(recheck(dep, max_running_requests=n), n)), None)
    nb1 = recheck(dep, max_running_requests=best) if best else None
    changed = best is not None and (not b.fits or (nb1.max_total_num_tokens or 0) != (b.max_total_num_tokens or 0))
    cap = got.get("cap_requests_mamba")
    if changed:
        assert cap is not None, f"{best} requests fit where {want} do not: fewer requests is a fix"
        assert cap.changes == [MO._set("--max-running-requests", best)]
        assert best < want or not b.fits
        assert (cap.cost, cap.fits) == (MO.COST_THROUGHPUT, True)
        assert cap.values == {**common, "requests": best, "was": want, "scratch_gib": nb1.spec_scratch_gib or None,
                              "after": MO.after(nb1)}
    else:
        assert cap is None, (best, want, b.fits)

    # 2) --max-mamba-cache-size in slots: ratio x N, N the largest that fits without shrinking the KV
    #    pool under what one full-context request (or the pool in use) needs
    ctx, tokens = b.context_len or 0, b.max_total_num_tokens or 0
    floor = min(ctx, tokens) if ctx and tokens else 0

    def sized(n):
        ch = {"max_mamba_cache_size": ratio * n}
        if b.draft_tokens or n < want:
            ch["max_running_requests"] = n
        nb = recheck(dep, **ch)
        return nb if serves(nb, n) and (nb.max_total_num_tokens or 0) >= floor else None

    n2, nb2 = next(((n, nb) for n in ([best] if changed else range(want, 0, -1)) if (nb := sized(n))), (None, None))
    pool = got.get("mamba_cache_size")
    if n2 is None:
        assert pool is None
    else:
        assert pool is not None, f"a Mamba pool of {ratio * n2} slots fits: the option is missing"
        flags = [MO._set("--max-mamba-cache-size", ratio * n2)]
        if b.draft_tokens or n2 < want:
            flags.append(MO._set("--max-running-requests", n2))
        assert pool.changes == flags
        assert pool.cost == (MO.COST_FLAG if n2 == want else MO.COST_THROUGHPUT)
        assert pool.values == {**common, "slots": ratio * n2, "requests": n2,
                               "state_gib": ratio * n2 * b.mamba_bytes_per_slot / GIB, "after": MO.after(nb2)}
        assert pool.fits is True and (nb2.max_total_num_tokens or 0) >= floor

    # 3) bf16 SSM state: offered when the state is wider than 2 bytes, from SGLang 0.5.4
    bf16 = got.get("mamba_bf16")
    if DTYPE_BYTES[b.mamba_ssm_dtype] > 2 and vkey(dep.version) >= vkey("0.5.4"):
        nb = recheck(dep, mamba_ssm_dtype="bfloat16")
        assert bf16 is not None and bf16.changes == [MO._set("--mamba-ssm-dtype", "bfloat16")]
        assert nb.mamba_bytes_per_slot < b.mamba_bytes_per_slot
        assert bf16.values == {**common, "slot_mib_after": nb.mamba_bytes_per_slot / MIB, "after": MO.after(nb)}
        assert bf16.fits is nb.fits and bf16.cost == MO.COST_THROUGHPUT
    else:
        assert bf16 is None, f"the state is {b.mamba_ssm_dtype} on {dep.version}: bf16 is no fix"

    # 4) no_buffer needs fewer slots per request than extra_buffer (0.5.7+); with speculative decoding
    #    0.5.10-0.5.13 also need the radix cache off, 0.5.14+ the overlap scheduler off
    nobuf = got.get("mamba_no_buffer")
    v = vkey(dep.version)
    if (b.mamba_strategy or "").startswith("extra_buffer") and v >= vkey("0.5.7"):
        radix_off = bool(dep.spec) and vkey("0.5.10") <= v < vkey("0.5.14")
        overlap_off = not radix_off and v >= vkey("0.5.14")
        ch = {"mamba_strategy": "no_buffer"}
        flags = [MO._set("--mamba-radix-cache-strategy", "no_buffer")]
        if radix_off:
            ch["disable_radix_cache"] = True
            flags.append(MO._set("--disable-radix-cache"))
        if overlap_off:
            ch["disable_overlap_schedule"] = True
            flags.append(MO._set("--disable-overlap-schedule"))
        nb = recheck(dep, **ch)
        assert nobuf is not None and nobuf.changes == flags
        assert nb.mamba_slots_per_request < ratio
        assert nobuf.values == {**common, "slots_after": nb.mamba_slots_per_request, "radix_off": radix_off or None,
                                "overlap_off": overlap_off or None, "after": MO.after(nb)}
        assert nobuf.fits is nb.fits
    else:
        assert nobuf is None
    for o in opts:
        check_texts(o)
    return [o.kind for o in opts]


MAMBA = [  # (launch arguments, GPU, version, the Mamba options it must get)
    ("Qwen/Qwen3.6-27B", "RTX PRO 6000", "0.5.12", {"mamba_cache_size", "mamba_bf16"}),
    ("Qwen/Qwen3.6-27B --max-running-requests 512" + EXTRA, "RTX PRO 6000", "0.5.12",
     {"mamba_cache_size", "mamba_bf16", "mamba_no_buffer"}),
    ("Qwen/Qwen3.6-27B --mamba-ssm-dtype bfloat16", "RTX PRO 6000", "0.5.12", {"mamba_cache_size"}),
    ("Qwen/Qwen3.6-27B" + EXTRA, "RTX PRO 6000", "0.5.3", {"mamba_cache_size"}),
    ("Qwen/Qwen3.5-35B-A3B" + SPEC, "RTX PRO 6000", "0.5.4", {"cap_requests_mamba", "mamba_bf16"}),
    ("Qwen/Qwen3.5-35B-A3B" + SPEC + EXTRA, "RTX PRO 6000", "0.5.9",
     {"cap_requests_mamba", "mamba_cache_size", "mamba_bf16", "mamba_no_buffer"}),
    ("Qwen/Qwen3.5-35B-A3B" + SPEC + EXTRA, "RTX PRO 6000", "0.5.12",
     {"cap_requests_mamba", "mamba_cache_size", "mamba_bf16", "mamba_no_buffer"}),
    ("Qwen/Qwen3.5-35B-A3B" + SPEC + EXTRA, "RTX PRO 6000", "0.5.14", {"mamba_cache_size", "mamba_bf16", "mamba_no_buffer"}),
    ("Qwen/Qwen3-Next-80B-A3B-Instruct --tp-size 2" + EXTRA, "H100", "0.5.14", {"mamba_bf16", "mamba_no_buffer"}),
    # one request is all that fits (the Mamba share at a low fraction, with draft scratch)
    ("Qwen/Qwen3.5-35B-A3B --mem-fraction-static 0.7" + SPEC, "RTX PRO 6000", "0.5.12",
     {"cap_requests_mamba", "mamba_cache_size", "mamba_bf16"}),
    # the budget fits, but a pool sized for the 48 requests would starve the KV pool: one request's slots
    ("Qwen/Qwen3.6-27B --mem-fraction-static 0.7" + SPEC, "H100", "0.5.14",
     {"mamba_cache_size", "mamba_bf16", "mamba_no_buffer"}),
    # SGLang's own split serves 43 of the 64 requests; a pool sized in slots serves all 64
    ("Qwen/Qwen3.6-27B --max-running-requests 64" + EXTRA, "H200", "0.5.12",
     {"mamba_cache_size", "mamba_bf16", "mamba_no_buffer"}),
]


@pytest.mark.parametrize("args,gpu,version,kinds", MAMBA, ids=[f"{a.split()[0][5:]}-{v}-{i}" for i, (a, _, v, _) in enumerate(MAMBA)])
def test_mamba_options_keep_their_promises(args, gpu, version, kinds):
    dep = deployment(args, gpu, version)
    b = M.budget(dep)
    assert b.hybrid_mamba and b.mamba_bytes_per_slot
    if gpu == "H200":
        assert b.fits and b.max_running_requests == 43
        assert next(o for o in MO._opts_mamba(dep, b) if o.kind == "mamba_cache_size").values["requests"] == 64
    got = set(check_mamba(dep, b)) & set(MO.KINDS[MO.KINDS.index("cap_requests_mamba"):MO.KINDS.index("fewer_draft_tokens")])
    assert got == kinds


def test_mamba_options_only_for_a_known_hybrid_state():
    dep = deployment("Qwen/Qwen3.6-27B", "RTX PRO 6000")
    b = M.budget(dep)
    assert MO._opts_mamba(dep, b)
    assert MO._opts_mamba(dep, dataclasses.replace(b, hybrid_mamba=False)) == []
    assert MO._opts_mamba(dep, dataclasses.replace(b, mamba_bytes_per_slot=None)) == []
    llama = deployment("meta-llama/Llama-3.1-8B-Instruct", "H100")
    assert MO._opts_mamba(llama, M.budget(llama)) == []


# -- the weights goal ---------------------------------------------------------------------------

def online(dep, b):
    return next((o for o in MO.options_for("weights", dep, b) if o.kind == "online_fp8"), None)


@pytest.mark.parametrize("model,gpu", [("Qwen/Qwen3-32B", "L40S"), ("Qwen/Qwen3-32B", "H100"),
                                       ("meta-llama/Llama-3.1-70B-Instruct", "RTX PRO 6000"),
                                       ("meta-llama/Llama-3.1-70B-Instruct", "B200")])
def test_online_fp8_on_gpus_with_fp8_kernels(model, gpu):
    """Ada (sm_89), Hopper and Blackwell (sm_100, sm_120): --quantization fp8 halves the BF16 weights."""
    dep = deployment(model, gpu)
    b = M.budget(dep)
    opt = online(dep, b)
    assert opt is not None, f"{model} in FP8 fits one {gpu} ({dep.gpu.arch})"
    nb = recheck(dep, model=dep.model.with_quant("fp8"), weight_quant="fp8")
    assert nb.fits
    assert opt.changes == [MO._set("--quantization", "fp8")]
    assert (opt.cost, opt.order, opt.fits) == (MO.COST_THROUGHPUT, 1, True)
    assert opt.values == {"weights_gib": b.weights_gib, "after": MO.after(nb), "before": MO.after(b)}
    assert 0.4 < opt.values["after"]["weights_gib"] / b.weights_gib < 0.6
    check_texts(opt)


@pytest.mark.parametrize("args,gpu", [("mistralai/Mixtral-8x7B-v0.1", "A100 80GB SXM"), ("Qwen/Qwen3-32B", "A10"),
                                      ("meta-llama/Llama-3.1-70B-Instruct --quantization fp8", "H100"),
                                      ("deepseek-ai/DeepSeek-V3 --tp-size 8", "H100"),
                                      ("meta-llama/Llama-3.1-70B-Instruct", "L40S")])
def test_no_online_fp8_without_kernels_an_fp8_checkpoint_or_room(args, gpu):
    """Ampere (sm_80, sm_86) has no FP8 kernels (Mixtral's 87 GiB of BF16 weights would fit an A100
    in FP8); an FP8 checkpoint or --quantization fp8 is already FP8; a 70B model in FP8 (67.7 GiB)
    still exceeds an L40S."""
    dep = deployment(args, gpu)
    b = M.budget(dep)
    if dep.gpu.arch.startswith("sm_8") and dep.gpu.arch < "sm_89" and args.startswith("mistralai"):
        assert "weights" in b.goals
        assert recheck(dep, model=dep.model.with_quant("fp8"), weight_quant="fp8").fits
    assert MO._online_fp8_option(dep, b) is None
    assert online(dep, b) is None


def test_tp_option_scales_the_logs_per_gpu_figures_without_a_model_config():
    """An unknown model: the weights, KV bytes per token and state bytes per slot the log gave are
    per GPU, so TP n divides them by n/TP (budget at the new TP, its own default fraction)."""
    h100 = K.find_gpu("H100")
    for pp in (1, 2):
        for slot in (None, 50 * MIB):
            dep = M.Deployment(model=None, gpu=h100, version="0.5.12", tp=1, pp=pp)
            R = M.Readings(pre_load_free_gib=78.5, weights_gib=70.0, kv_bytes_per_token=327680, mamba_bytes_per_slot=slot)
            b = M.budget(dep, R)
            assert not b.fits and "weights" in b.goals
            opt = MO._tp_option(dep, b)
            assert opt.changes == [MO._set("--tp-size", 2)] and (opt.cost, opt.fits) == (MO.COST_GPUS, True)
            nb = M.budget(dataclasses.replace(dep, tp=2),
                          M.Readings(pre_load_free_gib=78.5, weights_gib=35.0, kv_bytes_per_token=163840,
                                     mamba_bytes_per_slot=slot and slot / 2))
            assert opt.values == {"tp": 2, "was_tp": 1, "gpus": 2 * pp, "after": MO.after(nb)}
            after = opt.values["after"]
            assert after["weights_gib"] == 35.0 and after["fraction"] == nb.mem_fraction_static != b.mem_fraction_static
            assert after["kv_gib"] * GIB / after["kv_tokens"] == pytest.approx(163840, rel=0.01)
            if slot:
                assert after["mamba_gib"] * GIB / after["mamba_slots"] == pytest.approx(slot / 2, rel=0.01)
            check_texts(opt)
            assert f"needs {2 * pp} GPUs per server" in option_text("memory", "tp", opt.values).notes
    # a log without the KV bytes per token (loading failed before the pool): no KV tokens are invented
    dep = M.Deployment(model=None, gpu=h100, version="0.5.12", tp=1)
    opt = MO._tp_option(dep, M.budget(dep, M.Readings(pre_load_free_gib=78.5, weights_gib=70.0)))
    assert opt.values["after"]["weights_gib"] == 35.0 and "kv_tokens" not in opt.values["after"]
    # the smallest TP that fits
    b = M.budget(dep, M.Readings(pre_load_free_gib=78.5, weights_gib=200.0, kv_bytes_per_token=327680))
    assert MO._tp_option(dep, b).changes == [MO._set("--tp-size", 4)]


def vision_tight(model: str, gpu: str):
    """A multimodal model on a GPU that another process shares: the free memory before loading
    holds the language model but not the vision tower as well."""
    dep = deployment(model, gpu)
    text = dataclasses.replace(dep, language_only=True)
    for tenths in range(100, 1500):
        R = M.Readings(pre_load_free_gib=tenths / 10)
        if M.budget(text, R).fits:
            b = M.budget(dep, R)
            assert not b.fits and "weights" in b.goals, "the vision tower is what does not fit"
            return dep, b, R
    raise AssertionError("no free memory holds the language model")


def test_language_only_when_the_vision_tower_is_what_does_not_fit():
    dep, b, R = vision_tight("Qwen/Qwen3.6-27B", "H100")
    ranked = MO.options_for("weights", dep, b)
    kinds = [o.kind for o in ranked]
    opt = ranked[kinds.index("language_only")]
    nb = M.budget(dataclasses.replace(dep, language_only=True), R)
    assert opt.changes == [MO._set("--language-only")]
    assert (opt.cost, opt.fits) == (MO.COST_THROUGHPUT, True)
    assert opt.values == {"weights_gib": b.weights_gib, "after": MO.after(nb), "before": MO.after(b)}
    assert opt.values["after"]["weights_gib"] < b.weights_gib
    check_texts(opt)
    # skipping the vision tower costs less than quantizing the weights: it ranks first among equal costs
    assert "online_fp8" in kinds and kinds.index("language_only") < kinds.index("online_fp8")
    # not offered when the server is already text-only, nor for a text-only model
    text = dataclasses.replace(dep, language_only=True)
    assert "language_only" not in [o.kind for o in MO.options_for("weights", text, M.budget(text, R))]
    llama = deployment("meta-llama/Llama-3.1-8B-Instruct", "H100")
    assert "--language-only" not in [f for o in MO.options_for("weights", llama, M.budget(llama)) for f in o.flags]


def test_weights_options_texts_have_their_numbers():
    for args, gpu in (("Qwen/Qwen3-32B", "L40S"), ("meta-llama/Llama-3.1-70B-Instruct", "RTX PRO 6000"),
                      ("Qwen/Qwen3-Next-80B-A3B-Instruct", "H100")):
        dep = deployment(args, gpu)
        b = M.budget(dep)
        opts = MO.options_for("weights", dep, b)
        assert opts and not any("--mem-fraction-static" in o.flags for o in opts)
        for o in opts:
            check_texts(o)


# -- the lowered fraction's numbers and edges ----------------------------------------------------

LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"
EAGLE = (LLAMA8 + " --speculative-algorithm EAGLE --speculative-draft-model-path yuhuili/EAGLE-LLaMA3.1-Instruct-8B"
         " --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4")


@pytest.mark.parametrize("args,extra", [(LLAMA8, 0.0), (EAGLE, 2.5)], ids=["dense", "eagle-extra"])
def test_lower_fraction_quotes_its_arithmetic(args, extra):
    dep = dataclasses.replace(deployment(args, "H100", "0.5.10"), mem_fraction_static=0.97)
    b = M.budget(dep)
    opt = MO._lower_fraction(dep, b, extra)
    v = float(opt.changes[0]["value"])
    assert opt.changes == [MO._set("--mem-fraction-static", f"{v:.3f}")] and v < 0.97
    draft = MO._draft_outside_gib(b)
    assert (draft > 0) == (args == EAGLE)          # before 0.5.14 the draft is paid outside the pools
    need = b.cuda_graph_gib + draft + b.activations_gib + extra
    pre = b.pre_load_free_gib
    assert opt.values == {
        "fraction": v, "was": 0.97, "graph_gib": b.cuda_graph_gib, "draft_gib": draft, "act_gib": b.activations_gib,
        "extra_gib": extra or None, "need_gib": need, "margin_gib": MO.MFS_MARGIN_GIB, "pre_free_gib": pre,
        "freed_gib": pytest.approx((0.97 - v) * pre), "after": MO.after(recheck(dep, mem_fraction_static=v))}
    assert (opt.cost, opt.fits) == (MO.COST_FLAG, True)
    assert (1 - v) * pre >= need + MO.MFS_MARGIN_GIB > (1 - v - MO.MFS_SEARCH_STEP) * pre
    check_texts(opt)
    arith = option_text("memory", "lower_fraction", opt.values).arithmetic
    assert f"(was 0.970; {(0.97 - v) * pre:.1f} GiB more outside the pools)" in arith
    assert ("the failed allocation 2.5" in arith) == bool(extra)


def test_lower_fraction_edges():
    dep = dataclasses.replace(deployment(LLAMA8, "H100", "0.5.10"), mem_fraction_static=0.97)
    b = M.budget(dep)
    v = MO._lower_fraction(dep, b).values["fraction"]
    # without the free memory before loading, or a fraction in use, there is nothing to lower from
    for field, value in (("pre_load_free_gib", None), ("mem_fraction_static", None), ("mem_fraction_static", 0.0)):
        assert MO._lower_fraction(dep, dataclasses.replace(b, **{field: value})) is None, field
    # a move of exactly one step (0.010) is worth making; less is not
    assert MO._lower_fraction(dep, dataclasses.replace(b, mem_fraction_static=round(v + 0.01, 3))).values["fraction"] == v
    assert MO._lower_fraction(dep, dataclasses.replace(b, mem_fraction_static=round(v + 0.005, 3))) is None
    # never at or below 0.3, though the pools would still fit there
    pre, rest = b.pre_load_free_gib, MO._draft_outside_gib(b) + b.activations_gib + MO.MFS_MARGIN_GIB
    at_03 = dataclasses.replace(b, cuda_graph_gib=0.6998 * pre - rest)
    assert MO._mfs_leaving(at_03, 0.6998 * pre) == 0.3            # 0.3002, rounded down
    assert recheck(dep, mem_fraction_static=0.3).fits
    assert MO._lower_fraction(dep, at_03) is None
    above = dataclasses.replace(b, cuda_graph_gib=0.6948 * pre - rest)
    assert MO._lower_fraction(dep, above).values["fraction"] == 0.305


def test_fp8_capability_by_architecture():
    from diag.memory.options import fp8_capable
    assert [fp8_capable(a) for a in ("sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")] == \
        [False, False, True, True, True, True]
    # AMD: CDNA3 (MI300X gfx942) and MI355 (gfx950) compute in FP8, MI200 (gfx90a) does not
    assert [fp8_capable(a) for a in ("gfx942", "gfx950", "gfx90a", "gfx908")] == [True, True, False, False]
