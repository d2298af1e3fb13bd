"""Launch-command lint: flags the version lacks, bad values, and combinations SGLang refuses.

Each combination check cites the SGLang check it mirrors (../shared/reference/sglang-errors.md)
and only fires for the versions that have that check.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import flags as F
from .numbers import to_float
from .launch import LaunchCommand, parse_launch
from .versions import VersionRange

TRUE = (True, "1", "true", "True", "yes")
SEVERITY = {"unknown_flag": "error", "ambiguous": "error", "renamed": "error", "invalid_value": "error",
            "deprecated": "warning", "abbreviation": "info"}


@dataclass
class Conflict:
    severity: str
    message: str
    flags: list[str]
    fix: list[dict] = field(default_factory=list)
    source: str = ""
    code: str = ""             # which check (rules/config read texts for it by this name)

    def to_json(self) -> dict:
        return {"severity": self.severity, "kind": "incompatible", "flags": self.flags, "message": self.message,
                "fix": self.fix, "source": self.source, "code": self.code}


def _in(cat: F.Catalog, low: str | None, high: str | None) -> bool:
    """True when every version the catalog stands for lies in [low, high]."""
    rng = VersionRange(low=low, high=high)
    return all(rng.contains(v) for v in cat.versions)


def _any_in(cat: F.Catalog, low: str | None, high: str | None) -> bool:
    rng = VersionRange(low=low, high=high)
    return any(rng.contains(v) for v in cat.versions)


def _int(v) -> int | None:
    f = to_float(v)
    return None if f is None else int(f)


def conflicts(flags: dict, env: dict, cat: F.Catalog, model=None) -> list[Conflict]:
    """Known incompatible combinations for this version; model may be a knowledge.ModelSpec."""
    out: list[Conflict] = []

    def get(*names):
        for n in names:
            if n in flags and flags[n] not in (None, False):
                return flags[n]
        return None

    spec = get("--speculative-algorithm")
    spec = str(spec).upper() if spec else None
    strategy = get("--mamba-scheduler-strategy", "--mamba-radix-cache-strategy") or "auto"
    radix_off = get("--disable-radix-cache") in TRUE
    overlap_off = get("--disable-overlap-schedule") in TRUE
    page = _int(get("--page-size")) or 1
    topk = _int(get("--speculative-eagle-topk")) or 1
    hybrid = bool(model is not None and getattr(model, "is_hybrid_mamba", False))
    strat_flag = "--mamba-radix-cache-strategy" if cat.has("--mamba-radix-cache-strategy") and not cat.flag("--mamba-radix-cache-strategy").deprecated else "--mamba-scheduler-strategy"

    # spec + radix + no_buffer for hybrid models (errors §3.1)
    if hybrid and spec and not radix_off and strategy in ("auto", "no_buffer"):
        if _in(cat, "0.5.10", "0.5.13"):
            fix = [{"flag": strat_flag, "value": "extra_buffer", "why": "per-request state buffers make spec decoding safe with radix cache"}]
            if _in(cat, "0.5.10", "0.5.10"):
                fix.append({"env": "SGLANG_ENABLE_SPEC_V2", "value": "1", "why": "extra_buffer with spec decoding needs the v2 worker in 0.5.10"})
            why = " (auto resolves to no_buffer in 0.5.10–0.5.13)" if strategy == "auto" else ""
            out.append(Conflict("error", f"Speculative decoding with the radix cache is refused for {model.architecture} under no_buffer{why}.",
                                ["--speculative-algorithm", strat_flag], fix + [
                                    {"flag": "--disable-radix-cache", "why": "alternative: no prefix caching"}], "sglang-errors.md §3.1", code="spec_radix_no_buffer"))
        elif _in(cat, "0.5.9", "0.5.9"):
            out.append(Conflict("warning", "SGLang 0.5.9 silently disables the radix cache for speculative decoding on this hybrid model.",
                                ["--speculative-algorithm"], [], "sglang-errors.md §3.1", code="spec_radix_disabled"))
    if strategy == "no_buffer" and _in(cat, "0.5.14", None):
        if not overlap_off:
            out.append(Conflict("error", "no_buffer does not support the overlap scheduler (an assertion stops start-up from 0.5.14).",
                                [strat_flag], [{"flag": "--disable-overlap-schedule", "why": "required by no_buffer"}], "sglang-errors.md §3.1", code="no_buffer_overlap"))
        if page > 1:
            out.append(Conflict("error", "no_buffer only supports --page-size 1.", [strat_flag, "--page-size"],
                                [{"flag": "--page-size", "value": "1", "why": "required by no_buffer"}], "sglang-errors.md §3.1", code="no_buffer_page_size"))
    if strategy == "extra_buffer" and radix_off and _in(cat, "0.5.10", "0.5.13"):
        out.append(Conflict("error", "extra_buffer is refused together with --disable-radix-cache (0.5.10–0.5.13).",
                            [strat_flag, "--disable-radix-cache"],
                            [{"flag": strat_flag, "value": "no_buffer", "why": "without radix cache no_buffer already overlaps"}], "sglang-errors.md §3.2", code="extra_buffer_without_radix"))
    if strategy == "extra_buffer_lazy":
        if spec and _any_in(cat, "0.5.13", "0.5.14"):
            out.append(Conflict("error", "extra_buffer_lazy does not support speculative decoding (0.5.13–0.5.14).",
                                [strat_flag, "--speculative-algorithm"],
                                [{"flag": strat_flag, "value": "extra_buffer", "why": "supports spec decoding"}], "sglang-errors.md §3.2", code="lazy_spec"))
        if overlap_off:
            out.append(Conflict("error", "extra_buffer_lazy requires the overlap scheduler.", [strat_flag, "--disable-overlap-schedule"],
                                [{"flag": "--disable-overlap-schedule", "action": "remove", "why": "lazy buffers need overlap"}], "sglang-errors.md §3.2", code="lazy_no_overlap"))
    interval = _int(get("--mamba-track-interval"))
    draft = _int(get("--speculative-num-draft-tokens"))
    if strategy in ("extra_buffer", "extra_buffer_lazy") and interval:
        if draft and interval < draft:
            out.append(Conflict("error", f"--mamba-track-interval {interval} must be at least --speculative-num-draft-tokens {draft}.",
                                ["--mamba-track-interval"], [{"flag": "--mamba-track-interval", "value": str(max(draft, 256)), "why": "≥ draft tokens"}],
                                "sglang-errors.md §3.2", code="interval_draft_tokens"))
        if interval % page:
            out.append(Conflict("error", f"--mamba-track-interval {interval} must be divisible by --page-size {page}.",
                                ["--mamba-track-interval", "--page-size"],
                                [{"flag": "--mamba-track-interval", "value": str(page * max(1, interval // page)), "why": "a multiple of the page size"}],
                                "sglang-errors.md §3.2", code="interval_page_size"))
    # topk > 1 (errors §3.3)
    if spec and topk > 1:
        v2 = env.get("SGLANG_ENABLE_SPEC_V2") in TRUE or _in(cat, "0.5.11", None)
        if v2 and _any_in(cat, "0.5.7", "0.5.12") and not overlap_off:
            out.append(Conflict("error", f"--speculative-eagle-topk {topk} is not supported by the spec-v2 worker (topk 1 only up to 0.5.12).",
                                ["--speculative-eagle-topk"], [{"flag": "--speculative-eagle-topk", "value": "1", "why": "chain drafting"}],
                                "sglang-errors.md §3.3", code="topk_spec_v2"))
        if get("--attention-backend") == "trtllm_mha":
            out.append(Conflict("error", "trtllm_mha only supports --speculative-eagle-topk 1.", ["--attention-backend", "--speculative-eagle-topk"],
                                [{"flag": "--speculative-eagle-topk", "value": "1", "why": "required by trtllm_mha"}], "sglang-errors.md §3.3", code="topk_trtllm_mha"))
        if page > 1 and (get("--attention-backend") or "") != "flashinfer" and _any_in(cat, "0.5.4.post3", "0.5.12"):
            out.append(Conflict("error", "topk > 1 with --page-size > 1 is only supported by the flashinfer attention backend.",
                                ["--speculative-eagle-topk", "--page-size"],
                                [{"flag": "--speculative-eagle-topk", "value": "1", "why": "chain drafting works with pages"}], "sglang-errors.md §3.3", code="topk_paged"))
    chunk = _int(get("--chunked-prefill-size"))
    if chunk and chunk > 0 and page > 1 and chunk % page:
        out.append(Conflict("error", f"--chunked-prefill-size {chunk} must be divisible by --page-size {page}.",
                            ["--chunked-prefill-size", "--page-size"],
                            [{"flag": "--chunked-prefill-size", "value": str(page * max(1, chunk // page)), "why": "a multiple of the page size"}],
                            "sglang-errors.md §6", code="chunk_page_size"))
    mfs = get("--mem-fraction-static")
    try:
        if mfs is not None and to_float(mfs) is not None and not 0 < to_float(mfs) < 1:
            out.append(Conflict("error", f"--mem-fraction-static {mfs} must be between 0 and 1 (a fraction of free memory).",
                                ["--mem-fraction-static"], [], "sglang-memory.md §1", code="mem_fraction_range"))
    except ValueError:
        pass
    if model is not None:
        ctx = _int(get("--context-length"))
        maxpos = getattr(model, "max_position_embeddings", None)
        if ctx and maxpos and ctx > maxpos and env.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN") not in TRUE and _in(cat, "0.5.4.post3", None):
            out.append(Conflict("error", f"--context-length {ctx} is above the model's {maxpos}; SGLang refuses it without "
                                         "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1.", ["--context-length"],
                                [{"flag": "--context-length", "value": str(maxpos), "why": "the model's maximum"}], "sglang-errors.md §8", code="context_above_model"))
        tp = _int(get("--tp-size")) or 1
        heads = getattr(model, "num_attention_heads", 0)
        if heads and tp > 1 and heads % tp and not get("--enable-dp-attention", "--attn-dp-size"):
            out.append(Conflict("error", f"{heads} attention heads are not divisible by --tp-size {tp}.", ["--tp-size"], [], "model config", code="heads_tp"))
    return out


def problems_of(cmd: LaunchCommand) -> list[dict]:
    return [{"severity": SEVERITY.get(p.kind, "warning"), "kind": p.kind, "flag": p.flag, "message": p.message,
             "suggestion": p.suggestion, "value": p.value} for p in cmd.problems]


def lint_command(argv: list[str], sglang_version: str | None, model_name: str | None = None) -> dict:
    cat = F.for_version(sglang_version)
    cmd = parse_launch(argv, cat)
    model = None
    try:
        from . import knowledge
        path = model_name or cmd.flags.get("--model-path")
        model = knowledge.find_model(str(path)) if path else None
    except ImportError:
        model = None
    found = problems_of(cmd) + [c.to_json() for c in conflicts(cmd.flags, cmd.env, cat, model)]
    note = (f"Checked against SGLang {cat.label}." if sglang_version else
            f"No --sglang-version given: checked against the newest known SGLang ({cat.label}).")
    if sglang_version and cat.note and cat.note != f"SGLang {sglang_version}":
        note += f" {cat.note}."
    return {"sglang_version": cat.label, "version_note": note, "model": getattr(model, "name", None),
            "flags": {k: v for k, v in cmd.flags.items()}, "env": cmd.env, "problems": found}


def render_lint(result: dict, fmt: str = "text") -> str:
    if fmt == "json":
        import json
        return json.dumps(result, indent=2, default=str)
    lines = [result["version_note"]]
    if result.get("model"):
        lines.append(f"model: {result['model']}")
    probs = result["problems"]
    if not probs:
        lines.append("No problems found.")
    for p in probs:
        mark = {"error": "✖", "critical": "✖", "warning": "▲"}.get(p["severity"], "•")
        lines.append(f"{mark} {p['severity']:<7} {p['message']}")
        if p.get("suggestion") and p["suggestion"] not in p["message"]:
            lines.append(f"          did you mean: {p['suggestion']}" if p["kind"] in ("unknown_flag", "renamed", "ambiguous", "abbreviation")
                         else f"          suggestion: {p['suggestion']}")
        for fx in p.get("fix") or []:
            name = fx.get("flag") or fx.get("env")
            val = fx.get("value")
            if fx.get("action") == "remove":
                lines.append(f"          fix: remove {name} ({fx.get('why', '')})")
            else:
                lines.append(f"          fix: {name}{'=' if fx.get('env') else ' '}{val if val is not None else ''}".rstrip() + f"  ({fx.get('why', '')})")
    return "\n".join(lines)


def lint_facts(facts) -> tuple[list, list[dict]]:
    """(argparse-breaking problems, conflicts as dicts) for the launch command found in a log."""
    if facts.launch is None:
        return [], []
    breaking = [p for p in facts.launch.problems if p.kind in ("unknown_flag", "ambiguous", "renamed")]
    found = [c.to_json() for c in conflicts(facts.launch.flags, facts.launch.env, facts.catalog, facts.model) if c.severity == "error"]
    return breaking, found
