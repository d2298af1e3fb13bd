"""Stand-in for `python -m sglang.launch_server`: fails the way DIAG_FAKE_MODE says.

argparse  -> its own parser refuses a flag it does not know (an older release), exit 2
exception -> prints the real log DIAG_FAKE_LOG to stderr (a traceback), exit 1
sigkill   -> prints start-up lines, starts a child, and is killed by SIGKILL
silent    -> prints nothing, waits a moment, exits 1 (the founding failure: an empty log)
ready     -> prints the ready line, then serves until SIGTERM (exit 0)
DIAG_FAKE_MARKER, when set, is a file written with the pid once the server has started.
"""
import argparse
import datetime
import os
import signal
import subprocess
import sys
import time

MODE = os.environ.get("DIAG_FAKE_MODE", "ready")


def ts():
    return datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")


if MODE == "silent":
    time.sleep(0.3)
    sys.exit(1)

parser = argparse.ArgumentParser(prog="launch_server.py")
parser.add_argument("--model-path", required=True)
parser.add_argument("--tp-size", "--tp", type=int, default=1)
parser.add_argument("--port", type=int, default=30000)
parser.add_argument("--mem-fraction-static", type=float)
args = parser.parse_args()
if os.environ.get("DIAG_FAKE_MARKER"):
    with open(os.environ["DIAG_FAKE_MARKER"], "w") as f:
        f.write(str(os.getpid()))
print(f"[{ts()}] server_args=ServerArgs(model_path={args.model_path!r}, tp_size={args.tp_size}, port={args.port})")

if MODE == "exception":
    sys.stderr.write(open(os.environ["DIAG_FAKE_LOG"]).read())
    sys.exit(1)
if MODE == "sigkill":
    print(f"[{ts()} TP0] Init torch distributed begin.")
    print(f"[{ts()} TP0] Load weight begin. avail mem=23.20 GB")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])   # a scheduler process
    time.sleep(0.2)
    child.kill()
    child.wait()
    os.kill(os.getpid(), signal.SIGKILL)
if MODE == "ready":
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    print(f"[{ts()}] The server is fired up and ready to roll!")
    for _ in range(600):
        if stop:
            print(f"[{ts()}] Received SIGTERM, shutting down.")
            sys.exit(0)
        time.sleep(0.05)
    sys.exit(0)
