#!/usr/bin/env python3
"""List the mutants that survived a `mutmut run` (make mutate), grouped by file and function,
and flag the ones that change what a fix proposes: its direction or its value.

    .venv/bin/python scripts/mutants_report.py [--markdown OUT.md] [--fail-on-flagged]

Reads mutmut's own results (mutants/<file>.meta, written by `mutmut run`) and each survivor's
diff (`mutmut show`'s text, from mutmut's Python API). A survivor is flagged when the line it
changes decides a fix:
  direction  the words raise/lower/direction, or a comparison (<, <=, >, >=, ==, !=) that the
             mutant turned around, in code that chooses or checks a change;
  value      arithmetic, rounding, a numeric constant or a min/max on a line that computes a
             fix's value (fraction, tokens, tp, batch size, chunk, cap, _set(...)).
The flag is a reading of the diff, not a proof: a flagged survivor needs a test or a reason.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATUS = {0: "survived", 1: "killed", 3: "killed", 5: "no tests", 33: "no tests", 34: "skipped", 36: "timeout",
          37: "caught by type check", -24: "timeout", 24: "timeout", 152: "timeout", 255: "timeout",
          -11: "segfault", -9: "segfault", None: "not checked"}
DIRECTION_WORDS = re.compile(r"""["'](raise|lower)["']|\bdirection\b""")
COMPARISON = re.compile(r"(<=|>=|==|!=|(?<![<>=!-])<(?![<=])|(?<![<>=-])>(?![>=]))")
VALUE_CONTEXT = re.compile(r"fraction|mfs|tokens|\btp\b|_bs\b|\bbs\b|chunk|\bcap\b|_set\(|value|slots|context|need|margin"
                           r"|step|running|requests|gib|MIN_STEP|SEARCH_STEP|MARGIN", re.I)
VALUE_CHANGE = re.compile(r"[-+*/]|\bround\b|\bfloor\b|\bceil\b|\bmin\(|\bmax\(|\d")


def load_results(mutants: Path) -> dict[str, tuple[str, str]]:
    """{mutant name: (source file, status)} from every .meta file mutmut wrote."""
    out = {}
    for meta in sorted(mutants.rglob("*.py.meta")):
        data = json.loads(meta.read_text(encoding="utf-8"))
        src = str(meta.relative_to(mutants))[: -len(".meta")]
        for name, code in (data.get("exit_code_by_key") or {}).items():
            out[name] = (src, STATUS.get(code, "suspicious"))
    return out


def function_of(name: str) -> str:
    """diag.memory.options.x__lower_fraction__mutmut_3 -> _lower_fraction; xǁClassǁmeth -> Class.meth."""
    tail = name.rsplit(".", 1)[-1]
    tail = re.sub(r"__mutmut_\d+$", "", tail)
    if tail.startswith("xǁ"):
        return ".".join(p for p in tail[2:].split("ǁ") if p)
    return tail[2:] if tail.startswith("x_") else tail


def diff_of(name: str, src: str) -> str:
    """The mutant's diff, as `mutmut show` prints it (mutmut's API, run from the repository root;
    the path is the source file's, relative to mutants/)."""
    try:
        from mutmut.mutation.diff_apply import get_diff_for_mutant
    except ImportError:                 # another mutmut layout
        from mutmut.__main__ import get_diff_for_mutant
    try:
        return get_diff_for_mutant(name, path=src)
    except Exception as e:
        return f"(no diff: {type(e).__name__}: {e})"


def changed_lines(diff: str) -> tuple[list[str], list[str]]:
    old = [ln[1:] for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    new = [ln[1:] for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    return old, new


def classify(diff: str) -> list[str]:
    """'direction' and/or 'value' when the mutant changes what a fix proposes (see the module doc)."""
    old, new = changed_lines(diff)
    text_old, text_new = " ".join(old), " ".join(new)
    flags = []
    if DIRECTION_WORDS.search(text_old + text_new) or (
            COMPARISON.findall(text_old) != COMPARISON.findall(text_new)):
        flags.append("direction")
    if VALUE_CONTEXT.search(text_old + text_new) and (
            VALUE_CHANGE.findall(text_old) != VALUE_CHANGE.findall(text_new)):
        flags.append("value")
    return flags


def report(mutants: Path) -> tuple[str, int, dict]:
    results = load_results(mutants)
    counts: dict[str, int] = defaultdict(int)
    for _, status in results.values():
        counts[status] += 1
    survivors = sorted(n for n, (_, s) in results.items() if s == "survived")
    groups: dict[tuple[str, str], list[tuple[str, list[str], str]]] = defaultdict(list)
    flagged = 0
    for name in survivors:
        src = results[name][0]
        diff = diff_of(name, src)
        flags = classify(diff)
        flagged += bool(flags)
        groups[(src, function_of(name))].append((name, flags, diff))
    lines = ["# Surviving mutants", "",
             "checked: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + f" (of {len(results)})",
             f"survivors flagged as changing a fix's direction or value: {flagged}", ""]
    for (src, fn), items in sorted(groups.items()):
        lines.append(f"## {src} :: {fn} ({len(items)})")
        for name, flags, diff in items:
            old, new = changed_lines(diff)
            mark = f" **[{', '.join(flags)}]**" if flags else ""
            lines.append(f"- `{name.rsplit('__mutmut_', 1)[-1]}`{mark}: `{' '.join(o.strip() for o in old)[:140]}` "
                         f"→ `{' '.join(n.strip() for n in new)[:140]}`")
        lines.append("")
    return "\n".join(lines), flagged, dict(counts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mutants", default=str(ROOT / "mutants"), help="mutmut's work folder (default: ./mutants)")
    ap.add_argument("--markdown", help="also write the list to this file")
    ap.add_argument("--fail-on-flagged", action="store_true", help="exit 1 when a flagged mutant survived")
    a = ap.parse_args(argv)
    mutants = Path(a.mutants).resolve()
    if not mutants.is_dir():
        print(f"no {a.mutants}: run `make mutate` (mutmut run) first", file=sys.stderr)
        return 2
    import os
    markdown = Path(a.markdown).resolve() if a.markdown else None
    here = os.getcwd()
    os.chdir(mutants.parent)             # mutmut's API reads mutants/<file> relative to the working directory
    try:
        text, flagged, _ = report(mutants)
    finally:
        os.chdir(here)                   # main() is also called in-process (tests): leave the caller's folder
    print(text)
    if markdown:
        markdown.write_text(text + "\n", encoding="utf-8")
    return 1 if (a.fail_on_flagged and flagged) else 0


if __name__ == "__main__":
    sys.exit(main())
