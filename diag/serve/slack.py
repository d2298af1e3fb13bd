"""Slack: mention the bot on a paste, the message shortcut "Diagnose with diag", `/diag <log>`,
or a direct message; the answer (Block Kit) and the HTML incident report land in the thread.

Slack Bolt does the protocol: 3-second acks, lazy listeners for the work, the Web API client
(`chat_postMessage`, `files_upload_v2`, `files_info`, `chat_getPermalink`). Before Bolt sees a
request it is checked here once more, so refusals can be counted: no signature, a stale
timestamp (over 5 minutes, Slack's window), a wrong signature, or the exact request again
(a replay) get 401 and nothing is analysed.
"""
from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable
from urllib.parse import parse_qsl

from cachetools import TTLCache
from slack_bolt.adapter.starlette.async_handler import to_async_bolt_request, to_starlette_response
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .analysis import INTERNAL_REPLY, Job, Spool, TooLarge
from .intake import DownloadError, download

log = logging.getLogger("diag.serve.slack")
WINDOW = 300  # seconds: Slack's (and Bolt's) timestamp window
NOT_LOGS = ("image/", "video/", "audio/", "application/pdf")
MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^<>]*)?>")
MARKUP = re.compile(r"<([^<>|]+)(?:\|([^<>]*))?>")
USAGE = ("Paste a server log (a message, a code block, or a text/.log/.gz file; rank logs and an nvidia-smi "
         "snapshot together are fine) and mention me, use the *Diagnose with diag* message shortcut on a paste, "
         "or type `{command} <log>`.")


@dataclass
class Paste:
    source: str                 # mention | command | shortcut | dm
    team: str
    channel: str
    user: str
    thread_ts: str | None       # None: a slash command (the answer starts a thread)
    text: str = ""
    files: list[dict] = field(default_factory=list)
    respond: Callable[..., Awaitable] | None = None  # the response_url, where the payload has one


def clean_text(text: str) -> str:
    """A message's text as the user pasted it: mentions out, Slack's link markup and its
    three entities undone (code fences and quotes are diag's cleaner's job)."""
    text = MENTION.sub("", text or "")

    def markup(m: re.Match) -> str:
        target, label = m[1], m[2]
        if target.startswith("#"):
            return "#" + (label or target[1:])
        if target.startswith("!"):
            return "@" + (label or target[1:].split("^")[0])
        return label or target

    text = MARKUP.sub(markup, text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").strip()


def bolt_body(body: bytes, content_type: str) -> bytes:
    """The body as Bolt should parse it. Bolt (1.x, request/internals.parse_body) takes any form
    body that contains the word "payload" for an interactive payload, so a `/diag` paste with
    that word (logs often have it) would be lost; here the word's first letter is
    percent-encoded inside form values, which decodes to the same text. The signature was
    verified on the original bytes before this."""
    if not content_type.startswith("application/x-www-form-urlencoded") or b"payload" not in body:
        return body
    if any(key == "payload" for key, _ in parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)):
        return body  # a real interactive payload (shortcuts)
    return body.replace(b"payload", b"%70ayload")


def endpoint(service):
    if not service.settings.slack_enabled:
        async def not_configured(request: Request) -> Response:
            return JSONResponse({"error": "Slack is not configured on this server (SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET)"},
                                status_code=404)
        return not_configured
    return SlackBot(service).handle


class SlackBot:
    def __init__(self, service):
        self.service = service
        s = self.settings = service.settings
        self.client = AsyncWebClient(token=s.slack_bot_token, base_url=s.slack_api_url, timeout=30)
        # the signature is checked at the door (handle), on the bytes as they came: see bolt_body
        self.app = AsyncApp(client=self.client, signing_secret=s.slack_signing_secret, process_before_response=False,
                            request_verification_enabled=False, logger=logging.getLogger("diag.serve.bolt"))
        self.verifier = SignatureVerifier(s.slack_signing_secret)
        self.seen: TTLCache = TTLCache(maxsize=200_000, ttl=2 * WINDOW)  # signatures of accepted requests
        self.file_hosts = list(s.slack_file_hosts)

        self.app.event("app_mention")(ack=self._ack, lazy=[self.on_mention])
        self.app.event("message", matchers=[self._is_dm])(ack=self._ack, lazy=[self.on_dm])
        self.app.command(s.slack_command)(ack=self._ack_command, lazy=[self.on_command])
        self.app.message_shortcut(s.slack_shortcut)(ack=self._ack, lazy=[self.on_shortcut])

    # --- the door ---------------------------------------------------------------------

    def _refusal(self, body: bytes, timestamp: str | None, signature: str | None) -> str | None:
        if not timestamp or not signature:
            return "signature"
        try:
            age = abs(time.time() - int(timestamp))
        except ValueError:
            return "signature"
        if age > WINDOW:
            return "stale"
        if not self.verifier.is_valid(body, timestamp, signature):
            return "signature"
        if signature in self.seen:
            return "replay"
        return None

    async def handle(self, request: Request) -> Response:
        body = await request.body()  # within the chat body cap (BodyLimits)
        reason = self._refusal(body, request.headers.get("x-slack-request-timestamp"),
                               request.headers.get("x-slack-signature"))
        retry = request.headers.get("x-slack-retry-num")
        if reason == "replay" and retry:
            # Slack delivering again what was already acknowledged (and is being answered)
            self.service.metrics.requests.labels("slack", "retry_ignored").inc()
            return Response(status_code=200, headers={"X-Slack-No-Retry": "1"})
        if reason:
            self.service.metrics.reject("slack", reason)
            return JSONResponse({"error": "invalid request signature" if reason != "stale" else "stale request timestamp"},
                                status_code=401)
        self.seen[request.headers["x-slack-signature"]] = True
        if retry and request.headers.get("x-slack-retry-reason") == "http_timeout":
            # the first delivery was acknowledged late but is being answered: do not answer twice
            self.service.metrics.requests.labels("slack", "retry_ignored").inc()
            return Response(status_code=200, headers={"X-Slack-No-Retry": "1"})
        bolt_request = to_async_bolt_request(request, bolt_body(body, request.headers.get("content-type", "")))
        return to_starlette_response(await self.app.async_dispatch(bolt_request))

    # --- acks (within Slack's 3 seconds) and the lazy work -----------------------------

    async def _ack(self, ack) -> None:
        await ack()

    async def _ack_command(self, ack, command) -> None:
        if not self.settings.allows(command.get("team_id"), command.get("channel_id")):
            await ack(text="diag is not enabled in this channel.")
        elif not clean_text(command.get("text", "")):
            await ack(text=USAGE.format(command=self.settings.slack_command))
        else:
            await ack(text=f"🔎 Analysing your log ({len(command['text'].splitlines())} lines)…")

    @staticmethod
    async def _is_dm(event) -> bool:
        return event.get("channel_type") == "im" and event.get("subtype") in (None, "file_share") and not event.get("bot_id")

    async def on_mention(self, event, context, client) -> None:
        paste = Paste("mention", team=context.team_id or event.get("team", ""), channel=event["channel"],
                      user=event.get("user", ""), thread_ts=event.get("thread_ts") or event["ts"],
                      text=event.get("text", ""), files=event.get("files") or [])
        if event.get("thread_ts") and not paste.files and len(clean_text(paste.text).splitlines()) < 3:
            # "@diag" (or "@diag what is this?") under a paste: the log is the thread's first message
            replies = await client.conversations_replies(channel=paste.channel, ts=event["thread_ts"], limit=1, inclusive=True)
            parent = (replies.get("messages") or [{}])[0]
            if parent.get("bot_id"):  # a thread under an answer: nothing new to read
                return await self.reply(paste, client, USAGE.format(command=self.settings.slack_command))
            paste.text, paste.files = parent.get("text", ""), parent.get("files") or []
        await self.answer(paste, client)

    async def on_dm(self, event, context, client) -> None:
        paste = Paste("dm", team=context.team_id or event.get("team", ""), channel=event["channel"],
                      user=event.get("user", ""), thread_ts=event.get("thread_ts") or event["ts"],
                      text=event.get("text", ""), files=event.get("files") or [])
        in_thread = event.get("thread_ts") not in (None, event["ts"])
        if in_thread and not paste.files and len(clean_text(paste.text).splitlines()) < 3:
            return  # a word in the thread of an answer ("thanks"), not a new log
        await self.answer(paste, client)

    async def on_command(self, command, client, respond) -> None:
        if not clean_text(command.get("text", "")):
            return  # the ack showed the usage
        await self.answer(Paste("command", team=command.get("team_id", ""), channel=command["channel_id"],
                                user=command.get("user_id", ""), thread_ts=None, text=command.get("text", ""),
                                respond=respond), client)

    async def on_shortcut(self, shortcut, client, respond) -> None:
        message = shortcut.get("message") or {}
        await self.answer(Paste("shortcut", team=(shortcut.get("team") or {}).get("id", ""),
                                channel=(shortcut.get("channel") or {}).get("id", ""),
                                user=(shortcut.get("user") or {}).get("id", ""),
                                thread_ts=message.get("thread_ts") or message.get("ts"), text=message.get("text", ""),
                                files=message.get("files") or [], respond=respond), client)

    # --- the answer ---------------------------------------------------------------------

    async def answer(self, paste: Paste, client) -> None:
        svc, s = self.service, self.settings
        started = time.monotonic()
        outcome = "error"
        try:
            if not s.allows(paste.team, paste.channel):
                outcome = None
                svc.metrics.reject("slack", "not_allowed")
                if paste.respond is not None and paste.source == "shortcut":  # /diag was told in its ack
                    await paste.respond(text="diag is not enabled in this channel.", response_type="ephemeral",
                                        replace_original=False)
                return
            with Spool(s.max_bytes) as spool:
                try:
                    await self.collect(paste, spool, client)
                except TooLarge as exc:
                    outcome = "too_large"
                    svc.metrics.rejections.labels("too_large").inc()
                    return await self.reply(paste, client, f"📦 That is more than I read at once ({exc}). Send the last "
                                            "part of the log (the failure is near the end), or gzip it (`.gz` files are read directly).")
                except DownloadError as exc:
                    outcome = "unreadable"
                    return await self.reply(paste, client, f"⚠️ I could not read the attached file: {exc}.")
                spool.drop_empty()
                if not spool.inputs:
                    outcome = "empty"
                    return await self.reply(paste, client, "I found no log here. " + USAGE.format(command=s.slack_command))
                job = Job(inputs=list(spool.inputs), formats=("slack-blocks", "html"), redact=True,
                          sglang_version=s.version_for(paste.team))
                result, outcome, message = await svc.analyse_for_chat(job)
            if result is None:
                return await self.reply(paste, client, message)
            outcome = await self.post_result(paste, client, result)
        except Exception as exc:  # the Slack API refused (missing scope, revoked token): logged, never the text
            log.warning("slack answer failed: %s", _why(exc))
            outcome = "error"
            if not isinstance(exc, SlackApiError):   # a bug of ours: say so politely (Slack may still take a reply)
                try:
                    await self.reply(paste, client, INTERNAL_REPLY)
                except Exception as again:
                    log.warning("slack reply failed: %s", _why(again))
        finally:
            if outcome:
                svc.metrics.requests.labels("slack", outcome).inc()
            svc.metrics.latency.labels("slack").observe(time.monotonic() - started)

    async def collect(self, paste: Paste, spool: Spool, client) -> None:
        files = [f for f in paste.files if f.get("mode") not in ("tombstone", "hidden_by_limit", "external")
                 and not str(f.get("mimetype", "")).startswith(NOT_LOGS)]
        declared = sum(int(f.get("size") or 0) for f in files)
        if declared > spool.max_bytes:
            raise TooLarge(spool.max_bytes)
        text = clean_text(paste.text)
        if text and (not files or len(text.splitlines()) >= 3):  # a caption beside files is not a log
            spool.add("paste.log", text.encode("utf-8"))
        for f in files:
            info = f
            if not (f.get("url_private_download") or f.get("url_private")) and f.get("id"):
                info = (await client.files_info(file=f["id"])).get("file") or {}
            if int(info.get("size") or 0) > spool.max_bytes:
                raise TooLarge(spool.max_bytes)
            url = info.get("url_private_download") or info.get("url_private")
            if not url:
                raise DownloadError(f"{info.get('name') or 'a file'} has no download address")
            out = spool.new(info.get("name") or "slack-file.log")
            try:
                await download(self.service.http, url, out, token=self.settings.slack_bot_token,
                               allowed_hosts=self.file_hosts, timeout=self.settings.download_timeout)
            finally:
                out.close()

    async def post_result(self, paste: Paste, client, result) -> str:
        scope = ("slack", paste.team, paste.channel)
        first = self.service.dedup.get(scope, result.fingerprint)
        if first:
            link = (await client.chat_getPermalink(channel=first["channel"], message_ts=first["ts"])).get("permalink")
            await self.reply(paste, client, f"🔁 Same failure as <{link}|the answer earlier in this channel> "
                             f"({result.rule} · `{result.category}`): {_entities(result.title)}")
            return "duplicate"
        payload = json.loads(result.outputs["slack-blocks"])
        blocks = payload["blocks"]
        if paste.source == "command":
            blocks = [{"type": "context", "elements": [{"type": "mrkdwn", "text": f"Log pasted by <@{paste.user}> with "
                                                         f"`{self.settings.slack_command}`"}]}] + blocks
        posted = await self._post(paste, client, text=payload["text"], blocks=blocks)
        if posted is None:
            return "answered"  # through the response_url: the bot is not in the channel, so no file either
        thread = paste.thread_ts or posted
        self.service.dedup.put(scope, result.fingerprint, {"channel": paste.channel, "ts": posted})
        name = f"diag-report-{(result.rule or result.status).lower()}.html"
        try:
            await client.files_upload_v2(channel=paste.channel, thread_ts=thread, content=result.outputs["html"],
                                         filename=name, title=f"diag incident report: {result.title or result.status}"[:250])
        except SlackApiError as exc:
            log.warning("slack upload failed: %s", _why(exc))
            await client.chat_postMessage(channel=paste.channel, thread_ts=thread, text="(The HTML incident report "
                                          f"could not be attached: {exc.response.get('error')}.)")
            return "answered_without_report"
        return "answered"

    async def _post(self, paste: Paste, client, *, text: str, blocks: list | None = None) -> str | None:
        """Post in the paste's thread; return the message's ts, or None when it went through
        the response_url because the bot is not in the channel."""
        try:
            resp = await client.chat_postMessage(channel=paste.channel, thread_ts=paste.thread_ts, text=text,
                                                 blocks=blocks, unfurl_links=False, unfurl_media=False)
            return resp["ts"]
        except SlackApiError as exc:
            if paste.respond is None or exc.response.get("error") not in ("not_in_channel", "channel_not_found"):
                raise
        note = "_Invite me to this channel to get answers (and the HTML report) in a thread._"
        await paste.respond(text=text, blocks=(blocks or [{"type": "section", "text": {"type": "mrkdwn", "text": text}}])
                            + [{"type": "context", "elements": [{"type": "mrkdwn", "text": note}]}],
                            response_type="in_channel" if paste.source == "command" else "ephemeral", replace_original=False)
        return None

    async def reply(self, paste: Paste, client, text: str) -> None:
        """A short answer: in the thread, or to the user alone for a slash command (nobody
        else saw the command)."""
        if paste.source == "command" and paste.respond is not None:
            await paste.respond(text=text, response_type="ephemeral", replace_original=False)
            return
        await self._post(paste, client, text=text)


def _why(exc: Exception) -> str:
    if isinstance(exc, SlackApiError):
        return f"Slack API error {exc.response.get('error')!r}"
    return type(exc).__name__


def _entities(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
