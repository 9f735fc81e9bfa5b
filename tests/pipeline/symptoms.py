"""The test suite's own transform kind: a participant that fails on purpose.

Registered here, not in anpred: a run gets it the public way, as a transform record in
``RunOptions.extra["transforms"]`` (``{participant: [Symptom(...).record()]}``), like the
faults anpred plans. The worker imports this module by the record's name, so this folder
must be on its ``PYTHONPATH`` (``run_failing.py`` sets it).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from anpred.interchange.transform import Infer, Transform, register_transform

#: What the participant does during execution: ``crash`` (SIGKILL), ``hang``, ``error``
#: (an exception), ``nan`` (a non-finite final output), ``hog`` (allocates memory, 64 MB at
#: a time, up to 6 GB, as a library gone wrong would).
SYMPTOMS = ("crash", "hang", "error", "nan", "hog")


@register_transform
class Symptom(Transform):
    """Fail during anchored inference, before (or, for ``nan``, after) the runner runs.

    Args:
        symptom: One of :data:`SYMPTOMS`.
        once: A file marking that the symptom happened: when given, the symptom happens
            only while the file does not exist (a transient failure, for resume tests).
    """

    kind = "test-symptom"

    def __init__(self, symptom: str, once: str | None = None) -> None:
        if symptom not in SYMPTOMS:
            raise ValueError(f"symptom must be one of {SYMPTOMS}, not {symptom!r}")
        self.symptom = symptom
        self.once = once

    def params(self) -> dict[str, Any]:
        return {"symptom": self.symptom, "once": self.once}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Symptom:
        return cls(params["symptom"], params.get("once"))

    def wrap_infer(self, infer: Infer) -> Infer:
        if self.once is not None and Path(self.once).exists():
            return infer
        if self.once is not None:
            Path(self.once).touch()

        def failing(feed: np.ndarray) -> Any:
            if self.symptom == "crash":
                os.kill(os.getpid(), signal.SIGKILL)
            if self.symptom == "hang":
                time.sleep(10_000)
            if self.symptom == "error":
                raise RuntimeError("injected test error")
            if self.symptom == "hog":
                hoard = []
                for _ in range(96):
                    hoard.append(np.ones(8 * 2**20))  # 64 MB, touched
                    time.sleep(0.02)
                raise RuntimeError(f"allocated {len(hoard) * 64} MB and was not stopped")
            capture = infer(feed)
            if self.symptom == "nan":
                capture.arrays["output"] = np.full_like(capture.arrays["output"], np.nan)
            return capture

        return failing
