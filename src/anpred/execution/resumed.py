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

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anpred.analysis.alignment import default_reference_layout
from anpred.backends.base import Capture, ResumeUnavailable, Runner
from anpred.store import CAPTURE, ISOLATED, ParticipantStore

#: Key, in a job's resumption, of what the worker needs to rewrite its faulty graphs
#: itself (:func:`anpred.inject.transforms.deferred_graphs`): the anchored one, cut into its
#: resumed programs, in memory; the files only if it runs the whole model after all.
DEFERRED_GRAPHS_KEY = "graphs"

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


class Float32Anchors(Mapping[str, np.ndarray]):
    """The fp64 reference's anchors, each rounded to float32 when first read: a resumed
    isolation feeds the one or two anchors its cut graph reads (rounding every anchor of a
    yolov8n input took ~0.008 CPU s, issue 41). Same values as ``v.astype(np.float32)``.
    """

    def __init__(self, reference: Mapping[str, np.ndarray]) -> None:
        self._reference = reference
        self._rounded: dict[str, np.ndarray] = {}

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self._rounded:
            self._rounded[key] = self._reference[key].astype(np.float32)
        return self._rounded[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._reference)

    def __len__(self) -> int:
        return len(self._reference)


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
        self._graphs: Mapping[str, Any] | None = plan.get(DEFERRED_GRAPHS_KEY)
        if self._graphs is not None:
            from anpred.inject.transforms import deferred_graph
            from anpred.interchange.resume import provide_anchored

            graphs = self._graphs
            provide_anchored(graphs["anchored"][1], lambda: deferred_graph(graphs, "anchored"))

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
        """The anchored capture of ``input_id`` (arrays, layouts), or ``None`` (the worker
        then runs the whole model: :meth:`whole_model`).
        """
        return self._merged(runner, feed, input_id, CAPTURE, None)

    def whole_model(self) -> None:
        """Make what the whole model needs that a resumed worker skips: the faulty graphs'
        files, when the driver left them to the worker (:data:`DEFERRED_GRAPHS_KEY`).
        Called before every ``None`` this returns (once is enough).
        """
        if self._graphs is not None:
            from anpred.inject.transforms import write_deferred_graphs
            from anpred.interchange.resume import provided_anchored

            write_deferred_graphs(self._graphs, provided_anchored(self._graphs["anchored"][1]))
            self._graphs = None

    def isolated_capture(
        self, runner: Runner, feed: np.ndarray, input_id: str, reference: Mapping[str, np.ndarray]
    ) -> tuple[dict[str, np.ndarray], dict[str, str]] | None:
        """The stage-isolated capture of ``input_id`` given the fp64 ``reference``'s anchors
        (rounded to float32 where fed: :class:`Float32Anchors`), or ``None``.
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
        merged = self._resumed(runner, feed, input_id, kind, reference)
        if merged is None:
            self.whole_model()
        return merged

    def _resumed(
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
            recomputed = set(outputs)  # only their layouts are read
            # no copies: the store's arrays outlive the file (mapped copy-on-write, or read
            # into memory); copying them cost ~0.014 CPU s per yolov8n input (issue 41)
            kept = {k: clean[k] for k in self.keys if k not in recomputed}
            layouts = {k: v for k in self.keys if (v := clean.layout(k))}
        if reference is None:
            fed = {k: graph_layout(v, layouts.get(k)) for k, v in kept.items() if k not in outputs}
        else:  # isolation: every anchor read from the fp64 reference's, in float32
            fed = Float32Anchors(reference)
        if reference is None and not all(_feedable(v) for v in fed.values()):
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
