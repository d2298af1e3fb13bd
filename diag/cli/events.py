"""diag events: what diag sees in a log, one JSON event per line."""
from __future__ import annotations

import sys
from typing import List

from . import common as C
from .common import Format, typer


def register(app) -> None:
    @app.command()
    def events(
        file: str = typer.Argument("-", help="A server log ('-' or nothing: standard input)."),
        kinds: List[str] = typer.Option([], "--kind", "-k", help="Only these event kinds (milestone, exception, oom, batch, plain, …)."),
        fmt: Format = C.format_option(Format.json),
    ) -> None:
        """What diag sees in a log: one JSON event per line (after chat-paste clean-up), streamed."""
        C.check_format(fmt, (Format.json,), "events")
        from ..clean import Cleaner
        from ..jsonout import dumps
        from ..parse.sglang import iter_events
        from ..read import InputError, iter_lines, open_input
        if file == "-" and sys.stdin is not None and not sys.stdin.closed and sys.stdin.isatty():
            C.fail("give a server log (or pipe one in: … | diag events)")
        try:
            opened = open_input(file)
        except InputError as exc:
            C.fail(str(exc))
        out = sys.stdout
        if out is None:
            raise C.OutputError("standard output is closed")
        for ev in iter_events(Cleaner().run(iter_lines(opened))):
            if kinds and ev.kind not in kinds:
                continue
            data = {k: v for k, v in ev.data.items() if k != "oom_event"}
            if "frames" in data:
                data["frames"] = [f.short for f in data["frames"]]
            out.write(dumps({"line": ev.line, "kind": ev.kind, "rank": ev.rank, "ts": ev.ts, "text": ev.text,
                             "data": data}, indent=None) + "\n")
        for n in opened.notes:
            C.verbose(f"{opened.name}: {n}")
