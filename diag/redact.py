"""Redaction for reports that are shared: secrets removed, people and machines pseudonymised.

Secrets become `[REDACTED:kind]`; user names, host names, IP and e-mail addresses get an
alias (`user-1`, `host-1`, `ip-1`, `email-1`) that is the same everywhere in one report.
`redact_report` returns a deep copy in which every string a renderer can show, including
the facts object the HTML view reads, went through one Redactor. Model ids
(`Qwen/Qwen3.6-27B`), version numbers and localhost addresses stay readable.
"""
from __future__ import annotations

import copy
import dataclasses
import re

from .commands import attach as attach_commands
from .facts import Facts
from .report import Report

# Secrets: (kind, pattern); the group named `s` is replaced, the rest kept.
SECRETS = [
    ("slack-webhook", re.compile(r"(?P<s>https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+)")),
    ("bearer-token", re.compile(r"(?i)\b(?:bearer|basic)\s+(?P<s>[A-Za-z0-9._~+/=-]{8,})")),
    ("hf-token", re.compile(r"\b(?P<s>hf_[A-Za-z0-9]{20,})\b")),
    ("github-token", re.compile(r"\b(?P<s>gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b")),
    ("slack-token", re.compile(r"\b(?P<s>xox[abposre]-[A-Za-z0-9-]{10,})")),
    ("aws-key", re.compile(r"\b(?P<s>(?:AKIA|ASIA)[A-Z0-9]{16})\b")),
    ("api-key", re.compile(r"\b(?P<s>sk-[A-Za-z0-9_-]{16,})")),
    ("secret", re.compile(r"(?i)--(?P<k>(?:admin-)?api-key|[\w-]*(?:token|password|secret))(?:\s+|=)['\"]?(?P<s>[^\s'\"]+)")),
    ("secret", re.compile(r"(?i)(?<![#\w-])(?P<k>(?:[\w-]*[_-])?"
                          r"(?:api[_-]?key|access[_-]?key|secret[_-]?key|secret|password|passwd|pwd|token))"
                          r"['\"]?\s*(?P<sep>[=:])\s*(?P<q>['\"]?)(?P<s>[^\s'\",;&)}\]]+)")),
]
NOT_SECRET = re.compile(r"^(?:None|none|null|True|False|true|false|\*+|<.*>|[\d.]+|\[REDACTED.*)$")
URL_CREDS = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)(?P<user>[^\s:/@]+):(?P<pw>[^\s@/]+)@")
EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}\b")
HOME = re.compile(r"(?P<pre>/home/|/Users/|\b[A-Za-z]:\\{1,2}Users\\{1,2})(?P<name>[^/\\\s'\"]+)")
PROMPT = re.compile(r"(?<![\w.-])(?P<name>[a-z_][\w-]{0,31})@(?P<host>[A-Za-z0-9][\w.-]*)(?=:[~/])")
# Where a word is a host name by its place: URLs, host=..., --host / --dist-init-addr, NCCL's prefix.
HOST_PLACES = [
    re.compile(r"\b[a-z][a-z0-9+.-]*://(?:[^\s/@]*@)?(?P<host>[A-Za-z0-9][\w.-]*)"),
    re.compile(r"(?i)(?:\b(?:host|hostname|dist_init_addr|master_addr)\s*=\s*['\"]?|\"(?:host|hostname|dist_init_addr)\"\s*:\s*\")"
               r"(?P<host>[A-Za-z0-9][\w.-]*)"),
    re.compile(r"(?m)(?:^|\s)(?P<host>[A-Za-z][\w-]*(?:\.[\w-]+)*):\d+:\d+ \[\d+\] NCCL"),
]
# After a flag, a plain word is a host only where a command would have one (`--host box --port 1`),
# not in prose (`--dist-init-addr must be reachable`).
HOST_FLAG = re.compile(r"(?i)--(?:host|dist-init-addr|master-addr|nccl-init-addr)(?!\w)(?:\s+|=)['\"]?(?P<host>[A-Za-z0-9][\w.-]*)")
HOST_FLAG_END = re.compile(r"['\"]?(?::\d|\s+-|\s*$)")
TLDS = ("com|net|org|io|ai|co|dev|edu|gov|mil|cloud|internal|local|lan|corp|intra|intranet|home|arpa|"
        "us|uk|de|cn|jp|fr|nl|eu|ca|au|kr|ru|ch|se|tech|xyz")
FQDN = re.compile(rf"(?i)(?<![\w@.-])(?:[a-z0-9](?:[a-z0-9-]{{0,61}}[a-z0-9])?\.)+(?:{TLDS})(?![\w-]|\.[a-z0-9])")
PUBLIC = ("huggingface.co", "hf.co", "github.com", "githubusercontent.com", "pytorch.org", "nvidia.com", "python.org",
          "pypi.org", "sglang.ai", "lmsys.org", "docker.io", "docker.com", "ghcr.io", "nvcr.io", "flashinfer.ai",
          "readthedocs.io", "modelscope.cn", "ubuntu.com", "debian.org", "anaconda.org")
LOCAL = {"localhost", "0.0.0.0", "::", "::1", "ip6-localhost"}
KEEP_USERS = {"root", "Shared", "Public", "Default", "All Users"}
OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
IPV4 = re.compile(rf"(?<![\w.-]){OCTET}(?:\.{OCTET}){{3}}(?![\w-]|\.\d)")
HEX = r"[0-9A-Fa-f]{1,4}"
IPV6 = re.compile(rf"(?<![\w:.])(?:(?:{HEX}:){{7}}{HEX}|(?:{HEX}:){{1,7}}:(?:{HEX}(?::{HEX}){{0,6}})?|::(?:{HEX}:){{0,6}}{HEX})(?![\w:])")
VERSION_BEFORE = re.compile(r"(?i)(?:\bversion|\bver|\bv|==|>=|<=|\bcudnn|\bnccl|\bdriver|\brelease)[\s:=]*$")


class Redactor:
    """Holds the aliases of one report, so the same name gets the same alias everywhere."""

    def __init__(self) -> None:
        self.aliases: dict[tuple[str, str], str] = {}
        self._hosts_re: re.Pattern | None = None
        self._hosts_n = -1

    def alias(self, kind: str, value: str) -> str:
        key = (kind, value.lower() if kind in ("host", "email", "ip") else value)
        if key not in self.aliases:
            n = sum(1 for k in self.aliases if k[0] == kind) + 1
            self.aliases[key] = f"{kind}-{n}"
        return self.aliases[key]

    def redact(self, text: str) -> str:
        if not text:
            return text
        text = URL_CREDS.sub(lambda m: f"{m['scheme']}{self._user(m['user'])}:[REDACTED:password]@", text)
        for kind, pattern in SECRETS:
            text = pattern.sub(lambda m, k=kind: self._secret(m, k), text)
        text = EMAIL.sub(lambda m: self.alias("email", m[0]), text)
        text = HOME.sub(lambda m: m["pre"] + self._user(m["name"]), text)
        text = PROMPT.sub(lambda m: f"{self._user(m['name'])}@{self._host(m['host'])}", text)
        for pattern in HOST_PLACES:
            text = pattern.sub(lambda m: _swap(m, "host", self._host(m["host"])), text)
        text = HOST_FLAG.sub(self._host_flag, text)
        if (known := self._known_hosts()) is not None:
            text = known.sub(lambda m: self.alias("host", m[0]), text)
        text = FQDN.sub(lambda m: self._host(m[0]), text)
        text = IPV6.sub(self._ipv6, text)
        return IPV4.sub(self._ipv4, text)

    def _secret(self, m: re.Match, kind: str) -> str:
        value = m["s"]
        if NOT_SECRET.match(value) or _prose(m):
            return m[0]
        if kind == "secret":
            key = m["k"].lower()
            kind = ("password" if "pass" in key or "pwd" in key else "secret" if "secret" in key
                    else "api-key" if "key" in key else "token")
        return _swap(m, "s", f"[REDACTED:{kind}]")

    def _user(self, name: str) -> str:
        return name if name in KEEP_USERS else self.alias("user", name)

    def _host(self, host: str) -> str:
        h = host.lower().rstrip(".")
        if h in self.aliases.values():  # already replaced by an earlier pattern
            return host
        public = any(h == p or h.endswith("." + p) for p in PUBLIC)
        if public or h in LOCAL or h.isdigit() or h.startswith("127.") or IPV4.fullmatch(h):
            return host
        return self.alias("host", host.rstrip("."))

    def _host_flag(self, m: re.Match) -> str:
        host = m["host"]
        if re.search(r"[\d.-]", host) or HOST_FLAG_END.match(m.string, m.end()):
            return _swap(m, "host", self._host(host))
        return m[0]

    def _known_hosts(self) -> re.Pattern | None:
        """Host names learnt so far that look like machine names (a digit, '-' or '.'), to replace anywhere."""
        names = [v for (k, v) in self.aliases if k == "host" and re.search(r"[\d.-]", v)]
        if len(names) != self._hosts_n:
            self._hosts_n = len(names)
            alt = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
            self._hosts_re = re.compile(rf"(?i)(?<![\w.-])(?:{alt})(?![\w-]|\.\w)") if names else None
        return self._hosts_re

    def _ipv4(self, m: re.Match) -> str:
        ip = m[0]
        if ip.startswith("127.") or ip == "0.0.0.0" or VERSION_BEFORE.search(m.string[max(0, m.start() - 12):m.start()]):
            return ip
        return self.alias("ip", ip)

    def _ipv6(self, m: re.Match) -> str:
        ip = m[0]
        groups = [g for g in ip.split(":") if g]
        if ip.lower() in LOCAL or (len(groups) < 3 and not ip.lower().startswith(("fe80", "fc", "fd"))):
            return ip
        return self.alias("ip", ip)


def _prose(m: re.Match) -> bool:
    """`per token: about twice` is a sentence; after an unquoted ':' a secret has digits and length."""
    groups = m.groupdict()
    return groups.get("sep") == ":" and not groups.get("q") and not (len(m["s"]) >= 8 and re.search(r"\d", m["s"]))


def _swap(m: re.Match, group: str, new: str) -> str:
    """The match with one named group replaced."""
    a, b = m.start(group) - m.start(), m.end(group) - m.start()
    return m[0][:a] + new + m[0][b:]


def redact_text(text: str, redactor: Redactor | None = None) -> str:
    """One text redacted (with a fresh Redactor unless one is given, to share its aliases)."""
    return (redactor or Redactor()).redact(text)


def redact_report(report: Report) -> Report:
    """A redacted deep copy of the report; the input is not changed.

    Two passes over the same strings: the first learns every host name (a host named
    after `--host` also gets its alias where it appears bare), the second writes.
    """
    redactor = Redactor()
    _walk(report, redactor.redact)
    out = _walk(report, redactor.redact)
    out.redacted = True
    attach_commands(out)  # the commands again, from the redacted launch command and fixes (quoted as words)
    return out


def _walk(obj, fn):
    """A copy of obj with fn applied to every string in it (dataclasses, dicts, lists, tuples)."""
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, dict):
        return {_walk(k, fn): _pair(k, v, fn) for k, v in obj.items()}
    if isinstance(obj, list):
        if obj and all(isinstance(x, str) for x in obj):
            joined = fn("\n".join(obj)).split("\n")  # an argv: `--api-key` gives its value away
            if len(joined) == len(obj):
                return joined
        return [_walk(x, fn) for x in obj]
    if isinstance(obj, (tuple, set, frozenset)):
        return type(obj)(_walk(x, fn) for x in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = copy.copy(obj)
        for f in dataclasses.fields(obj):
            if f.name not in _opaque(obj):
                object.__setattr__(out, f.name, _walk(getattr(obj, f.name), fn))
        return out
    return obj


def _pair(key, value, fn):
    """A dict value, read together with its key: {'--api-key': 'abc'} or {'host': 'node1'}."""
    if isinstance(key, str) and isinstance(value, str):
        done = fn(f"{key}={value}")
        head = fn(key) + "="
        return done[len(head):] if done.startswith(head) else fn(value)
    return _walk(value, fn)


def _opaque(obj) -> tuple[str, ...]:
    """Fields of the facts that hold catalogs and number columns, not text from the inputs."""
    return ("catalog", "version", "model", "gpu", "batches") if isinstance(obj, Facts) else ()
