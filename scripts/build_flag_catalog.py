#!/usr/bin/env python3
"""Build diag/data/flags.json from the per-version flag files in ../shared/reference/flags.

Developer tool, run by hand when the reference catalog changes; the product and the
tests only read the bundled output. Each flag keeps one definition per run of versions
in which it is unchanged, so the bundle stays small and loads fast.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "reference" / "flags"
OUT = ROOT / "diag" / "data" / "flags.json"

SWITCH_ACTIONS = {"store_true", "store_false", "DeprecatedStoreTrueAction", "DeprecatedStoreConstAction",
                  "BooleanOptionalAction"}


def vkey(v: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.]|post", v) if p)


def definition(e: dict) -> dict:
    action = e.get("action")
    d = {
        "type": e.get("type"),
        "default": e.get("default"),
        "choices": e.get("choices"),
        "nargs": e.get("nargs"),
        "switch": action in SWITCH_ACTIONS,
        "negatable": action == "BooleanOptionalAction",
        "aliases": e.get("aliases") or [],
        "deprecated": bool(e.get("deprecated")),
        "replaced_by": e.get("replaced_by"),
        "dest": e.get("dest"),
    }
    if e.get("fallback") is not None:
        d["fallback"] = e["fallback"]
    return {k: v for k, v in d.items() if v not in (None, [], False) or k in ("switch",)}


def main() -> None:
    files = sorted(SRC.glob("sglang-*.json"), key=lambda p: vkey(p.stem[len("sglang-"):]))
    versions = [p.stem[len("sglang-"):] for p in files]
    flags: dict[str, dict] = {}
    envs: dict[str, dict] = {}
    for vi, path in enumerate(files):
        for e in json.loads(path.read_text()):
            table = envs if e.get("env") else flags
            name = e["flag"]
            entry = table.setdefault(name, {"help": "", "defs": []})
            if e.get("help"):
                entry["help"] = e["help"]  # newest wins: files are read oldest first
            d = definition(e) if not e.get("env") else {"type": e.get("type"), "default": e.get("default")}
            last = entry["defs"][-1] if entry["defs"] else None
            if last and last["def"] == d and last["v"][-1] == vi - 1:
                last["v"].append(vi)
            else:
                entry["defs"].append({"v": [vi], "def": d})
    for table in (flags, envs):
        for entry in table.values():
            for d in entry["defs"]:
                d["v"] = [d["v"][0], d["v"][-1]]  # inclusive index range
    out = {"source": "SGLang flag catalog (reference/flags), one entry per flag and version range",
           "versions": versions, "flags": flags, "env": envs}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, separators=(",", ":"), sort_keys=True))
    print(f"{OUT}: {len(versions)} versions, {len(flags)} flags, {len(envs)} env vars, {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main()
