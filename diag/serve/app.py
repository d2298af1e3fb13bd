"""The ASGI application: routes, limits, the worker pool's life cycle.

    POST /slack/events   Slack: events, slash commands and shortcuts (Bolt's path)
    POST /mattermost     Mattermost: outgoing webhook or slash command
    POST /v1/analyze     anything else: the log as the body, or multipart files
    GET  /healthz        liveness and readiness (the worker pool is up)
    GET  /metrics        Prometheus text
"""
from __future__ import annotations

import contextlib
import logging
import time

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .. import __version__
from . import analysis
from .dedup import Dedup
from .intake import BodyLimits, BodyTooLarge, SlowClient
from .metrics import Metrics
from .pool import AnalysisPool
from .settings import Settings

log = logging.getLogger("diag.serve")
CHANNELS = {"/slack/events": "slack", "/mattermost": "mattermost", "/v1/analyze": "http"}


class Service:
    """What the routes share: settings, the pool, metrics, the de-duplication store, and the
    HTTP client for the chat platforms' files."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.pool = AnalysisPool(settings.worker_count(), settings.queue, settings.time_limit)
        self.metrics = Metrics(queue_depth=lambda: self.pool.pending)
        self.dedup = Dedup(settings.dedup_seconds)
        self.http = None

    async def start(self) -> None:
        import httpx
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(self.settings.download_timeout, connect=10),
                                      trust_env=False, follow_redirects=False)
        await self.pool.start()
        log.info("diag serve: %d workers, queue %d, limit %s per request", self.pool.workers, self.settings.queue,
                 analysis.human_bytes(self.settings.max_bytes))

    async def stop(self) -> None:
        await self.pool.close()
        if self.http is not None:
            await self.http.aclose()

    async def analyse(self, job: analysis.Job) -> analysis.Result:
        """Run a job in the pool (Busy, TimedOut, WorkerFailed pass through) and count it."""
        started = time.monotonic()
        try:
            result = await self.pool.run(job)
        finally:
            self.metrics.analysis.observe(time.monotonic() - started)
        for category in result.categories:
            self.metrics.findings.labels(category).inc()
        return result

    async def analyse_for_chat(self, job: analysis.Job) -> tuple[analysis.Result | None, str, str]:
        """For a chat reply: (result, outcome, "") or (None, outcome, a polite one-line message)."""
        from .pool import Busy, TimedOut, WorkerFailed
        try:
            result = await self.analyse(job)
        except Busy as exc:
            self.metrics.rejections.labels("busy").inc()
            return None, "busy", f"⏳ I am busy with other logs right now; try again in {exc.retry_after} s."
        except TimedOut:
            return None, "timeout", (f"⌛ This log took longer than {self.settings.time_limit:g} s to analyse, so I stopped. "
                                     "Run `diag analyze` on it locally, or send its last part.")
        except WorkerFailed:
            return None, "error", "⚠️ The analysis stopped unexpectedly; please try again."
        if result.status == "unreadable":
            return None, "unreadable", f"⚠️ I could not read that: {result.error}."
        if result.status == "error":
            return None, "error", analysis.INTERNAL_REPLY
        return result, "answered", ""

    def limit_for(self, path: str) -> int:
        return self.settings.max_bytes if path == "/v1/analyze" else self.settings.chat_max_bytes

    def count_rejection(self, path: str, reason: str) -> None:
        self.metrics.reject(CHANNELS.get(path, "other"), reason)


def service_of(request: Request) -> Service:
    return request.app.state.service


async def healthz(request: Request) -> Response:
    svc = service_of(request)
    ok = svc.pool.running
    return JSONResponse({"status": "ok" if ok else "starting", "version": __version__, "workers": svc.pool.workers,
                         "queued": svc.pool.pending, "capacity": svc.pool.capacity,
                         "slack": svc.settings.slack_enabled, "mattermost": svc.settings.mattermost_enabled},
                        status_code=200 if ok else 503)


async def metrics(request: Request) -> Response:
    body, content_type = service_of(request).metrics.render()
    return Response(body, media_type=content_type)


async def internal_error(request: Request, exc: Exception) -> Response:
    """Anything a handler did not catch: a clean answer with the contract's meaning (nothing
    concluded, exit code 3), the exception's type in the service's log, never its text (it may
    quote the input). A chat endpoint gets a polite reply in its own shape."""
    log.error("internal error answering %s: %s", request.url.path, type(exc).__name__)   # counted by the endpoint
    if request.url.path == "/mattermost":
        return JSONResponse({"text": analysis.INTERNAL_REPLY, "response_type": "ephemeral"}, status_code=200)
    return JSONResponse({"error": f"internal error ({type(exc).__name__}); nothing concluded", "exit_code": 3},
                        status_code=500, headers={"X-Diag-Exit-Code": "3"})


async def too_large(request: Request, exc: BodyTooLarge) -> Response:
    service_of(request).count_rejection(request.url.path, "too_large")
    return JSONResponse({"error": str(exc), "exit_code": 2}, status_code=413, headers={"Connection": "close"})


async def slow_client(request: Request, exc: SlowClient) -> Response:
    service_of(request).count_rejection(request.url.path, "slow_client")
    return JSONResponse({"error": str(exc), "exit_code": 2}, status_code=408, headers={"Connection": "close"})


def create_app(settings: Settings) -> Starlette:
    from . import http_api, mattermost, slack

    service = Service(settings)
    routes = [Route("/healthz", healthz, methods=["GET"]), Route("/metrics", metrics, methods=["GET"]),
              Route("/v1/analyze", http_api.analyze, methods=["POST"]),
              Route("/slack/events", slack.endpoint(service), methods=["POST"]),
              Route("/mattermost", mattermost.endpoint, methods=["POST"])]

    @contextlib.asynccontextmanager
    async def lifespan(app):
        await service.start()
        try:
            yield
        finally:
            await service.stop()

    app = Starlette(routes=routes, lifespan=lifespan,
                    middleware=[Middleware(BodyLimits, limit_for=service.limit_for, deadline=settings.body_timeout,
                                           idle=settings.idle_timeout, on_reject=service.count_rejection)],
                    exception_handlers={BodyTooLarge: too_large, SlowClient: slow_client, Exception: internal_error})
    app.state.service = service
    return app
