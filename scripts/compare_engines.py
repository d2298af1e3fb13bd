#!/usr/bin/env python3
"""Compare the v1 engine (rules/*.toml + diag/remedies) with the v2 engine (rules/<family>/*.toml)
on every labelled log under tests/data: top category and fix flags, and which matches the label.

    python scripts/compare_engines.py [--only SGL-CFG-] [--show-same]

Used while rules move to v2; goes away with v1.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from diag.analyze import Options, analyze  # noqa: E402


def label_flags(label: dict) -> set[str]:
    out = set()
    for item in label.get("fix_flags") or []:
        m = re.search(r"(--[A-Za-z0-9][A-Za-z0-9-]*)", item) or re.search(r"\b([A-Z][A-Z0-9_]{3,})=", item)
        if m:
            out.add(m.group(1))
    return out


def summary(report) -> tuple[str, str, set[str]]:
    if not report.findings:
        return "-", report.status, set()
    f = report.findings[0]
    return f.rule, f.category, {x.flag or x.env or x.external_env for x in f.fix}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="", help="only logs where either engine's top rule starts with this")
    ap.add_argument("--show-same", action="store_true")
    args = ap.parse_args()
    rows = []
    for log in sorted((ROOT / "tests" / "data").glob("*/*.log")):
        lab = log.with_suffix(".json")
        if not lab.exists():
            continue
        label = json.loads(lab.read_text())
        if "category" not in label:
            continue
        want, want_fix = label["category"], label_flags(label)
        accept = {want, *(label.get("accept") or [])}
        r1 = summary(analyze([str(log)]))
        r2 = summary(analyze([str(log)], options=Options(engine="v2")))
        if args.only and not (r1[0].startswith(args.only) or r2[0].startswith(args.only)):
            continue
        same = r1[1] == r2[1] and r1[2] == r2[2]
        rows.append((log, want, accept, want_fix, r1, r2, same))
    v1 = sum(r[4][1] in r[2] for r in rows)
    v2 = sum(r[5][1] in r[2] for r in rows)
    f1 = sum(len(r[3] & r[4][2]) for r in rows)
    f2 = sum(len(r[3] & r[5][2]) for r in rows)
    for log, want, accept, want_fix, a, b, same in rows:
        if same and not args.show_same:
            continue
        mark = "=" if same else ("+" if b[1] in accept and a[1] not in accept else "-" if a[1] in accept and b[1] not in accept else "~")
        print(f"{mark} {log.parent.name}/{log.name[:48]:<48} want {want:<22} v1 {a[0]:<12}{a[1]:<22} v2 {b[0]:<12}{b[1]:<22}"
              f" fix v1 {sorted(a[2] & want_fix)} v2 {sorted(b[2] & want_fix)} want {sorted(want_fix)}")
    print(f"logs {len(rows)}: category right v1 {v1}, v2 {v2}; fix flags found v1 {f1}, v2 {f2}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
