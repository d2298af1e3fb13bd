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

from . import rx
from .commands import attach as attach_commands
from .facts import Facts
from .report import Evidence, InputInfo, Report

# Secrets: (kind, pattern); the group named `s` is replaced, the rest kept. All RE2 (linear time).
_SLACK = r"(?:xox[abposre]-[A-Za-z0-9-]{10,}|xoxe\.xox[bp]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,})"
SECRETS = [  # (kind, pattern, words one of which the text must hold for the pattern to be tried)
    ("slack-webhook", rx.compile(r"(?P<s>https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]+)"), ("hooks.slack",)),
    ("jwt", rx.compile(r"\b(?P<s>eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{8,})"), ("eyJ",)),
    ("bearer-token", rx.compile(r"(?i)\b(?:bearer|basic)\s+(?P<s>[A-Za-z0-9._~+/=-]{8,})"), ("earer", "asic", "EARER", "ASIC")),
    ("hf-token", rx.compile(r"\b(?P<s>hf_[A-Za-z0-9]{20,})\b"), ("hf_",)),
    ("github-token", rx.compile(r"\b(?P<s>gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b"), ("gh", "github_pat_")),
    ("slack-token", rx.compile(rf"\b(?P<s>{_SLACK})"), ("xox", "xapp-")),
    ("aws-key", rx.compile(r"\b(?P<s>(?:AKIA|ASIA)[A-Z0-9]{16})\b"), ("AKIA", "ASIA")),
    ("api-key", rx.compile(r"\b(?P<s>sk-[A-Za-z0-9_-]{16,})"), ("sk-",)),
    ("secret", rx.compile(r"(?i)--(?P<k>(?:admin-)?api-key|[\w-]*(?:token|password|secret))(?:\s+|=)['\"]?(?P<s>[^\s'\"]+)"), ("--",)),
    # key=value / key: value; the character before the key is matched (RE2 has no lookbehind)
    ("secret", rx.compile(r"(?i)(?:^|[^#\w-])(?P<k>(?:[\w-]*[_-])?"
                          r"(?:api[_-]?key|access[_-]?key|secret[_-]?key|secret|password|passwd|pwd|token))"
                          r"['\"]?\s*(?P<sep>[=:])\s*(?P<q>['\"]?)(?P<s>[^\s'\",;&)}\]]+)"), ("=", ":")),
]
NOT_SECRET = rx.compile(r"^(?:None|none|null|True|False|true|false|\*+|<.*>|[\d.]+|\[REDACTED.*)$")
# scheme://user:password@ and scheme://:password@ (redis): the password is labelled as one
URL_CREDS = rx.compile(r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)(?P<user>[^\s:/@]*):(?P<pw>[^\s@/]+)@")
EMAIL = rx.compile(r"\b[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}\b")
HOME = rx.compile(r"(?P<pre>/home/|/Users/|\b[A-Za-z]:\\{1,2}Users\\{1,2})(?P<name>[^/\\\s'\"]+)")
PROMPT = rx.compile(r"(?:^|[^\w.-])(?P<name>[a-z_][\w-]{0,31})@(?P<host>[A-Za-z0-9][\w.-]*):[~/]")
# Kubernetes pods: deployment-replicaset-pod (ReplicaSet hash and pod suffix in the safe alphabet), kubectl's pod/ names
_K8S = "bcdfghjklmnpqrstvwxz2456789"
POD = rx.compile(rf"(?:^|[^\w.-])(?P<pod>[a-z0-9](?:[a-z0-9-]{{0,40}}[a-z0-9])?-[{_K8S}]{{6,10}}-[{_K8S}]{{5}})(?:$|[^\w-])")
POD_PLACE = rx.compile(r"(?:\bpods?/|\bpod[_ ]?name\s*[=:]\s*['\"]?)(?P<pod>[a-z0-9][a-z0-9.-]{0,62})")
# Where a word is a host name by its place: URLs, host=..., --host / --dist-init-addr, NCCL's prefix.
HOST_PLACES = [
    rx.compile(r"\b[a-z][a-z0-9+.-]*://(?:[^\s/@]*@)?(?P<host>[A-Za-z0-9][\w.-]*)"),
    rx.compile(r"(?i)(?:\b(?:host|hostname|dist_init_addr|master_addr)\s*=\s*['\"]?|\"(?:host|hostname|dist_init_addr)\"\s*:\s*\")"
               r"(?P<host>[A-Za-z0-9][\w.-]*)"),
    rx.compile(r"(?m)(?:^|\s)(?P<host>[A-Za-z][\w-]*(?:\.[\w-]+)*):\d+:\d+ \[\d+\] NCCL"),
]
# After a flag, a plain word is a host only where a command would have one (`--host box --port 1`),
# not in prose (`--dist-init-addr must be reachable`).
HOST_FLAG = rx.compile(r"(?i)--(?:host|dist-init-addr|master-addr|nccl-init-addr)(?:\s+|=)['\"]?(?P<host>[A-Za-z0-9][\w.-]*)")
HOST_FLAG_END = rx.compile(r"['\"]?(?::\d|\s+-|\s*$)")
TLDS = ("com|net|org|io|ai|co|dev|edu|gov|mil|cloud|internal|local|lan|corp|intra|intranet|home|arpa|"
        "us|uk|de|cn|jp|fr|nl|eu|ca|au|kr|ru|ch|se|tech|xyz")
FQDN = rx.compile(rf"(?i)(?:^|[^\w@.-])(?P<x>(?:[a-z0-9](?:[a-z0-9-]{{0,61}}[a-z0-9])?\.)+(?:{TLDS}))")
# inside a file name a host may be followed by '-' or '_' ('gpu-node-17.cluster.internal-server.log')
FQDN_IN_NAME = rx.compile(rf"(?i)(?P<x>(?:[a-z0-9](?:[a-z0-9-]{{0,61}}[a-z0-9])?\.)+(?:{TLDS}))(?:$|[-_.])")
PUBLIC = ("huggingface.co", "hf.co", "github.com", "githubusercontent.com", "pytorch.org", "nvidia.com", "python.org",
          "pypi.org", "sglang.ai", "lmsys.org", "docker.io", "docker.com", "ghcr.io", "nvcr.io", "flashinfer.ai",
          "readthedocs.io", "modelscope.cn", "ubuntu.com", "debian.org", "anaconda.org")
LOCAL = {"localhost", "0.0.0.0", "::", "::1", "ip6-localhost"}
KEEP_USERS = {"root", "Shared", "Public", "Default", "All Users"}
OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
IPV4 = rx.compile(rf"(?:^|[^\w.-])(?P<x>{OCTET}(?:\.{OCTET}){{3}})")
IPV4_FULL = rx.compile(rf"^{OCTET}(?:\.{OCTET}){{3}}$")
HEX = r"[0-9A-Fa-f]{1,4}"
IPV6 = rx.compile(rf"(?:^|[^\w:.])(?P<x>(?:{HEX}:){{7}}{HEX}|(?:{HEX}:){{1,7}}:(?:{HEX}(?::{HEX}){{0,6}})?|::(?:{HEX}:){{0,6}}{HEX})")
VERSION_BEFORE = rx.compile(r"(?i)(?:\bversion|\bver|\bv|==|>=|<=|\bcudnn|\bnccl|\bdriver|\brelease)[\s:=]*$")
# a machine named in a file name: a host word and a number ('node17', 'gpu-node-3', 'worker_02'), not a
# model or GPU name ('qwen36-27b', 'rtx-pro-6000') nor a date ('server-2024-05-14')
MACHINE = rx.compile(r"(?i)(?:^|[-_.])(?P<x>(?:[a-z]+-)?(?:node|host|gpu|worker|machine|compute|dgx|hgx|box|vm|instance|srv|server)"
                     r"[-_]?\d{1,3}(?:[a-z]\d*)?)(?:$|[-_.])")
SPAN_KINDS = {"host": "host", "hostname": "host", "ip": "ip", "user": "user", "email": "email", "pod": "pod",
              "path": "user"}
# spans that mark a part of the line without it being sensitive: the catalog-matched message (the
# views highlight it); redaction keeps them, moved onto the redacted text
MARK_KINDS = frozenset({"message"})


def _not_followed(text: str, end: int, chars: str, dot_then: str = "") -> bool:
    """The lookahead RE2 lacks: the character at `end` is none of `chars` (nor '.' then one of `dot_then`)."""
    if end >= len(text):
        return True
    c = text[end]
    if c.isalnum() and "w" in chars or c == "_" and "w" in chars or c in chars.replace("w", ""):
        return False
    if dot_then and c == "." and end + 1 < len(text):
        n = text[end + 1]
        return not (n.isalnum() if dot_then == "w" else n.isdigit() if dot_then == "d" else n.isalnum() and n.isascii())
    return True


def _sub_group(pattern, text: str, group: str, fn, after=None) -> str:
    """pattern.sub on one named group only: the characters matched around it are kept; `after`
    (text, end) -> bool may refuse a match, as a lookahead would."""
    out, last = [], 0
    gi = pattern.groupindex[group]
    for m in pattern.finditer(text):
        a, b = m.span(gi)
        if a < 0 or (after is not None and not after(text, b)):
            continue
        new = fn(m, text[a:b])
        if new is None:
            continue
        out.append(text[last:a])
        out.append(new)
        last = b
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


class Redactor:
    """Holds the aliases of one report, so the same name gets the same alias everywhere."""

    def __init__(self) -> None:
        self.aliases: dict[tuple[str, str], str] = {}
        self._hosts_re = None
        self._hosts_n = -1
        self._memo: dict[tuple[str, int], str] = {}

    def alias(self, kind: str, value: str) -> str:
        key = (kind, value.lower() if kind in ("host", "email", "ip", "pod") else value)
        if key not in self.aliases:
            n = sum(1 for k in self.aliases if k[0] == kind) + 1
            self.aliases[key] = f"{kind}-{n}"
        return self.aliases[key]

    def redact(self, text: str) -> str:
        if not text or len(text) < 3:
            return text
        key = (text, self._hosts_n)
        done = self._memo.get(key)
        if done is None:
            done = self._redact(text)
            if len(self._memo) < 200_000:
                self._memo[key] = done
        return done

    def _redact(self, text: str) -> str:
        if "://" in text:
            text = URL_CREDS.sub(lambda m: f"{m['scheme']}{self._user(m['user']) if m['user'] else ''}:[REDACTED:password]@", text)
        for kind, pattern, needles in SECRETS:
            if any(n in text for n in needles):
                text = _sub_group(pattern, text, "s", lambda m, v, k=kind: self._secret(m, v, k))
        if "@" in text:
            text = EMAIL.sub(lambda m: self.alias("email", m[0]), text)
            text = _sub_group(PROMPT, text, "name", lambda m, v: self._user(v))
            text = _sub_group(PROMPT, text, "host", lambda m, v: self._host(v))
        if "Users" in text or "/home/" in text:
            text = _sub_group(HOME, text, "name", lambda m, v: self._user(v))
        if "pod" in text:
            text = _sub_group(POD_PLACE, text, "pod", lambda m, v: self._pod(v))
        if "-" in text:
            text = _sub_group(POD, text, "pod", lambda m, v: self._pod(v))
        for pattern in HOST_PLACES:
            text = _sub_group(pattern, text, "host", lambda m, v: self._host(v))
        if "--" in text:
            text = _sub_group(HOST_FLAG, text, "host", self._host_flag)
        if (known := self._known_hosts()) is not None:
            text = _sub_group(known, text, "x", lambda m, v: self.alias("host", v),
                              after=lambda t, e: _not_followed(t, e, "w-", "w"))
        if "." in text:
            text = _sub_group(FQDN, text, "x", lambda m, v: self._host(v), after=lambda t, e: _not_followed(t, e, "w-", "a"))
            text = _sub_group(IPV4, text, "x", self._ipv4, after=lambda t, e: _not_followed(t, e, "w-", "d"))
        if "::" in text or text.count(":") >= 2:
            text = _sub_group(IPV6, text, "x", lambda m, v: self._ipv6(v), after=lambda t, e: _not_followed(t, e, "w:"))
        return text

    def redact_name(self, path: str) -> str:
        """An input's file name: its folders as any text; in its base name, host names also where
        a '-server' follows, and machine names ('node17'), which are then known everywhere."""
        head, sep, base = path.rpartition("/")
        head = self.redact(head) if head else head
        name = self.redact(base)
        name = _sub_group(FQDN_IN_NAME, name, "x", lambda m, v: self._host(v))
        if (known := self._known_hosts()) is not None:
            name = _sub_group(known, name, "x", lambda m, v: self.alias("host", v))
        name = _sub_group(MACHINE, name, "x", lambda m, v: self._host(v))
        return head + sep + name

    def redact_spans(self, text: str, spans) -> str:
        """The parser's own record of what is sensitive, replaced first (the regexes then run as a backstop)."""
        out, last = [], 0
        for start, end, kind in sorted(spans or (), key=lambda s: s[0]):
            if start < last or end > len(text) or start >= end:
                continue
            value = text[start:end]
            k = SPAN_KINDS.get(kind)
            if k == "host":
                new = self._host(value)
            elif k == "user":
                new = self._user(value) if kind == "user" else self.redact(value)
            elif k:
                new = self.alias(k, value)
            else:  # token, secret, password, api-key, ...
                new = f"[REDACTED:{kind}]"
            out.append(text[last:start])
            out.append(new)
            last = end
        out.append(text[last:])
        return self.redact("".join(out))

    def _secret(self, m, value: str, kind: str) -> str | None:
        if NOT_SECRET.match(value) or _prose(m, value):
            return None
        if kind == "secret":
            key = m["k"].lower()
            kind = ("password" if "pass" in key or "pwd" in key else "secret" if "secret" in key
                    else "api-key" if "key" in key else "token")
        return f"[REDACTED:{kind}]"

    def _user(self, name: str) -> str:
        return name if name in KEEP_USERS else self.alias("user", name)

    def _pod(self, name: str) -> str:
        if name.startswith("pod-") and name[4:].isdigit():
            return name
        return self.alias("pod", name)

    def _host(self, host: str) -> str:
        h = host.lower().rstrip(".")
        if h in self.aliases.values():  # already replaced by an earlier pattern
            return host
        public = any(h == p or h.endswith("." + p) for p in PUBLIC)
        if public or h in LOCAL or h.isdigit() or h.startswith("127.") or IPV4_FULL.match(h):
            return host
        return self.alias("host", host.rstrip("."))

    def _host_flag(self, m, host: str) -> str | None:
        if any(c.isdigit() or c in ".-" for c in host) or HOST_FLAG_END.match(m.string, rx.span_of(m, "host")[1]):
            return self._host(host)
        return None

    def _known_hosts(self):
        """Host names learnt so far that look like machine names (a digit, '-' or '.'), to replace anywhere."""
        names = [v for (k, v) in self.aliases if k == "host" and any(c.isdigit() or c in ".-" for c in v)]
        if len(names) != self._hosts_n:
            self._hosts_n = len(names)
            alt = "|".join(rx.escape(n) for n in sorted(names, key=len, reverse=True))
            self._hosts_re = rx.compile(rf"(?i)(?:^|[^\w.-])(?P<x>{alt})", register=False) if names else None
        return self._hosts_re

    def _ipv4(self, m, ip: str) -> str | None:
        a = m.span(m.re.groupindex["x"])[0]
        if ip.startswith("127.") or ip == "0.0.0.0" or VERSION_BEFORE.search(m.string[max(0, a - 12):a]):
            return None
        return self.alias("ip", ip)

    def _ipv6(self, ip: str) -> str | None:
        groups = [g for g in ip.split(":") if g]
        if ip.lower() in LOCAL or (len(groups) < 3 and not ip.lower().startswith(("fe80", "fc", "fd"))):
            return None
        return self.alias("ip", ip)


def _prose(m, value: str) -> bool:
    """`per token: about twice` is a sentence; after an unquoted ':' a secret has digits and length."""
    groups = m.groupdict()
    return groups.get("sep") == ":" and not groups.get("q") and not (len(value) >= 8 and any(c.isdigit() for c in value))


def redact_text(text: str, redactor: Redactor | None = None) -> str:
    """One text redacted (with a fresh Redactor unless one is given, to share its aliases)."""
    return (redactor or Redactor()).redact(text)


def redact_report(report: Report) -> Report:
    """A redacted deep copy of the report; the input is not changed.

    Two passes over the same strings: the first learns every host name (a host named
    after `--host` also gets its alias where it appears bare), the second writes.
    """
    redactor = Redactor()
    for info in report.inputs:  # file names first: a host they name is then known everywhere
        redactor.redact_name(info.path)
    _walk(report, redactor.redact, redactor)
    out = _walk(report, redactor.redact, redactor)
    out.redacted = True
    attach_commands(out)  # the commands again, from the redacted launch command and fixes (quoted as words)
    return out


def _marks_moved(ev: Evidence, text: str, fn) -> list[tuple[int, int, str]]:
    """The evidence's marking spans on its redacted text: where the marked part, redacted, now
    stands (dropped where redaction changed it past finding)."""
    out = []
    for a, b, kind in ev.spans:
        if kind not in MARK_KINDS or not 0 <= a < b <= len(ev.text):
            continue
        piece = fn(ev.text[a:b]) if ev.text[a:b].strip() else ""
        if not piece:
            continue
        at = text.find(piece, max(0, min(a, len(text)) - 200))
        at = at if at >= 0 else text.find(piece)
        if at >= 0:
            out.append((at, at + len(piece), kind))
    return out


def _walk(obj, fn, redactor: Redactor | None = None):
    """A copy of obj with fn applied to every string in it (dataclasses, dicts, lists, tuples);
    evidence with spans is redacted from its spans first, input file names as names."""
    if isinstance(obj, str):
        return fn(obj)
    if redactor is not None:
        if isinstance(obj, Evidence) and obj.spans:
            out = copy.copy(obj)
            sensitive = [s for s in obj.spans if s[2] not in MARK_KINDS]
            out.text = redactor.redact_spans(obj.text, sensitive) if sensitive else fn(obj.text)
            out.context = _walk(obj.context, fn, redactor)
            out.spans = _marks_moved(obj, out.text, fn)
            return out
        if isinstance(obj, InputInfo):
            out = copy.copy(obj)
            out.path = redactor.redact_name(obj.path)
            out.notes = [_walk(n, fn, redactor) for n in obj.notes]
            return out
    if isinstance(obj, dict):
        return {_walk(k, fn, redactor): _pair(k, v, fn, redactor) for k, v in obj.items()}
    if isinstance(obj, list):
        if obj and all(isinstance(x, str) for x in obj):
            joined = fn("\n".join(obj)).split("\n")  # an argv: `--api-key` gives its value away
            if len(joined) == len(obj):
                return joined
        return [_walk(x, fn, redactor) for x in obj]
    if isinstance(obj, (tuple, set, frozenset)):
        return type(obj)(_walk(x, fn, redactor) for x in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = copy.copy(obj)
        for f in dataclasses.fields(obj):
            if f.name not in _opaque(obj):
                object.__setattr__(out, f.name, _walk(getattr(obj, f.name), fn, redactor))
        return out
    return obj


def _pair(key, value, fn, redactor=None):
    """A dict value, read together with its key: {'--api-key': 'abc'} or {'host': 'node1'}."""
    if isinstance(key, str) and isinstance(value, str):
        done = fn(f"{key}={value}")
        head = fn(key) + "="
        return done[len(head):] if done.startswith(head) else fn(value)
    return _walk(value, fn, redactor)


def _opaque(obj) -> tuple[str, ...]:
    """Fields of the facts that hold catalogs and number columns, not text from the inputs."""
    return ("catalog", "version", "model", "gpu", "batches") if isinstance(obj, Facts) else ()
