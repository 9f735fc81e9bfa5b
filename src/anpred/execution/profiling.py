"""Optional per-job CPU profiles of worker processes, for benchmarks and investigations.

When the environment variable ``ANPRED_PROFILE`` names a folder, every job a worker process
runs (fresh or served) is run under :mod:`cProfile` and its statistics are written there as
``<participant>-<pid>-<n>.prof`` (read them with :mod:`pstats`). The profiler's clock is
the process's CPU time (:func:`time.process_time`), the quantity the benchmarks compare:
a call that waits (for the fp64 reference, or for the kernel to write dirty pages back)
costs what it computes, not how long it waits. Unset, nothing is profiled.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable
from pathlib import Path

#: The environment variable naming the folder that receives the profiles.
PROFILE_ENV = "ANPRED_PROFILE"

_count = itertools.count()


def run_profiled(name: str, run: Callable[[], int]) -> int:
    """Run ``run()``; under ``ANPRED_PROFILE``, profiled, its statistics saved as ``name``'s.

    Args:
        name: Names the profile file (the job's participant).
        run: The job.

    Returns:
        What ``run()`` returned.
    """
    folder = os.environ.get(PROFILE_ENV)
    if not folder:
        return run()
    import cProfile

    profile = cProfile.Profile(time.process_time)
    try:
        return profile.runcall(run)
    finally:
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
        path = Path(folder) / f"{safe}-{os.getpid()}-{next(_count)}.prof"
        path.parent.mkdir(parents=True, exist_ok=True)
        profile.dump_stats(str(path))
