"""Write the fallback rules of rules/<family>/SGL-CAT-*.toml: one per category that reviewed
catalog messages carry, each with a top case made from one of those messages.

Run from the project root, twice (the cases are chosen with the rules loaded):

    PASS1=1 .venv/bin/python scripts/catalog_fallback_rules.py   # write every rule with a first example
    .venv/bin/python scripts/catalog_fallback_rules.py           # keep only examples where the rule leads

A category whose reviewed messages all have a specific rule gets no fallback rule (it could not
have a top case). The files are data: review their diff like any rule change.
"""
import collections
import os
import pathlib
import re
import tempfile

from diag.analyze import analyze
from diag.messages import Catalog
import diag.messages as M
c = Catalog.open()
rows = c.db.execute(f"SELECT {M._ROW} FROM messages WHERE auto=0").fetchall()
by = collections.defaultdict(list)
for r in rows:
    e = c._entry(r)
    if e.category and "." in e.category and e.category not in ("runtime.other", "env.empty_log") and e.template:
        by[e.category].append(e)

TITLES = {
 "env.nccl": "Communication between the ranks failed (NCCL, gloo, P2P or the network)",
 "config.incompatible_flags": "The server refused a combination of settings that cannot be used together",
 "env.cuda_arch_driver": "The GPU, its driver or the CUDA/ROCm runtime does not match what this build needs",
 "env.import_error": "A package is missing, or was built against another torch/CUDA",
 "env.model_load": "The model's files could not be found, downloaded or read",
 "config.mamba_strategy": "The Mamba scheduler strategy does not fit the other settings",
 "config.invalid_value": "A setting's value is outside what this version accepts",
 "oom.runtime_decode": "The server ran out of KV or GPU memory while decoding",
 "env.host_memory": "Host memory (RAM, pinned or shared memory) ran out",
 "env.killed": "The process was killed from outside",
 "oom.kv_pool": "Too little GPU memory was left for the KV cache",
 "config.speculative": "The speculative-decoding settings do not work together",
 "env.gpu_fault": "The GPU itself is in an error state",
 "config.context_length": "A request or the context length exceeds what the model or pool allows",
 "oom.mamba_state": "The Mamba state pool does not fit",
 "env.port_in_use": "An address or port the server needs is taken",
 "oom.runtime_prefill": "The server ran out of GPU memory in a prefill batch",
 "runtime.watchdog_hang": "A scheduler stopped making progress and its watchdog fired",
 "env.http_proxy": "The server's own start-up request failed (a proxy can catch it)",
 "config.unknown_flag": "The server was given an argument it does not know",
 "oom.other_process": "Memory held elsewhere leaves too little on some GPUs",
 "oom.cuda_graph": "CUDA-graph capture failed",
 "config.context_length": "A request or the context length exceeds what the model or pool allows",
}
SEV = {"oom": "critical", "config": "error", "env": "error", "runtime": "error"}
SAMPLE = {"int": "3", "float": "1.5", "size": "2.00 GiB", "word": "x0", "text": "it failed", "hex": "0x1f"}

def render(t):
    def sub(m):
        name, typ = m.group(1), m.group(2)
        if typ:
            return SAMPLE.get(typ, "value")
        if re.search(r"len|size|num|count|rank|port|timeout|tokens|memory|ratio|bs|id$", name):
            return "4096"
        return name
    return re.sub(r"\{(\w+)(?::(\w+))?\}", sub, t.split("\n")[0])

n = 0
for cat in sorted(by):
    if cat not in TITLES:
        print("skip", cat); continue
    example = None
    for e in sorted(by[cat], key=lambda e: (e.origin != "hand", -len(e.template or ""))):
        line = render(e.template)
        if len(line) < 25:
            continue
        m = c.match(line)
        if m is None or m.category != cat:
            continue
        ent = c.get(m.id)
        if ent is None or c.reviewed_category(m.id) != cat or (ent.level or "").lower() in ("info", "debug", "warning", "print"):
            continue
        fd, tmp = tempfile.mkstemp(suffix=".log"); os.write(fd, (line + "\n").encode()); os.close(fd)
        rep = analyze([tmp]); os.unlink(tmp)
        if os.environ.get("PASS1") is None and (not rep.findings or rep.findings[0].category != cat or not rep.findings[0].rule.startswith("SGL-CAT")):
            continue
        example = (line, m)
        break
    rid = f"SGL-CAT-{sorted(TITLES).index(cat) + 1:03d}"
    slug = "known-" + cat.replace(".", "-").replace("_", "-")
    fam = cat.split(".")[0]
    if example is None:
        pathlib.Path(f"rules/{fam}/{rid}-{slug}.toml").unlink(missing_ok=True)
        print("no example", cat); continue
    line, m = example
    title = TITLES[cat]
    fam = cat.split(".")[0]
    text = f'''id = "{rid}"
slug = "{slug}"
category = "{cat}"
severity = "{SEV[fam]}"
priority = 25
title = "{title}"
summary = """[[{{known.meaning}} ]]The line is {{known.component}}'s message '{{known.message}}', which diag's message catalog files under {cat} by review. \\
diag has no rule of its own for it, so this names the kind of failure the message reports, not the cause behind it."""
detects = "A failure message that diag's message catalog knows by review (a hand-list entry for torch, CUDA, NCCL, the OS and the other components, or a reviewed SGLang family) and files under {cat}, when no more specific rule explains the log."
why = """The catalog records, for every message SGLang and the components around it print, what kind of failure it reports; a person reviewed the entries this rule reads. Without a rule of its own for the message, that kind is what diag can say with reason: where to look, not yet why."""
fix_safety = "—"
evidence = ["known.event"]

[match]
where = [{{fact = "known.category", eq = "{cat}"}}]
fallback = true

[confidence]
base = 0.5
generic = true

[[fix_other]]
text = "{{known.action}}"
when = [{{fact = "known.action", present = true}}]
[[fix_other]]
text = "Search the issues of SGLang and of the component that printed the message ({{known.component}}) for it; include the full log, the launch command and the versions when reporting."

[[case]]
name = "a reviewed message of this kind ({m.id})"
log = \'\'\'
{line}
\'\'\'
[case.want]
category = "{cat}"
confidence_below = 0.61
evidence = [1]
'''
    open(f"rules/{fam}/{rid}-{slug}.toml", "w").write(text)
    print(rid, cat, "|", line[:90], "|", m.id)
