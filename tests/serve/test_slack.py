"""Slack, end to end: signed requests to the real server, answers checked at the Web API stub."""
from __future__ import annotations

import itertools
import json
import time
from urllib.parse import urlencode

import httpx
import pytest

from .conftest import SAMPLE, SMI, MiB, leaked, seeded_log, sign
from .stub import BOT_TOKEN, NO_FILES, NOT_IN_CHANNEL

_ts = itertools.count(1)


def new_ts() -> str:
    return f"1700001{next(_ts):03d}.000100"


def post(service: str, body: bytes, content_type: str, headers: dict | None = None) -> httpx.Response:
    h = {"Content-Type": content_type, **sign(body), **(headers or {})}
    return httpx.post(f"{service}/slack/events", content=body, headers=h, timeout=60)


def command(service: str, text: str, channel: str = "C100", response: str = "") -> httpx.Response:
    body = urlencode({"token": "legacy", "team_id": "T1", "team_domain": "example", "channel_id": channel,
                      "channel_name": "incidents", "user_id": "U42", "user_name": "sre", "command": "/diag",
                      "text": text, "response_url": response or "https://hooks.slack.com/commands/T1/1/x",
                      "trigger_id": "1.2.3", "api_app_id": "A1"}).encode()
    return post(service, body, "application/x-www-form-urlencoded")


def event(service: str, ev: dict, event_id: str | None = None) -> httpx.Response:
    body = json.dumps({"token": "legacy", "team_id": "T1", "api_app_id": "A1", "event": ev, "type": "event_callback",
                       "event_id": event_id or f"Ev{time.monotonic_ns()}", "event_time": int(time.time()),
                       "authorizations": [{"team_id": "T1", "user_id": "UBOT", "is_bot": True}]}).encode()
    return post(service, body, "application/json")


def mention(service: str, channel: str, text: str, files: list | None = None, thread_ts: str | None = None):
    ts = new_ts()
    ev = {"type": "app_mention", "user": "U42", "text": text, "ts": ts, "channel": channel, "event_ts": ts,
          "team": "T1"}
    if files:
        ev["files"] = files
    if thread_ts:
        ev["thread_ts"] = thread_ts
    return event(service, ev), ts


def slack_file(stub, name: str, data, size: int | None = None, path: str | None = None) -> dict:
    stub.files[name] = data
    url = f"{stub.base}{path or '/files/' + name}"
    return {"id": f"F{name}", "name": name, "mimetype": "text/plain", "filetype": "text",
            "size": size if size is not None else len(data), "url_private": url, "url_private_download": url}


def html_upload(stub, thread_ts: str, channel: str) -> str:
    done = stub.wait_for("files.completeUploadExternal", channel_id=channel, thread_ts=thread_ts)[0]
    fid = done["files"][0]["id"]
    stub.wait_for("upload", file_id=fid)
    return stub.uploads[fid].decode()


def test_slash_command_answers_in_a_new_thread_with_the_report_file(service, clean_stub):
    started = time.monotonic()
    r = command(service, "```\n" + seeded_log() + "```", channel="C100")
    assert r.status_code == 200 and time.monotonic() - started < 3  # Slack's 3-second ack
    assert "Analysing your log" in r.text
    msg = clean_stub.wait_for("chat.postMessage", channel="C100")[0]
    assert msg.get("thread_ts") is None  # the answer starts the thread
    text = json.dumps(msg["blocks"])
    assert "SGL-OOM-021" in text and "<@U42>" in text and "--mamba-scheduler-strategy" in text
    assert msg["blocks"][1]["type"] == "header" and len(msg["blocks"]) <= 50
    # the HTML incident report, in the thread of that answer
    first_ts = [c for c in clean_stub.calls if c["method"] == "chat.postMessage"][0]
    posted = clean_stub.wait_for("files.completeUploadExternal", channel_id="C100")[0]
    html = html_upload(clean_stub, posted["thread_ts"], "C100")
    assert posted["thread_ts"].startswith("1700000000.") and first_ts
    assert "<!DOCTYPE html>" in html[:200] and "SGL-OOM-021" in html
    assert leaked(clean_stub.everything_sent()) == []
    assert clean_stub.bad_auth == 0


def test_empty_command_shows_usage_and_analyses_nothing(service, clean_stub):
    r = command(service, "   ")
    assert r.status_code == 200 and "mention me" in r.text
    time.sleep(0.5)
    assert clean_stub.of("chat.postMessage") == []


def test_mention_with_files_answers_in_that_thread(service, clean_stub):
    files = [slack_file(clean_stub, "rank0.log", seeded_log().encode()), slack_file(clean_stub, "smi.txt", SMI.read_bytes())]
    r, ts = mention(service, "C200", "<@UBOT> why did this die?", files)
    assert r.status_code == 200
    msg = clean_stub.wait_for("chat.postMessage", channel="C200")[0]
    assert msg["thread_ts"] == ts
    blocks = json.dumps(msg["blocks"])
    assert "SGL-OOM-021" in blocks and "RTX PRO 6000" in blocks  # the snapshot was analysed with the log
    html = html_upload(clean_stub, ts, "C200")
    assert "rank0.log" in html and "smi.txt" in html
    assert {d["name"] for d in clean_stub.of("download")} >= {"rank0.log", "smi.txt"}
    assert leaked(clean_stub.everything_sent()) == [] and clean_stub.bad_auth == 0


def test_message_shortcut_on_someone_elses_paste(service, clean_stub):
    ts = new_ts()
    payload = {"type": "message_action", "callback_id": "diagnose_with_diag", "trigger_id": "1.2.3",
               "team": {"id": "T1", "domain": "example"}, "channel": {"id": "C300", "name": "incidents"},
               "user": {"id": "U7", "name": "oncall"}, "message_ts": ts, "response_url": f"{clean_stub.base}/response/1",
               "message": {"type": "message", "user": "U9", "ts": ts, "text": "it died again\n```" +
                           SAMPLE.read_text().replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") + "```"}}
    r = post(service, urlencode({"payload": json.dumps(payload)}).encode(), "application/x-www-form-urlencoded")
    assert r.status_code == 200
    msg = clean_stub.wait_for("chat.postMessage", channel="C300")[0]
    assert msg["thread_ts"] == ts and "SGL-OOM-021" in json.dumps(msg["blocks"])
    assert html_upload(clean_stub, ts, "C300")


def test_mention_under_a_paste_reads_the_thread_parent(service, clean_stub):
    parent_ts = new_ts()
    clean_stub.threads[parent_ts] = {"type": "message", "user": "U9", "ts": parent_ts, "text": SAMPLE.read_text()}
    r, ts = mention(service, "C350", "<@UBOT>", thread_ts=parent_ts)
    assert r.status_code == 200
    msg = clean_stub.wait_for("chat.postMessage", channel="C350")[0]
    assert msg["thread_ts"] == parent_ts and "SGL-OOM-021" in json.dumps(msg["blocks"])


def test_second_paste_of_the_same_failure_links_to_the_first_answer(service, clean_stub):
    log = SAMPLE.read_text()
    mention(service, "C400", "<@UBOT>\n" + log)
    first = clean_stub.wait_for("chat.postMessage", channel="C400")[0]
    clean_stub.wait_for("files.completeUploadExternal", channel_id="C400")
    # the same failure again, other timestamps and numbers: a link, no second report
    again = log.replace("09:13:02", "17:45:10").replace("0.755", "0.8")
    _, ts2 = mention(service, "C400", "<@UBOT> again?\n" + again)
    reply = clean_stub.wait_for("chat.postMessage", channel="C400", count=2)[1]
    assert reply["thread_ts"] == ts2 and "Same failure as" in reply["text"]
    link = clean_stub.of("chat.getPermalink")[0]
    assert link["channel"] == "C400" and link["message_ts"] != ts2
    assert "archives/C400/p1700000000" in reply["text"] and "SGL-OOM-021" in reply["text"]
    assert len(clean_stub.of("files.completeUploadExternal", channel_id="C400")) == 1
    assert first["blocks"]
    # another channel gets its own full answer
    mention(service, "C401", "<@UBOT>\n" + log)
    clean_stub.wait_for("files.completeUploadExternal", channel_id="C401")


def test_unsigned_wrongly_signed_stale_and_replayed_requests_get_401(service, clean_stub):
    body = urlencode({"team_id": "T1", "channel_id": "C500", "user_id": "U1", "command": "/diag",
                      "text": SAMPLE.read_text(), "response_url": "https://hooks.slack.com/x"}).encode()
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    url = f"{service}/slack/events"

    def rejections(reason: str) -> float:
        for line in httpx.get(f"{service}/metrics").text.splitlines():
            if line.startswith(f'diag_rejections_total{{reason="{reason}"}}'):
                return float(line.split()[-1])
        return 0.0

    before = {r: rejections(r) for r in ("signature", "stale", "replay")}
    assert httpx.post(url, content=body, headers=form).status_code == 401  # unsigned
    wrong = {**form, **sign(body, secret="not-the-secret")}
    assert httpx.post(url, content=body, headers=wrong).status_code == 401
    tampered = {**form, **sign(body)}
    assert httpx.post(url, content=body + b"&x=1", headers=tampered).status_code == 401
    stale = {**form, **sign(body, timestamp=int(time.time()) - 6 * 60)}
    assert httpx.post(url, content=body, headers=stale).status_code == 401
    good = {**form, **sign(body)}
    assert httpx.post(url, content=body, headers=good).status_code == 200
    assert httpx.post(url, content=body, headers=good).status_code == 401  # the same request again: a replay
    assert rejections("signature") == before["signature"] + 3
    assert rejections("stale") == before["stale"] + 1 and rejections("replay") == before["replay"] + 1
    clean_stub.wait_for("chat.postMessage", channel="C500")
    time.sleep(0.5)
    assert len(clean_stub.of("chat.postMessage", channel="C500")) == 1  # only the good one was analysed


def test_url_verification(service):
    body = json.dumps({"token": "x", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
                       "type": "url_verification"}).encode()
    r = post(service, body, "application/json")
    assert r.status_code == 200 and "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" in r.text


def test_a_50_mb_file_gets_a_polite_reply_without_a_download(service, clean_stub):
    big = slack_file(clean_stub, "huge.log", b"", size=50 * 1000 * 1000)
    _, ts = mention(service, "C600", "<@UBOT> this one", [big])
    reply = clean_stub.wait_for("chat.postMessage", channel="C600")[0]
    assert reply["thread_ts"] == ts and "more than I read at once" in reply["text"] and "8 MiB" in reply["text"]
    assert clean_stub.of("download", name="huge.log") == []


def test_a_file_larger_than_it_says_is_cut_at_the_cap(service, clean_stub):
    line = b"[2026-05-14 09:20:00 TP0] Decode batch, #running-req: 17, #token: 51234, token usage: 0.42\n"

    def fifty_mb():
        chunk = line * (MiB // len(line))
        for _ in range(50):
            yield chunk

    liar = slack_file(clean_stub, "liar.log", fifty_mb, size=1000)
    _, ts = mention(service, "C610", "<@UBOT>", [liar])
    reply = clean_stub.wait_for("chat.postMessage", channel="C610")[0]
    assert reply["thread_ts"] == ts and "more than I read at once" in reply["text"]
    assert clean_stub.served["liar.log"] < 20 * MiB  # the bot stopped reading at its 8 MiB cap


def test_files_only_from_slack_and_never_the_token_elsewhere(service, clean_stub):
    elsewhere = {"id": "Fx", "name": "x.log", "mimetype": "text/plain", "size": 10,
                 "url_private_download": "https://attacker.example.net/files/x.log"}
    _, ts = mention(service, "C620", "<@UBOT>", [elsewhere])
    reply = clean_stub.wait_for("chat.postMessage", channel="C620")[0]
    assert "refused to fetch a file from attacker.example.net" in reply["text"]
    # a redirect off the platform's hosts is refused too (the stub's own redirect to another host)
    clean_stub.files["r.log"] = b"x"
    bounce = slack_file(clean_stub, "r.log", b"x", path="/redirect/r.log?to=https://attacker.example.net/r.log")
    mention(service, "C621", "<@UBOT>", [bounce])
    reply = clean_stub.wait_for("chat.postMessage", channel="C621")[0]
    assert "refused to fetch" in reply["text"] and clean_stub.of("redirect")


def test_file_objects_without_urls_are_looked_up(service, clean_stub):
    f = slack_file(clean_stub, "lookup.log", SAMPLE.read_bytes())
    clean_stub.file_info[f["id"]] = dict(f)
    _, ts = mention(service, "C630", "<@UBOT>", [{"id": f["id"], "file_access": "check_file_info"}])
    msg = clean_stub.wait_for("chat.postMessage", channel="C630")[0]
    assert msg["thread_ts"] == ts and "SGL-OOM-021" in json.dumps(msg["blocks"])
    assert clean_stub.of("files.info", file=f["id"])


def test_not_in_channel_falls_back_to_the_response_url(service, clean_stub):
    r = command(service, SAMPLE.read_text(), channel=NOT_IN_CHANNEL, response=f"{clean_stub.base}/response/2")
    assert r.status_code == 200
    resp = clean_stub.wait_for("response_url")[0]
    assert resp["response_type"] == "in_channel" and "SGL-OOM-021" in json.dumps(resp["blocks"])
    assert "Invite me" in json.dumps(resp["blocks"])


def test_binary_file_gets_a_clear_reply(service, clean_stub):
    f = slack_file(clean_stub, "core.bin", bytes(range(256)) * 32)
    _, ts = mention(service, "C640", "<@UBOT>", [f])
    reply = clean_stub.wait_for("chat.postMessage", channel="C640")[0]
    assert reply["thread_ts"] == ts and "core.bin: binary data" in reply["text"]


def test_direct_message(service, clean_stub):
    ts = new_ts()
    ev = {"type": "message", "channel_type": "im", "user": "U42", "text": SAMPLE.read_text(), "ts": ts,
          "channel": "D1", "event_ts": ts}
    assert event(service, ev).status_code == 200
    msg = clean_stub.wait_for("chat.postMessage", channel="D1")[0]
    assert msg["thread_ts"] == ts and "SGL-OOM-021" in json.dumps(msg["blocks"])


@pytest.mark.parametrize("size", [2 * MiB])
def test_oversize_slack_body_is_refused(service, size):
    body = b"payload=" + b"x" * size
    r = post(service, body, "application/x-www-form-urlencoded")
    assert r.status_code == 413
    assert BOT_TOKEN not in r.text


def test_slack_retry_of_an_answered_request_is_not_answered_twice(service, clean_stub):
    ts = new_ts()
    ev = {"type": "app_mention", "user": "U42", "text": "<@UBOT>\n" + SAMPLE.read_text(), "ts": ts, "channel": "C700",
          "event_ts": ts}
    body = json.dumps({"team_id": "T1", "api_app_id": "A1", "event": ev, "type": "event_callback", "event_id": "EvR",
                       "event_time": int(time.time())}).encode()
    headers = {"Content-Type": "application/json", **sign(body)}
    assert httpx.post(f"{service}/slack/events", content=body, headers=headers).status_code == 200
    retry = {**headers, "X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    r = httpx.post(f"{service}/slack/events", content=body, headers=retry)
    assert r.status_code == 200 and r.headers["x-slack-no-retry"] == "1"
    clean_stub.wait_for("files.completeUploadExternal", channel_id="C700")
    time.sleep(0.5)
    assert len(clean_stub.of("chat.postMessage", channel="C700")) == 1


def test_chatter_in_threads_is_not_a_log(service, clean_stub):
    # "@diag thanks" under the bot's own answer: usage, no analysis of the answer
    answer_ts = new_ts()
    clean_stub.threads[answer_ts] = {"type": "message", "bot_id": "BBOT", "ts": answer_ts, "text": "🔴 The Mamba state…"}
    mention(service, "C710", "<@UBOT> thanks!", thread_ts=answer_ts)
    reply = clean_stub.wait_for("chat.postMessage", channel="C710")[0]
    assert "mention me" in reply["text"] and not reply.get("blocks")
    # a one-line DM reply in a thread is ignored; a top-level DM is analysed
    ts = new_ts()
    ev = {"type": "message", "channel_type": "im", "user": "U42", "text": "thanks", "ts": ts, "thread_ts": "1700000000.000001",
          "channel": "D2", "event_ts": ts}
    assert event(service, ev).status_code == 200
    time.sleep(0.7)
    assert clean_stub.of("chat.postMessage", channel="D2") == []


def test_answer_stays_when_the_report_cannot_be_attached(service, clean_stub):
    _, ts = mention(service, NO_FILES, "<@UBOT>\n" + SAMPLE.read_text())
    posts = clean_stub.wait_for("chat.postMessage", channel=NO_FILES, count=2)
    assert "SGL-OOM-021" in json.dumps(posts[0]["blocks"])
    assert posts[1]["thread_ts"] == ts and "could not be attached: missing_scope" in posts[1]["text"]
