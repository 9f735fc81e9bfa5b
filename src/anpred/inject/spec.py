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

import math
from abc import ABC
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

from anpred.errors import UsageError

if TYPE_CHECKING:
    import onnx

    from anpred.inject.math import FaultMath

#: ``op`` value that selects every node of the stage the kind applies to.
ANY_OP = "*"
#: Partial fault modes (:class:`Partial`).
ABOVE = "above"
CHANNELS = "channels"


class Target(str, Enum):
    """What a fault kind changes."""

    OUTPUT = "output"  # the op's float outputs (computed from outputs and, maybe, inputs)
    INPUT = "input"  # the op's float operands, before it runs
    ATTRIBUTE = "attribute"  # an attribute of the node (the ONNX graph is rewritten)


@dataclass(frozen=True)
class Partial:
    """Which elements of a faulted tensor take the faulty value (the others stay clean).

    ``above:K`` (K > 0): the elements whose magnitude exceeds K times the tensor's RMS
    (``sqrt(mean(x²))`` over the whole clean tensor, computed in the graph), whatever the
    layout. ``channels:F`` (0 < F < 1): the first ``ceil(F·C)`` of the ``C`` channels,
    channel axis 1 of the ONNX tensor (a library value's own layout is followed; a tensor
    of rank < 2 counts as one channel).

    Attributes:
        mode: :data:`ABOVE` or :data:`CHANNELS`.
        value: K or F.
        text: The canonical string (``above:2``, ``channels:0.25``).
    """

    mode: str
    value: float
    text: str

    @property
    def label(self) -> str:
        """Suffix of the fault's label: ``above2``, ``channels0.25``."""
        return self.text.replace(":", "")

    def channel_count(self, channels: int) -> int:
        """``ceil(F·C)``, with F read as the decimal it was written as (0.3·10 = 3)."""
        _, _, number = self.text.partition(":")
        return min(channels, math.ceil(Fraction(number) * channels))


def parse_partial(text: str) -> Partial:
    """Parse ``above:K`` or ``channels:F`` into a :class:`Partial` (canonical text).

    Raises:
        UsageError: Any other string.
    """
    mode, sep, number = str(text).strip().partition(":")
    try:
        value = float(number) if sep else math.nan
    except ValueError:
        value = math.nan
    valid = (mode == ABOVE and 0 < value < math.inf) or (mode == CHANNELS and 0 < value < 1)
    if not valid:  # NaN compares false
        raise UsageError(
            f"partial fault {text!r}: write above:K (K > 0: only elements above K times the "
            "tensor's RMS) or channels:F (0 < F < 1: only the first ceil(F*C) channels)"
        )
    canonical = str(int(value)) if value.is_integer() else repr(value)
    return Partial(mode, value, f"{mode}:{canonical}")


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
        partial: ``None`` (the whole output is faulted) or which elements are
            (``above:K``, ``channels:F``; see :class:`Partial`); the others keep their
            clean value.
    """

    stage: str
    op: str
    kind: str
    severity: float
    node: str | None = None
    partial: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (``node`` and ``partial`` only when set, so whole-stage,
        whole-tensor faults read as before).
        """
        data = {"stage": self.stage, "op": self.op, "kind": self.kind, "severity": self.severity}
        if self.node is not None:
            data["node"] = self.node
        if self.partial is not None:
            data["partial"] = self.partial
        return data

    @property
    def selection(self) -> Partial | None:
        """The parsed :attr:`partial` (``None`` for a whole-tensor fault).

        Raises:
            UsageError: An invalid partial string.
        """
        return None if self.partial is None else parse_partial(self.partial)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FaultSpec:
        """Inverse of :meth:`to_dict`; checks the kind, the severity and the partial
        (whose string is made canonical: ``above:2.0`` reads ``above:2``).

        Raises:
            UsageError: Missing fields, unknown kind, invalid severity or partial.
        """
        missing = [k for k in ("stage", "op", "kind") if k not in data]
        if missing:
            raise UsageError(f"fault is missing {', '.join(missing)}: {dict(data)}")
        kind = fault_kind(str(data["kind"]))
        severity = data.get("severity")
        node = data.get("node")
        partial = data.get("partial")
        spec = cls(
            str(data["stage"]),
            str(data["op"]),
            kind.name,
            kind.default_severity if severity is None else severity,
            None if node is None else str(node),
            None if partial is None else parse_partial(partial).text,
        )
        kind.check(spec)
        return spec

    @property
    def label(self) -> str:
        """Short name: ``bf16@neck.p4``, ``mantissa@s2~above2`` for a partial fault (op and
        severity are in the settings).
        """
        selection = self.selection
        suffix = "" if selection is None else f"~{selection.label}"
        return f"{self.kind}@{self.stage}{suffix}"


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
        """Raise :class:`UsageError` when ``spec`` does not fit this kind (op, severity,
        partial).
        """
        if self.ops is not None and spec.op != ANY_OP and spec.op not in self.ops:
            raise UsageError(
                f"fault {self.name} applies to {', '.join(sorted(self.ops))}, not {spec.op}"
            )
        self.check_severity(spec.severity)
        self.check_partial(spec.selection)

    def check_partial(self, partial: Partial | None) -> None:
        """Raise :class:`UsageError` for a partial this kind cannot apply: none on attribute
        kinds (they change the node, not its values), only ``above`` on operand kinds (an
        operand's axis 1 is not the op's channels for every op).
        """
        if partial is None or self.target is Target.OUTPUT:
            return
        if self.target is Target.ATTRIBUTE:
            raise UsageError(
                f"fault {self.name} changes a node attribute; it cannot be partial ({partial.text})"
            )
        if partial.mode != ABOVE:
            raise UsageError(
                f"fault {self.name} acts on the op's operands; only above:K applies to "
                f"them, not {partial.text}"
            )

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
