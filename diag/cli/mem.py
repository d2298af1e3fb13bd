"""diag mem -- <launch command>: the GPU memory budget."""
from __future__ import annotations

from typing import List, Optional

from . import common as C
from .common import Format, typer


def register(app) -> None:
    @app.command()
    def mem(
        argv: Optional[List[str]] = typer.Argument(None, help="The launch command, after --."),
        gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU model, e.g. 'H100', 'RTX PRO 6000'."),
        model_config: Optional[str] = typer.Option(None, "--model-config", help="A model's config.json (or its folder)."),
        sglang_version: Optional[str] = typer.Option(None, "--sglang-version", help="SGLang version (default: newest known)."),
        fmt: Format = C.format_option(),
    ) -> None:
        """GPU memory budget of a launch command: diag mem --gpu H100 -- python -m sglang.launch_server ..."""
        C.check_format(fmt, (Format.text, Format.json), "mem")
        version = C.check_sglang_version(sglang_version or C.settings().sglang_version)
        from ..mem_cmd import run
        text, code = run(list(argv or []), gpu, model_config, version, fmt.value)
        if code == 2:
            C.fail(text.strip().removeprefix("diag mem: "))
        C.write_output(text, None)
        raise typer.Exit(code)
