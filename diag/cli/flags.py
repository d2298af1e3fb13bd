"""diag flags check -- <launch command>."""
from __future__ import annotations

from typing import List, Optional

from . import common as C
from .common import Format, typer

OTHER_SERVERS = {"vllm": "vLLM", "trtllm-serve": "TensorRT-LLM", "text-generation-launcher": "TGI", "ollama": "Ollama",
                 "llama-server": "llama.cpp", "lmdeploy": "LMDeploy"}


def register(app) -> None:
    flags_app = typer.Typer(no_args_is_help=True, help="SGLang flags per version.")
    app.add_typer(flags_app, name="flags")

    @flags_app.command("check")
    def flags_check(
        argv: Optional[List[str]] = typer.Argument(None, help="The launch command, after --."),
        sglang_version: Optional[str] = typer.Option(None, "--sglang-version", help="Check against this SGLang version (default: newest known)."),
        model: Optional[str] = typer.Option(None, "--model", help="Model id or path, when the command does not name one."),
        fmt: Format = C.format_option(),
    ) -> None:
        """Lint a launch command: diag flags check -- python -m sglang.launch_server ..."""
        C.check_format(fmt, (Format.text, Format.json), "flags check")
        argv = list(argv or [])
        if not argv:
            C.fail("give the launch command after `--`, e.g. diag flags check -- python -m sglang.launch_server --model-path ...")
        if len(argv) == 1 and " " in argv[0].strip():
            from ..launch import split_command
            argv = split_command(argv[0])
        other = not_sglang(argv)
        if other:
            C.fail(f"this is a {other} command, not an SGLang one (diag checks `python -m sglang.launch_server …` or `sglang serve …`)")
        version = C.check_sglang_version(sglang_version or C.settings().sglang_version)
        from ..lint import lint_command, render_lint
        result = lint_command(argv, version, model)
        C.write_output(render_lint(result, fmt.value), None)
        raise typer.Exit(1 if any(p["severity"] in ("error", "critical") for p in result["problems"]) else 0)


def not_sglang(argv: list[str]) -> str | None:
    """The name of the other server a command launches, if it is not SGLang."""
    from ..launch import find_entry
    if find_entry(argv) >= 0:
        return None
    for tok in argv[:6]:
        base = tok.rsplit("/", 1)[-1]
        for name, label in OTHER_SERVERS.items():
            if base == name or base.startswith(name + ".") or tok in (f"{name}.entrypoints.openai.api_server",):
                return label
        if base.startswith("vllm."):
            return "vLLM"
    return None
