"""diag rules list | show."""
from __future__ import annotations

from . import common as C
from .common import Format, typer


def register(app) -> None:
    rules_app = typer.Typer(no_args_is_help=True, help="The rules diag knows.")
    app.add_typer(rules_app, name="rules")

    @rules_app.command("list")
    def rules_list(fmt: Format = C.format_option()) -> None:
        """Every rule: id, category, severity, slug."""
        C.check_format(fmt, (Format.text, Format.json), "rules list")
        from ..rules.registry import registry
        rules = sorted(registry().rules, key=lambda r: r.id)
        if fmt is Format.json:
            from ..jsonout import dumps
            C.write_output(dumps([{"id": r.id, "slug": r.slug, "category": r.category, "severity": r.severity,
                                   "role": r.role, "title": r.title, "file": r.path} for r in rules]), None)
            return
        width = max(len(r.category) for r in rules)
        C.write_output("\n".join(f"{r.id:<14} {r.category:<{width}}  {r.severity:<8} {r.slug}" for r in rules), None)

    @rules_app.command("show")
    def rules_show(rule_id: str = typer.Argument(..., help="A rule id (e.g. SGL-OOM-001) or name."),
                   fmt: Format = C.format_option()) -> None:
        """Everything a rule's finding can say: what it matches (catalog messages, events, conditions),
        its texts, every fix with its direction, and its cases."""
        C.check_format(fmt, (Format.text, Format.json), "rules show")
        from ..rules import doc
        from ..rules.registry import registry
        reg = registry()
        rule = reg.get(rule_id)
        if rule is None:
            import difflib
            names = [r.id for r in reg.rules] + [r.slug for r in reg.rules]
            close = difflib.get_close_matches(rule_id, names, n=1, cutoff=0.6)
            C.fail(f"no rule {rule_id!r}" + (f" (did you mean {close[0]}?)" if close else " (see `diag rules list`)"))
        if fmt is Format.json:
            from ..jsonout import dumps
            C.write_output(dumps(doc.describe(reg, rule)), None)
            return
        C.write_output(doc.text(reg, rule), None)
