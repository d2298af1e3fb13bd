"""diag serve: the chat-ops bot and HTTP API (needs the serve extra)."""
from __future__ import annotations

from typing import Optional

from .common import typer


def register(app) -> None:
    @app.command()
    def serve(
        host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0: all interfaces)."),
        port: int = typer.Option(8787, "--port", help="Port to listen on."),
        config: Optional[str] = typer.Option(None, "--config", help="A TOML config file (default: $DIAG_CONFIG); the environment overrides it."),
    ) -> None:
        """Run the chat-ops bot and HTTP API: Slack, Mattermost, POST /v1/analyze (needs the serve extra)."""
        from ..serve import main as serve_main
        raise typer.Exit(serve_main(host, port, config))
