"""diag rules list | show."""
from __future__ import annotations

from . import common as C
from .common import Format, typer


def register(app) -> None:
    rules_app = typer.Typer(no_args_is_help=True, help="The rules diag knows.")
    app.add_typer(rules_app, name="rules")

    @rules_app.command("list")
    def rules_list(fmt: Format = C.format_option()) -> None:
        """Every rule: id, category, severity, name."""
        C.check_format(fmt, (Format.text, Format.json), "rules list")
        from ..rules_v1 import load_rules
        rules = load_rules()
        if fmt is Format.json:
            from ..jsonout import dumps
            C.write_output(dumps([{"id": r.id, "name": r.name, "category": r.category, "severity": r.severity,
                                   "title": r.title} for r in rules]), None)
            return
        width = max(len(r.category) for r in rules)
        C.write_output("\n".join(f"{r.id:<16} {r.category:<{width}}  {r.severity:<8} {r.name}" for r in rules), None)

    @rules_app.command("show")
    def rules_show(rule_id: str = typer.Argument(..., help="A rule id (e.g. SGL-OOM-001) or name."),
                   fmt: Format = C.format_option()) -> None:
        """What a rule detects, why it happens, its signature, fix and examples."""
        C.check_format(fmt, (Format.text, Format.json), "rules show")
        from ..rules_v1 import load_rules
        rules = load_rules()
        rule = next((r for r in rules if rule_id.upper() == r.id or rule_id == r.name), None)
        if rule is None:
            import difflib
            close = difflib.get_close_matches(rule_id, [r.id for r in rules] + [r.name for r in rules], n=1, cutoff=0.6)
            C.fail(f"no rule {rule_id!r}" + (f" (did you mean {close[0]}?)" if close else " (see `diag rules list`)"))
        if fmt is Format.json:
            from ..jsonout import dumps
            C.write_output(dumps({"id": rule.id, "name": rule.name, "category": rule.category, "severity": rule.severity,
                                  "title": rule.title, "detects": rule.detects, "why": rule.why,
                                  "patterns": [p.regex.pattern for p in rule.lines], "examples": rule.examples}), None)
            return
        from ..render.text import rule_doc
        C.write_output(rule_doc(rule), None)
