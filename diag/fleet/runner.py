"""`diag run -- python -m sglang.launch_server …`: check the launch, start the server so that
no output is lost, record how it ended, and diagnose it the moment it dies.

1. Pre-flight, before minutes of weight loading: the flags check (diag/lint.py) against the
   installed SGLang (asked from the command's Python) or --sglang-version, and the memory
   budget (diag/mem_cmd.py) when the GPU is known (--gpu, or nvidia-smi). Errors stop here
   unless --force.
2. The start: stdout and stderr into one log file opened for appending (never truncated),
   PYTHONUNBUFFERED=1, standard input closed, a session of its own with --detach (the
   terminal's hang-up does not reach it: what nohup is used for, without nohup's pitfalls).
   The command line is written to the log first, as a shell would show it.
3. While it runs, the log is watched (diag/fleet/watch.py): findings as they complete, a line
   when the server is ready.
4. How it ended, from the operating system, not inferred: the exit status or the signal (a
   SIGKILL is known); for a SIGKILL, the kernel's OOM-killer line about one of its processes
   when the kernel log is readable. Both are appended to the log in the words a shell and the
   kernel use (so the log read later says the same), and the run is diagnosed.
"""
from __future__ import annotations

import datetime
import os
import shlex
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from .. import rx

ENV_WORD = rx.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# what bash prints when a foreground job dies of a signal (the parser knows these words)
SHELL_WORDS = {signal.SIGKILL: "Killed", signal.SIGSEGV: "Segmentation fault (core dumped)", signal.SIGABRT: "Aborted (core dumped)",
               signal.SIGBUS: "Bus error (core dumped)"}


@dataclass
class Preflight:
    problems: list[dict] = field(default_factory=list)   # {severity, message, suggestion?}
    notes: list[str] = field(default_factory=list)
    version: str | None = None
    memory: dict | None = None

    @property
    def blocking(self) -> list[dict]:
        return [p for p in self.problems if p["severity"] in ("error", "critical")]


@dataclass
class Ending:
    pid: int
    returncode: int
    seconds: float
    oom_kill: str | None = None       # the kernel's line, when readable and about one of its processes
    kernel_log: str = "not needed"    # read | unreadable | not needed

    @property
    def signal(self) -> int | None:
        return -self.returncode if self.returncode < 0 else None

    def describe(self) -> str:
        if self.signal:
            try:
                name = signal.Signals(self.signal).name
            except ValueError:
                name = f"signal {self.signal}"
            how = f"killed by {name} (signal {self.signal})"
        else:
            how = f"exited with status {self.returncode}"
        return f"the server (pid {self.pid}) {how} after {self.seconds:.1f} s"

    def shell_line(self) -> str:
        """What bash would have printed for this ending (the words the parser reads)."""
        sig = self.signal
        if sig is not None:
            return SHELL_WORDS.get(sig, f"Exit code: {self.returncode}")
        return f"Exit code: {self.returncode}"

    def to_json(self) -> dict:
        return {"pid": self.pid, "returncode": self.returncode, "signal": self.signal,
                "signal_name": signal.Signals(self.signal).name if self.signal and self.signal in signal.Signals._value2member_map_ else None,
                "seconds": round(self.seconds, 3), "oom_kill": self.oom_kill, "kernel_log": self.kernel_log,
                "description": self.describe()}


# -- pre-flight -------------------------------------------------------------------------------

def split_env(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """VAR=value words before the program, as a shell reads them."""
    env, k = {}, 0
    while k < len(argv) and ENV_WORD.match(argv[k]):
        name, _, value = argv[k].partition("=")
        env[name] = value
        k += 1
    return env, argv[k:]


def installed_sglang(python: str, timeout: float = 10.0) -> str | None:
    """The SGLang version the command's Python has installed, asked from that Python."""
    code = "import importlib.metadata as m\ntry:\n print(m.version('sglang'))\nexcept Exception:\n pass"
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    v = out.stdout.strip()
    return v or None


def local_gpu(timeout: float = 10.0) -> str | None:
    """The first GPU's total memory in MiB from nvidia-smi, when there is one."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = out.stdout.strip().splitlines()[0].strip() if out.returncode == 0 and out.stdout.strip() else ""
    return first if first.isdigit() else None


def preflight(argv: list[str], sglang_version: str | None = None, gpu: str | None = None,
              model_config: str | None = None) -> Preflight:
    from ..launch import find_entry
    from ..lint import lint_command
    pf = Preflight()
    env, words = split_env(argv)
    if find_entry(words) < 0:
        pf.notes.append("not an SGLang launch command (python -m sglang.launch_server … or sglang serve …): "
                        "the flags and the memory budget are not checked")
        return pf
    version = sglang_version
    if version is None and words and os.path.basename(words[0]).startswith("python"):
        version = installed_sglang(words[0])
        if version:
            pf.notes.append(f"SGLang {version} is installed for {words[0]}")
    pf.version = version
    lint = lint_command(argv, _known(version))
    pf.notes.append(lint["version_note"])
    pf.problems.extend(lint["problems"])
    gpu = gpu or local_gpu()
    if gpu is None:
        pf.notes.append("memory budget not checked: no GPU found here (give --gpu, e.g. --gpu H100)")
        return pf
    from .. import mem_cmd
    import json
    text, code = mem_cmd.run(argv, gpu, model_config, _known(version), "json")
    if code == 2:
        pf.notes.append(f"memory budget not checked: {text.removeprefix('diag mem: ').strip()}")
        return pf
    pf.memory = json.loads(text)
    if code == 1:
        pf.problems.append({"severity": "error", "kind": "memory",
                            "message": "the memory budget does not fit on this GPU: the server would fail at start-up "
                                       "(`diag mem --gpu … -- <command>` shows the budget and the options)"})
    return pf


def _known(version: str | None) -> str | None:
    """A version the flag catalog can be asked about (a dev build's base release)."""
    if not version:
        return None
    from .. import versions as V
    return version if V.parse(version) else None


# -- the run ----------------------------------------------------------------------------------

def descendants(pid: int) -> set[int]:
    """The process's children, grandchildren, … (from /proc)."""
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                kids = [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            kids = []
        for k in kids:
            if k not in out:
                out.add(k)
                todo.append(k)
    return out


def kernel_oom_line(pids: set[int]) -> tuple[str | None, str]:
    """The kernel's 'Out of memory: Killed process N' line about one of these processes, and
    whether the kernel log could be read (/dev/kmsg, else dmesg)."""
    wanted = [f"Killed process {p} " for p in pids] + [f"Killed process {p}(" for p in pids] + [f"pid={p}," for p in pids]
    lines = _kmsg()
    how = "read"
    if lines is None:
        try:
            out = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=5, stdin=subprocess.DEVNULL)
            lines = out.stdout.splitlines() if out.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired):
            lines = None
    if lines is None:
        return None, "unreadable"
    for line in reversed(lines):
        if ("Out of memory" in line or "oom-kill" in line or "oom_reaper" in line) and any(w in line for w in wanted):
            return line.strip(), how
    return None, how


def _kmsg() -> list[str] | None:
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    lines = []
    try:
        while True:
            try:
                rec = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == 32:     # EPIPE: records overwritten while reading; go on
                    continue
                break
            if not rec:
                break
            text = rec.decode("utf-8", "replace")
            lines.append(text.split(";", 1)[1].split("\n", 1)[0] if ";" in text else text)
    finally:
        os.close(fd)
    return lines


class Runner:
    """Start, watch and record one server run."""

    def __init__(self, argv: list[str], log_path: str, detach: bool = False, emit=None, interval: float = 0.5,
                 settle: float = 1.0, sglang_version: str | None = None):
        self.argv, self.log_path, self.detach = argv, log_path, detach
        self.emit = emit or (lambda note: None)
        self.interval, self.settle, self.sglang_version = interval, settle, sglang_version
        self.proc: subprocess.Popen | None = None
        self.ready_after: float | None = None
        self.start_offset = 0
        self._pids: set[int] = set()
        self._stop = False

    def start(self) -> None:
        env_words, words = split_env(self.argv)
        env = dict(os.environ, PYTHONUNBUFFERED="1", **env_words)
        os.makedirs(os.path.dirname(os.path.abspath(self.log_path)), exist_ok=True)
        self.log = open(self.log_path, "ab", buffering=0)          # append: an earlier run's output stays
        self.start_offset = self.log.seek(0, os.SEEK_END)
        now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %z")
        self._write(f"diag run: starting at {now} in {os.getcwd()} (output unbuffered, stderr with stdout, appended here)")
        self._write("$ " + shlex.join(self.argv))
        self.t0 = time.monotonic()
        try:
            self.proc = subprocess.Popen(words, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=self.detach, close_fds=True)
        except OSError as exc:
            self._write(f"diag run: cannot start {words[0] if words else '?'}: {exc.strerror or exc}")
            self.log.close()
            raise
        self._pids.add(self.proc.pid)

    def _write(self, line: str) -> None:
        self.log.write((line + "\n").encode("utf-8", "replace"))

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Pass a stop on to the server (and, when it has its own session, its process group)."""
        self._stop = True
        if self.proc and self.proc.poll() is None:
            try:
                if self.detach:
                    os.killpg(self.proc.pid, sig)
                else:
                    self.proc.send_signal(sig)
            except ProcessLookupError:
                pass

    def supervise(self, exit_when_ready: bool = False) -> Ending | None:
        """Watch the log until the server ends (its Ending) or, with exit_when_ready, is ready (None)."""
        from .watch import Follower, Note, Watcher
        follower = Follower(self.log_path)
        follower._open()
        follower._f.seek(self.start_offset)
        follower._pos = self.start_offset
        watcher = Watcher(settle=self.settle, sglang_version=self.sglang_version)
        self.watcher = watcher
        try:
            while True:
                self._pids |= descendants(self.proc.pid)
                code = self.proc.poll()
                lines = follower.read()
                notes = watcher.feed(lines) if lines else []
                notes += watcher.tick()
                for n in notes:
                    if n.type == "ready" and self.ready_after is None:
                        self.ready_after = time.monotonic() - self.t0
                        n = Note("ready", n.line, f"the server is ready after {self.ready_after:.1f} s (log: {self.log_path})")
                    if n.type not in ("opened",):
                        self.emit(n)
                if code is not None:
                    ending = self._ended(code)
                    lines = follower.read() + follower.flush()
                    for n in (watcher.feed(lines) if lines else []) + watcher.tick(final=True):
                        self.emit(n)
                    return ending
                if exit_when_ready and self.ready_after is not None:
                    return None
                time.sleep(self.interval)
        finally:
            follower.close()
            watcher.close()

    def _ended(self, code: int) -> Ending:
        ending = Ending(self.proc.pid, code, time.monotonic() - self.t0)
        if ending.signal == signal.SIGKILL:
            ending.oom_kill, ending.kernel_log = kernel_oom_line(self._pids)
        self._write(ending.shell_line())
        if ending.oom_kill:
            self._write(ending.oom_kill)
        note = ""
        if ending.signal == signal.SIGKILL and not ending.oom_kill:
            note = ("; the kernel log names no OOM kill of its processes" if ending.kernel_log == "read"
                    else "; the kernel log cannot be read here (no OOM-killer line to check)")
        self._write(f"diag run: {ending.describe()}{note}")
        self.log.close()
        return ending

    def report(self):
        """The diagnosis of this run: the log from where this run began."""
        from ..analyze import analyze
        from ..analyze import Options
        fd, path = tempfile.mkstemp(prefix="diag-run-", suffix=".log")
        try:
            with open(self.log_path, "rb") as src, os.fdopen(fd, "wb") as out:
                src.seek(self.start_offset)
                while chunk := src.read(1 << 20):
                    out.write(chunk)
            report = analyze([path], None, Options(sglang_version=self.sglang_version))
        finally:
            os.unlink(path)
        report.inputs[0].path = self.log_path
        if self.start_offset:
            with open(self.log_path, "rb") as src:
                before = src.read(self.start_offset).count(b"\n")
            report.inputs[0].notes.append(f"this run starts at line {before + 1} of the log (earlier runs' output is above it); "
                                          f"line numbers here count from there")
        return report


def default_log() -> str:
    return f"sglang-{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}.log"
