"""Runtime remedies: watchdog hangs, cut tracebacks, kernel faults, unclassified exceptions, symptoms."""
from __future__ import annotations

import re

from .. import phase as P
from ..numbers import to_float
from ..rules_v1 import Context
from . import remedy, _deployment, _current_mfs, _lower_mfs, _smaller_batches


@remedy
def watchdog(ctx: Context):
    facts = ctx.facts
    timeout = to_float(ctx.values.get("timeout"))
    dumps = [e for e in facts.of_kind("watchdog") if e.data.get("frames")]
    missing = any(e.data.get("pyspy") == "failed" for e in facts.of_kind("watchdog"))
    sentence = f"A scheduler spent more than {float(timeout):.0f} s in one step and the watchdog ended the server." if timeout else \
        "A scheduler stopped making progress and the watchdog ended the server."
    if dumps:
        frames = dumps[0].data["frames"]
        top = frames[0] if frames else None
        sentence += f" The py-spy dump shows it stuck in {top.func} ({top.file}:{top.line})" if top else ""
        files = " ".join(f.file for f in frames)
        if "eagle" in files or "speculative" in files:
            sentence += ", inside speculative decoding's verify step."
            ctx.add_fix("--speculative-algorithm", action="remove", why="check whether the hang follows speculative decoding", option=1)
            ctx.finding.options.append({"option": 1, "title": "isolate: run without speculative decoding", "cost": 2})
            if facts.flag("--enable-hierarchical-cache", "--enable-hicache"):
                ctx.add_fix("--enable-hierarchical-cache", action="remove", why="or without the hierarchical cache", option=2)
        else:
            sentence += "."
        for e in dumps[:1]:
            ctx.evidence(e, role="trigger")
    elif missing:
        sentence += (" SGLang tried to dump the stuck scheduler with py-spy, but py-spy is not installed, so the hang's location is lost.")
    jit = [t for (_, n), t in facts.context.items() if "JIT" in t or "jit" in t]
    if jit:
        sentence += " It follows a just-in-time kernel compilation, which can take minutes on the first request."
        ctx.add_fix("--watchdog-timeout", int(float(timeout or 300) * 2), "only if the first forward legitimately waits for a JIT compile", option=2)
        ctx.finding.fix_other.append("Warm the JIT cache before serving (send one request after start-up, or keep ~/.cache/flashinfer between runs).")
    ctx.values["watchdog_sentence"] = sentence
    if missing:
        ctx.finding.fix_other.append("Install py-spy in the serving environment (pip install py-spy) so the next timeout prints the stuck stack.")
    ctx.finding.fix_other.append("Look at what ran just before the timeout on the rank that timed out; a rank waiting in a collective "
                                 "usually waits for another rank that failed or hung first.")
    return None


@remedy
def cut_forward(ctx: Context):
    ex = next((e for e in ctx.facts.of_kind("exception") if e.data.get("partial_tail")), None)
    if ex:
        frames = ex.data.get("frames") or []
        fwd = next((f for f in reversed(frames) if re.search(r"forward_extend|forward_decode|forward", f.func)), None)
        ctx.values["where"] = f"{fwd.func} in {fwd.file.split('/')[-1]}" if fwd else "the model's forward"
        ctx.evidence(ex, role="trigger")
        if ex.data.get("header"):
            ctx.values["where"] += f", reported as '{ex.data['header']}'"
    phase = ctx.facts.values.get("cut_forward")
    ctx.finding.confidence_notes.append("the exception line is missing: the category is inferred from where the traceback stops")
    _smaller_batches(ctx, "decode" if phase == "decode" else "prefill", "if it was an OOM", requests_default=128)
    ctx.add_fix("--mem-fraction-static", _lower_mfs(_current_mfs(ctx, None)), "if it was an OOM: more headroom outside the static pool", option=2)
    ctx.finding.options.extend([{"option": 1, "title": "smaller batches", "cost": 1}, {"option": 2, "title": "more headroom", "cost": 2}])
    return None


@remedy
def log_end_prefill(ctx: Context):
    facts = ctx.facts
    n = facts.values.get("end.new_tokens")
    line = facts.values.get("end.line")
    ctx.values["end_line"] = line
    ctx.values["new_tokens_text"] = f"{n:,} new tokens" if n else "unknown size"
    ctx.values["cut_text"] = ", cut mid-line" if facts.values.get("end.cut") else ""
    if line is not None:
        ctx.evidence(line, facts.context.get((0, line), ""), role="trigger")
    cap = _pow2_below(n // 2) if n else 4096
    ctx.add_fix("--max-prefill-tokens", cap, f"at most {cap:,} new tokens per prefill batch (the last one had {n:,})" if n else
                "cap the new tokens of one prefill batch", option=1)
    ctx.add_fix("--chunked-prefill-size", cap, "and split long prompts into chunks of that size", option=1)
    ctx.add_fix("--mem-fraction-static", _lower_mfs(_current_mfs(ctx, None) or _default_mfs(ctx)),
                "more headroom outside the static pool for activations", option=2)
    ctx.finding.options.extend([{"option": 1, "title": "smaller prefill batches", "cost": 1},
                                {"option": 2, "title": "more headroom", "cost": 2}])
    ctx.finding.fix_other.append("Paste the lines after this one if the log continues: the exception decides the fix.")
    return None


def _pow2_below(n: int) -> int:
    p = 1024
    while p * 2 <= n:
        p *= 2
    return p


def _default_mfs(ctx: Context) -> float | None:
    """SGLang's automatic --mem-fraction-static for this deployment, when the GPU is known."""
    try:
        from .. import memory as M
        dep = _deployment(ctx.facts)
        return M.default_mem_fraction_static(dep, dep.model).value if dep.total_mib else None
    except (ImportError, AttributeError):
        return None


@remedy
def kernel_fault(ctx: Context):
    step = ctx.facts.failure_phase.phase if ctx.facts.failure_phase else None
    ctx.values["phase_text"] = f" {P.DESCRIBE[step]}" if step in P.DESCRIBE else ""
    ctx.add_fix(external_env="CUDA_LAUNCH_BLOCKING", value="1", why="reproduce with synchronous launches so the traceback names the failing kernel", option=1)
    ctx.finding.fix_other.extend([
        "Try another attention backend (--attention-backend triton) and --disable-cuda-graph to see which component faults.",
        "If it follows specific requests, check their token ids and sampling parameters; report the reproducer to SGLang.",
        "'uncorrectable ECC error' is hardware: check nvidia-smi -q for ECC/row-remapping errors and drain the GPU.",
    ])
    return None


@remedy
def generic_exception(ctx: Context):
    ex = next((e for e in ctx.facts.of_kind("exception") if e.data.get("type")), None) or \
        next((e for e in ctx.facts.of_kind("exception")), None)
    if ex is None:
        return False
    etype = ex.data.get("type") or "an exception (its line is cut off)"
    msg = (ex.data.get("message") or "").strip().splitlines()
    frames = ex.data.get("frames") or []
    sg = [f for f in frames if "sglang" in f.file or "/srt/" in f.file]
    where = f" in {sg[-1].func} ({sg[-1].file.split('/')[-1]}:{sg[-1].line})" if sg else (f" in {frames[-1].func}" if frames else "")
    ctx.values["exc_type"] = etype
    ctx.values["exc_sentence"] = f"{etype}{where}" + (f": {msg[0][:200]}" if msg else "") + "."
    ctx.evidence(ex, role="trigger")
    step = ctx.facts.failure_phase.phase if ctx.facts.failure_phase else None
    if step in P.DESCRIBE:
        ctx.values["exc_sentence"] += f" It happened {P.DESCRIBE[step]}."
    ctx.finding.fix_other.append("Search SGLang's GitHub issues for the exception message; include the full traceback and launch command when reporting.")
    return None


@remedy
def symptom(ctx: Context):
    first = next((e for e in ctx.facts.events if e.kind == "exception" and e.data.get("type")), None)
    ctx.values["cause_hint"] = f" (first exception: line {first.line}, {first.data.get('type')})" if first else \
        " — it is not in this paste; include the lines above this one"
    codes = [e.data.get("exit_code") for e in ctx.facts.of_kind("signal") if e.data.get("exit_code") is not None]
    ctx.values["exit_text"] = f" with code {codes[0]}" if codes else ""
    if not first:
        ctx.finding.fix_other.append("Paste the log from the launch command on: the failing child's own traceback comes before this line.")
    return None
