"""A worker's captures resumed from a clean participant's: recompute only what changed.

A fault run's faulty participant differs from the clean one in a few nodes; its job names
the anchors those nodes reach (:data:`~anpred.execution.job.RESUME_KEY`, planned by
:func:`anpred.evaluation.fault_runs.run_fault` with
:func:`~anpred.interchange.resume.footprint`) and the clean participant's folder. The worker
then runs, per input, only the part of its graph that computes the changed anchors, fed
the clean capture's values of the others (:meth:`~anpred.backends.base.Runner.resume`), and
writes the clean capture's arrays and layouts for those: a complete capture, as the whole
model would give it. The stage-isolated capture likewise: the changed isolated anchors
recomputed from the fp64 reference's, the others the clean participant's isolated ones.

:class:`Resumption` returns ``None`` where it cannot (no clean capture of the input, a
pruned one, a capture in a reduced precision, a runner that runs whole models only); the
worker then computes the input as usual.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anpred.analysis.alignment import default_reference_layout
from anpred.backends.base import Capture, ResumeUnavailable, Runner
from anpred.store import CAPTURE, ISOLATED, ParticipantStore

#: Capture dtypes fed back as they are (what the graphs compute in; a capture in another,
#: e.g. a reduced precision's anchors, is computed again instead).
_FED_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


def graph_layout(array: np.ndarray, layout: str | None) -> np.ndarray:
    """``array`` in the graph's own (channels-first) layout, given its recorded ``layout``."""
    if not layout:
        return array
    target = default_reference_layout(layout.upper())
    if target == layout.upper():
        return array
    return np.ascontiguousarray(np.transpose(array, [layout.upper().index(a) for a in target]))


def _feedable(array: np.ndarray) -> bool:
    return array.dtype in _FED_DTYPES or np.issubdtype(array.dtype, np.integer)


class Resumption:
    """A job's resumption: the clean participant's folder and the anchors to recompute.

    Args:
        plan: The job's :data:`~anpred.execution.job.RESUME_KEY` entry.
        keys: Every anchor key, in the export's order.
    """

    def __init__(self, plan: Mapping[str, Any], keys: Sequence[str]) -> None:
        self.source = ParticipantStore(Path(plan["source"]))
        changed, isolated = set(plan["changed"]), set(plan["isolated"])
        self.changed = [k for k in keys if k in changed]
        self.isolated = [k for k in keys if k in isolated]
        self.keys = list(keys)
        #: Why the runner cannot resume (set on its first refusal; then nothing is resumed).
        self.unavailable: str | None = None

    def record(self) -> dict[str, Any]:
        """What the worker's status records of it."""
        return {
            "from": str(self.source.folder),
            "recomputed": self.changed,
            "isolated_recomputed": self.isolated,
            **({"unavailable": self.unavailable} if self.unavailable else {}),
        }

    def anchored(
        self, runner: Runner, feed: np.ndarray, input_id: str
    ) -> tuple[dict[str, np.ndarray], dict[str, str]] | None:
        """The anchored capture of ``input_id`` (arrays, layouts), or ``None``."""
        return self._merged(runner, feed, input_id, CAPTURE, None)

    def isolated_capture(
        self, runner: Runner, feed: np.ndarray, input_id: str, reference: Mapping[str, np.ndarray]
    ) -> tuple[dict[str, np.ndarray], dict[str, str]] | None:
        """The stage-isolated capture of ``input_id`` given the fp64 ``reference``'s anchors
        (float32), or ``None``.
        """
        return self._merged(runner, feed, input_id, ISOLATED, reference)

    def _merged(
        self,
        runner: Runner,
        feed: np.ndarray,
        input_id: str,
        kind: str,
        reference: Mapping[str, np.ndarray] | None,
    ) -> tuple[dict[str, np.ndarray], dict[str, str]] | None:
        if self.unavailable is not None:
            return None
        clean = self.source.open_capture(input_id, kind)
        if clean is None:
            return None
        with clean:
            if clean.pruned or set(clean.keys()) < set(self.keys):
                return None
            outputs = self.changed if reference is None else self.isolated
            kept = {k: np.array(clean[k]) for k in self.keys}  # own copies: the file closes
            layouts = {k: v for k in self.keys if (v := clean.layout(k))}
        if reference is None:
            fed = {k: graph_layout(v, layouts.get(k)) for k, v in kept.items() if k not in outputs}
        else:  # isolation: every anchor read from the fp64 reference's
            fed = dict(reference)
        if not all(_feedable(v) for v in fed.values()):
            return None
        capture = Capture({})
        if outputs:
            try:
                capture = runner.resume(feed, fed, outputs)
            except ResumeUnavailable as err:
                self.unavailable = str(err)
                return None
        for key in outputs:
            kept[key] = capture.arrays[key]
            layouts.pop(key, None)
            if key in capture.layouts:
                layouts[key] = capture.layouts[key]
        return {k: kept[k] for k in self.keys}, layouts
