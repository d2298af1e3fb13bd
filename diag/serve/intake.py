"""What comes in: request bodies within a size cap and a time limit, and files downloaded
from the chat platform within the same cap, straight into the request's spool.

`BodyLimits` is an ASGI middleware: a declared Content-Length over the route's cap gets 413
before a byte of the body is read; a body that grows past it, or that the client sends too
slowly (more than `idle` seconds between chunks, or not complete after `deadline` seconds),
raises BodyTooLarge / SlowClient from the route's `receive`, which the app answers with
413 / 408. A request holds no worker while its body arrives: analyses start on whole inputs.
"""
from __future__ import annotations

import asyncio
import json
from typing import Callable
from urllib.parse import urljoin, urlsplit

from .analysis import SpoolFile, human_bytes

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class BodyTooLarge(Exception):
    def __init__(self, limit: int):
        super().__init__(f"the request body is larger than the limit of {human_bytes(limit)}")
        self.limit = limit


class SlowClient(Exception):
    pass


class DownloadError(Exception):
    """A file could not be fetched from the chat platform (one line, for the thread)."""


async def send_json(send, status: int, payload: dict, headers: dict | None = None) -> None:
    body = json.dumps(payload).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), (b"connection", b"close")]
    raw += [(k.lower().encode(), str(v).encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


DRAIN_BYTES = 16 << 20     # before an early 413, read (and drop) this much of the body so the client sees the answer
DRAIN_SECONDS = 2.0
DRAIN_PAUSE = 0.25         # a client that sends nothing for this long is not writing: answer it now


async def _drain(receive, limit: int, seconds: float, pause: float = DRAIN_PAUSE) -> None:
    """Discard what the client is still sending, bounded in bytes and time: a client that is
    still writing when the connection closes reads a reset instead of the 413. One that pauses
    (it sent only the headers and waits for the answer) is answered at once."""
    got = 0
    try:
        async with asyncio.timeout(seconds):
            while got < limit:
                async with asyncio.timeout(pause):
                    message = await receive()
                if message["type"] != "http.request":
                    return
                got += len(message.get("body", b""))
                if not message.get("more_body"):
                    return
    except TimeoutError:
        return


class BodyLimits:
    def __init__(self, app, limit_for: Callable[[str], int], deadline: float, idle: float,
                 on_reject: Callable[[str, str], None]):
        self.app, self.limit_for, self.deadline, self.idle, self.on_reject = app, limit_for, deadline, idle, on_reject

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        limit = self.limit_for(path)
        declared = next((v for k, v in scope.get("headers", []) if k == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > limit:
            self.on_reject(path, "too_large")
            await _drain(receive, DRAIN_BYTES, DRAIN_SECONDS)    # before answering: the server stops reading after it
            return await send_json(send, 413, {"error": str(BodyTooLarge(limit)), "exit_code": 2})
        loop = asyncio.get_running_loop()
        start = loop.time()
        state = {"received": 0, "done": False}

        async def limited_receive():
            if state["done"]:  # the body is in; what follows (a disconnect) has no deadline
                return await receive()
            left = start + self.deadline - loop.time()
            try:
                async with asyncio.timeout(max(0.0, min(self.idle, left))):
                    message = await receive()
            except TimeoutError:
                raise SlowClient(f"the request body did not arrive in time ({self.idle:g} s between chunks, "
                                 f"{self.deadline:g} s in all)") from None
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > limit:
                    raise BodyTooLarge(limit)
                if not message.get("more_body"):
                    state["done"] = True
            return message

        return await self.app(scope, limited_receive, send)


def host_allowed(url: str, allowed: list[str]) -> bool:
    parts = urlsplit(url)
    if not parts.hostname or parts.netloc.rsplit("@", 1)[-1] not in allowed:
        return False
    return parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK)


async def download(client, url: str, out: SpoolFile, *, token: str, allowed_hosts: list[str],
                   timeout: float, max_redirects: int = 3) -> None:
    """Stream a file of the chat platform into `out` (which enforces the byte cap). The
    token goes only to the platform's own hosts; a redirect elsewhere is refused."""
    try:
        async with asyncio.timeout(timeout):
            for _ in range(max_redirects + 1):
                if not host_allowed(url, allowed_hosts):
                    raise DownloadError(f"refused to fetch a file from {urlsplit(url).hostname or 'an unknown host'} "
                                        "(not the chat platform's file host)")
                async with client.stream("GET", url, headers={"Authorization": f"Bearer {token}"},
                                         follow_redirects=False) as resp:
                    if resp.is_redirect and "location" in resp.headers:
                        url = urljoin(url, resp.headers["location"])
                        continue
                    if resp.status_code != 200:
                        raise DownloadError(f"the file could not be fetched (HTTP {resp.status_code})")
                    if "text/html" in resp.headers.get("content-type", ""):  # Slack's login page: no files:read
                        raise DownloadError("the file could not be fetched (the app lacks the files:read scope?)")
                    async for chunk in resp.aiter_bytes():
                        out.write(chunk)
                    return
            raise DownloadError("the file could not be fetched (too many redirects)")
    except TimeoutError:
        raise DownloadError(f"the file did not arrive within {timeout:g} s") from None
    except OSError as exc:
        raise DownloadError(f"the file could not be fetched ({type(exc).__name__})") from None
    except Exception as exc:
        import httpx
        if isinstance(exc, httpx.HTTPError):
            raise DownloadError(f"the file could not be fetched ({type(exc).__name__})") from None
        raise
