"""`diag serve`: the chat-ops bot (Slack, Mattermost) and HTTP API, an ASGI app under uvicorn.

    app.py        routes, limits, the pool's life cycle      settings.py   environment + config file
    slack.py      Slack Bolt listeners                       mattermost.py outgoing webhook, slash command
    http_api.py   POST /v1/analyze                           pool.py       bounded worker processes
    intake.py     body caps and deadlines, file downloads    dedup.py      recently answered failures
    metrics.py    Prometheus                                 analysis.py   the only caller of the pipeline

Needs the [serve] extra (`pip install 'diag[serve]'`); this module imports none of it at load.
"""
from __future__ import annotations

import os
import sys
from importlib.util import find_spec

REQUIRED = ("slack_bolt", "slack_sdk", "aiohttp", "starlette", "uvicorn", "multipart", "httpx", "prometheus_client",
            "pebble", "cachetools")


def missing_packages() -> list[str]:
    return [name for name in REQUIRED if find_spec(name) is None]


def main(host: str, port: int, config: str | None = None) -> int:
    """Run the service until interrupted; the exit status (2: a setting or a package is missing)."""
    missing = missing_packages()
    if missing:
        sys.stderr.write(f"diag: error: diag serve needs the serve extra (pip install 'diag[serve]'); missing: "
                         f"{', '.join(missing)}\n")
        return 2
    import logging

    import uvicorn

    from .app import create_app
    from .settings import SettingsError, load
    try:
        settings = load(config)
    except SettingsError as exc:
        sys.stderr.write(f"diag: error: {exc}\n")
        return 2
    import socket
    try:  # bound here, so a port in use is one line and no worker is started for nothing
        sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    except (OSError, OverflowError) as exc:
        reason = os.strerror(exc.errno) if getattr(exc, "errno", None) else str(exc)
        sys.stderr.write(f"diag: error: cannot listen on {host}:{port} ({reason})\n")
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("diag.serve.bolt").setLevel(logging.WARNING)
    server = uvicorn.Server(uvicorn.Config(create_app(settings), lifespan="on",
                                           limit_concurrency=settings.max_connections, timeout_keep_alive=5,
                                           server_header=False, log_level="info", access_log=True))
    log = logging.getLogger("diag.serve")
    log.info("listening on http://%s:%d (Slack %s, Mattermost %s)", host, port,
             "on" if settings.slack_enabled else "off", "on" if settings.mattermost_enabled else "off")
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return 0 if server.started else 2
