"""python -m diag.messages show ID | family ID | search WORDS | match TEXT | stats

A terminal view of the message catalog, for people (the diag CLI proper is elsewhere)."""
from __future__ import annotations

import sys

USAGE = ("usage: python -m diag.messages show ID | family ID | search WORDS... | match TEXT | stats\n"
         "  ID: a message id (m-...), a family id (sgl-...), a review name, or a hand entry's id")


def _ranges(versions: list[str], order: list[str]) -> str:
    """['0.5.1', '0.5.2', '0.5.3', '0.5.9'] -> '0.5.1–0.5.3, 0.5.9' over the ordered releases."""
    if not order:
        return ", ".join(versions)
    idx = sorted(order.index(v) for v in versions if v in order)
    out, start, prev = [], None, None
    for i in idx:
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            out.append((start, prev))
            start = prev = i
    if start is not None:
        out.append((start, prev))
    return ", ".join(order[a] if a == b else f"{order[a]}–{order[b]}" for a, b in out)


def _show_entry(cat, e, out) -> None:
    order = cat.releases(e.component)
    out.write(f"{e.id}  family {e.family}" + (f" ({e.name})" if e.name else "") + "\n")
    out.write(f"  {e.template if e.template is not None else 're: ' + e.regex}\n")
    out.write(f"  component {e.component}; {e.kind} {e.level}; category {e.category or '-'}; event {e.event}"
              f"{' (automatic)' if e.auto else ''}; {'specific' if e.specific else 'not matched (too generic)'}\n")
    if e.versions:
        out.write(f"  versions: {_ranges(cat.versions_of(e), order)}\n")
    if e.origin == "extracted":
        for loc in cat.locations(e):
            names = f"; reads {', '.join(loc['names'])}" if loc["names"] else ""
            out.write(f"  at {loc['module']}:{loc['function']} ({loc['kind']} {loc['level']}) in "
                      f"{_ranges(loc['versions'], order)}{names}\n")
    elif e.module:
        out.write(f"  source: {e.module}\n")
    if e.meaning:
        out.write(f"  meaning: {e.meaning}\n")
    if e.action:
        out.write(f"  action: {e.action}\n")


def main(argv: list[str] | None = None, out=None) -> int:
    out = out or sys.stdout
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        out.write(USAGE + "\n")
        return 0 if args else 2
    from . import Catalog, CatalogError
    try:
        cat = Catalog.open()
    except CatalogError as e:
        sys.stderr.write(f"error: {e}\n")
        return 1
    cmd, rest = args[0], args[1:]
    if cmd == "stats":
        meta = cat.meta()
        for comp, c in meta["counts"]["components"].items():
            out.write(f"{comp}: {c['scanned']}/{c['releases']} releases, {c['messages']} messages, "
                      f"{c['failure_messages']} failure messages ({c['specific_failure_messages']} specific), "
                      f"{c['families']} families; failed releases: {', '.join(c['failed']) or 'none'}\n")
        out.write(f"hand messages {meta['counts']['hand_messages']}, reviewed families "
                  f"{meta['counts']['reviewed_families']}; {meta.get('built_from', '')}\n")
        return 0
    if not rest:
        sys.stderr.write(f"error: '{cmd}' needs an argument\n{USAGE}\n")
        return 2
    if cmd in ("show", "family"):
        key = rest[0]
        e = cat.get(key) if cmd == "show" else None
        if e is not None:
            _show_entry(cat, e, out)
            return 0
        info = cat.family_info(key)
        if info is None:
            sys.stderr.write(f"error: no message or family '{key}' in the catalog\n")
            return 1
        order = cat.releases(info["component"])
        out.write(f"family {info['id']}" + (f" ({info['name']})" if info["name"] else "") +
                  f": {info['category'] or '-'} / {info['event']}"
                  f"{'' if info['reviewed'] else ' (automatic)'}; versions {_ranges(info['versions'], order)}\n")
        for e in cat.family(key):
            _show_entry(cat, e, out)
        return 0
    if cmd == "search":
        hits = cat.search(rest)
        for e in hits:
            out.write(f"{e.id}  {e.family}  {e.category or '-':24} {(e.template or e.regex)[:110]}\n")
        if not hits:
            sys.stderr.write("no message has all of these words\n")
            return 1
        return 0
    if cmd == "match":
        text = " ".join(rest)
        ms = cat.match_all(text)
        if not ms:
            sys.stderr.write("no catalog message matches\n")
            return 1
        for m in ms:
            out.write(f"{m.id}  {m.family}  {m.category or '-'} / {m.event}  score {m.score}  fields {m.fields}\n")
        return 0
    sys.stderr.write(f"error: unknown command '{cmd}'\n{USAGE}\n")
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:          # `... | head`
        sys.stderr.close()
        sys.exit(0)
