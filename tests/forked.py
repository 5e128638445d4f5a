"""Running a piece of a test in a forked child, whose hang or death by a signal the
parent reports instead of sharing it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable


def run_in_child(work: Callable[[], bool], timeout: float = 30.0) -> str:
    """Run ``work`` in a forked child: "ok" (it returned True), "failed" (False or
    raised), "hung" (killed after ``timeout`` seconds) or "signal N"."""
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            code = 0 if work() else 1
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            if os.WIFSIGNALED(status):
                return f"signal {os.WTERMSIG(status)}"
            return "ok" if os.WEXITSTATUS(status) == 0 else "failed"
        time.sleep(0.02)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return "hung"
