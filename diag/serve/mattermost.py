"""Mattermost: an outgoing webhook (answered in the thread of the triggering post) or a slash
command (answered in the channel), both with the Markdown report.

The request's `token` must be one of DIAG_MATTERMOST_TOKENS (wrong or missing: 401, counted,
nothing analysed). Files attached to the post are read through the Mattermost API when
DIAG_MATTERMOST_URL and DIAG_MATTERMOST_BOT_TOKEN are set (the bot account needs read access
to the channel); otherwise only the post's text is analysed.
"""
from __future__ import annotations

import hmac
import json
import time
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse

from .analysis import Job, Spool, TooLarge
from .app import service_of
from .intake import DownloadError, download

USAGE = ("Paste a server log (a message, a code block or an attached text/.log/.gz file) after the trigger word "
         "or the slash command.")


def _payload(body: bytes, content_type: str) -> dict:
    if content_type.startswith("application/json"):
        data = json.loads(body or b"{}")
        return data if isinstance(data, dict) else {}
    return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}


def _token_ok(given: str, tokens: list[str]) -> bool:
    return bool(given) and any(hmac.compare_digest(given.encode(), t.encode()) for t in tokens)


def _text(p: dict) -> str:
    text = str(p.get("text") or "")
    trigger = str(p.get("trigger_word") or "")
    if trigger and text.startswith(trigger):
        text = text[len(trigger):]
    return text.strip()


def _file_ids(p: dict) -> list[str]:
    ids = p.get("file_ids") or []
    if isinstance(ids, str):
        ids = ids.split(",")
    return [str(i).strip() for i in ids if str(i).strip().isalnum()][:10]


async def endpoint(request: Request) -> JSONResponse:
    svc = service_of(request)
    s = svc.settings
    started = time.monotonic()
    outcome = "error"
    try:
        if not s.mattermost_enabled:
            outcome = None
            return JSONResponse({"error": "Mattermost is not configured on this server (DIAG_MATTERMOST_TOKENS)"},
                                status_code=404)
        body = await request.body()  # within the chat body cap (BodyLimits)
        try:
            p = _payload(body, request.headers.get("content-type", ""))
        except (ValueError, UnicodeDecodeError):
            p = {}
        if not _token_ok(str(p.get("token") or ""), s.mattermost_tokens):
            outcome = None
            svc.metrics.reject("mattermost", "token")
            return JSONResponse({"error": "missing or wrong token"}, status_code=401)
        command = bool(p.get("command"))
        team, channel = str(p.get("team_id") or ""), str(p.get("channel_id") or "")

        def reply(text: str) -> JSONResponse:
            return JSONResponse({"text": text, "response_type": "in_channel" if command else "comment"})

        if not s.allows(team, channel):
            outcome = None
            svc.metrics.reject("mattermost", "not_allowed")
            return JSONResponse({"text": "diag is not enabled in this channel.", "response_type": "ephemeral"})
        with Spool(s.max_bytes) as spool:
            files = _file_ids(p)
            try:
                text = _text(p)
                if text and (not files or len(text.splitlines()) >= 3):
                    spool.add("paste.log", text.encode("utf-8"))
                if files and s.mattermost_bot_token:
                    await _fetch(svc, files, spool)
            except TooLarge as exc:
                outcome = "too_large"
                svc.metrics.rejections.labels("too_large").inc()
                return reply(f"📦 That is more than I read at once ({exc}). Send the last part of the log, or gzip it.")
            except DownloadError as exc:
                outcome = "unreadable"
                return reply(f"⚠️ I could not read the attached file: {exc}.")
            spool.drop_empty()
            if not spool.inputs:
                outcome = "empty"
                return JSONResponse({"text": "I found no log here. " + USAGE, "response_type": "ephemeral"})
            job = Job(inputs=list(spool.inputs), formats=("markdown",), redact=True, sglang_version=s.version_for(team))
            result, outcome, message = await svc.analyse_for_chat(job)
        if result is None:
            return reply(message)
        scope = ("mattermost", team, channel)
        first = svc.dedup.get(scope, result.fingerprint)
        if first:
            outcome = "duplicate"
            where = (f"[the answer earlier in this channel]({s.mattermost_url.rstrip('/')}/{first['team']}/pl/{first['post']})"
                     if s.mattermost_url and first.get("team") else "a paste answered earlier today in this channel")
            return reply(f"🔁 Same failure as {where} ({result.rule} · `{result.category}`): {result.title}")
        if p.get("post_id") and str(p["post_id"]).isalnum():
            svc.dedup.put(scope, result.fingerprint, {"post": str(p["post_id"]), "team": str(p.get("team_domain") or "")})
        return reply(result.outputs["markdown"])
    finally:
        if outcome:
            svc.metrics.requests.labels("mattermost", outcome).inc()
        svc.metrics.latency.labels("mattermost").observe(time.monotonic() - started)


async def _fetch(svc, file_ids: list[str], spool: Spool) -> None:
    s = svc.settings
    base = s.mattermost_url.rstrip("/")
    host = [urlsplit(base).netloc]
    headers = {"Authorization": f"Bearer {s.mattermost_bot_token}"}
    for fid in file_ids:
        try:
            resp = await svc.http.get(f"{base}/api/v4/files/{fid}/info", headers=headers)
        except Exception as exc:
            raise DownloadError(f"the file could not be fetched ({type(exc).__name__})") from None
        if resp.status_code != 200:
            raise DownloadError(f"the file could not be fetched (HTTP {resp.status_code})")
        info = resp.json()
        if str(info.get("mime_type", "")).startswith(("image/", "video/", "audio/")):
            continue
        if int(info.get("size") or 0) > spool.max_bytes:
            raise TooLarge(spool.max_bytes)
        out = spool.new(info.get("name") or "mattermost-file.log")
        try:
            await download(svc.http, f"{base}/api/v4/files/{fid}", out, token=s.mattermost_bot_token,
                           allowed_hosts=host, timeout=s.download_timeout)
        finally:
            out.close()
