"""POST /v1/analyze: for alerting pipelines, CI jobs, web forms.

The log is the request body (text, or gzip/xz/bzip2), or multipart/form-data files (a part
named `smi` is read as an nvidia-smi snapshot; other parts' kinds are detected). Query:
`format` json|markdown|slack|slack-blocks|html (json), `fail_on` (error), `sglang_version`,
`launch`, `name` (what a raw body is called in the report), `redact=false` (only where the
operator allows it). Statuses: 200 analysed (`exit_code` in the JSON and X-Diag-Exit-Code
keep the CLI's meaning: 0 clean, 1 findings, 3 inconclusive), 400 bad request, 401 bad
token, 408 body too slow, 413 too large, 422 unreadable input (exit code 2), 503 busy (with
Retry-After), 504 over the time limit, 500 internal error. Every answer's exit code is one of
the report contract's four: where nothing was concluded (busy, over the time limit, an
internal error) it is 3, as the CLI says after an internal error; an error answer is
`{"error": one line, "exit_code"}` with X-Diag-Exit-Code too, never the input's text.
"""
from __future__ import annotations

import hmac
import re
import time

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response


from .analysis import FAIL_ON, FORMATS, NOTHING_CONCLUDED, Job, Spool, TooLarge
from .app import service_of
from .intake import BodyTooLarge, SlowClient
from .pool import Busy, TimedOut, WorkerFailed

MEDIA = {"json": "application/json", "slack-blocks": "application/json", "markdown": "text/markdown; charset=utf-8",
         "slack": "text/plain; charset=utf-8", "html": "text/html; charset=utf-8"}
VERSION = re.compile(r"^[\w.+-]{1,40}$")
TEXT_FIELDS = ("log", "text", "paste")
CHUNK = 1024 * 1024


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def _error(status: int, message: str, code: int = 2, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "exit_code": code}, status_code=status,
                        headers={"X-Diag-Exit-Code": str(code), **(headers or {})})


def _authorised(request: Request, tokens: list[str]) -> bool:
    if not tokens:
        return True
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not given:
        return False
    return any(hmac.compare_digest(given.strip().encode(), t.encode()) for t in tokens)


def _options(request: Request, svc) -> dict:
    q = request.query_params
    fmt = q.get("format", "json")
    if fmt not in FORMATS:
        raise BadRequest(f"format must be one of {', '.join(FORMATS)}")
    fail_on = q.get("fail_on", "error")
    if fail_on not in FAIL_ON:
        raise BadRequest(f"fail_on must be one of {', '.join(FAIL_ON)}")
    version = q.get("sglang_version") or svc.settings.sglang_version or None
    if version and not VERSION.match(version):
        raise BadRequest("sglang_version is not a version number")
    launch = q.get("launch")
    if launch and len(launch) > 16384:
        raise BadRequest("launch is longer than 16,384 characters")
    redact = q.get("redact", "true").lower() not in ("false", "0", "no", "off")
    if not redact and not svc.settings.allow_unredacted:
        raise BadRequest("unredacted output is turned off on this server (DIAG_ALLOW_UNREDACTED)", 403)
    return {"formats": (fmt,), "fail_on": fail_on, "sglang_version": version, "launch": launch, "redact": redact}


async def _read_inputs(request: Request, spool: Spool) -> None:
    ctype = request.headers.get("content-type", "")
    if ctype.startswith("multipart/form-data"):
        async with request.form(max_files=32, max_fields=64, max_part_size=CHUNK) as form:
            for key, value in form.multi_items():
                if isinstance(value, UploadFile):
                    out = spool.new(value.filename or key, "nvidia-smi" if key == "smi" else None)
                    try:
                        while chunk := await value.read(CHUNK):
                            out.write(chunk)
                    finally:
                        out.close()
                elif key in TEXT_FIELDS or key == "smi":
                    spool.add("paste.log" if key != "smi" else "nvidia-smi.txt", value.encode(),
                              "nvidia-smi" if key == "smi" else None)
        return
    # anything else is the log itself (curl --data-binary sends it as x-www-form-urlencoded)
    out = spool.new(request.query_params.get("name") or "paste.log")
    try:
        async for chunk in request.stream():
            out.write(chunk)
    finally:
        out.close()


async def analyze(request: Request) -> Response:
    svc = service_of(request)
    started = time.monotonic()
    outcome = "error"
    try:
        if not _authorised(request, svc.settings.api_tokens):
            outcome = None
            svc.metrics.reject("http", "token")
            return _error(401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})
        try:
            opts = _options(request, svc)
        except BadRequest as exc:
            outcome = "bad_request"
            return _error(exc.status, str(exc))
        with Spool(svc.settings.max_bytes) as spool:
            try:
                await _read_inputs(request, spool)
            except (BodyTooLarge, SlowClient):
                outcome = None  # answered and counted by the app's handlers
                raise
            except TooLarge as exc:
                outcome = None
                svc.metrics.reject("http", "too_large")
                return _error(413, str(exc))
            except BadRequest as exc:
                outcome = "bad_request"
                return _error(exc.status, str(exc))
            spool.drop_empty()
            if not spool.inputs:
                outcome = "empty"
                return _error(400, "no log in the request: send it as the body or as multipart files")
            job = Job(inputs=list(spool.inputs), **opts)
            try:
                result = await svc.analyse(job)
            except Busy as exc:
                outcome = "busy"
                svc.metrics.rejections.labels("busy").inc()
                return _error(503, f"busy: every worker and queue place is taken; retry in {exc.retry_after} s",
                              code=NOTHING_CONCLUDED, headers={"Retry-After": str(exc.retry_after)})
            except TimedOut:
                outcome = "timeout"
                return _error(504, f"the analysis took longer than {svc.settings.time_limit:g} s and was stopped",
                              code=NOTHING_CONCLUDED)
            except WorkerFailed:
                outcome = "error"
                return _error(500, "the analysis worker stopped unexpectedly; nothing concluded", code=NOTHING_CONCLUDED)
        if result.status == "unreadable":
            outcome = "unreadable"
            return _error(422, result.error or "unreadable input")
        if result.status == "error":
            outcome = "error"
            return _error(500, result.error or "internal error; nothing concluded", code=NOTHING_CONCLUDED)
        outcome = "answered"
        fmt = opts["formats"][0]
        return Response(result.outputs[fmt], media_type=MEDIA[fmt],
                        headers={"X-Diag-Exit-Code": str(result.exit_code), "X-Diag-Status": result.status})
    finally:
        if outcome:
            svc.metrics.requests.labels("http", outcome).inc()
        svc.metrics.latency.labels("http").observe(time.monotonic() - started)



