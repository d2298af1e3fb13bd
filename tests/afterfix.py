"""The after-fix check (issue 8, part 3): a case's first fix option applied to its launch command
(the patched command the report carries, `finding.commands`) must then fit and lint clean.

Two memory checks, both on the patched command as the report prints it:
- `diag mem` (diag.mem_cmd.run, what the CLI runs) on the command and the case's GPU;
- the memory model on the command with the numbers the log measured that the change leaves
  valid (free memory before loading always; the weights' and the KV cell's size only while no
  flag that reshapes the weights changed). This one bites where `diag mem`, which knows only the
  catalog's estimates, thinks even the failing command fits.
And `diag flags check` (diag.lint.lint_command) on it for the case's version: no error, and no
problem the command before the fix did not have.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from diag import flags as F
from diag import knowledge as K
from diag import mem_cmd
from diag import memory as M
from diag.analyze import Options, analyze_with_facts
from diag.explain import memory as EM
from diag.launch import parse_launch, split_command
from diag.lint import lint_command
from diag.rules.registry import registry

# flags whose change makes the log's weight and KV-cell sizes stale: only the free memory before loading stays
RESHAPING = ("--tp-size", "--pp-size", "--dp-size", "--model-path", "--quantization", "--language-only",
             "--kv-cache-dtype", "--speculative-algorithm", "--speculative-draft-model-path", "--enable-dp-attention")


def memory_flags() -> set[str]:
    """Every flag an option of the memory model can change (rules/_fixes/memory.toml)."""
    return {c.name for key, lib in registry().library.items() if lib.explainer == "memory"
            for c in lib.changes if c.kind == "flag"}


def memory_cases() -> list:
    """(rule, case): a memory rule's top case whose pinned fixes include a memory-model flag."""
    mf = memory_flags()
    return [(r, c) for r in registry().rules if any(e.name == "memory" for e in r.explainers)
            for c in r.cases if c.expect == "top" and not c.xfail
            and any(w.get("flag") in mf for w in c.want.get("fix") or [])]


_RUNS: dict = {}


def checked(rule, case, tmp: Path) -> "Checked":
    """The case run once per process (collection and the tests share it)."""
    key = (rule.id, case.name)
    if key not in _RUNS:
        _RUNS[key] = run(case, tmp / f"{len(_RUNS)}")
    return _RUNS[key]


def qualifying(tmp: Path) -> dict[str, list]:
    """Which memory cases each check can judge, decided by running them (a case that cannot be
    checked is not collected, rather than skipped): 'command' = the report patched a launch
    command (from --launch or the log) for the first option; 'diag_mem' = and the GPU is known
    (nvidia-smi or the OOM line's capacity); 'model' = and the memory model can judge the
    command before the fix (it knows the model and the free memory)."""
    out: dict[str, list] = {"command": [], "diag_mem": [], "model": []}
    for r, c in memory_cases():
        ch = checked(r, c, tmp)
        if ch.rule != r.id or not ch.after:
            continue
        out["command"].append((r, c))
        if ch.gpu:
            out["diag_mem"].append((r, c))
        if model_budget(ch, ch.before, ch.before).fits is not None:
            out["model"].append((r, c))
    return out


@dataclass
class Checked:
    rule: str
    case: str
    before: list[str]
    after: list[str]
    changes: list[str]
    version: str | None           # the case's version (flags check), else what the log proved
    sizing_version: str | None    # the version whose sizing rules the explainer used
    gpu: str | None               # for diag mem: a total in MiB
    facts: object = None
    report: object = None
    notes: list[str] = field(default_factory=list)


def run(case, tmp: Path) -> Checked:
    tmp.mkdir(parents=True, exist_ok=True)
    log = tmp / "case.log"
    log.write_text(case.log, encoding="utf-8")
    smi = []
    if case.smi:
        (tmp / "case-smi.txt").write_text(case.smi, encoding="utf-8")
        smi = [str(tmp / "case-smi.txt")]
    opts = Options(sglang_version=case.sglang_version, launch=case.launch, model_config=case.model_config, strict=True)
    report, facts = analyze_with_facts([str(log)], smi, opts)
    top = report.findings[0]
    first = min((f.option for f in top.fix), default=None)
    entry = next((e for e in top.commands if e["option"] == first), None)
    total = next((g.get("memory_total_mib") for g in facts.gpus if g.get("memory_total_mib")), None)
    if total is None and facts.gpu_total_gib:
        total = int(round(facts.gpu_total_gib * 1024))
    version = case.sglang_version or facts.version.exact
    return Checked(top.rule, case.name, (entry or {}).get("before") or [], (entry or {}).get("after") or [],
                   (entry or {}).get("changes") or [], version, top.memory.get("sglang_rules") or version,
                   str(total) if total else None, facts, report)


def argv(lines: list[str]) -> list[str]:
    return split_command("\n".join(lines))


def diag_mem(ch: Checked, lines: list[str], model_config: str | None) -> tuple[int, dict | str]:
    out, code = mem_cmd.run(argv(lines), ch.gpu, model_config, ch.sizing_version, fmt="json")
    return code, (json.loads(out) if code != 2 else out)


def model_budget(ch: Checked, lines: list[str], base_lines: list[str]) -> M.Budget:
    """The memory model on `lines` with the log's numbers that stay valid against `base_lines`
    (the command the log was produced by)."""
    cat = F.for_version(ch.sizing_version)
    new, base = parse_launch(argv(lines), cat), parse_launch(argv(base_lines), cat)
    changed = {k for k in set(new.flags) | set(base.flags) if new.flags.get(k) != base.flags.get(k)}
    model = ch.facts.model
    if "--model-path" in changed:
        model = K.find_model(str(new.flags["--model-path"]))
    facts = dataclasses.replace(ch.facts, flags=dict(new.flags), env=dict(new.env), model=model)
    dep = EM.deployment(facts, ch.sizing_version)
    R = EM.readings(ch.facts)
    keep = {"pre_load_free_gib": R.pre_load_free_gib, "oom_total_gib": R.oom_total_gib}
    if not changed & set(RESHAPING):
        keep.update(after_load_free_gib=R.after_load_free_gib, weights_gib=R.weights_gib,
                    draft_weights_gib=R.draft_weights_gib, kv_dtype=R.kv_dtype, context_len=R.context_len,
                    kv_bytes_per_token=R.kv_bytes_per_token, mamba_bytes_per_slot=R.mamba_bytes_per_slot)
    return M.budget(dep, M.Readings(**{k: v for k, v in keep.items() if v is not None}))


def lint(ch: Checked, lines: list[str]) -> list[dict]:
    return lint_command(argv(lines), ch.version)["problems"]
