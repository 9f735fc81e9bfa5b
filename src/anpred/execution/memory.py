"""Memory of worker processes, watched by the pool so that a library that allocates too
much is stopped as a symptom of its participant instead of starving the machine.

An address-space limit (``RLIMIT_AS``) cannot be used: PyTorch's CUDA build aborts at
import under a 3 GB limit ("cannot allocate memory for thread-local data"; measured with
torch 2.14.1) because it maps gigabytes of libraries it never touches. The resident set
(``VmRSS``) is what a worker really uses, so the pool polls it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path


def rss_bytes(pid: int) -> int | None:
    """Resident memory of process ``pid`` in bytes (``None`` when it is gone or unknown)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None


#: Environment variable carrying a worker's memory limit in bytes (set by the pool).
LIMIT_ENV = "ANPRED_MEMORY_LIMIT"
#: Seconds between two readings of the watchdog.
POLL_SECONDS = 0.05


def limit_env(limit: int | None) -> dict[str, str]:
    """The environment entry that puts a worker under ``limit`` bytes (empty: no limit)."""
    return {LIMIT_ENV: str(int(limit))} if limit else {}


def start_watchdog(on_exceed: Callable[[int, int], None], limit: int | None = None) -> bool:
    """Watch this process's resident memory in a daemon thread.

    When it exceeds ``limit`` (default: ``$ANPRED_MEMORY_LIMIT``), ``on_exceed(used,
    limit)`` is called once; it is expected to record the symptom and end the process.

    Returns:
        Whether a watchdog was started (a limit is set and memory can be read).
    """
    if limit is None:
        text = os.environ.get(LIMIT_ENV, "")
        limit = int(text) if text.isdigit() else None
    pid = os.getpid()
    if not limit or rss_bytes(pid) is None:
        return False

    def watch() -> None:
        while True:
            used = rss_bytes(pid) or 0
            if used > limit:
                on_exceed(used, limit)
                return
            time.sleep(POLL_SECONDS)

    threading.Thread(target=watch, name="anpred-memory-watchdog", daemon=True).start()
    return True


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (``PR_SET_PDEATHSIG``).

    A worker whose ``anpred run`` was killed (SIGKILL leaves no chance to clean up) would
    otherwise go on writing into a run directory that a resumed run now owns. Elsewhere
    than on Linux this does nothing.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os.kill(os.getpid(), signal.SIGKILL)
