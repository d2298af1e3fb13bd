"""A local stand-in for the Slack Web API (and Mattermost's file API), served on loopback.

It answers the methods the bot calls, records every call, serves files that tests register
(only to the right bearer token) and takes uploads the way files.getUploadURLExternal's URL
does. Tests wait on `calls` with `wait_for`.
"""
from __future__ import annotations

import itertools
import json
import threading
import time
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

BOT_TOKEN = "xoxb-test-0123456789-abcdefghij"
MM_BOT_TOKEN = "mm-bot-token-abcdef"
NOT_IN_CHANNEL = "CNOTIN"
NO_FILES = "CNOFILES"  # files.completeUploadExternal fails there (an app without files:write)


class SlackStub:
    def __init__(self):
        self.calls: list[dict] = []      # {"method", "params"}
        self.uploads: dict[str, bytes] = {}
        self.files: dict[str, object] = {}  # name -> bytes, or a callable returning an iterator of chunks
        self.file_info: dict[str, dict] = {}  # Slack file id -> file object (files.info)
        self.threads: dict[str, dict] = {}    # thread ts -> parent message (conversations.replies)
        self.served: dict[str, int] = {}      # bytes sent per file name
        self.bad_auth = 0
        self.base = ""                        # set once the stub listens
        self._ts = itertools.count(1)
        self._cond = threading.Condition()
        self.app = Starlette(routes=[
            Route("/api/{method}", self.api, methods=["POST", "GET"]),
            Route("/upload/{fid}", self.upload, methods=["POST"]),
            Route("/files/{name}", self.file, methods=["GET"]),
            Route("/redirect/{name}", self.redirect, methods=["GET"]),
            Route("/response/{rid}", self.response_url, methods=["POST"]),
            Route("/api/v4/files/{fid}/info", self.mm_info, methods=["GET"]),
            Route("/api/v4/files/{fid}", self.mm_file, methods=["GET"]),
        ])

    # --- recording ---------------------------------------------------------------------

    def _record(self, method: str, params: dict) -> None:
        with self._cond:
            self.calls.append({"method": method, "params": params})
            self._cond.notify_all()

    def of(self, method: str, **match) -> list[dict]:
        with self._cond:
            return [c["params"] for c in self.calls if c["method"] == method
                    and all(c["params"].get(k) == v for k, v in match.items())]

    def wait_for(self, method: str, count: int = 1, timeout: float = 20, **match) -> list[dict]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [c["params"] for c in self.calls if c["method"] == method
                         and all(c["params"].get(k) == v for k, v in match.items())]
                if len(found) >= count:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{method} {match} not called {count} time(s) in {timeout} s; calls: "
                                         f"{[c['method'] for c in self.calls]}")
                self._cond.wait(left)

    def everything_sent(self) -> str:
        """All text the bot sent to Slack: messages, blocks, uploaded files, responses."""
        with self._cond:
            parts = [json.dumps(c["params"], ensure_ascii=False) for c in self.calls]
            parts += [b.decode("utf-8", "replace") for b in self.uploads.values()]
        return "\n".join(parts)

    def reset(self) -> None:
        with self._cond:
            self.calls.clear()
            self.uploads.clear()
            self.served.clear()

    # --- Web API ---------------------------------------------------------------------

    def _authorised(self, request: Request, token: str = BOT_TOKEN) -> bool:
        ok = request.headers.get("authorization") == f"Bearer {token}"
        if not ok:
            self.bad_auth += 1
        return ok

    async def api(self, request: Request) -> Response:
        method = request.path_params["method"]
        body = await request.body()
        if request.headers.get("content-type", "").startswith("application/json"):
            params = json.loads(body or b"{}")
        else:
            params = {k: v[0] for k, v in parse_qs(body.decode()).items()}
            params.update(request.query_params)
        for key in ("blocks", "files"):
            if isinstance(params.get(key), str):
                params[key] = json.loads(params[key])
        self._record(method, params)
        if not self._authorised(request):
            return JSONResponse({"ok": False, "error": "invalid_auth"})
        if method == "auth.test":
            return JSONResponse({"ok": True, "url": "https://example.slack.com/", "team": "Example", "user": "diag",
                                 "team_id": "T1", "user_id": "UBOT", "bot_id": "BBOT"})
        if method == "chat.postMessage":
            if params.get("channel") == NOT_IN_CHANNEL:
                return JSONResponse({"ok": False, "error": "not_in_channel"})
            ts = f"1700000000.{next(self._ts):06d}"
            return JSONResponse({"ok": True, "channel": params["channel"], "ts": ts, "message": {"text": params.get("text")}})
        if method == "chat.getPermalink":
            return JSONResponse({"ok": True, "channel": params["channel"],
                                 "permalink": f"https://example.slack.com/archives/{params['channel']}/p"
                                              f"{params['message_ts'].replace('.', '')}"})
        if method == "files.info":
            info = self.file_info.get(params.get("file", ""))
            return JSONResponse({"ok": True, "file": info} if info else {"ok": False, "error": "file_not_found"})
        if method == "conversations.replies":
            parent = self.threads.get(params.get("ts", ""))
            return JSONResponse({"ok": True, "messages": [parent] if parent else []})
        if method == "files.getUploadURLExternal":
            fid = f"F{next(self._ts):06d}"
            return JSONResponse({"ok": True, "upload_url": f"{self.base}/upload/{fid}", "file_id": fid})
        if method == "files.completeUploadExternal":
            if params.get("channel_id") == NO_FILES:
                return JSONResponse({"ok": False, "error": "missing_scope"})
            return JSONResponse({"ok": True, "files": [{"id": f["id"], "title": f.get("title")} for f in params["files"]]})
        return JSONResponse({"ok": False, "error": "unknown_method"})

    async def upload(self, request: Request) -> Response:
        self.uploads[request.path_params["fid"]] = await request.body()
        self._record("upload", {"file_id": request.path_params["fid"]})
        return PlainTextResponse("OK - 1")

    async def response_url(self, request: Request) -> Response:
        self._record("response_url", json.loads(await request.body()))
        return PlainTextResponse("ok")

    # --- files -------------------------------------------------------------------------

    def _stream(self, name: str):
        content = self.files[name]
        chunks = content() if callable(content) else [content]
        self.served[name] = 0
        for chunk in chunks:
            self.served[name] += len(chunk)
            yield chunk

    async def file(self, request: Request) -> Response:
        name = request.path_params["name"]
        self._record("download", {"name": name})
        if not self._authorised(request):
            return PlainTextResponse("<html>sign in</html>", status_code=200, media_type="text/html")
        if name not in self.files:
            return PlainTextResponse("not found", status_code=404)
        return StreamingResponse(self._stream(name), media_type="application/octet-stream")

    async def redirect(self, request: Request) -> Response:
        self._record("redirect", {"name": request.path_params["name"]})
        return Response(status_code=302, headers={"Location": request.query_params["to"]})

    async def mm_info(self, request: Request) -> Response:
        fid = request.path_params["fid"]
        self._record("mm.info", {"id": fid})
        if not self._authorised(request, MM_BOT_TOKEN) or fid not in self.files:
            return JSONResponse({"message": "no"}, status_code=403)
        data = self.files[fid]
        return JSONResponse({"id": fid, "name": f"{fid}.log", "size": len(data), "mime_type": "text/plain"})

    async def mm_file(self, request: Request) -> Response:
        fid = request.path_params["fid"]
        self._record("mm.download", {"id": fid})
        if not self._authorised(request, MM_BOT_TOKEN) or fid not in self.files:
            return JSONResponse({"message": "no"}, status_code=403)
        return StreamingResponse(self._stream(fid), media_type="text/plain")
