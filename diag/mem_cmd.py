"""`diag mem`: the GPU memory calculator for a pasted SGLang launch command.

    run(["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3.6-27B", ...],
        gpu="RTX PRO 6000", model_config=None, sglang_version="0.5.10") -> (text, exit code)

Exit codes: 0 fits, 1 does not fit, 2 usage error (one line).
"""
from __future__ import annotations

import json
from pathlib import Path

from . import flags as F
from . import knowledge as K
from . import launch as L
from . import memory as M

COST_LABELS = {M.COST_FLAG: "flag tweak", M.COST_THROUGHPUT: "less throughput/concurrency",
               M.COST_GPUS: "more GPUs", M.COST_CHECKPOINT: "another checkpoint", M.COST_INFO: "for information"}


class UsageError(Exception):
    pass


def run(argv: list[str], gpu: str | None, model_config: str | None, sglang_version: str | None,
        fmt: str = "text") -> tuple[str, int]:
    try:
        ctx = _prepare(argv, gpu, model_config, sglang_version)
    except UsageError as e:
        return f"diag mem: {e}", 2
    dep, catalog, cmd, notes = ctx
    b = M.budget(dep)
    options = [_translated(o, catalog) for o in M.all_options(dep, b)]
    code = 0 if b.fits else 1
    if fmt == "json":
        out = b.to_json()
        out.update({
            "model": dep.model.name if dep.model else None,
            "model_format": dep.model.checkpoint_format if dep.model else None,
            "gpu": dep.gpu.name if dep.gpu else None, "gpu_total_mib": dep.total_mib,
            "sglang_version": sglang_version, "flag_catalog": catalog.label,
            "tp": dep.tp, "pp": dep.pp, "dp": dep.dp, "dp_attention": dep.dp_attention,
            "mamba_bytes_per_slot_conv": b.mamba_conv_bytes_per_slot, "mamba_bytes_per_slot_ssm": b.mamba_ssm_bytes_per_slot,
            "options": [o for o, _ in options], "input_notes": notes, "fits": b.fits,
        })
        return json.dumps(out, indent=2, default=str), code
    return _text(dep, b, catalog, options, notes, sglang_version), code


# -- inputs ------------------------------------------------------------------------------

def _prepare(argv, gpu, model_config, sglang_version):
    argv = list(argv or [])
    if len(argv) == 1 and " " in argv[0].strip():
        argv = L.split_command(argv[0])
    if not argv:
        raise UsageError("no launch command given (paste it after --)")
    catalog = F.for_version(sglang_version)
    cmd = L.parse_launch(argv, catalog)
    notes = [p.message for p in cmd.problems if p.kind not in ("abbreviation",)]
    if not sglang_version:
        notes.append(catalog.note)
    model_path = cmd.flags.get("--model-path") or cmd.flags.get("--model")
    if model_config:
        p = Path(model_config)
        if not (p.exists() or (p / "config.json").exists()):
            raise UsageError(f"model config not found: {model_config}")
        try:
            model = K.model_from_config(p)
        except (OSError, ValueError, KeyError) as e:
            raise UsageError(f"cannot read model config {model_config}: {e}") from None
        if model_path and model.weight_quant is None:
            named = K.find_model(str(model_path))      # a -FP8 name still tells the weight format
            if named and named.weight_quant:
                model = model.with_quant(named.weight_quant)
    elif model_path:
        model = K.find_model(str(model_path))
        if model is None:
            raise UsageError(f"unknown model {model_path!r}: pass --model-config path/to/config.json")
    else:
        raise UsageError("no model: the command has no --model-path; pass --model-config path/to/config.json")
    gpu_spec, total_mib = _gpu(gpu)
    dep = M.Deployment.from_flags(cmd.flags, sglang_version, model=model, gpu=gpu_spec, gpu_total_mib=total_mib,
                                  env=cmd.env)
    return dep, catalog, cmd, notes


def _gpu(gpu: str | None) -> tuple[K.GpuSpec | None, int | None]:
    if not gpu:
        raise UsageError("no GPU: pass --gpu (an nvidia-smi name such as 'H100' or 'RTX PRO 6000', or the total MiB)")
    text = gpu.strip()
    digits = text.lower().removesuffix("mib").strip()
    spec = K.find_gpu(text)                      # a name first: "4090" is a GPU, "97887" a total in MiB
    if spec is None and digits.isdigit():
        return K.find_gpu(total_mib=int(digits)), int(digits)
    if spec is None:
        known = ", ".join(g.name for g in K.all_gpus())
        raise UsageError(f"unknown GPU {gpu!r} (known: {known}; or give the nvidia-smi total in MiB)")
    if not spec.memory_total_mib:
        raise UsageError(f"no nvidia-smi total known for {spec.name}: give --gpu as the total MiB")
    return spec, None


def _translated(o: M.Option, catalog: F.Catalog) -> tuple[dict, list[str]]:
    """The option with its texts (the same library the findings use), its flags in the user's
    version; flags the version lacks are dropped with a note."""
    from .rules.fixlib import option_text
    texts = option_text("memory", o.kind, o.values)
    fixes, dropped = [], []
    for ch in o.changes:
        flag, value = ch["flag"], ch.get("value")
        info = catalog.flag(flag)
        if info is not None and not info.deprecated and flag in (info.name, *catalog.all_flags()):
            spelled = [(flag, value)]    # valid as written in this version
        else:
            spelled = catalog.translate(flag, value)
        if not spelled:
            dropped.append(f"{flag} does not exist in SGLang {catalog.label}; dropped")
            continue
        for name, v in spelled:
            fixes.append({"flag": name, "value": v, "action": ch.get("action", "set"), "why": texts.whys.get(flag, ""),
                          "direction": texts.directions.get(flag, "set")})
    out = {"kind": o.kind, "title": texts.title, "cost": o.cost, "goal": o.goal, "fixes": fixes,
           "other": texts.notes + dropped, "arithmetic": texts.arithmetic, "fits": o.fits, "after": o.values.get("after")}
    return out, dropped


# -- text ---------------------------------------------------------------------------------

def _g(x: float | None, nd: int = 2) -> str:
    return "-" if x is None else f"{x:,.{nd}f}"


def _text(dep: M.Deployment, b: M.Budget, catalog: F.Catalog, options, notes: list[str], version: str | None) -> str:
    m = dep.model
    lines = []
    par = f"TP{dep.tp}" + (f" PP{dep.pp}" if dep.pp > 1 else "") + (f" DP{dep.dp}" if dep.dp > 1 else "") \
        + (" (DP attention)" if dep.dp_attention else "")
    gpu = dep.gpu.name if dep.gpu else "GPU"
    lines.append(f"diag mem: {m.name if m else 'unknown model'} ({m.checkpoint_format if m else '?'}) on {gpu} "
                 f"[{dep.total_mib:,} MiB], SGLang {version or 'unknown'}, {par}")
    if dep.spec:
        lines.append(f"speculative: {dep.speculative_algorithm} ({b.draft_tokens} draft tokens)")
    lines.append("")
    lines.append(f"{'per GPU':<26}{'GiB':>8}  {'source':<15} note")
    for it in b.items:
        lines.append(f"  {it.label:<24}{_g(it.gib):>8}  {it.source:<15} {it.note}")
    lines.append("")
    if b.static_budget_gib is not None:
        auto = "automatic" if b.mem_fraction_static_auto else "set"
        lines.append(f"static budget: --mem-fraction-static {b.mem_fraction_static:.3f} ({auto}) x {b.pre_load_free_gib:.2f} GiB "
                     f"free = {b.static_budget_gib:.2f} GiB; left outside {b.headroom_gib:.2f} GiB; "
                     f"rest for the pools {b.rest_gib:.2f} GiB")
    lines.append("")
    lines.append("derived")
    rows = []
    if b.kv_bytes_per_token:
        kv_layers = m.kv_layers if m else None
        rows.append(("KV bytes/token", f"{b.kv_bytes_per_token:,.0f} B ({b.kv_dtype}"
                     + (f", {kv_layers} KV layers" if kv_layers else "") + ")"
                     + (f"; cell with draft layers {b.kv_cell_bytes:,.0f} B" if b.kv_cell_bytes and b.kv_cell_bytes != b.kv_bytes_per_token else "")))
    if b.hybrid_mamba and b.mamba_bytes_per_slot:
        parts = ""
        if b.mamba_ssm_bytes_per_slot is not None:
            parts = (f" = conv {b.mamba_conv_bytes_per_slot / M.MIB:.2f} + ssm {b.mamba_ssm_bytes_per_slot / M.MIB:.2f} MiB"
                     f" ({b.mamba_ssm_dtype})")
        rows.append(("Mamba state per slot", f"{b.mamba_bytes_per_slot / M.MIB:.2f} MiB ({b.mamba_bytes_per_slot:,.0f} B){parts}"))
        if b.kv_bytes_per_token:
            rows.append(("  = KV of", f"{b.mamba_bytes_per_slot / b.kv_bytes_per_token:,.0f} tokens"))
        ratios = "; ".join(f"{k} {v}" for k, v in b.mamba_ratios.items())
        rows.append(("slots per request", f"{b.mamba_slots_per_request} with {b.mamba_strategy} (overlap "
                     f"{'on' if b.overlap_schedule else 'off'}); by strategy: {ratios}"))
        rows.append(("Mamba slots", f"{b.max_mamba_cache_size if b.max_mamba_cache_size is not None else '-'}"
                     + (f" -> {b.max_mamba_cache_size // b.mamba_slots_per_request} requests"
                        if b.max_mamba_cache_size is not None and b.mamba_slots_per_request else "")))
    rows.append(("max_total_num_tokens", _int(b.max_total_num_tokens)
                 + (f" (context length {b.context_len:,})" if b.context_len else "")))
    rows.append(("max_running_requests", _int(b.max_running_requests)
                 + (f" ({b.max_running_requests_why})" if b.max_running_requests_why else "")))
    if b.min_viable_fraction is not None:
        rows.append(("min viable fraction", f"{b.min_viable_fraction:.4f} (weights' share of the free memory)"))
    for k, v in rows:
        lines.append(f"  {k:<24}{v}")
    lines.append("")
    if b.fits:
        lines.append("result: FITS" + (" (with warnings)" if b.warnings else ""))
    elif b.fits is False:
        lines.append("result: DOES NOT FIT")
    else:
        lines.append("result: UNKNOWN (not enough numbers)")
    for p in b.problems:
        lines.append(f"  problem: {p}")
    for w in b.warnings:
        lines.append(f"  warning: {w}")
    if options:
        lines.append("")
        lines.append(f"options (cheapest first; flags as SGLang {catalog.label} spells them)")
        n = 0
        for o, _dropped in options:
            n += 1
            label = COST_LABELS.get(o["cost"], "for information")
            lines.append(f"  {n}. [{label}] {o['title']}")
            if o["fixes"]:
                lines.append("     " + " ".join((f"remove {f['flag']}" if f["action"] == "remove" else f"{f['flag']}")
                                             + (f" {f['value']}" if f["value"] is not None else "") for f in o["fixes"]))
            if o["arithmetic"]:
                lines.append(f"     why: {o['arithmetic']}")
            if o.get("after"):
                lines.append(f"     then: {_after(o['after'])}")
            for x in o["other"]:
                lines.append(f"     note: {x}")
    all_notes = notes + b.notes
    if all_notes:
        lines.append("")
        lines.append("notes")
        for x in all_notes:
            lines.append(f"  - {x}")
    return "\n".join(lines) + "\n"


def _after(a: dict) -> str:
    """The re-checked budget after an option, one line."""
    parts = []
    if a.get("weights_gib") is not None:
        parts.append(f"weights {a['weights_gib']:.1f} GiB")
    if a.get("mamba_slots") is not None:
        parts.append(f"{a['mamba_slots']} Mamba slots ({a.get('mamba_gib') or 0:.1f} GiB)")
    if a.get("scratch_gib"):
        parts.append(f"scratch {a['scratch_gib']:.1f} GiB")
    if a.get("kv_tokens") is not None:
        parts.append(f"{a['kv_tokens']:,} KV tokens ({a.get('kv_gib') or 0:.1f} GiB)")
    if a.get("running") is not None:
        parts.append(f"{a['running']} running requests")
    return ", ".join(parts) + ("" if a.get("fits", True) else " (does not fit)")


def _int(x: int | None) -> str:
    return "-" if x is None else f"{x:,}"
