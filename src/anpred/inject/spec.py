"""What a fault is: :class:`FaultSpec` (where, which op, which kind, how severe) and the
registry of fault kinds.

A fault replaces one op kind of one participant, inside one stage, by a reduced-precision
version of it. It is planned in the main process and reaches the worker as a transform
(:mod:`anpred.inject.transforms`), never as a runner setting, and is the ground truth
against which the evaluation scores detection and localization.

A fault kind is a class registered with :func:`register_fault` (a duplicate name is an
error). It declares what it acts on (:class:`Target`) and which ops it applies to, and
implements the transformation once, against the small :class:`~anpred.inject.math.FaultMath`
interface that every library (and the ONNX rewriter) provides.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar

from anpred.errors import UsageError

if TYPE_CHECKING:
    import onnx

    from anpred.inject.math import FaultMath

#: ``op`` value that selects every node of the stage the kind applies to.
ANY_OP = "*"


class Target(str, Enum):
    """What a fault kind changes."""

    OUTPUT = "output"  # the op's float outputs (computed from outputs and, maybe, inputs)
    INPUT = "input"  # the op's float operands, before it runs
    ATTRIBUTE = "attribute"  # an attribute of the node (the ONNX graph is rewritten)


@dataclass(frozen=True)
class FaultSpec:
    """One injected fault.

    Attributes:
        stage: Anchor key; the fault applies to the nodes of the stage that produces this
            anchor (see :mod:`anpred.inject.stages`).
        op: ONNX op type (``"Conv"``, ``"Sigmoid"`` ...) or ``"*"`` for every node of the
            stage the kind applies to.
        kind: Registered fault kind (``bf16``, ``fp16``, ``mantissa``, ``lowp_accum``,
            ``approx_act``, ``eps``).
        severity: Kind-specific strength (see each kind's ``severity_doc``).
        node: Key of one ONNX node (its name; ``anpred inject --node``): the fault hits
            only that node, which must be in ``stage`` and of type ``op`` (or ``op`` is
            ``"*"``); ``None``: every matching node of the stage.
    """

    stage: str
    op: str
    kind: str
    severity: float
    node: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (``node`` only when set, so stage faults read as before)."""
        data = {"stage": self.stage, "op": self.op, "kind": self.kind, "severity": self.severity}
        if self.node is not None:
            data["node"] = self.node
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FaultSpec:
        """Inverse of :meth:`to_dict`; checks the kind and the severity.

        Raises:
            UsageError: Missing fields, unknown kind or invalid severity.
        """
        missing = [k for k in ("stage", "op", "kind") if k not in data]
        if missing:
            raise UsageError(f"fault is missing {', '.join(missing)}: {dict(data)}")
        kind = fault_kind(str(data["kind"]))
        severity = data.get("severity")
        node = data.get("node")
        spec = cls(
            str(data["stage"]),
            str(data["op"]),
            kind.name,
            kind.default_severity if severity is None else severity,
            None if node is None else str(node),
        )
        kind.check(spec)
        return spec

    @property
    def label(self) -> str:
        """Short name: ``bf16@neck.p4`` (op and severity are in the settings)."""
        return f"{self.kind}@{self.stage}"


class FaultKind(ABC):
    """A way of reducing an op's precision; concrete kinds are registered and final.

    Class attributes:
        name: Registry key (``--fault``).
        target: What the kind changes.
        ops: ONNX op types it applies to; ``None`` = any op with a float output.
        needs_inputs: Whether an :attr:`Target.OUTPUT` kind recomputes the output from
            the op's inputs (then the inputs are passed to :meth:`outputs`).
        default_severity: Severity used when none is given.
        severity_doc: What the severity means (shown by ``anpred inject --help``).
    """

    name: ClassVar[str] = ""
    target: ClassVar[Target] = Target.OUTPUT
    ops: ClassVar[frozenset[str] | None] = None
    needs_inputs: ClassVar[bool] = False
    default_severity: ClassVar[float] = 1.0
    severity_doc: ClassVar[str] = ""
    summary: ClassVar[str] = ""

    def check(self, spec: FaultSpec) -> None:
        """Raise :class:`UsageError` when ``spec`` does not fit this kind (op, severity)."""
        if self.ops is not None and spec.op != ANY_OP and spec.op not in self.ops:
            raise UsageError(
                f"fault {self.name} applies to {', '.join(sorted(self.ops))}, not {spec.op}"
            )
        self.check_severity(spec.severity)

    def check_severity(self, severity: float) -> None:
        """Raise :class:`UsageError` for an invalid severity (default: must be > 0)."""
        if not isinstance(severity, int | float) or not severity > 0:
            raise UsageError(
                f"fault {self.name}: severity must be a number > 0 "
                f"({self.severity_doc}), not {severity!r}"
            )

    def applies_to(self, op_type: str) -> bool:
        """Whether the kind can act on nodes of ``op_type``."""
        return self.ops is None or op_type in self.ops

    def inputs(
        self, math: FaultMath, spec: FaultSpec, op_type: str, values: Sequence[Any]
    ) -> list[Any]:
        """Return the op's operands after the fault (:attr:`Target.INPUT` kinds)."""
        raise NotImplementedError(f"fault {self.name} does not act on inputs")

    def outputs(
        self,
        math: FaultMath,
        spec: FaultSpec,
        op_type: str,
        inputs: Sequence[Any],
        values: Sequence[Any],
    ) -> list[Any]:
        """Return the op's outputs after the fault (:attr:`Target.OUTPUT` kinds).

        ``inputs`` are the op's operands (only when :attr:`needs_inputs`, else empty).
        """
        raise NotImplementedError(f"fault {self.name} does not act on outputs")

    def rewrite_node(self, node: onnx.NodeProto, spec: FaultSpec) -> None:
        """Change the node's attributes in place (:attr:`Target.ATTRIBUTE` kinds)."""
        raise NotImplementedError(f"fault {self.name} does not rewrite attributes")


_KINDS: dict[str, FaultKind] = {}


def register_fault(cls: type[FaultKind]) -> type[FaultKind]:
    """Class decorator: register a fault kind under ``cls.name``.

    Raises:
        ValueError: Empty or duplicate name.
    """
    if not cls.name:
        raise ValueError(f"fault kind {cls.__name__} has no name")
    if cls.name in _KINDS:
        raise ValueError(f"duplicate fault kind {cls.name!r}")
    _KINDS[cls.name] = cls()
    return cls


def _ensure_kinds() -> None:
    import anpred.inject.kinds  # noqa: F401  (importing registers the built-in kinds)


def fault_kind(name: str) -> FaultKind:
    """Return the registered kind ``name``.

    Raises:
        UsageError: Unknown kind (the message lists the known ones).
    """
    _ensure_kinds()
    if name not in _KINDS:
        raise UsageError(f"unknown fault kind {name!r}; choose from {', '.join(_KINDS)}")
    return _KINDS[name]


def fault_kinds() -> dict[str, FaultKind]:
    """Return every registered kind by name (registration order)."""
    _ensure_kinds()
    return dict(_KINDS)
