"""The texts of an explainer's fix option, from its library (rules/_fixes/<explainer>.toml).

Used by the engine for findings and by `diag mem` for its option list, so both say the same
thing about the same option.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import text as T
from .registry import libraries


@dataclass
class OptionText:
    title: str
    arithmetic: str
    notes: list[str]
    whys: dict[str, str]         # change name -> why
    directions: dict[str, str]   # change name -> direction


def option_text(explainer: str, kind: str, values: dict, lookup=None) -> OptionText:
    """Render an option's texts from its values (`opt.*`, `after.*`, `before.*`); `lookup` resolves
    any other path (facts, explainer values), or leaves it unknown."""
    library, tables = libraries()
    lib = library[f"{explainer}.{kind}"]
    extra = {"opt": values, "after": values.get("after") or {}, "before": values.get("before") or {}}

    def look(path: str):
        ns, _, rest = path.partition(".")
        if ns in extra:
            cur = extra[ns]
            for part in rest.split("."):
                if not isinstance(cur, dict) or cur.get(part) is None:
                    return T.MISSING
                cur = cur[part]
            return cur
        return lookup(path) if lookup else T.MISSING

    return OptionText(title=T.render(lib.title, look, tables), arithmetic=T.render(lib.arithmetic, look, tables),
                      notes=[t for t in (T.render(n, look, tables) for n in lib.notes) if t],
                      whys={c.name: T.render(c.why, look, tables) for c in lib.changes},
                      directions={c.name: c.direction for c in lib.changes})
