"""Memory remedies: the budget, the phase, and ranked options for OOMs and pool refusals."""
from __future__ import annotations

import math
import re

from .. import phase as P
from ..rules_v1 import Context
from . import remedy, _oom, _gpu_text, _size, _budget, _memory_json, _budget_sentence, _add_options, _int, _current_mfs, _lower_mfs, _raise_mfs, _smaller_batches, _float


# -- memory ---------------------------------------------------------------------------

GOAL = {"weights": "weights", "kv_pool": "kv_pool", "mamba": "mamba", "cuda_graph": "cuda_graph", "draft": "speculative",
        "prefill": "prefill", "warmup": "prefill", "decode": "decode", "multimodal": "prefill", "dist_init": "kv_pool"}


@remedy
def oom_memory(ctx: Context):
    """Budget, phase text and ranked options for an OOM (or a pool refusal)."""
    facts = ctx.facts
    oi = _oom(ctx)
    phase = oi.phase if oi else ({"oom.kv_pool": "kv_pool", "oom.mamba_state": "mamba"}.get(ctx.rule.category))
    if ctx.rule.category == "oom.mamba_state":
        phase = "mamba"
    if oi:
        ctx.finding.confidence = min(ctx.finding.confidence, max(oi.confidence, 0.3)) if oi.basis in ("numbers", "none") else ctx.finding.confidence
        for n in oi.notes:
            ctx.finding.confidence_notes.append(f"step inferred from {oi.basis}: {n}" if oi.basis in ("numbers", "milestones") else n)
        ctx.evidence(oi.event, role="trigger")
        if oi.basis == "milestones":
            ms = [m for m in facts.milestones if m.line <= oi.event.line][-2:]
            for m in ms:
                ctx.evidence(m, role="context")
    ctx.values["phase_text"] = P.DESCRIBE.get(phase, "") if phase else ""
    ctx.values["gpu_text"] = _gpu_text(oi.event if oi else None)
    dep, b = _budget(ctx)
    if b is not None:
        ctx.finding.memory = _memory_json(b)
        ctx.values["budget_sentence"] = _budget_sentence(b)
        from .. import memory as M
        goal = GOAL.get(phase or "", "prefill")
        if ctx.rule.category == "oom.kv_pool" and b.goals and b.goals[0] == "mamba":
            _to_mamba(ctx, b)
            goal, phase = "mamba", "mamba"
        elif b.goals and goal not in b.goals and phase in ("kv_pool", None) and b.goals[0] in ("weights",):
            goal = b.goals[0]
        opts = M.options_for(goal, dep, b)
        if not opts and b.goals:
            opts = M.all_options(dep, b)
        _add_options(ctx, opts)
        if phase in ("prefill", "decode", "warmup", "multimodal", "cuda_graph", "draft", None):
            _shortfall_option(ctx, b, oi)
    if not ctx.finding.fix or ctx.values.get("mamba_rebalanced") and len(ctx.finding.fix) == 1:
        _fallback_fixes(ctx, phase, b, start=2 if ctx.values.get("mamba_rebalanced") else 1)
    if phase == "mamba":
        ctx.values["mamba_sentence"] = _mamba_sentence(ctx, b)
    return None


def _shortfall_option(ctx: Context, b, oi) -> None:
    """A runtime/graph OOM says how much was missing: lower the fraction by that much (and a margin)."""
    if oi is None or any(f.flag == "--mem-fraction-static" for f in ctx.finding.fix):
        return
    d = oi.event.data
    tried, free = d.get("tried_gib"), d.get("free_gib")
    mfs, pre = b.mem_fraction_static, b.pre_load_free_gib or d.get("total_gib")
    if tried is None or free is None or not mfs or not pre:
        return
    missing = max(0.0, tried - free) + 1.0  # what was missing, plus 1 GiB for the next allocation
    new = math.floor((mfs - missing / pre) * 100) / 100
    if new < 0.5:
        return
    n = max([o["option"] for o in ctx.finding.options] + [0]) + 1
    ctx.add_fix("--mem-fraction-static", f"{new:.2f}",
                f"the failed allocation lacked {max(0.0, tried - free):.2f} GiB; {mfs:.3f} → {new:.2f} leaves "
                f"{(mfs - new) * pre:.1f} GiB more outside the static pool (the KV pool shrinks by as much)", option=n)
    ctx.finding.options.append({"option": n, "title": f"more headroom: --mem-fraction-static {new:.2f}", "cost": 1,
                                "arithmetic": f"({mfs:.3f} - {new:.2f}) x {pre:.1f} GiB = {(mfs - new) * pre:.1f} GiB ≥ "
                                              f"{tried:.2f} GiB requested - {free:.2f} GiB free"})


def _to_mamba(ctx: Context, b) -> None:
    """A KV-pool refusal whose arithmetic shows the Mamba state (and spec scratch) took the budget."""
    f = ctx.finding
    f.category = "oom.mamba_state"
    f.title = "The Mamba state (and its speculative-decoding scratch) leaves no room for the KV cache"
    f.summary = ("SGLang refused to start with 'Not enough memory', but its own sizing rules for this model show why: "
                 "the per-request Mamba state (and, with speculative decoding, its per-draft-token scratch) takes the budget, "
                 "so the Mamba side is what must shrink. {budget_sentence}")
    f.confidence_notes.append("the refusal message names --mem-fraction-static, but SGLang's own sizing rules for this model put the "
                              "blame on the Mamba state pool")


def _fallback_fixes(ctx: Context, phase: str | None, b, start: int = 1) -> None:
    """Fixes when the arithmetic lacks inputs: directions from the phase, values from what is known."""
    facts = ctx.facts
    mfs = _current_mfs(ctx, b)
    oom = _oom(ctx)
    d = oom.event.data if oom else {}
    if phase == "weights":
        tp = _int(facts.flag("--tp-size")) or 1
        ctx.add_fix("--tp-size", tp * 2, f"split the weights over {tp * 2} GPUs (each then holds about half of what failed to fit)", option=1)
        ctx.finding.options.append({"option": 1, "title": f"TP={tp * 2}", "cost": 3})
        ctx.finding.fix_other.append("Or serve a quantized checkpoint (FP8 halves BF16 weights; AWQ/GPTQ 4-bit quarters them), or a GPU with more memory. "
                                     "--mem-fraction-static cannot help: the weights come first.")
        if d.get("total_gib") and d.get("this_process_gib"):
            ctx.values["budget_sentence"] = (f"The server held {d['this_process_gib']:.2f} of {d['total_gib']:.2f} GiB when "
                                             f"{_size(d.get('tried_gib') or 0)} more was requested: the weights of one rank exceed the GPU.")
    elif phase in ("kv_pool", "dist_init"):
        new = _raise_mfs(mfs)
        ctx.add_fix("--mem-fraction-static", new, "give the static pools a larger share of the free memory", option=1)
        ctx.add_fix("--kv-cache-dtype", "fp8_e4m3", "halve the KV bytes per token", option=2)
        ctx.finding.options.extend([{"option": 1, "title": "larger static budget", "cost": 1},
                                    {"option": 2, "title": "fp8 KV cache", "cost": 2}])
    elif phase == "cuda_graph":
        new = _lower_mfs(mfs)
        ctx.add_fix("--mem-fraction-static", new, "leave more memory outside the static pool for CUDA graphs and start-up buffers", option=1)
        ctx.add_fix("--cuda-graph-max-bs", 16 if not facts.flag("--cuda-graph-max-bs") else max(1, _int(facts.flag("--cuda-graph-max-bs")) // 2),
                    "capture fewer/smaller decode graphs", option=2)
        ctx.finding.options.extend([{"option": 1, "title": "more headroom", "cost": 1}, {"option": 2, "title": "smaller CUDA graphs", "cost": 2}])
    elif phase in ("prefill", "warmup", "multimodal", None):
        _smaller_batches(ctx, "prefill", "less activation memory")
        ctx.add_fix("--mem-fraction-static", _lower_mfs(mfs), "leave more headroom outside the static pool", option=2)
        ctx.finding.options.extend([{"option": 1, "title": "smaller prefill batches", "cost": 1},
                                    {"option": 2, "title": "more headroom", "cost": 2}])
    elif phase == "decode":
        _smaller_batches(ctx, "decode", "less activation memory")
        ctx.add_fix("--mem-fraction-static", _lower_mfs(mfs), "leave more headroom outside the static pool", option=2)
        ctx.finding.options.extend([{"option": 1, "title": "fewer running requests", "cost": 2},
                                    {"option": 2, "title": "more headroom", "cost": 2}])
    elif phase == "draft":
        dt = _int(facts.flag("--speculative-num-draft-tokens"))
        ctx.add_fix("--speculative-num-draft-tokens", max(2, dt // 2) if dt else 2, "smaller verify buffers and scratch", option=1)
        ctx.add_fix("--mem-fraction-static", _lower_mfs(mfs), "leave room outside the static pool for the draft model", option=2)
        ctx.finding.options.extend([{"option": 1, "title": "fewer draft tokens", "cost": 2}, {"option": 2, "title": "more headroom", "cost": 2}])
    elif phase == "mamba":
        cap, why = _mamba_request_cap(ctx)
        ctx.add_fix("--max-running-requests", cap, why, option=start)
        ctx.add_fix("--mamba-ssm-dtype", "bfloat16", "halve the SSM state per slot (twice the slots in the same memory)", option=start + 1)
        ctx.finding.options.extend([{"option": start, "title": "fewer running requests", "cost": 2},
                                    {"option": start + 1, "title": "bf16 SSM state", "cost": 2}])


def _mamba_request_cap(ctx: Context) -> tuple[int, str]:
    """Running requests the Mamba pool can serve: its slots over the slots each request holds, with a
    quarter left for states the radix cache keeps for cached prefixes."""
    text = " ".join(h.text for h in ctx.hits)
    size = re.search(r"mamba_pool\.size=(\d+)|max_mamba_cache_size=(\d+)", text)
    slots = int(size[1] or size[2]) if size else _int(ctx.facts.readings.get("mamba_cache_size"))
    b = next((s for s in ctx.facts.batches if len(s)), None)
    strategy = str(ctx.facts.flag("--mamba-scheduler-strategy", "--mamba-radix-cache-strategy") or "")
    ratio = 5 if "extra_buffer" in strategy else 3
    if slots and b is not None and len(b):
        last = b.last()
        used, running = last["mamba_usage"], last["running"]
        if used == used and running == running and running > 0:
            ratio = max(1, round(slots * used / running))  # slots the running requests actually hold, each
    if slots:
        cap = max(1, int(slots / ratio * 0.75))
        return cap, f"{slots} Mamba slots / {ratio} slots per running request, with room kept for cached prefix states"
    mrr = _int(ctx.facts.flag("--max-running-requests"))
    if b is not None and len(b):
        running = b.max_running if b.max_running == b.max_running else 0
        mrr = mrr or int(running)
    return (max(1, mrr // 2) if mrr else 16), "each running request pins 3-5 Mamba slots"


def _mamba_sentence(ctx: Context, b) -> str:
    msg = " ".join(h.text for h in ctx.hits[:1])
    if "too small to serve any requests" in msg:
        head = "The Mamba state cache cannot hold even one running request's slots."
    elif "Not enough space for mamba" in msg:
        head = "At run time a request found no free Mamba state slot (slots are per request, not per token)."
    elif "Not enough GPU memory for hybrid" in msg:
        head = "SGLang computed a Mamba state cache of zero slots: nothing is left for the per-request recurrent state."
    else:
        head = "The Mamba/linear-attention state pool did not fit."
    if b is not None and b.mamba_bytes_per_slot and b.mamba_ratios:
        ratios = ", ".join(f"{k} {v}" for k, v in b.mamba_ratios.items())
        head += (f" Each slot is {b.mamba_bytes_per_slot / 2**20:.1f} MiB; a running request holds {b.mamba_slots_per_request or '?'} "
                 f"slot(s) under {b.mamba_strategy or 'the current strategy'} (by strategy: {ratios}).")
    return head


@remedy
def kv_pool_refused(ctx: Context):
    """The 'Not enough memory' refusals: quote the printed fraction, say when it is suspiciously low."""
    text = " ".join(h.text for h in ctx.hits)
    m = re.search(r"mem_fraction_static=([\d.]+)", text)
    if m:
        mfs = float(m[1])
        ctx.values["mfs_text"] = f" (--mem-fraction-static was {mfs:g})"
        if mfs < 0.5:
            ctx.finding.confidence_notes.append(
                f"{mfs:g} is far below SGLang's own defaults (about 0.8-0.9 on GPUs of 40 GiB and more): it was probably set by a "
                "wrapper or launcher, not computed by SGLang for this GPU; raising it is the fix here, unlike for runtime OOMs")
    m2 = re.search(r"Raise --mem-fraction-static above ([\d.]+) \(minimum viable = 1 - available/pre = ([\d.]+)\)", text)
    if m2:
        ctx.values["mfs_text"] = ctx.values.get("mfs_text", "") + f"; SGLang says the weights alone take {float(m2[2]):.3f} of the free memory"
    return None


@remedy
def kv_exhausted(ctx: Context):
    kind = (ctx.values.get("batch_kind") or "prefill").lower()
    ctx.values["batch_kind"] = kind
    if kind == "decode":
        ctx.finding.category = "oom.runtime_decode"
    msg = next((e.data.get("message", "") for e in ctx.facts.of_kind("exception") if "out of memory. Try to lower" in e.data.get("message", "")), "")
    want = re.search(r"Try to allocate (\d+) tokens", msg)
    have = re.search(r"Ava[il]+able tokens: (\d+)", msg) or re.search(r"available_size\(\)=(\d+)", msg)
    page = _int(ctx.facts.flag("--page-size")) or 1
    if want and have and int(have[1]) >= int(want[1]):
        # enough free tokens, yet the allocation failed: the allocator hands out whole pages
        ctx.finding.summary += (f" {int(have[1]):,} tokens were free and only {int(want[1]):,} were needed: the allocator works in whole "
                                f"pages{f' of {page} tokens' if page > 1 else ''}, and each running request needs a page of its own, "
                                "so a large --page-size exhausts the pool long before the tokens run out.")
        ctx.add_fix("--page-size", 1 if page <= 16 else page // 4, "smaller pages waste fewer tokens per request", option=1)
        ctx.finding.options.append({"option": 1, "title": "smaller KV pages", "cost": 1})
        return None
    _smaller_batches(ctx, kind, "less demand for free KV slots")
    ctx.add_fix("--mem-fraction-static", _raise_mfs(_current_mfs(ctx, None)), "a larger KV pool (if headroom allows)", option=2)
    ctx.finding.options.extend([{"option": 1, "title": "lower the demand", "cost": 2}, {"option": 2, "title": "larger KV pool", "cost": 1}])
    return None


@remedy
def kv_retract(ctx: Context):
    """Runaway generations (few requests, full pool) versus a pool too small for the admitted load."""
    facts = ctx.facts
    b = next((s for s in facts.batches if len(s)), None)
    usage_text, reason = "token usage near 1.00", ""
    if b is not None:
        rows = b.last_rows(3, kind=1)
        if rows:
            last = rows[-1]
            running, tokens, usage = last["running"], last["tokens"], last["usage"]
            usage_text = f"token usage {usage:.2f}" if usage == usage else usage_text
            if running == running and tokens == tokens and running > 0:
                per = tokens / running
                usage_text += f", {int(running)} running request(s) holding {int(tokens):,} tokens"
                if running <= 4 and per >= 32768:
                    reason = (f"Only {int(running)} request(s) hold about {per:,.0f} tokens each: generations that do not stop "
                              "(no max_tokens, a stop token never produced) take the whole pool, a client-side problem.")
                    ctx.finding.fix_other.append("Cap generation length per request (max_tokens / max_new_tokens in the client or "
                                                 "benchmark), and check the stop tokens / chat template.")
                    ctx.finding.confidence = max(ctx.finding.confidence, 0.75)
                else:
                    reason = "Many requests share a pool that is too small for what is admitted."
                    ctx.add_fix("--max-running-requests", max(1, int(running) // 2), "admit fewer concurrent requests", option=1)
                    ctx.add_fix("--mem-fraction-static", _raise_mfs(_current_mfs(ctx, None)), "a larger KV pool", option=2)
            for row in rows:
                ctx.evidence(row["line"], facts.context.get((0, row["line"]), ""), role="context")
    ctx.values["usage_text"] = usage_text
    ctx.values["retract_reason"] = reason
    if not reason:
        ctx.finding.fix_other.append("Retraction is SGLang's recovery path; if it happens constantly, lower --max-running-requests or give the KV pool more memory.")
    return None


@remedy
def other_process(ctx: Context):
    facts = ctx.facts
    oi = _oom(ctx)
    pieces = []
    total = facts.gpu_total_gib
    if oi and oi.other_gib:
        if total and oi.other_gib < 0.05 * total and not any("unbalanced" in h.text for h in ctx.hits):
            return False  # a few hundred MiB of a display server does not explain an OOM
        for p in oi.other_pids:
            pieces.append(f"PID {p['pid']} holds {p['used_gib']:.2f} GiB")
            ctx.finding.fix_other.append(f"Stop PID {p['pid']}, which holds {p['used_gib']:.2f} GiB on GPU "
                                         f"{oi.event.data.get('gpu', '?')} (check it first: ps -o pid,user,etime,cmd -p {p['pid']}).")
        ctx.evidence(oi.event, role="trigger")
    smi_other = facts.values.get("smi.other")
    if smi_other:
        for p in smi_other:
            pieces.append(f"PID {p['pid']} ({p.get('name') or '?'}) holds {p['used_mib']} MiB on GPU {p.get('gpu')}")
            ctx.finding.fix_other.append(f"Stop PID {p['pid']} ({p.get('name') or '?'}) on GPU {p.get('gpu')}, or point "
                                         "CUDA_VISIBLE_DEVICES at free GPUs.")
    if any("unbalanced" in h.text for h in ctx.hits):
        pieces.append("one GPU had much less free memory than the others at start-up")
        ctx.add_fix(env="SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK", value="0",
                    why="only if the other process must stay: start anyway, every rank sized to the fullest GPU", option=2)
    lead = "Memory was already taken on the GPU when SGLang needed it: " + "; ".join(pieces) + "." if pieces else \
        "Another process holds memory on this GPU."
    ctx.values["other_sentence"] = lead + " SGLang sizes everything from what is free, so the server fails at whatever step runs out first."
    ctx.finding.fix_other.append("Check with nvidia-smi (or nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv) "
                                 "that the GPUs are empty before starting; in containers, PIDs of other containers are not visible by name.")
    return None




@remedy
def kv_budget_check(ctx: Context):
    """Applies only when SGLang's sizing, on the printed numbers, leaves no KV pool."""
    dep, b = _budget(ctx)
    if b is None or not any(g in ("kv_pool", "weights", "mamba") for g in b.goals):
        return False
    return None


@remedy
def mamba_rebalance(ctx: Context):
    """Run-time slot exhaustion while the KV pool has room: move memory from KV to Mamba state.

    SGLang gives the Mamba pool r/(1+r) of the pool budget (r = --mamba-full-memory-ratio, 0.9); when
    the batch lines show Mamba usage near 1.00 and KV usage low, a larger r serves more requests at the
    same memory.
    """
    text = " ".join(h.text for h in ctx.hits)
    if "Not enough space for mamba" not in text:
        return None
    b = next((s for s in ctx.facts.batches if len(s)), None)
    if b is None:
        return None
    last = b.last()
    kv, mamba = last["usage"], last["mamba_usage"]
    if not (mamba == mamba and kv == kv) or mamba < 0.95 or kv > 0.7:
        return None
    r0 = _float(ctx.facts.flag("--mamba-full-memory-ratio")) or 0.9
    kv_share = 1 / (1 + r0) * max(kv / 0.8, 0.05)       # keep 20% spare in the KV pool
    r1 = round((1 - kv_share) / kv_share, 1)
    gain = ((1 - kv_share) / (r0 / (1 + r0)))
    size = re.search(r"mamba_pool\.size=(\d+)", text)
    slots = f"{int(size[1])} → about {int(int(size[1]) * gain)} slots" if size else f"about {gain:.1f}× the slots"
    ctx.add_fix("--mamba-full-memory-ratio", r1,
                f"the Mamba pool is full (usage {mamba:.2f}) while the KV pool is {kv:.0%} used: shift memory to the state pool "
                f"({slots}, the KV pool keeps {kv_share * (1 + r0):.0%} of its size)", option=1)
    ctx.finding.options.append({"option": 1, "title": "rebalance the pools: more Mamba slots, fewer spare KV tokens", "cost": 1,
                                "arithmetic": f"KV share 1/(1+{r0}) → {kv_share:.2f}; ratio {r0} → {r1}"})
    ctx.evidence(last["line"], ctx.facts.context.get((0, last["line"]), ""), role="context")
    ctx.values["mamba_rebalanced"] = True
    return None
