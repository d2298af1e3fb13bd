"""The words of a failure that follows another rank's (a timeout, a peer gone, a health check,
the launcher's own summary): the parser package's reading of a line for diag/fleet/ranks.py,
which names the first failing rank and folds these as its cascade."""
from __future__ import annotations

from .. import rx

# What a rank prints because another one failed first (messages of PyTorch, NCCL, SGLang).
CASCADE = rx.compile(
    r"Watchdog caught collective operation timeout|timed? ?out|Timeout|DistBackendError|NCCL communicator was aborted"
    r"|ProcessGroupNCCL|Connection reset by peer|Broken pipe|BrokenPipeError|EOFError|ConnectionResetError"
    r"|ConnectionRefusedError|TCPStore|recvValue|other ranks|did not finish|Health ?check|health_generate"
    r"|Received sigquit|SIGQUIT|SIGTERM|scheduler is dead|scheduler died|KeyboardInterrupt|terminate called"
    r"|remote process exited|Socket Timeout|heartbeat|Child process unexpectedly failed|detokenizer.*(?:died|dead)"
    r"|Rank \d+ scheduler|peer (?:closed|died)|ncclRemoteError|ncclSystemError.*remote", rx.IGNORECASE)
# a GPU error that says "timed out" and is a root cause itself
NOT_CASCADE = rx.compile(r"launch timed out|cudaErrorLaunchTimeout")


def cascade_text(text: str) -> bool:
    """Words of a failure that follows another rank's (a timeout, a peer gone, a health check)."""
    return bool(CASCADE.search(text)) and not NOT_CASCADE.search(text)
