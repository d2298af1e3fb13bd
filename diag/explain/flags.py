"""The flags explainer: what a flag the user's release rejected is called there, the values a
flag accepts, and the values of the launch command and of the matched message that the config
rules' fixes need. Values only (flag names, values, lists, numbers, booleans).

Replacement of a rejected flag, in this order: the same flag written with dashes; its name in
the user's release (renamed); the replacement its catalog help documents (a removed flag is
mapped to that, never to the nearest spelling); the flag that took its place when it was removed
(same help, same dest less a word); another server's name for the setting (vLLM's); a flag the
user's release predates (`newer`, with the first release that has it); the nearest spelling.
The program that printed the error decides the parser: a server flag given to the router is
not misspelt, it belongs to the other program.
"""
from __future__ import annotations

import json
import math

from . import Explainer, ExplainContext, Values

PROVIDES = (
    "prog", "parser", "unknown", "renames", "bad_flags", "drop", "newer_flags", "newer_since", "removed_flags",
    "removed_last", "server_flags", "other_flags", "has.*",
    "ambiguous.*", "invalid.*", "device.*", "quant.*", "backend.*", "spec.*", "mamba.*", "context.*", "lint.*", "pair",
    "pair_first", "pair_second",
)
# backends in the order they are suggested: the most widely supported first
BACKEND_PREFERENCE = ("triton", "fa3", "flashinfer", "trtllm_mha", "fa4", "torch_native", "flex_attention")
SERVER_PROGS = ("launch_server.py", "launch_server", "sglang serve", "sglang", "server.py")
QUOTES = "'\"`"


def _int(v):
    from ..numbers import to_int
    if isinstance(v, str):
        v = v.strip().strip(QUOTES).split(" ", 1)[0]
    return to_int(v)


def _fields(hits) -> dict:
    """The typed fields of the matched messages (the first message that has a field wins)."""
    out: dict = {}
    for ev in hits:
        for k, v in ((getattr(getattr(ev, "msg", None), "fields", None) or {}).items()):
            if v is not None and k not in out:
                out[k] = v
    return out


def _names_list(text) -> list[str]:
    """"{'trtllm_mha', 'triton'}", "['awq', 'fp8']", "a, b or c" -> the names, in order."""
    if text is None:
        return []
    if isinstance(text, (list, tuple, set)):
        return [str(x) for x in text]
    out = []
    word = []
    for ch in str(text) + " ":
        if ch.isalnum() or ch in "_-.":
            word.append(ch)
        else:
            w = "".join(word).strip(".")
            word = []
            if w and w not in ("or", "and") and w not in out:
                out.append(w)
    return out


def closest(value: str | None, choices: list[str] | None) -> str | None:
    """The choice most like the value given: the same name in other case or punctuation, else the
    best difflib ratio (ties: the longer common prefix); None when nothing is alike."""
    import difflib
    if not value or not choices:
        return None
    norm = lambda x: x.lower().replace("-", "_")   # noqa: E731
    same = [c for c in choices if norm(c) == norm(value)]
    if same:
        return same[0]

    def score(c):
        a, b = norm(value), norm(c)
        prefix = len(next((a[:i] for i in range(min(len(a), len(b)), 0, -1) if a[:i] == b[:i]), ""))
        return difflib.SequenceMatcher(None, a, b).ratio(), prefix
    best = max(choices, key=score)
    ratio, prefix = score(best)
    return best if ratio >= 0.5 or prefix >= 3 else None


def split_args(args: str) -> list[tuple[str, str | None]]:
    """'--a x --b --c y z' -> [('--a', 'x'), ('--b', None), ('--c', 'y z')] (argparse lists a rejected
    flag's words after it)."""
    out: list[tuple[str, str | None]] = []
    for tok in str(args or "").split():
        tok = tok.strip(QUOTES)
        if not tok:
            continue
        if tok.startswith("-") and len(tok) > 1 and not tok[1].isdigit():
            flag, _, val = tok.partition("=")
            out.append((flag, val or None))
        elif out:
            f, v = out[-1]
            out[-1] = (f, tok if v is None else f"{v} {tok}")
    return out


# -- the parser that rejected the command -------------------------------------------------------

def parser_of(prog: str | None, hits) -> str:
    p = (prog or "").strip().lower()
    if any(getattr(getattr(e, "msg", None), "module", "") and "multimodal_gen" in e.msg.module for e in hits):
        return "diffusion"
    if "router" in p:
        return "router"
    if p.endswith("generate"):
        return "diffusion"
    if not p or p in SERVER_PROGS or p.endswith(("launch_server.py", "sglang serve")):
        return "server"
    return "other"


# -- a rejected flag -------------------------------------------------------------------------------

def _value_for(cat, facts, flag: str, value: str | None, documented_value: str | None):
    """(value, choices): the user's value, the documented one, a choice named like the model, or a
    placeholder naming what to fill in."""
    info = cat.flag(flag)
    if info is None or info.switch:
        return None, None
    if value:
        return value, None
    if documented_value:
        return documented_value, None
    model = (facts.model_path or getattr(facts.model, "name", "") or "").lower().replace("_", "-")
    for choice in sorted(info.choices or [], key=len, reverse=True):
        if choice.lower().replace("_", "-") in model:
            return choice, None
    return f"<{(info.dest or info.name.lstrip('-')).replace('_', '-')}>", list(info.choices or []) or None


def _other_spelling(cat, name: str) -> str | None:
    """Another spelling of the same flag (--tp-size for --tensor-parallel-size): the running release
    refused this one. The spelling of the field the flag sets first, then the one accepted longest."""
    from .. import flags as F
    from ..versions import key as vkey
    info = cat.flag(name)
    own = "--" + info.dest.replace("_", "-") if info is not None and info.dest else None
    others = [o for o in dict.fromkeys([cat.primary(name) or name] + cat.other_spellings(name)) if o != name]
    if not others:
        return None

    def rank(o):
        hist = F.history(o)
        return (o != own, vkey(hist[0]) if hist else (99,), len(o))
    return min(others, key=rank)


def resolve_unknown(cat, facts, written: str, value: str | None, parser: str) -> dict:
    from .. import flags as F
    from ..versions import key as vkey
    base = written.split("=", 1)[0]
    dashed = "--" + base.lstrip("-").replace("_", "-").lower()
    item = {"written": base, "value": value, "flag": None, "reason": "none", "since": None, "last": None,
            "switch": False, "choices": None}
    if parser == "router":
        known = cat.has(dashed) or F.history(dashed) is not None
        item["reason"] = "server_flag" if known else "none"
        return item
    if parser == "diffusion":
        # the diffusion server parses its own flags: an LLM-server flag is not misspelt, it is the other server's
        item["reason"] = "other_parser" if (cat.has(dashed) or F.history(dashed) is not None) else "none"
        return item
    target, documented = None, None
    if dashed != base and cat.has(dashed):
        target, item["reason"] = cat.primary(dashed) or dashed, "underscore" if "_" in base else "case"
    elif cat.has(dashed) and not cat.flag(dashed).deprecated and (alias := _other_spelling(cat, dashed)):
        # a spelling the catalog's releases accept but the one that runs did not: one accepted longer
        target, item["reason"] = alias, "alias"
    elif cat.has(dashed) and not cat.flag(dashed).deprecated:
        # the release the catalog stands for has it, yet the parser refused it: an older release
        hist = F.history(dashed)
        if hist and "unknown" in cat.requested:
            item["reason"], item["since"] = "newer", hist[0]
        else:
            item["reason"] = "other_parser"
        return item
    elif (renamed := cat.translate_name(dashed)) and renamed != dashed:
        target, item["reason"] = renamed, "renamed"
    elif (doc := F.documented_replacement(dashed)) and cat.translate_name(doc[0]):
        target, documented, item["reason"] = cat.translate_name(doc[0]), doc[1], "documented"
    elif (succ := F.successor(dashed)) and cat.translate_name(succ):
        target, item["reason"] = cat.translate_name(succ), "successor"
    elif dashed in F.FOREIGN:
        mapped = F.FOREIGN[dashed]
        target = cat.translate_name(mapped) if mapped else None
        item["reason"] = "foreign" if target else "foreign_none"
    elif (hist := F.history(dashed)) is not None:
        newest = cat.versions[-1]
        if vkey(hist[0]) > vkey(newest):
            item["reason"], item["since"] = "newer", hist[0]
        else:
            item["reason"], item["last"] = "removed", hist[1]
    elif (guess := cat.did_you_mean(dashed)):
        target, item["reason"] = guess[0], "spelling"
    if target:
        item["flag"] = target
        info = cat.flag(target)
        item["switch"] = bool(info and info.switch)
        item["value"], item["choices"] = _value_for(cat, facts, target, value, documented)
    return item


def _unknown(ctx: ExplainContext, v: dict) -> None:
    facts, cat = ctx.facts, ctx.facts.catalog
    f = _fields(ctx.hits)
    args = f.get("args") or f.get("argv") or f.get("remaining")
    prog = f.get("prog")
    parser = parser_of(prog, ctx.hits)
    v["prog"], v["parser"] = prog, parser
    if not args or cat is None:
        return
    items = [resolve_unknown(cat, facts, w, val, parser) for w, val in split_args(args)]
    v["unknown"] = items
    v["bad_flags"] = [i["written"] for i in items]
    v["renames"] = [i for i in items if i["flag"]]
    v["drop"] = [i["written"] for i in items if i["reason"] in ("none", "foreign_none", "removed")]
    from ..versions import key as vkey
    newer = [i for i in items if i["reason"] == "newer"]
    removed = [i for i in items if i["reason"] == "removed"]
    v["newer_flags"] = [i["written"] for i in newer]
    v["newer_since"] = max((i["since"] for i in newer), key=vkey, default=None)
    v["removed_flags"] = [i["written"] for i in removed]
    v["removed_last"] = min((i["last"] for i in removed), key=vkey, default=None)
    v["server_flags"] = [i["written"] for i in items if i["reason"] == "server_flag"]
    v["other_flags"] = [i["written"] for i in items if i["reason"] == "other_parser"]
    v["has"] = {r: any(i["reason"] == r for i in items) for r in
                ("underscore", "renamed", "documented", "successor", "foreign", "spelling", "newer", "removed",
                 "server_flag", "other_parser", "none", "foreign_none")}


def _ambiguous(ctx: ExplainContext, v: dict) -> None:
    from .. import flags as F
    facts, cat = ctx.facts, ctx.facts.catalog
    f = _fields(ctx.hits)
    flag = f.get("flag") or f.get("option")
    if not flag or cat is None:
        return
    matches = [m for m in _names_list(f.get("matches")) if m.startswith("--")]
    target = cat.translate_name(flag)
    if not target or target == flag:
        doc = F.documented_replacement(flag)
        target = cat.translate_name(doc[0]) if doc else None
    value = None
    launch = facts.launch
    if launch is not None and flag in launch.argv:
        i = launch.argv.index(flag)
        if i + 1 < len(launch.argv) and not launch.argv[i + 1].startswith("--"):
            value = launch.argv[i + 1]
    out = {"flag": flag, "matches": matches, "replacement": target, "value": None, "switch": False}
    if target:
        out["value"], _ = _value_for(cat, facts, target, value, None)
        out["switch"] = bool(cat.flag(target) and cat.flag(target).switch)
    v["ambiguous"] = out


def _invalid(ctx: ExplainContext, v: dict) -> None:
    cat = ctx.facts.catalog
    f = _fields(ctx.hits)
    flag = f.get("flag")
    if not flag:
        return
    value = str(f.get("value") or "").strip().strip(QUOTES)
    choices = [c for c in _names_list(f.get("choices")) if c]
    info = cat.flag(flag) if cat is not None else None
    if not choices and info and info.choices:
        choices = list(info.choices)
    kind = "choice" if f.get("choices") is not None else ("expected" if f.get("count") else "type")
    typ = f.get("type")
    number = None
    if kind == "type" and typ in ("int", "float") and value:
        digits = "".join(ch for ch in value if ch.isdigit() or ch == ".")
        if digits and digits.count(".") <= (1 if typ == "float" else 0) and digits != ".":
            number = digits
    pick = closest(value, choices)
    v["invalid"] = {"flag": flag, "value": value or None, "choices": choices or None, "pick": pick, "kind": kind,
                    "type": typ, "number": number}


def _device(ctx: ExplainContext, v: dict) -> None:
    facts = ctx.facts
    f = _fields(ctx.hits)
    gpu = _int(f.get("gpu_id"))
    visible_text = f.get("visible_devices")
    if visible_text is None:
        visible_text = facts.env.get("CUDA_VISIBLE_DEVICES")
    visible = [x for x in _names_list(visible_text) if x.isdigit()]
    rank = _int(f.get("tp_rank")) or 0
    tp = _int(f.get("tp_size")) or _int(facts.flag("--tp-size"))
    out = {"gpu_id": gpu, "visible": visible or None, "count": len(visible) or None, "tp": tp,
           "in_visible": None, "index": None, "base": None, "tp_too_big": bool(tp and visible and tp > len(visible))}
    if gpu is not None and visible:
        out["in_visible"] = str(gpu) in visible
        if out["in_visible"]:
            out["index"] = visible.index(str(gpu))
            out["base"] = max(0, out["index"] - rank)
        else:
            out["base"] = 0
    v["device"] = out


def _quant(ctx: ExplainContext, v: dict) -> None:
    f = _fields(ctx.hits)
    method = str(f.get("method") or "").strip().strip(QUOTES) or None
    supported = _names_list(f.get("supported"))
    pick = closest(method, supported)
    v["quant"] = {"method": method, "supported": supported or None, "pick": pick if pick != method else None,
                  "checkpoint_method": f.get("checkpoint_method"), "flag_set": ctx.facts.flag("--quantization") is not None}


def _backend(ctx: ExplainContext, v: dict) -> None:
    facts, cat = ctx.facts, ctx.facts.catalog
    f = _fields(ctx.hits)
    current = str(f.get("backend") or facts.flag("--attention-backend") or "").strip().strip(QUOTES) or None
    allowed = [a for a in _names_list(f.get("allowed")) if a != current]
    info = cat.flag("--attention-backend") if cat is not None else None
    if info and info.choices:
        allowed = [a for a in allowed if a in info.choices]
    allowed.sort(key=lambda n: BACKEND_PREFERENCE.index(n) if n in BACKEND_PREFERENCE else len(BACKEND_PREFERENCE))
    v["backend"] = {"flag": "--attention-backend", "current": current, "allowed": allowed or None,
                    "pick": allowed[0] if allowed else None, "others": allowed[1:] or None}


def _spec(ctx: ExplainContext, v: dict) -> None:
    facts, cat = ctx.facts, ctx.facts.catalog
    steps = _int(facts.flag("--speculative-num-steps"))
    draft = _int(facts.flag("--speculative-num-draft-tokens"))
    env = str(facts.env.get("SGLANG_ENABLE_SPEC_V2", "")).lower()
    has_env = bool(cat is not None and cat.has_env("SGLANG_ENABLE_SPEC_V2"))
    v["spec"] = {
        "topk": facts.values.get("spec.topk"), "steps": steps,
        "chain_draft_tokens": steps + 1 if steps and draft != steps + 1 else None,   # not the value in use
        "draft_tokens": draft,
        "backend": facts.flag("--attention-backend"),
        "partial": bool(steps) and (facts.flag("--speculative-eagle-topk") is None
                                    or facts.flag("--speculative-num-draft-tokens") is None),
        "v2_env_set": has_env and env in ("1", "true", "yes"),
        "v2_env_needed": has_env and cat.env_default("SGLANG_ENABLE_SPEC_V2") is not True and env not in ("1", "true", "yes"),
    }


def _mamba(ctx: ExplainContext, v: dict) -> None:
    facts = ctx.facts
    f = _fields(ctx.hits)
    page = _int(f.get("page_size")) or _int(facts.flag("--page-size")) or 1
    draft = _int(f.get("draft_tokens")) or _int(facts.flag("--speculative-num-draft-tokens")) or 0
    chunk = _int(f.get("chunk_size")) or 0
    current = _int(f.get("interval")) or _int(facts.flag("--mamba-track-interval"))
    need = max(current or 0, draft, chunk, page)
    interval = math.ceil(need / page) * page if need else None
    if interval is not None and current is not None and interval <= current:
        interval = None                # nothing to raise: the numbers the log shows do not explain the check
    v["mamba"] = {"track_interval": interval, "page_size": page, "draft_tokens": draft or None, "interval_was": current}


def rope_context(text) -> int | None:
    """The context length --json-model-override-args gives: rope_scaling's factor times its
    original_max_position_embeddings, or an overridden max_position_embeddings."""
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        data = json.loads(text)
    except ValueError:
        import ast
        try:
            data = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return None
    if not isinstance(data, dict):
        return None
    rope = data.get("rope_scaling") or data.get("rope_parameters")
    if isinstance(rope, dict):
        factor, orig = rope.get("factor"), rope.get("original_max_position_embeddings")
        try:
            if factor and orig:
                return int(float(factor) * int(orig))
        except (TypeError, ValueError):
            pass
    mpe = data.get("max_position_embeddings")
    return int(mpe) if isinstance(mpe, int) and mpe > 0 else None


def _context(ctx: ExplainContext, v: dict) -> None:
    facts = ctx.facts
    f = _fields(ctx.hits)
    n = _int(f.get("input_tokens") if f.get("input_tokens") is not None else f.get("input_token_num"))
    total = _int(f.get("total_tokens"))
    allowed = _int(f.get("max_input_tokens"))
    model_ctx = _int(f.get("context_len"))
    ctl = _int(facts.flag("--context-length")) or _int(facts.readings.get("context_len"))
    pool = _int(facts.readings.get("max_total_num_tokens"))
    # the scheduler's limit is min(context, KV pool) less a margin; a request over the model's context
    # is refused earlier, by the tokenizer manager: reaching this check means the pool, unless the
    # context length is known and the limit is its margin
    pool_limited = None if allowed is None else (ctl is None or allowed < ctl - 10)
    rope = rope_context(facts.flag("--json-model-override-args"))
    limit = allowed or model_ctx
    asked = total or n
    longer = 1 << max(asked - 1, 1).bit_length() if asked else None
    rope = rope if (rope and (not limit or rope > limit)) else None
    v["context"] = {
        "input_tokens": n, "total_tokens": total, "max_new_tokens": _int(f.get("max_new_tokens")),
        "limit": limit, "context_length": ctl or model_ctx, "pool_tokens": pool, "pool_limited": pool_limited,
        "rope_context": rope,
        "longer": longer if not rope else None,          # a guess, only where the launch command gives no scaling
        "fp8_tokens": 2 * limit if limit else None,
        "requested": _int(f.get("requested")), "derived": _int(f.get("derived")),
        "kv_dtype": facts.flag("--kv-cache-dtype"),
        "kv_bf16": facts.flag("--kv-cache-dtype") in (None, "auto", "bf16", "bfloat16"),
    }


def _lint(ctx: ExplainContext, v: dict) -> None:
    facts = ctx.facts
    problems = facts.values.get("launch.unknown") or []
    given = facts.launch.flags if facts.launch else {}
    cat = facts.catalog
    renames, unknown = [], []
    for p in problems:
        unknown.append(p.flag)
        s = p.suggestion
        if s and s.startswith("--") and " " not in s and s not in given and cat is not None and cat.has(s):
            info = cat.flag(s)
            value = None if (info and info.switch) else (p.value or None)
            renames.append({"written": p.flag, "flag": s, "value": value, "switch": bool(info and info.switch),
                            "kind": p.kind})
    conflicts = facts.values.get("launch.conflicts") or []
    fixes = []
    for c in conflicts:
        for fx in c.get("fix", []):
            if fx.get("flag") and (cat is None or cat.has(fx["flag"])):
                fixes.append({"flag": fx["flag"], "value": fx.get("value"), "remove": fx.get("action") == "remove",
                              "switch": fx.get("value") is None and fx.get("action") != "remove", "code": c.get("code")})
            elif fx.get("env"):
                fixes.append({"env": fx["env"], "value": fx.get("value"), "code": c.get("code")})
    v["lint"] = {"unknown": unknown or None, "renames": renames or None, "suggested": [r["flag"] for r in renames] or None,
                 "conflict_codes": [c.get("code") for c in conflicts] or None,
                 "conflict_flags": list(dict.fromkeys(x for c in conflicts for x in c.get("flags", []))) or None,
                 "first_code": conflicts[0].get("code") if conflicts else None,
                 "fixes": [x for x in fixes if x.get("flag")] or None,
                 "env_fixes": [x for x in fixes if x.get("env")] or None}


def _pair(ctx: ExplainContext, v: dict) -> None:
    from ..facts import lookup
    cat = ctx.facts.catalog
    pair = lookup(ctx.facts, "check.pair") or []
    known = [p for p in pair if cat is None or cat.has(p)]
    v["pair"] = known or None
    v["pair_first"] = known[0] if known else None
    v["pair_second"] = known[1] if len(known) > 1 else None


SECTIONS = {"unknown": _unknown, "ambiguous": _ambiguous, "invalid": _invalid, "device": _device, "quant": _quant,
            "backend": _backend, "spec": _spec, "mamba": _mamba, "context": _context, "lint": _lint, "pair": _pair}


def explain(ctx: ExplainContext, about: str | None = None) -> Values:
    """The values of one section (`about`, a rule's argument) or of all of them."""
    out = Values()
    for name, fn in SECTIONS.items():
        if about is None or about == name:
            fn(ctx, out.values)
    return out


EXPLAINER = Explainer("flags", explain, PROVIDES, args=("about",))
