"""Transforms: a change to what one participant runs, planned before its worker starts.

They sit with the anchored model they change, below the runners and the executors: a
library's runner (:mod:`anpred.backends`), a fault (:mod:`anpred.inject`) and a user's port
(:mod:`anpred.ports`) all plan or apply them.

A fault (:mod:`anpred.inject`) is not a runner setting. The main process plans it into a
:class:`Transform` whose record travels in the job (``job["transforms"][participant]``);
the worker rebuilds it and applies it around a runner that knows nothing about it, through
one of three effects:

* :meth:`Transform.model`: another model, e.g. the export's graphs rewritten into the
  participant's folder, the job's export pointing at them;
* :meth:`Transform.node_hooks`: per-node pre/post hooks for runners that execute the graph
  node by node (``Runner.node_hooks``: anpred's translators), built in the worker so that
  they compute with the library's own operators;
* :meth:`Transform.wrap_infer`: a wrapper around the runner's anchored inference (symptoms
  such as a crash during execution).

Kinds are registered with :func:`register_transform`. A record names its kind and the
module that registers it, which the worker imports: a kind may live outside anpred (the
test suite registers its own and passes it as ``RunOptions.extra["transforms"]``, the
same records the pipeline plans for faults). The worker writes the record of every
transform it applied into its status record (``transforms``).

Importing this module imports no DL library.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from anpred.errors import UsageError

if TYPE_CHECKING:
    import numpy as np

    from anpred.backends.base import Capture, ModelJob
    from anpred.translate.graph import NodeHook

#: Key of the transforms in a job and in ``RunOptions.extra``: participant → records.
TRANSFORMS_KEY = "transforms"


@dataclass(frozen=True)
class NodeHooks:
    """Per-node hooks for runners that execute the graph node by node
    (:attr:`~anpred.backends.base.Runner.node_hooks`); see
    :class:`~anpred.translate.graph.GraphProgram`.

    Attributes:
        pre: Called before every node with its inputs; returns the inputs it runs on.
        post: Called after every node with its outputs; returns the outputs.
    """

    pre: NodeHook | None = None
    post: NodeHook | None = None


#: The runner's anchored inference: one input in, one capture out.
Infer = Callable[["np.ndarray"], "Capture"]


class Transform(ABC):
    """One planned change to a participant's model or execution (see the module doc).

    Concrete kinds set :attr:`kind`, are registered with :func:`register_transform`, and
    override the effects they have; the defaults change nothing.
    """

    #: Registry key; the ``kind`` of the record.
    kind: ClassVar[str] = ""

    @abstractmethod
    def params(self) -> dict[str, Any]:
        """JSON-ready parameters (:meth:`from_params` inverts them)."""

    @classmethod
    @abstractmethod
    def from_params(cls, params: Mapping[str, Any]) -> Transform:
        """Rebuild the transform from :meth:`params`."""

    def record(self) -> dict[str, Any]:
        """The record in the job and in the status: kind, registering module, params."""
        return {"kind": self.kind, "module": type(self).__module__, **self.params()}

    def model(self, job: ModelJob) -> ModelJob:
        """Return the job the runner activates (default: ``job`` unchanged)."""
        return job

    def node_hooks(self, library: str) -> NodeHooks | None:
        """Return per-node hooks, computed with ``library``'s operators (default: none)."""
        return None

    def wrap_infer(self, infer: Infer) -> Infer:
        """Return the anchored inference the worker calls (default: ``infer``)."""
        return infer


_KINDS: dict[str, type[Transform]] = {}

#: Record keys that are not parameters.
_RECORD_KEYS = ("kind", "module")


def register_transform(cls: type[Transform]) -> type[Transform]:
    """Class decorator: register a transform kind under ``cls.kind``.

    Raises:
        ValueError: Empty or duplicate kind.
    """
    if not cls.kind:
        raise ValueError(f"transform {cls.__name__} has no kind")
    if cls.kind in _KINDS and _KINDS[cls.kind] is not cls:
        raise ValueError(f"duplicate transform kind {cls.kind!r}")
    _KINDS[cls.kind] = cls
    return cls


def transform_from_record(record: Mapping[str, Any]) -> Transform:
    """Import the record's module, then rebuild the transform of its kind.

    Raises:
        UsageError: Not a record, its module cannot be imported, or an unknown kind.
    """
    if not isinstance(record, Mapping) or not isinstance(record.get("kind"), str):
        raise UsageError(f"a transform record needs a 'kind': {record!r}")
    module = record.get("module")
    if module:
        try:
            importlib.import_module(str(module))
        except ImportError as err:
            raise UsageError(
                f"transform {record['kind']!r}: cannot import its module {module!r} ({err})"
            ) from None
    cls = _KINDS.get(record["kind"])
    if cls is None:
        known = ", ".join(sorted(_KINDS)) or "none"
        raise UsageError(f"unknown transform kind {record['kind']!r} (registered: {known})")
    return cls.from_params({k: v for k, v in record.items() if k not in _RECORD_KEYS})


def _chain(hooks: Sequence[Callable[[Any, list[Any]], list[Any]]]) -> Any:
    if not hooks:
        return None
    if len(hooks) == 1:
        return hooks[0]

    def chained(call: Any, values: list[Any]) -> list[Any]:
        for hook in hooks:
            values = hook(call, values)
        return values

    return chained


@dataclass(frozen=True)
class Transforms:
    """The transforms of one participant, applied in order."""

    items: tuple[Transform, ...] = ()

    @classmethod
    def of(cls, job: Mapping[str, Any], participant: str) -> Transforms:
        """The transforms a worker's ``job`` plans for ``participant``."""
        records = (job.get(TRANSFORMS_KEY) or {}).get(participant, [])
        return cls(tuple(transform_from_record(r) for r in records))

    def records(self) -> list[dict[str, Any]]:
        """Every transform's record, in order."""
        return [t.record() for t in self.items]

    def model(self, job: ModelJob) -> ModelJob:
        """The job after every transform's :meth:`Transform.model`."""
        for transform in self.items:
            job = transform.model(job)
        return job

    def node_hooks(self, library: str) -> NodeHooks | None:
        """Every transform's hooks chained in order, or ``None`` when none has hooks."""
        found = [h for t in self.items if (h := t.node_hooks(library)) is not None]
        if not found:
            return None
        return NodeHooks(
            pre=_chain([h.pre for h in found if h.pre is not None]),
            post=_chain([h.post for h in found if h.post is not None]),
        )

    def wrap_infer(self, infer: Infer) -> Infer:
        """The inference after every transform's wrapper (the first one is innermost)."""
        for transform in self.items:
            infer = transform.wrap_infer(infer)
        return infer


def check_records(transforms: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
    """Check ``{participant: [record, ...]}`` before any worker starts.

    Raises:
        UsageError: A record that :func:`transform_from_record` refuses.
    """
    if not isinstance(transforms, Mapping):
        raise UsageError(f"transforms must map participant names to records, not {transforms!r}")
    for records in transforms.values():
        for record in records:
            transform_from_record(record)
