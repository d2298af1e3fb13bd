"""Redaction: every kind of secret, consistent aliases, and nothing leaks into a shared report."""
import copy
from pathlib import Path

import pytest

from diag.analyze import analyze
from diag.redact import Redactor, redact_report, redact_text
from diag.render import html, markdown, slack, slack_blocks

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "qwen36-27b-mtp-extra-buffer.log"


@pytest.mark.parametrize("text, secret, marker", [
    ("HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345 python", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "[REDACTED:hf-token]"),
    ("key sk-proj-abcdefghijklmnop1234 used", "sk-proj-abcdefghijklmnop1234", "[REDACTED:api-key]"),
    ("server_args=ServerArgs(api_key='Zq8sLxw4Rt', port=30000)", "Zq8sLxw4Rt", "api_key='[REDACTED:api-key]'"),
    ("--api-key Zq8sLxw4Rt --port 30000", "Zq8sLxw4Rt", "--api-key [REDACTED:api-key]"),
    ("admin_api_key='adm1nKey99'", "adm1nKey99", "[REDACTED:api-key]"),
    ("AWS AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE", "[REDACTED:aws-key]"),
    ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI", "[REDACTED:secret]"),
    ("token ghp_0123456789abcdefghijABCDEFGHIJ012345", "ghp_0123456789abcdefghij", "[REDACTED:github-token]"),
    ("slack xoxb-123456789012-abcdefghijKL", "xoxb-123456789012", "[REDACTED:slack-token]"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "eyJhbGciOiJIUzI1NiJ9", "Bearer [REDACTED:bearer-token]"),
    ("pip install from https://bob:hunter2pass@pypi.corp.example.net/simple", "hunter2pass", ":[REDACTED:password]@host-1"),
    ("password=s3cr3t-Passw0rd retry", "s3cr3t-Passw0rd", "password=[REDACTED:password]"),
    ("token=tok_ab12cd34ef56", "tok_ab12cd34ef56", "token=[REDACTED:token]"),
    ('{"hf_token": "abc", "token": x9Y8z7W6v5}', "x9Y8z7W6v5", '"token": [REDACTED:token]'),
    ("mail alice.smith@example.org now", "alice.smith@example.org", "email-1"),
    ('File "/home/alice/venvs/sglang/x.py"', "alice", "/home/user-1/venvs"),
    ("/Users/carol/Downloads/model", "carol", "/Users/user-1/"),
    ("C:\\Users\\dave\\AppData\\x", "dave", "C:\\Users\\user-1\\"),
    ("--host gpu-box --port 30000", "gpu-box", "--host host-1"),
    ("--dist-init-addr 10.20.30.40:5000", "10.20.30.40", "ip-1:5000"),
    ("connect node7.cluster.internal failed", "node7.cluster.internal", "host-1"),
    ("node17-2:12345:12345 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.17<0>", "node17-2", "host-1:12345"),
    ("peer fe80::1ff:fe23:4567:890a and [2001:db8::8a2e:370:7334]:8000", "2001:db8", "[ip-2]:8000"),
])
def test_each_kind_of_secret(text, secret, marker):
    out = redact_text(text)
    assert secret not in out
    assert marker in out


@pytest.mark.parametrize("text", [
    "SGLang 0.5.4.post3, driver 580.95.05, NCCL version 2.21.5+cuda12.4, cuDNN version 9.1.0.70",
    "--model-path Qwen/Qwen3.6-27B --host 0.0.0.0 --port 30000",
    "http://127.0.0.1:30000/generate and localhost:30000 and ::1",
    "#token: 307481, token usage: 1.00, #new-token: 8192, max_total_num_tokens=1000, api_key=None",
    "see https://huggingface.co/Qwen/Qwen3.6-27B and https://docs.sglang.ai/advanced",
    "at 09:13:03 bus 00000000:01:00.0 raised c10::Error in torch::add (sglang.srt.model_executor.model_runner.py)",
    "--dist-init-addr must be an address every node can reach; use the --dist-init-addr IP, e.g. eth0",
    "FP8 KV halves bytes per token: about twice the tokens",
])
def test_keeps_what_is_not_secret(text):
    assert redact_text(text) == text


def test_aliases_are_consistent():
    r = Redactor()
    a = r.redact("--host gpu-node-7 --dist-init-addr 10.1.2.3:5000")
    b = r.redact("gpu-node-7 lost 10.1.2.3; 10.9.9.9 and gpu-node-8.corp.example.com joined")
    assert a == "--host host-1 --dist-init-addr ip-1:5000"
    assert b == "host-1 lost ip-1; ip-2 and host-2 joined"
    assert r.redact("/home/alice/a /home/bob/b /home/alice/c") == "/home/user-1/a /home/user-2/b /home/user-1/c"
    assert r.redact("--host=myserver") == r.redact("--host myserver --port 1").split(" --port")[0].replace(" ", "=")


def test_host_learnt_anywhere_is_replaced_everywhere():
    report = analyze([str(SAMPLE)], options=None)
    report.findings[0].summary += " The peer node17-2 stopped answering."
    report.inputs[0].notes.append("--host node17-2 was given")  # learnt here, after the summary
    out = redact_report(report)
    assert "node17-2" not in out.findings[0].summary and "host-1" in out.findings[0].summary


def test_redact_report_is_a_copy():
    report = analyze([str(SAMPLE)])
    before = copy.deepcopy(report.to_json())
    api_key = report.facts["launch_flags"]["--api-key"]
    out = redact_report(report)
    assert report.to_json() == before and not report.redacted
    assert out.redacted and out.to_json()["redacted"] is True
    assert out.facts["launch_flags"]["--api-key"] == "[REDACTED:api-key]"
    # the launch command and each option's command, in the report itself, are redacted too
    assert api_key in report.launch.argv and api_key not in out.launch.argv
    shown = [line for f in out.findings for c in f.commands for line in (c["before"] or []) + (c["after"] or [])]
    assert shown and not any(api_key in line for line in shown)
    assert any(api_key in line for f in report.findings for c in f.commands for line in c["before"] or [])


SECRETS = {
    "hf": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "sk": "sk-live-9f8e7d6c5b4a39281716", "api": "Zq8sLxw4Rt",
    "gh": "ghp_0123456789abcdefghijABCDEFGHIJ012345", "slack": "xoxb-123456789012-abcdefghijKL",
    "aws": "AKIAIOSFODNN7EXAMPLE", "bearer": "eyJhbGciOiJIUzI1NiJ9.payload.sig", "pw": "hunter2pass",
    "pw2": "s3cr3t-Passw0rd", "tok": "tok_ab12cd34ef56", "email": "alice.smith@example.org",
    "fqdn": "gpu-node-7.corp.example.com", "mirror": "mirror.internal.example.net", "nccl_host": "node17-2",
    "ip4": "10.20.30.40", "ip4b": "10.0.0.17", "ip6": "fe80::1ff:fe23:4567:890a",
    "user1": "/home/alice/", "user2": "/Users/carol/", "user3": "C:\\Users\\dave\\",
}


def seeded_log(tmp_path: Path) -> Path:
    """The founding sample with a launch command and, around the failure, a line of each secret."""
    s = SECRETS
    lines = SAMPLE.read_text().splitlines()
    launch = (f"$ HF_TOKEN={s['hf']} python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B --api-key {s['api']} "
              f"--host {s['fqdn']} --dist-init-addr {s['ip4']}:5000 --mamba-scheduler-strategy extra_buffer "
              "--speculative-algorithm EAGLE --mem-fraction-static 0.755")
    extra = [
        f"[2026-05-14 09:13:02 TP0] {s['nccl_host']}:12345:12345 [0] NCCL INFO Bootstrap : Using eth0:{s['ip4b']}<0> {s['ip6']}",
        f"[2026-05-14 09:13:02 TP0] upload https://bob:{s['pw']}@{s['mirror']}/x failed; mail {s['email']}; "
        f"{s['aws']} {s['gh']} {s['slack']}",
        f"[2026-05-14 09:13:02 TP0] Authorization: Bearer {s['bearer']} password={s['pw2']} token={s['tok']} "
        f"{s['user2']}x {s['user3']}y",
    ]
    lines = [l for l in lines if not l.startswith("$ ")]  # the seeded launch command replaces the sample's own
    i = next(k for k, l in enumerate(lines) if "RuntimeError: Not enough memory" in l)
    path = tmp_path / "server.log"
    path.write_text("\n".join([lines[0], launch] + lines[1:i + 1] + extra + lines[i + 1:]) + "\n")
    return path


@pytest.mark.parametrize("view", [markdown, slack, slack_blocks, html], ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_shared_views_leak_nothing(tmp_path, view):
    report = analyze([str(seeded_log(tmp_path))])
    assert report.findings[0].category == "oom.mamba_state"
    raw, shared = view.render(report), view.render(redact_report(report))
    # the unredacted view shows the launch command (and the HTML view the lines around the failure) ...
    shown = [k for k in SECRETS if k != "sk"] if view is html else ["hf", "api", "fqdn", "ip4"]  # sk-: server_args only
    expected = {k: SECRETS[k] for k in shown}
    assert [k for k, v in expected.items() if v not in raw] == []
    # ... and the shared one none of it, with the aliases in their place
    assert [k for k, v in SECRETS.items() if v in shared] == []
    assert "[REDACTED:hf-token]" in shared and "host-1" in shared and "ip-1" in shared
    assert "Qwen/Qwen3.6-27B" in shared


def test_cli_redacts_shared_formats_by_default(tmp_path):
    from typer.testing import CliRunner
    from diag.cli import app
    log = str(seeded_log(tmp_path))
    runner = CliRunner()
    shared = runner.invoke(app, ["analyze", log, "--format", "markdown"]).output
    plain = runner.invoke(app, ["analyze", log, "--format", "markdown", "--no-redact"]).output
    assert SECRETS["hf"] not in shared and SECRETS["hf"] in plain


# -- issue 10: every secret kind, in every shared format, with host names in the file names ----

HOSTILE = Path(__file__).parent / "data" / "hostile"
SEEDED_SECRETS = [  # every sensitive value in tests/data/hostile/redaction-seeded*.{log,txt}
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90", "alice", "dgx-a100-03",
    "my-gpu-box", "s3cr3tk3yvalue9", "10.0.0.12", "node17", "gpu-node-17", "cluster.internal", "34.120.5.6",
    "bob.smith", "hunter2pw", "r3disPassw0rd", "p@ssw0rdX", "db.corp.example.com", "ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ",
    "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "xapp-1-A0123456789-1234567890123-abcdef0123456789abcdef",
    "AKIAIOSFODNN7EXAMPLE", "ASIAY34FZKBOKMUTVV7A", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "Tr0ub4dor3",
    "abcDEF123456ghiJKL7890", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9", "YWxhZGRpbjpvcGVuc2VzYW1l", "2001:db8:85a3",
    "fe80::1ff:fe23:4567:890a", "192.168.7.9", "sglang-7d9f8c6b5-x2x9q", "sk-ant-api03-AbCdEf0123456789",
    "hooks.slack.com/services/T00000000", "carol", "dmitri", "Eleanor",
]


@pytest.fixture
def seeded_inputs(tmp_path):
    log = tmp_path / "gpu-node-17.cluster.internal-server.log"
    log.write_bytes((HOSTILE / "redaction-seeded.log").read_bytes())
    smi = tmp_path / "node17.log"
    smi.write_bytes((HOSTILE / "redaction-seeded-smi.txt").read_bytes())
    return log, smi


@pytest.mark.parametrize("fmt", ["markdown", "slack", "slack-blocks", "html", "sarif", "github"])
def test_seeded_log_leaks_nothing_in_any_shared_format(seeded_inputs, tmp_path, fmt):
    from typer.testing import CliRunner  # noqa: F401 - the CLI path, as a user runs it
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from hostile import diag
    log, smi = seeded_inputs
    out = tmp_path / f"out.{fmt}"
    run = diag("analyze", str(log), "--smi", str(smi), "--format", fmt, "-o", str(out))
    assert run.code in (0, 1, 3), run.err
    shared = out.read_text()
    raw = diag("analyze", str(log), "--smi", str(smi), "--format", fmt, "--no-redact", "-o", str(tmp_path / "raw")).code
    assert raw in (0, 1, 3)
    shown = [s for s in SEEDED_SECRETS if s in (tmp_path / "raw").read_text()]
    assert shown, shown  # the unredacted view does show secrets (github: the file name): the shared one removed them
    leaked = [s for s in SEEDED_SECRETS if s in shared]
    assert leaked == [], leaked
    assert "redis://:[REDACTED:password]@" in shared or fmt in ("sarif", "github", "slack", "slack-blocks", "markdown")


def test_seeded_log_same_host_same_alias(seeded_inputs):
    log, smi = seeded_inputs
    report = analyze([str(log)], [str(smi)])
    out = redact_report(report)
    name = out.inputs[0].path.rsplit("/", 1)[-1]
    assert name.endswith("-server.log") and name.startswith("host-"), name
    alias = name[: -len("-server.log")]
    texts = " ".join(e.text for f in out.findings for e in f.evidence) + " " + str(out.facts)
    assert alias in texts  # gpu-node-17.cluster.internal inside the log has the file name's alias
    assert out.inputs[1].path.rsplit("/", 1)[-1].startswith("host-")  # node17.log
    r = Redactor()
    a = r.redact("host gpu-node-17.cluster.internal up")
    b = r.redact_name("/x/gpu-node-17.cluster.internal-server.log")
    assert a.split()[1] == b.rsplit("/", 1)[1][: -len("-server.log")]


def test_spans_are_redacted_first():
    from diag.report import Evidence
    r = Redactor()
    text = "peer zeus answered, token qwerty123 from build-box"
    spans = [(text.index(w), text.index(w) + len(w), k) for w, k in (("zeus", "host"), ("qwerty123", "token"), ("build-box", "host"))]
    ev = Evidence(0, 1, text, spans=spans)
    out = r.redact_spans(ev.text, ev.spans)
    assert out == "peer host-1 answered, token [REDACTED:token] from host-2"
    assert r.redact("zeus again") == "zeus again"  # a bare word: only spans make it a host
    assert r.redact("build-box again").startswith("host-2")  # machine-like names learnt from spans are known


@pytest.mark.parametrize("text, secret, marker", [
    ("redis://:r3disPassw0rd@cache:6379/0", "r3disPassw0rd", "redis://:[REDACTED:password]@"),
    ("jwt eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fw", "eyJhbGci", "[REDACTED:jwt]"),
    ("xapp-1-A0123456789-1234567890123-abcdef0123456789", "xapp-1-A012", "[REDACTED:slack-token]"),
    ("xoxe.xoxp-1-Mi0yLTE0NTc1NzI3MDAwNDk", "xoxe.xoxp-1", "[REDACTED:slack-token]"),
    ("xoxp-1234567890-abcdefghij", "xoxp-1234567890", "[REDACTED:slack-token]"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github_pat_11ABC", "[REDACTED:github-token]"),
    ("pod sglang-7d9f8c6b5-x2x9q restarted", "sglang-7d9f8c6b5-x2x9q", "pod pod-1 restarted"),
    ("[pod/sglang-worker-0/server] up", "sglang-worker-0", "[pod/pod-1/server]"),
])
def test_new_token_kinds(text, secret, marker):
    out = redact_text(text)
    assert secret not in out and marker in out, out
