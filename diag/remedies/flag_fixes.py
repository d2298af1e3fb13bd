"""Flag remedies: unknown and renamed flags, bad values, backends, Mamba strategy, speculative decoding, context length, launch lint."""
from __future__ import annotations

import re

from .. import flags as F
from ..rules_v1 import Context
from . import remedy, _budget, _memory_json, _int


# -- flags and values ------------------------------------------------------------------

def _split_args(args: str) -> list[tuple[str, str | None]]:
    """'--a x --b --c y z' -> [('--a', 'x'), ('--b', None), ('--c', 'y z')]"""
    out: list[tuple[str, str | None]] = []
    for tok in args.split():
        if tok.startswith("-"):
            flag, _, val = tok.partition("=")
            out.append((flag, val or None))
        elif out:
            f, v = out[-1]
            out[-1] = (f, tok if v is None else f"{v} {tok}")
    return out


@remedy
def unknown_flag(ctx: Context):
    cat = ctx.facts.catalog
    args = ctx.values.get("args", "")
    bad, advice = [], []
    for flag, value in _split_args(args):
        bad.append(flag)
        target = _replacement(cat, flag)
        if target is None and flag in F.FOREIGN:
            advice.append(f"drop {flag}: SGLang has no such setting" + (" (its radix cache is on by default)" if "prefix" in flag else ""))
            continue
        if target and cat.has(target):
            info = cat.flag(target)
            why = f"{flag} is not a flag of SGLang {cat.label}"
            if "_" in flag and target == "--" + flag.lstrip("-").replace("_", "-"):
                why += "; SGLang's flags are spelled with dashes"
            elif flag in F.FOREIGN:
                why += f"; {target} is SGLang's name for that setting"
            elif target in cat.other_spellings(flag):
                why += f"; {target} is the spelling every release accepts"
            else:
                why += f"; it is spelled {target} in this version"
            if info and info.switch:
                value = None
            elif value is None and info:
                value = _pick_choice(info, ctx.facts)
                if value.startswith("<") and info.choices:
                    why += f" (choose one of: {', '.join(info.choices)})"
            ctx.add_fix(flag=target, value=value, why=why, option=1)
            advice.append(f"use {target}" + (f" {value}" if value else "") + f" instead of {flag}")
        else:
            advice.append(f"{flag} has no equivalent in SGLang {cat.label}: drop it (or install a version that has it)")
    ctx.values["bad_flags"] = ", ".join(bad) or args
    ctx.values["version_label"] = cat.label if cat.requested != "unknown" else f"{cat.label} (the newest known; the log does not show the version)"
    ctx.values["flag_advice"] = ("Fix: " + "; ".join(advice) + ".") if advice else ""
    return None


def _pick_choice(info, facts) -> str:
    """A value for a flag that needs one: the choice named like the model, else a placeholder to fill in."""
    model = (facts.model_path or getattr(facts.model, "name", "") or "").lower().replace("_", "-")
    for choice in sorted(info.choices or [], key=len, reverse=True):
        if choice.lower().replace("_", "-") in model:
            return choice
    return f"<{(info.dest or info.name.lstrip('-')).replace('_', '-')}>"


def _replacement(cat, flag: str) -> str | None:
    """What to write instead of a flag the user's parser rejected."""
    if flag in F.FOREIGN:
        return cat.translate_name(F.FOREIGN[flag]) if F.FOREIGN[flag] else None
    dashed = "--" + flag.lstrip("-").replace("_", "-")
    renamed = cat.translate_name(dashed)
    if renamed == flag:  # the catalog knows it, the user's (older) release did not: another spelling
        others = sorted(cat.other_spellings(flag), key=len)
        return others[0] if others else None
    if renamed:
        return renamed
    guess = cat.did_you_mean(flag)
    return guess[0] if guess else None


@remedy
def ambiguous_flag(ctx: Context):
    cat = ctx.facts.catalog
    flag = ctx.values.get("flag", "")
    target = cat.translate_name(flag)
    value = None
    if ctx.facts.launch and flag in ctx.facts.launch.argv:
        i = ctx.facts.launch.argv.index(flag)
        if i + 1 < len(ctx.facts.launch.argv) and not ctx.facts.launch.argv[i + 1].startswith("--"):
            value = ctx.facts.launch.argv[i + 1]
    if target:
        ctx.add_fix(target, value, f"{flag} was renamed {target}; the old spelling is now a prefix of several flags", option=1)
        ctx.values["flag_advice"] = f"Use {target}" + (f" {value}" if value else " <value>") + "."
    else:
        choices = [c.strip() for c in ctx.values.get("matches", "").split(",") if c.strip()]
        ctx.values["flag_advice"] = f"Write the full flag: one of {', '.join(choices)}."
    return None


@remedy
def invalid_value(ctx: Context):
    cat = ctx.facts.catalog
    flag = ctx.values.get("flag", "")
    value = ctx.values.get("value", "").strip("'\"")
    choices = [c.strip().strip("'\"") for c in (ctx.values.get("choices") or "").split(",") if c.strip()]
    info = cat.flag(flag)
    if not choices and info and info.choices:
        choices = list(info.choices)
    ctx.values["choices_text"] = f" (accepted: {', '.join(choices)})" if choices else ""
    from ..launch import closest_choice
    pick = closest_choice(value, choices) if choices else None
    kind = ctx.values.get("type")
    if pick:
        ctx.add_fix(flag, pick, f"'{value}' is not one of {flag}'s choices in this version; '{pick}' is the closest", option=1)
        ctx.values["value_advice"] = f"Use {flag} {pick}."
    elif kind in ("int", "float"):
        ctx.values["value_advice"] = f"{flag} takes a plain {kind} number."
        cleaned = re.sub(r"[^\d.]", "", value)
        if cleaned:
            ctx.add_fix(flag, cleaned, f"{flag} takes a plain {kind}", option=1)
    else:
        ctx.values["value_advice"] = "Pick one of the accepted values."
    return None


@remedy
def device_ordinal(ctx: Context):
    msg = " ".join(e.data.get("message", "") for e in ctx.facts.events if "invalid device ordinal" in (e.data.get("message") or "") + e.text)
    gpu_id = re.search(r"gpu_id=(\d+)", msg)
    cvd = re.search(r"CUDA_VISIBLE_DEVICES'?\)?='([\d,\s]+)'", msg) or None
    visible = [x.strip() for x in (cvd[1] if cvd else ctx.facts.env.get("CUDA_VISIBLE_DEVICES", "")).split(",") if x.strip()]
    tp = re.search(r"tp_size=(\d+)", msg)
    rank = re.search(r"tp_rank=(\d+)", msg)
    if gpu_id:
        ctx.values["gpu_id_text"] = f" for device {gpu_id[1]}"
    if gpu_id and visible:
        gid = int(gpu_id[1])
        ctx.values["gpu_id_text"] += f" while only {len(visible)} GPU(s) are visible (CUDA_VISIBLE_DEVICES={','.join(visible)})"
        if gpu_id[1] in visible:
            base = visible.index(gpu_id[1]) - (int(rank[1]) if rank else 0)
            ctx.add_fix("--base-gpu-id", max(0, base), f"physical GPU {gid} is index {visible.index(gpu_id[1])} among the visible GPUs; "
                        "SGLang's GPU ids are relative to CUDA_VISIBLE_DEVICES", option=1)
            ctx.values["device_advice"] = (f"GPU {gid} is visible as index {visible.index(gpu_id[1])}: pass --base-gpu-id {max(0, base)} "
                                           "(indices relative to CUDA_VISIBLE_DEVICES), or stop restricting CUDA_VISIBLE_DEVICES.")
        else:
            ctx.values["device_advice"] = f"GPU {gid} is not among the visible GPUs; use an index below {len(visible)}."
            ctx.add_fix("--base-gpu-id", 0, "the first visible GPU", option=1)
        if tp and visible and int(tp[1]) > len(visible):
            ctx.finding.fix_other.append(f"--tp-size {tp[1]} needs {tp[1]} visible GPUs; only {len(visible)} are visible.")
    else:
        ctx.values["device_advice"] = ("Check CUDA_VISIBLE_DEVICES, --base-gpu-id and --tp-size/--dp-size: device indices are counted "
                                       "within the visible GPUs.")
    return None


@remedy
def quantization(ctx: Context):
    text = " ".join(h.text for h in ctx.hits)
    if "ModelOptFp4Config" in text or "FP4" in text:
        ctx.add_fix("--quantization", "modelopt_fp4", "the checkpoint is a ModelOpt FP4 export; name the FP4 loader explicitly", option=1)
        ctx.add_fix("--attention-backend", "trtllm_mha", "the TensorRT-LLM attention kernels that NVFP4 serving on Blackwell uses", option=1)
        ctx.values["quant_sentence"] = ("The checkpoint is a ModelOpt FP4 (NVFP4) export, but SGLang resolved it to the FP8 loader "
                                        "(ModelOptFp8Config), which refuses it. Select the FP4 method explicitly.")
        ctx.finding.fix_other.append("NVFP4 kernels need a Blackwell GPU (sm_100/sm_120); on older GPUs use an FP8 or BF16 checkpoint.")
    else:
        m = re.search(r"quantization method (\S+)", text)
        ctx.values["quant_sentence"] = ("The quantization method" + (f" {m[1]}" if m else "") +
                                        " does not match the checkpoint or this SGLang version. Use the method the checkpoint's "
                                        "quantization_config names (or drop --quantization to let SGLang read it).")
        if ctx.facts.flag("--quantization"):
            ctx.add_fix("--quantization", action="remove", why="let SGLang read the method from the checkpoint", option=1)
    return None


BACKEND_PREFERENCE = ("triton", "fa3", "flashinfer", "trtllm_mha", "fa4", "torch_native", "flex_attention")


@remedy
def backend(ctx: Context):
    text = " ".join(h.text for h in ctx.hits)
    allowed = ctx.values.get("allowed")
    flag = "--attention-backend"
    m = re.search(r"Got (\w+)=(\w+)", text)
    if m and m[1].endswith("backend"):
        flag = "--" + m[1].replace("_", "-")
    ctx.values["flag_name"] = flag
    reason = text.split("Error:", 1)[-1].strip() if "Error:" in text else text.strip()
    ctx.values["reason"] = reason.rstrip(".")
    if allowed:
        names = [a.strip().strip("'\"") for a in allowed.split(",") if a.strip()]
        names.sort(key=lambda n: BACKEND_PREFERENCE.index(n) if n in BACKEND_PREFERENCE else 99)
        for i, name in enumerate(names, 1):
            ctx.add_fix(flag, name, f"one of the backends SGLang allows here ({', '.join(names)})", option=i)
            ctx.finding.options.append({"option": i, "title": f"{flag} {name}", "cost": i})
        ctx.values["backend_advice"] = f"Use {flag} " + " or ".join(names) + "."
    elif "only supports topk = 1" in text:
        ctx.add_fix("--speculative-eagle-topk", 1, "this backend drafts a single chain", option=1)
        ctx.values["backend_advice"] = "Use --speculative-eagle-topk 1 with this backend, or another attention backend."
    else:
        ctx.values["backend_advice"] = "Choose a backend the message allows, or drop the feature it conflicts with."
    return None


# -- Mamba strategy and speculative decoding -------------------------------------------

def _strategy_flag(facts) -> str:
    return "--mamba-scheduler-strategy"  # translated to --mamba-radix-cache-strategy where that is the name


@remedy
def mamba_spec_radix(ctx: Context):
    facts = ctx.facts
    cat = facts.catalog
    arch = ctx.values.get("arch") or facts.architecture
    ctx.values["arch_text"] = f"for {arch}" if arch else ""
    ctx.values["version_label"] = facts.version.describe() if facts.version.describe() != "unknown" else "0.5.10–0.5.13"
    ctx.add_fix(_strategy_flag(facts), "extra_buffer", "keep radix cache and speculative decoding: per-request ping-pong state copies", option=1)
    if cat.has_env("SGLANG_ENABLE_SPEC_V2") and cat.env_default("SGLANG_ENABLE_SPEC_V2") is not True:
        ctx.add_fix(env="SGLANG_ENABLE_SPEC_V2", value="1", why="extra_buffer with speculative decoding needs the spec-v2 (overlap) worker", option=1)
    ctx.add_fix("--disable-radix-cache", None, "no prefix caching, no Mamba snapshots: no_buffer then works with speculative decoding", option=2)
    ctx.add_fix("--speculative-algorithm", action="remove", why="keep the radix cache and no_buffer; lose the draft speed-up", option=3)
    ctx.finding.options.extend([
        {"option": 1, "title": "extra_buffer strategy (costs Mamba memory per running request)", "cost": 1},
        {"option": 2, "title": "no radix cache (loses prefix caching)", "cost": 2},
        {"option": 3, "title": "no speculative decoding", "cost": 3},
    ])
    cost = ("Cost of extra_buffer: a running request holds 5 Mamba state slots with the overlap scheduler (4 without) instead of 3, "
            "so the same state pool serves 40% fewer running requests.")
    dep, b = _budget(ctx)
    if b is not None and b.mamba_bytes_per_slot:
        per = b.mamba_bytes_per_slot / 2**20
        cost = (f"Cost of extra_buffer: each state slot is {per:.1f} MiB per GPU and a running request holds "
                f"{b.mamba_ratios.get('extra_buffer', 5)} slots instead of {b.mamba_ratios.get('no_buffer', 3)} "
                f"({per * b.mamba_ratios.get('extra_buffer', 5):.0f} vs {per * b.mamba_ratios.get('no_buffer', 3):.0f} MiB per request).")
        if b.gpu_total_gib:
            ctx.finding.memory = _memory_json(b)
    ctx.values["strategy_cost"] = cost
    ctx.finding.fix_other.append("On a PD-disaggregation decode node this check is spurious (fixed upstream): use --disable-radix-cache there; "
                                 "following the message's advice there makes each request take extra Mamba slots and caps concurrency.")
    return None


@remedy
def mamba_strategy_validation(ctx: Context):
    text = " ".join(h.text for h in ctx.hits)
    f = _strategy_flag(ctx.facts)
    if "no_buffer do not support overlap" in text:
        ctx.values["check_text"] = "no_buffer cannot run with the overlap scheduler"
        ctx.add_fix("--disable-overlap-schedule", None, "no_buffer keeps one state per request and cannot overlap", option=1)
        ctx.add_fix(f, "extra_buffer", "or keep overlap scheduling with per-request state buffers (more Mamba memory)", option=2)
    elif "page_size=1" in text or "page_size = 1" in text:
        ctx.values["check_text"] = "no_buffer needs --page-size 1"
        ctx.add_fix("--page-size", 1, "no_buffer tracks states per token position", option=1)
        ctx.add_fix(f, "extra_buffer", "extra_buffer works with larger pages", option=2)
    elif "trtllm_mha" in text:
        ctx.values["check_text"] = "no_buffer cannot use the trtllm_mha attention backend"
        ctx.add_fix("--attention-backend", "triton", "a backend that supports page size 1", option=1)
    elif "not compatible with --disable-radix-cache" in text:
        ctx.values["check_text"] = "extra_buffer only makes sense with the radix cache"
        ctx.add_fix(f, "no_buffer", "without radix cache no_buffer already supports overlap scheduling", option=1)
    elif "extra_buffer_lazy" in text or "Lazy extra buffer" in text:
        ctx.values["check_text"] = "extra_buffer_lazy does not support this configuration"
        ctx.add_fix(f, "extra_buffer", "the non-lazy strategy supports speculative decoding and non-overlap scheduling", option=1)
    elif "mamba_track_interval" in text:
        other = ctx.values.get("other")
        ctx.values["check_text"] = "--mamba-track-interval " + ("is below the speculative draft tokens" if "draft" in text else "is not a multiple of the page size")
        ctx.add_fix("--mamba-track-interval", 256 if not other else (max(256, int(other)) if "draft" in text else int(other) * max(1, 256 // int(other))),
                    "a tracking interval at least the draft tokens and divisible by the page size", option=1)
    elif "Page size must be 1 for MambaRadixCache" in text:
        ctx.values["check_text"] = "the Mamba radix cache (v1) works with --page-size 1 only"
        ctx.add_fix("--page-size", 1, "the Mamba radix cache tracks states token by token", option=1)
        ctx.add_fix("--disable-radix-cache", None, "or keep the page size and give up prefix caching", option=2)
    elif "not supported for" in text or "only supported on" in text or "platform support" in text or "extra_buffer needs" in text:
        ctx.values["check_text"] = "extra_buffer is not supported for this model or platform"
        ctx.add_fix(f, "no_buffer", "the strategy this model/platform supports", option=1)
        ctx.add_fix("--disable-overlap-schedule", None, "no_buffer needs it", option=1)
    elif "FlashInfer GDN decode" in text:
        ctx.values["check_text"] = "the FlashInfer GDN decode kernel needs extra_buffer"
        ctx.add_fix(f, "extra_buffer", "required by --linear-attn-decode-backend flashinfer", option=1)
        ctx.add_fix("--linear-attn-decode-backend", "triton", "or keep no_buffer with the triton kernel", option=2)
    else:
        ctx.values["check_text"] = text.strip()[:160]
    ctx.values["strategy_advice"] = "Strategy memory: no_buffer holds 3 Mamba slots per running request, extra_buffer 4-5."
    return None


@remedy
def mamba_tracking_crash(ctx: Context):
    ctx.values.setdefault("site", "the Mamba tracking code")
    ctx.add_fix("--speculative-algorithm", action="remove", why="avoid the spec-v2 verify path that crashes", option=1)
    ctx.add_fix(_strategy_flag(ctx.facts), "no_buffer", "no tracking slots; needs the radix cache off with speculative decoding", option=2)
    ctx.add_fix("--disable-radix-cache", None, "required for no_buffer with speculative decoding", option=2)
    ctx.finding.options.extend([{"option": 1, "title": "run without speculative decoding", "cost": 2},
                                {"option": 2, "title": "no_buffer without radix cache", "cost": 2}])
    return None


@remedy
def spec_topk(ctx: Context):
    facts = ctx.facts
    topk = facts.values.get("spec.topk")
    steps = _int(facts.flag("--speculative-num-steps"))
    text = " ".join(h.text for h in ctx.hits)
    path = "the spec-v2 (overlap) worker"
    if "trtllm_mha" in text:
        path = "the trtllm_mha attention backend"
    elif "page_size > 1" in text:
        path = "paged attention with --page-size > 1"
    sentence = f"--speculative-eagle-topk {topk or '> 1'} asks for tree drafting, which {path} does not support"
    m = re.search(r"Expected size (\d+) but got size (\d+)", text)
    if m:
        sentence += f"; the draft model then fails on mismatched tensor sizes ({m[1]} vs {m[2]})"
    ctx.values["spec_sentence"] = sentence + "."
    ctx.add_fix("--speculative-eagle-topk", 1, "chain drafting, supported on every path", option=1)
    if steps:
        ctx.add_fix("--speculative-num-draft-tokens", steps + 1, "with topk 1 SGLang uses steps + 1 draft tokens", option=1)
    if facts.env.get("SGLANG_ENABLE_SPEC_V2") and facts.catalog.has_env("SGLANG_ENABLE_SPEC_V2"):
        ctx.add_fix(env="SGLANG_ENABLE_SPEC_V2", action="remove", why="the v1 worker supports topk > 1 (without overlap scheduling)", option=2)
        ctx.finding.options.append({"option": 2, "title": "keep tree drafting on the v1 worker", "cost": 2})
    ctx.finding.options.insert(0, {"option": 1, "title": "chain drafting (topk 1)", "cost": 1})
    return None


# -- context length ---------------------------------------------------------------------

@remedy
def context_length(ctx: Context):
    facts = ctx.facts
    v = ctx.values
    if v.get("c") and v.get("d"):
        c, d = int(v["c"]), int(v["d"])
        v["context_sentence"] = (f"--context-length {c:,} is larger than the model's derived maximum ({d:,}); SGLang refuses it "
                                 "unless told the longer context is intended (e.g. with RoPE scaling).")
        ctx.add_fix("--context-length", d, "the model's own maximum", option=1)
        ctx.add_fix(env="SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", value="1", why="only if the model really supports the longer context", option=2)
        return None
    n = int(v.get("n") or v.get("n2") or 0)
    mx = int(v.get("max") or v.get("max2") or v.get("max3") or 0)
    ctl = _int(facts.flag("--context-length")) or _int(facts.readings.get("context_len"))
    pool = _int(facts.readings.get("max_total_num_tokens"))
    limited_by_pool = bool(v.get("max")) and (ctl is None or mx < ctl - 10)
    if limited_by_pool:
        v["context_sentence"] = (f"A request of {n:,} tokens exceeds the {mx:,} tokens one request can use. "
                                 + (f"--context-length is {ctl:,}, but the limit" if ctl else "The limit")
                                 + " is the KV cache pool: one sequence's KV must fit in it"
                                 + (f" ({pool:,} tokens)" if pool else "") + ".")
        kv = facts.flag("--kv-cache-dtype")
        if kv in (None, "auto", "bf16", "bfloat16"):
            ctx.add_fix("--kv-cache-dtype", "fp8_e5m2", f"FP8 KV halves bytes per token: about {2 * mx:,} tokens fit", option=1)
        ctx.add_fix("--context-length", mx, "advertise only what the pool can hold, so clients get a clear error", option=2)
        ctx.add_fix("--allow-auto-truncate", None, "truncate over-long prompts instead of failing them", option=3)
        ctx.finding.options.extend([{"option": 1, "title": "fp8 KV cache (about twice the tokens)", "cost": 2},
                                    {"option": 2, "title": "match --context-length to the pool", "cost": 1},
                                    {"option": 3, "title": "truncate long prompts", "cost": 3}])
        ctx.finding.fix_other.append("More GPUs (higher --tp-size) or GPUs with more memory give the pool more tokens; "
                                     "for MLA models (DeepSeek) every TP rank holds the full KV, so DP attention does not help one long request.")
    else:
        v["context_sentence"] = (f"A request of {n:,} tokens exceeds the model's context length of {mx:,} tokens.")
        ctx.add_fix("--allow-auto-truncate", None, "truncate over-long prompts instead of failing them", option=1)
        longer = 1 << max(n - 1, 1).bit_length()
        ctx.add_fix("--context-length", longer, f"only if the model supports {longer:,} tokens (e.g. with RoPE/YaRN scaling in its "
                    "config or --json-model-override-args) and the KV pool holds it", option=2)
        ctx.finding.options.extend([{"option": 1, "title": "truncate long prompts", "cost": 1},
                                    {"option": 2, "title": "a longer context, where the model supports it", "cost": 2}])
        ctx.finding.fix_other.append("Shorten the prompt or lower max_tokens in the client; a model with a longer context window is the other fix.")
    return None


# -- launch-command lint ----------------------------------------------------------------

@remedy
def launch_lint_flags(ctx: Context):
    problems = ctx.facts.values.get("launch.unknown") or []
    sentences = []
    given = ctx.facts.launch.flags if ctx.facts.launch else {}
    for p in problems:
        sentences.append(p.message)
        if p.suggestion and p.suggestion.startswith("--") and " " not in p.suggestion and p.suggestion not in given:
            ctx.add_fix(p.suggestion, p.value, p.message, option=1)
    if ctx.facts.launch_event is not None:
        ctx.evidence(ctx.facts.launch_event, role="trigger")
    ctx.values["lint_sentence"] = "; ".join(sentences) + "."
    return None


@remedy
def launch_lint_combos(ctx: Context):
    conflicts = ctx.facts.values.get("launch.conflicts") or []
    ctx.values["lint_sentence"] = " ".join(c["message"] for c in conflicts)
    for i, c in enumerate(conflicts, 1):
        for fx in c.get("fix", []):
            ctx.add_fix(fx.get("flag"), fx.get("value"), fx.get("why", ""), env=fx.get("env"), action=fx.get("action", "set"), option=i)
    if ctx.facts.launch_event is not None:
        ctx.evidence(ctx.facts.launch_event, role="trigger")
    return None




@remedy
def flag_pair(ctx: Context):
    a, b = ctx.values.get("flag_a"), ctx.values.get("flag_b")
    for n, flag in enumerate((a, b), 1):
        if flag:
            ctx.add_fix(flag, action="remove", why=f"the other side ({b if flag == a else a}) stays", option=n)
            ctx.finding.options.append({"option": n, "title": f"drop {flag}", "cost": 2})
    return None
