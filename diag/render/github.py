"""GitHub Actions workflow commands: `::error file=…,line=…,title=…::message`, one per finding."""
from __future__ import annotations

LEVEL = {"critical": "error", "error": "error", "warning": "warning", "info": "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render(report) -> str:
    lines = []
    for f in report.findings:
        props = []
        ev = next((e for e in f.evidence if 0 <= e.input < len(report.inputs) and e.line and e.line > 0), None)
        if ev is not None and report.inputs[ev.input].path != "<stdin>":
            props.append(f"file={_prop(report.inputs[ev.input].path)}")
            props.append(f"line={int(ev.line)}")
        props.append(f"title={_prop(f'{f.rule} {f.category}')}")
        lines.append(f"::{LEVEL.get(f.severity, 'warning')} {','.join(props)}::{_data(f'{f.title}. {f.summary}')}")
    if not lines:
        lines.append(f"::notice title=diag::{_data('No findings (status: ' + report.status + ')')}")
    return "\n".join(lines)
