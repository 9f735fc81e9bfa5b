"""The runner lifecycle every backend implements (after Polygraphy's ``BaseRunner``).

Public methods do the bookkeeping (step tracking, timings, checks); a backend implements
only the ``*_impl`` hooks. Runners live in worker processes: a backend module may import
its DL library at module level, but nothing outside ``backends/`` imports a backend module
except the worker.
"""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from anpred.interchange.export import AnchoredExport
from anpred.interchange.transform import NodeHooks  # re-exported: runners import it from here
from anpred.ports.spec import PortSpec, port_runner
from anpred.store.outcome import Step  # re-exported: runners import it from here


@dataclass(frozen=True)
class ModelJob:
    """What a runner executes: the anchored export and, for the native torch runner,
    how to rebuild the zoo model.

    Attributes:
        export: The anchored ONNX export (graphs + anchor map).
        zoo_model: Zoo name, or ``None`` for a user's ONNX file.
        weights: User checkpoint path, or ``None`` for seeded weights.
        seed: Seed of generated weights.
        module: The source of a user's torch module (``file.py:function``, ``file.pt``;
            :mod:`anpred.interchange.user_module`), whose export folder holds its state.
        port: The user's port this participant runs instead of the export
            (:mod:`anpred.ports`), set by its transform.
    """

    export: AnchoredExport
    zoo_model: str | None = None
    weights: str | None = None
    seed: int = 0
    module: str | None = None
    port: PortSpec | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "export": self.export.to_dict(),
            "zoo_model": self.zoo_model,
            "weights": self.weights,
            "seed": self.seed,
            **({"module": self.module} if self.module else {}),
            **({"port": self.port.to_dict()} if self.port else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelJob:
        """Inverse of :meth:`to_dict`."""
        return cls(
            AnchoredExport.from_dict(data["export"]),
            data.get("zoo_model"),
            data.get("weights"),
            int(data.get("seed", 0)),
            data.get("module"),
            PortSpec.from_dict(data["port"]) if data.get("port") else None,
        )


class ParticipantFailure(Exception):
    """A failure whose message is the participant's error as is, at :attr:`step` (the
    worker records it without the exception's class name).
    """

    step: Step = Step.EXECUTE


class IsolationUnavailable(Exception):
    """The runtime cannot run stage isolation; ``str(err)`` is the reason (the worker
    records ``isolation unavailable: <reason>`` and goes on).
    """


class ResumeUnavailable(Exception):
    """The runner cannot recompute part of its anchors from given ones (:meth:`Runner.resume`);
    ``str(err)`` is the reason (the worker runs the whole model instead and records it).
    """


@dataclass
class Capture:
    """One participant's anchors for one input: arrays plus the layout of each."""

    arrays: dict[str, np.ndarray]
    layouts: dict[str, str] = field(default_factory=dict)


class Runner(ABC):
    """A library executing one model; one instance per worker process.

    Args:
        settings: Participant settings (dtype, threads, configuration toggles).
        hooks: Per-node hooks (only for runners that declare :attr:`node_hooks`).

    Raises:
        UsageError: Hooks for a runner that does not execute the graph node by node.
    """

    #: Library name (registry key, e.g. ``"onnxruntime"``).
    library: str = ""
    #: Whether the runner executes the graph node by node and so applies :class:`NodeHooks`.
    node_hooks: ClassVar[bool] = False
    #: Called with each step as the runner reaches it (set by the worker, which records it,
    #: so that a converter that crashes or hangs is named at its step); ``None``: nobody.
    on_step: Callable[[Step], None] | None = None
    #: The fp64 reference's anchors for the current input, set by the worker before each
    #: inference while :attr:`wants_reference` (a converted runtime maps its outputs by them).
    reference: Mapping[str, np.ndarray] | None = None
    #: Set by the worker before :meth:`activate` when it will :meth:`resume`: a runner that
    #: can builds the whole model's programs only if it is asked to run them.
    resuming: bool = False

    def __init__(
        self, settings: Mapping[str, Any] | None = None, hooks: NodeHooks | None = None
    ) -> None:
        if hooks is not None and not self.node_hooks:
            from anpred.errors import UsageError

            raise UsageError(
                f"{self.library} ({type(self).__name__}) does not execute the graph node by "
                "node: it cannot apply per-node hooks"
            )
        self.settings = dict(settings or {})
        self.hooks = hooks
        self.step = Step.LOAD
        self.timings: dict[str, float] = {}
        self._job: ModelJob | None = None

    @classmethod
    def for_job(cls, job: ModelJob) -> type[Runner]:
        """The runner class that executes ``job``: this one, unless the library runs some
        models another way (torch: the native module, or translators for an ONNX file), or
        the job is a user's port (:mod:`anpred.ports`).
        """
        if job.port is not None:
            return port_runner(job.port)
        return cls

    @property
    def threads(self) -> int:
        """Compute threads: the ``threads`` setting, else the worker's ``ANPRED_THREADS``."""
        return int(self.settings.get("threads") or os.environ.get("ANPRED_THREADS", 1))

    def _timed(self, name: str, start: float) -> None:
        self.timings[name] = round(time.perf_counter() - start, 4)

    def activate(self, job: ModelJob) -> None:
        """Load, translate and compile the model (steps recorded for symptoms)."""
        self._job = job
        start = time.perf_counter()
        self.step = Step.LOAD
        self.activate_impl(job)
        self._timed("load", start)

    def infer(self, feed: np.ndarray) -> Capture:
        """Run the anchored model on one input and return every anchor."""
        self.step = Step.EXECUTE
        start = time.perf_counter()
        capture = self.infer_impl(feed)
        self._timed(
            "first_inference" if "first_inference" not in self.timings else "inference", start
        )
        self.step = Step.CAPTURE
        return capture

    def infer_plain(self, feed: np.ndarray) -> np.ndarray:
        """Run the model without anchors exposed and return the final output (observer check)."""
        self.step = Step.EXECUTE
        return self.infer_plain_impl(feed)

    def isolate(self, feed: np.ndarray, anchors: Mapping[str, np.ndarray]) -> Capture:
        """Stage isolation: recompute every anchor from the given upstream anchor values.

        Every anchor tensor consumed downstream is replaced by ``anchors[key]`` (the fp64
        reference rounded to float32), so each returned anchor holds only the error its
        own stage introduces. One inference covers all stages.
        """
        self.step = Step.EXECUTE
        start = time.perf_counter()
        capture = self.isolate_impl(feed, anchors)
        self._timed("isolation", start)
        return capture

    def resume(
        self, feed: np.ndarray, fed: Mapping[str, np.ndarray], outputs: Sequence[str]
    ) -> Capture:
        """Recompute the anchors ``outputs`` only, every anchor of ``fed`` given.

        Each consumer of an anchor in ``fed`` reads the given value (in the graph's own
        layout and dtype) instead of computing it, and only what ``outputs`` need runs
        (:mod:`anpred.interchange.resume`). Fed the participant's own values of the anchors
        a fault does not reach, it gives what the whole faulty model computes at the others;
        fed every anchor from the fp64 reference, their stage-isolated values.

        Raises:
            ResumeUnavailable: The runner runs only whole models (the worker then does).
        """
        self.step = Step.EXECUTE
        start = time.perf_counter()
        capture = self.resume_impl(feed, fed, outputs)
        self._timed("resume", start)
        return capture

    def resume_impl(
        self, feed: np.ndarray, fed: Mapping[str, np.ndarray], outputs: Sequence[str]
    ) -> Capture:
        """Resumed inference (default: unavailable)."""
        raise ResumeUnavailable(f"{type(self).__name__} runs whole models only")

    @property
    def job(self) -> ModelJob:
        """The activated job."""
        if self._job is None:
            raise RuntimeError("runner is not activated")
        return self._job

    @abstractmethod
    def activate_impl(self, job: ModelJob) -> None:
        """Load/translate/compile; set ``self.step`` as it goes."""

    @abstractmethod
    def infer_impl(self, feed: np.ndarray) -> Capture:
        """Anchored inference."""

    @abstractmethod
    def infer_plain_impl(self, feed: np.ndarray) -> np.ndarray:
        """Plain inference."""

    @abstractmethod
    def isolate_impl(self, feed: np.ndarray, anchors: Mapping[str, np.ndarray]) -> Capture:
        """Stage-isolated inference."""

    @abstractmethod
    def version(self) -> str:
        """Library version."""

    def describe_settings(self) -> dict[str, Any]:
        """Settings as run (defaults filled in)."""
        return dict(self.settings)

    @property
    def wants_reference(self) -> bool:
        """Whether the next inference needs the fp64 reference's anchors in
        :attr:`reference` (default: no).
        """
        return False

    def conversion_record(self) -> dict[str, Any] | None:
        """What was converted and how its outputs map to anchors: the participant's
        conversion record in the run store (default: ``None``, nothing was converted).
        """
        return None
