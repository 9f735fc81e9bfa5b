"""Memory of worker processes, watched by the pool so that a library that allocates too
much is stopped as a symptom of its participant instead of starving the machine.

An address-space limit (``RLIMIT_AS``) cannot be used: PyTorch's CUDA build aborts at
import under a 3 GB limit ("cannot allocate memory for thread-local data"; measured with
torch 2.14.1) because it maps gigabytes of libraries it never touches. The resident set
(``VmRSS``) is what a worker really uses, so the pool polls it.
"""

from __future__ import annotations

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
