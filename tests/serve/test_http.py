"""POST /v1/analyze, /healthz and /metrics against the real server on loopback."""
from __future__ import annotations

import asyncio
import glob
import gzip
import json
import os
import select
import socket
import tempfile
import threading
import time

import httpx

from .conftest import MiB, SAMPLE, SMI, DATA, heavy_gz, leaked, seeded_log


def recv_all(s: socket.socket) -> str:
    """What the server sends until it closes the connection (it does after a 413 or 408)."""
    chunks = []
    try:
        while chunk := s.recv(65536):
            chunks.append(chunk)
    except OSError:  # reset after the server closed with unread input
        pass
    return b"".join(chunks).decode()


def metric(http, name: str, **labels) -> float:
    text = http.get("/metrics").text
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(f"{name}{{{want}}} ") or (not labels and line.startswith(f"{name} ")):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_plain_post_json_keeps_the_exit_code_meaning(http):
    r = http.post("/v1/analyze", content=SAMPLE.read_bytes(), headers={"Content-Type": "text/plain"})
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["schema"] == "diag.report/2" and data["status"] == "findings"
    assert data["findings"][0]["rule"] == "SGL-OOM-021" and data["findings"][0]["category"] == "oom.mamba_state"
    assert data["exit_code"] == 1 and r.headers["x-diag-exit-code"] == "1"
    assert data["inputs"][0]["path"] == "paste.log"  # the service's temporary path never shows
    # --fail-on never: the same findings, exit code 0
    r = http.post("/v1/analyze?fail_on=never&name=server.log", content=SAMPLE.read_bytes())
    assert r.json()["exit_code"] == 0 and r.json()["inputs"][0]["path"] == "server.log"


def test_curl_style_body_and_a_clean_log(http):
    clean = "[2026-05-14 09:13:20] The server is fired up and ready to roll!\n"
    r = http.post("/v1/analyze", content=clean, headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 200 and r.json()["exit_code"] in (0, 3)
    assert r.json()["status"] in ("clean", "inconclusive")


def test_formats(http):
    body = SAMPLE.read_bytes()
    md = http.post("/v1/analyze?format=markdown", content=body)
    assert md.headers["content-type"].startswith("text/markdown") and "SGL-OOM-021" in md.text and len(md.text) <= 4000
    sl = http.post("/v1/analyze?format=slack", content=body)
    assert sl.headers["content-type"].startswith("text/plain") and "*" in sl.text and "SGL-OOM-021" in sl.text
    blocks = http.post("/v1/analyze?format=slack-blocks", content=body).json()
    assert blocks["blocks"][0]["type"] == "header" and len(blocks["blocks"]) <= 50
    assert all(len(b["text"]["text"]) <= 3000 for b in blocks["blocks"] if b["type"] == "section")
    html = http.post("/v1/analyze?format=html", content=body)
    assert html.headers["content-type"].startswith("text/html") and html.text.lstrip().lower().startswith("<!doctype html")
    assert http.post("/v1/analyze?format=yaml", content=body).status_code == 400
    assert http.post("/v1/analyze?fail_on=sometimes", content=body).status_code == 400


def test_multipart_files_are_analysed_together(http):
    files = [("log", ("rank0.log", SAMPLE.read_bytes(), "text/plain")),
             ("smi", ("gpu.txt", SMI.read_bytes(), "text/plain"))]
    r = http.post("/v1/analyze", files=files)
    assert r.status_code == 200, r.text
    inputs = r.json()["inputs"]
    assert [(i["path"], i["kind"]) for i in inputs] == [("rank0.log", "sglang-log"), ("gpu.txt", "nvidia-smi")]
    assert r.json()["facts"].get("gpus")  # the snapshot was read with the log


def test_gzip_body_and_unreadable_input(http):
    r = http.post("/v1/analyze", content=gzip.compress(SAMPLE.read_bytes()))
    assert r.status_code == 200 and r.json()["findings"][0]["rule"] == "SGL-OOM-021"
    r = http.post("/v1/analyze", content=bytes(range(256)) * 64, params={"name": "core.bin"})
    assert r.status_code == 422 and r.json()["exit_code"] == 2
    assert r.json()["error"].startswith("core.bin: binary data") and "diag-serve-" not in r.json()["error"]
    r = http.post("/v1/analyze", content=b"")
    assert r.status_code == 400 and "no log" in r.json()["error"]


def test_shared_output_is_redacted_by_default(http):
    for fmt in ("json", "markdown", "html"):
        r = http.post(f"/v1/analyze?format={fmt}", content=seeded_log())
        assert r.status_code == 200 and "[REDACTED:hf-token]" in r.text
        assert leaked(r.text) == [], fmt
    r = http.post("/v1/analyze?redact=false", content=seeded_log())
    assert r.status_code == 403 and "turned off" in r.json()["error"]


def test_a_path_in_the_request_is_only_a_name(http):
    r = http.post("/v1/analyze", params={"name": "../../etc/passwd"}, content=SAMPLE.read_bytes())
    assert r.json()["inputs"][0]["path"] == "passwd"
    files = [("log", ("/etc/shadow", b"", "text/plain")), ("log", ("../x.log", SAMPLE.read_bytes(), "text/plain"))]
    r = http.post("/v1/analyze", files=files)
    assert [i["path"] for i in r.json()["inputs"]] == ["x.log"]  # the empty part is dropped, nothing read from /etc


def test_oversize_body_is_refused_before_it_is_read(http, service):
    before = metric(http, "diag_rejections_total", reason="too_large")
    # 50 MB declared: refused from the headers (the 8 MiB cap of the test server), body unread
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", int(service.rsplit(":", 1)[1])), timeout=10) as s:
        s.sendall(b"POST /v1/analyze HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 52428800\r\n\r\n")
        reply = recv_all(s)  # the answer comes from the headers alone
    assert reply.startswith("HTTP/1.1 413") and "larger than the limit of 8 MiB" in reply
    assert time.monotonic() - started < 5
    assert metric(http, "diag_rejections_total", reason="too_large") == before + 1


def test_a_50_mb_upload_is_cut_at_the_cap(http):
    """Without a Content-Length (chunked) the cap is counted as the bytes arrive."""
    sent = 0

    def body():
        nonlocal sent
        chunk = (b"[2026-05-14 09:20:00 TP0] Decode batch, #running-req: 17, #token: 51234\n" * 14000)[:MiB]
        for _ in range(50):
            sent += len(chunk)
            yield chunk

    started = time.monotonic()
    try:
        r = http.post("/v1/analyze", content=body())
        assert r.status_code == 413 and "8 MiB" in r.json()["error"]
    except (httpx.WriteError, httpx.RemoteProtocolError, httpx.ReadError):
        pass  # the server answered 413 and closed while the client was still writing
    assert sent < 50 * MiB  # the client was stopped well before it sent everything
    assert time.monotonic() - started < 15
    files = [("log", ("big.log", b"x" * (9 * MiB), "text/plain"))]  # multipart over the cap
    assert http.post("/v1/analyze", files=files).status_code == 413


def test_a_client_trickling_bytes_is_cut_off_and_holds_no_worker(http, service):
    port = int(service.rsplit(":", 1)[1])
    result = {}

    def slow():
        with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
            s.sendall(b"POST /v1/analyze HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n")
            started = time.monotonic()
            for _ in range(60):  # a byte every half second (under the 0.75 s idle limit) until the server answers
                if select.select([s], [], [], 0.5)[0]:
                    break
                s.sendall(b"x")
            s.settimeout(5)
            result["reply"] = recv_all(s)
            result["after"] = time.monotonic() - started

    t = threading.Thread(target=slow)
    t.start()
    time.sleep(0.3)
    quick = [http.post("/v1/analyze", content=SAMPLE.read_bytes()) for _ in range(3)]  # served meanwhile
    assert all(r.status_code == 200 for r in quick)
    t.join(30)
    assert result["reply"].startswith("HTTP/1.1 408"), result
    assert result["after"] < 5  # the 1 s body deadline of the test server, not the client's 30 s


def test_fifty_concurrent_requests(service):
    logs = [SAMPLE.read_bytes()] + [p.read_bytes() for p in sorted((DATA / "sglang").glob("*.log"))[:4]]

    async def main():
        async with httpx.AsyncClient(base_url=service, timeout=60) as client:
            return await asyncio.gather(*(client.post("/v1/analyze", content=logs[i % len(logs)]) for i in range(50)))

    replies = asyncio.run(main())
    assert [r.status_code for r in replies] == [200] * 50
    # each answer is its own input's report (no cross-talk between concurrent requests)
    for i, r in enumerate(replies):
        assert r.json()["inputs"][0]["lines"] == replies[i % len(logs)].json()["inputs"][0]["lines"]
    assert replies[0].json()["findings"][0]["rule"] == "SGL-OOM-021"


def test_no_temporary_file_outlives_its_request(http):
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "diag-serve-*")))
    for _ in range(3):
        http.post("/v1/analyze", files=[("log", ("a.log", SAMPLE.read_bytes(), "text/plain"))])
        http.post("/v1/analyze", content=bytes(range(256)) * 16)
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "diag-serve-*"))) - before == set()


def test_healthz_and_metrics(http):
    h = http.get("/healthz").json()
    assert h["status"] == "ok" and h["workers"] == 2 and h["slack"] and h["mattermost"]
    http.post("/v1/analyze", content=SAMPLE.read_bytes())
    text = http.get("/metrics").text
    assert 'diag_findings_total{category="oom.mamba_state"}' in text
    assert metric(http, "diag_requests_total", channel="http", outcome="answered") >= 1
    assert "diag_request_duration_seconds_bucket" in text and "diag_queue_depth" in text


def test_bearer_token_busy_and_time_limit(strict):
    with httpx.Client(base_url=strict, timeout=30) as c:
        assert c.post("/v1/analyze", content=SAMPLE.read_bytes()).status_code == 401
        assert c.post("/v1/analyze", content=SAMPLE.read_bytes(), headers={"Authorization": "Bearer nope"}).status_code == 401
        auth = {"Authorization": "Bearer api-token-1"}
        assert c.post("/v1/analyze", content=SAMPLE.read_bytes(), headers=auth).status_code == 200
        # an analysis over the limit (0.4 s) is stopped with its worker; the next one is served
        started = time.monotonic()
        r = c.post("/v1/analyze", content=heavy_gz(), headers=auth)
        assert r.status_code == 504 and "0.4 s" in r.json()["error"] and time.monotonic() - started < 5
        assert c.post("/v1/analyze", content=SAMPLE.read_bytes(), headers=auth).status_code == 200
        assert 'diag_rejections_total{reason="token"} 2.0' in c.get("/metrics").text

    heavy = heavy_gz()

    async def burst():
        async with httpx.AsyncClient(base_url=strict, timeout=60, headers=auth) as client:
            return await asyncio.gather(*(client.post("/v1/analyze", content=heavy) for _ in range(6)))

    replies = asyncio.run(burst())
    statuses = sorted(r.status_code for r in replies)
    # one worker and one queue place: two are admitted (and time out), the others are turned away at once
    assert statuses.count(503) >= 4 and set(statuses) <= {503, 504}, statuses
    busy = [r for r in replies if r.status_code == 503]
    assert all(int(r.headers["retry-after"]) >= 1 for r in busy) and "busy" in busy[0].json()["error"]
    assert json.loads(replies[0].text)["exit_code"] == 3          # nothing concluded: the contract has no fifth code
