"""diag version (and diag --version)."""
from __future__ import annotations

from .common import typer


def version_line() -> str:
    from .. import __version__
    from ..flags import catalog_versions
    vs = catalog_versions()
    return f"diag {__version__} (SGLang flag catalogs {vs[0]} … {vs[-1]}, {len(vs)} versions)"


def register(app) -> None:
    @app.command()
    def version() -> None:
        """Print diag's version and the SGLang versions it knows."""
        typer.echo(version_line())
