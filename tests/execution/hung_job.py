"""A job module for the pool's tests: ``python -m hung_job JOB`` hangs (or crashes) in
its export step, as a real export would on a stuck model or file system.

Test helper only: it is started through the pool's public mechanism (``run_job`` with a
module name), never switched on inside anpred.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from anpred.store import ParticipantStore, Status, Step


def main() -> None:
    """Record the export step, then hang (or crash when the job says so)."""
    job = ParticipantStore.load_job(Path(sys.argv[1]))
    folder = ParticipantStore(Path(job["out"]))
    folder.write_status({"state": Status.RUNNING, "step": Step.EXPORT, "pid": os.getpid()})
    if job.get("crash"):
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(3600)


if __name__ == "__main__":
    main()
