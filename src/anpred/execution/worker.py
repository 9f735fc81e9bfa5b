"""The worker process: one participant, every input, streamed to the run directory.

Run as ``python -m anpred.execution.worker JOB.json``. Writes, per input,
``<input>.capture.npz`` (anchors + the plain final output) and ``<input>.capture.json``
(layouts, observer-effect record, non-finite anchors), optionally the stage-isolation
capture ``<input>.isolated.*``, and keeps ``status.json`` up to date so that the parent
can name the step a crash or hang happened in.

``ANPRED_TEST_FAULT=<participant>:<crash|hang|error|nan>`` makes the named participant
fail on purpose during execution (used by the test suite only).
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from anpred.errors import AnpredError
from anpred.execution.layout import (
    PLAIN_KEY,
    capture_done,
    load_capture,
    read_json,
    write_arrays,
    write_json,
)


def _test_fault(participant: str) -> str | None:
    spec = os.environ.get("ANPRED_TEST_FAULT", "")
    name, _, kind = spec.rpartition(":")
    return kind if name == participant else None


def _observer(anchored: np.ndarray, plain: np.ndarray) -> dict[str, Any]:
    same_shape = anchored.shape == plain.shape
    diff = float(np.max(np.abs(anchored.astype(np.float64) - plain))) if same_shape else None
    return {
        "identical": bool(same_shape and np.array_equal(anchored, plain)),
        "max_abs_diff": diff,
        "shape_match": same_shape,
    }


def _nonfinite(arrays: dict[str, np.ndarray]) -> list[str]:
    return [
        k
        for k, v in arrays.items()
        if np.issubdtype(v.dtype, np.floating) and not np.all(np.isfinite(v))
    ]


class Worker:
    """Executes one job file."""

    def __init__(self, job_path: Path) -> None:
        self.job = read_json(job_path)
        self.out = Path(self.job["out"])
        self.out.mkdir(parents=True, exist_ok=True)
        self.status: dict[str, Any] = {
            "state": "running",
            "step": "load",
            "pid": os.getpid(),
            "participant": self.job["participant"]["name"],
        }

    def update(self, **fields: Any) -> None:
        """Merge ``fields`` into ``status.json``."""
        self.status.update(fields)
        write_json(self.out / "status.json", self.status)

    def run(self) -> int:
        """Run the job; return the process exit code."""
        start = time.perf_counter()
        self.update()
        try:
            return self._run(start)
        except Exception as err:  # a library error is a symptom, recorded, not a crash
            self.update(
                state="error",
                message=f"{err.__class__.__name__}: {err}"[:2000],
                error_type=err.__class__.__name__,
                usage_error=isinstance(err, AnpredError),
                traceback=traceback.format_exc()[-4000:],
            )
            return 1

    def _run(self, start: float) -> int:
        from anpred.backends.base import ModelJob
        from anpred.backends.registry import runner_class

        participant = self.job["participant"]
        fault = _test_fault(participant["name"])
        runner = runner_class(participant["library"])(participant["settings"])
        self.update(step="load", timings={"import": round(time.perf_counter() - start, 4)})
        job = ModelJob.from_dict(self.job["model"])
        runner.activate(job)
        self.update(
            step=runner.step.value,
            version=runner.version(),
            settings=runner.describe_settings(),
            timings={"import": self.status["timings"]["import"], **runner.timings},
        )
        with np.load(self.job["inputs"]) as data:
            feeds = {key: data[key] for key in data.files}
        nonfinite_any = False
        for input_id in self.job["input_ids"]:
            if not capture_done(self.out, input_id):
                self.update(step="execute", input=input_id)
                if fault == "crash":
                    os.kill(os.getpid(), signal.SIGKILL)
                if fault == "hang":
                    time.sleep(10_000)
                if fault == "error":
                    raise RuntimeError("injected test error")
                capture = runner.infer(feeds[input_id])
                plain = runner.infer_plain(feeds[input_id])
                if fault == "nan":
                    capture.arrays["output"] = np.full_like(capture.arrays["output"], np.nan)
                self.update(step="capture")
                bad = _nonfinite(capture.arrays)
                nonfinite_any |= bool(bad)
                write_arrays(
                    self.out / f"{input_id}.capture.npz", {**capture.arrays, PLAIN_KEY: plain}
                )
                write_json(
                    self.out / f"{input_id}.capture.json",
                    {
                        "layouts": capture.layouts,
                        "observer": _observer(capture.arrays["output"], plain),
                        "nonfinite": bad,
                        "timings": dict(runner.timings),
                    },
                )
            elif read_json(self.out / f"{input_id}.capture.json")["nonfinite"]:
                nonfinite_any = True
            self._isolate(runner, feeds[input_id], input_id)
        self.update(
            state="non-finite" if nonfinite_any else "ok",
            step="done",
            timings={**self.status["timings"], **runner.timings},
            settings=runner.describe_settings(),
        )
        return 0

    def _isolate(self, runner: Any, feed: np.ndarray, input_id: str) -> None:
        source = self.job.get("isolation_source")
        if not source or capture_done(self.out, input_id, "isolated"):
            return
        if not capture_done(Path(source), input_id):
            return  # the fp64 reference failed on this input: nothing to isolate against
        reference = load_capture(Path(source), input_id)
        fed = {k: v.astype(np.float32) for k, v in reference.items() if k != PLAIN_KEY}
        self.update(step="execute", input=input_id, phase="isolation")
        capture = runner.isolate(feed, fed)
        write_arrays(self.out / f"{input_id}.isolated.npz", capture.arrays)
        write_json(self.out / f"{input_id}.isolated.json", {"layouts": capture.layouts})


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m anpred.execution.worker JOB.json``."""
    args = sys.argv[1:] if argv is None else argv
    return Worker(Path(args[0])).run()


if __name__ == "__main__":
    raise SystemExit(main())
