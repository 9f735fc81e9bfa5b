"""A job module for the executors' tests: ``python -m node_job JOB``.

It records where it ran and what it read, then ends as the job asks: ``ok`` (a status
record and a result file), ``crash`` (SIGKILL), ``error`` (a recorded exception, exit 1),
``hang`` (until killed), ``nan`` (the non-finite state), ``slow`` (ok after ``seconds``).
Every start appends a line to ``attempts`` (an absolute path, not an asset: the tests of
lost nodes count the starts there; every node of a one-machine cluster sees it).

Test helper only: it is started through the executors' public mechanism (a
:class:`~anpred.execution.executor.JobSpec` naming this module), never inside anpred.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from anpred.execution.memory import die_with_parent
from anpred.store import ParticipantStore, Status, Step


def main() -> int:
    """Run the job file given as the only argument."""
    die_with_parent()
    job = ParticipantStore.load_job(Path(sys.argv[1]))
    folder = ParticipantStore(Path(job["out"]))
    if job.get("attempts"):
        with open(job["attempts"], "a") as attempts:
            attempts.write(f"{os.getpid()}\n")
    folder.write_status({"state": Status.RUNNING, "step": Step.EXECUTE, "pid": os.getpid()})
    asset = Path(job["asset"])
    (folder.folder / "result.json").write_text(
        json.dumps(
            {
                "out": job["out"],
                "asset_path": str(asset),
                "asset": asset.read_text(),
                "earlier": (folder.folder / "earlier.txt").read_text()
                if (folder.folder / "earlier.txt").exists()
                else None,
            }
        )
    )
    print(f"node_job {job['mode']} in {job['out']}", flush=True)
    mode = job["mode"]
    if mode == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "hang":
        time.sleep(3600)
    if mode == "slow":
        time.sleep(float(job.get("seconds", 5)))
    if mode == "error":
        folder.write_status(
            {"state": Status.ERROR, "step": Step.EXECUTE, "message": "RuntimeError: on purpose"}
        )
        return 1
    state = Status.NON_FINITE if mode == "nan" else Status.OK
    folder.write_status({"state": state, "step": Step.DONE, "pid": os.getpid()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
