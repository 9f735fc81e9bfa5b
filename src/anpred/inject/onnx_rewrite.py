"""Fault injection for libraries that load the ONNX graph (onnxruntime, OpenVINO): rewrite it.

The fault's nodes are inserted around each target node: operand faults between the
operands and the node, output faults between the node and its consumers (the node's
output is renamed and the fault writes the original name, so anchors, graph outputs and
stage isolation keep working). Attribute faults change the node itself.

Two ONNX operations the fault kinds need have no direct equivalent here:

* ``truncate_mantissa`` has no bit cast before opset 26, so it is computed exactly with
  float arithmetic: the power of two of ``|x|`` comes from Veltkamp's splitting (rounding
  ``|x|`` to one significant bit), then ``floor(|x| / ulp) * ulp``. Same result as masking
  the bits for ``2**-100 <= |x| <= 2**100``; other values (zeros, tiny and huge values,
  inf, nan) pass unchanged.
* round trips through bfloat16/float16 are ``Cast`` pairs, except for OpenVINO, whose
  graph transformations remove a ``Convert`` pair (measured with OpenVINO 2026.4: the
  output was bit-identical to the input; it also folds ``(x + c) - c``). There
  (``emulate_casts=True``) the rounding is computed with Veltkamp's splitting too (round
  to nearest even, as the cast, for ``2**-100 <= |x| <= 2**100``, other values pass
  unchanged), plus, for float16, ``Round`` on its subnormal grid and the overflow to
  infinity: float16 is then exact for every value.

A partial fault selects with ``Where``: ``above:K`` compares ``Abs`` with ``K·Sqrt(
ReduceMean(x·x))`` (every axis), ``channels:F`` uses a constant boolean mask over the
channel axis, from the value's shape as ONNX shape inference gives it.

Every rewrite is valid at the graph's own opset (a user's ONNX file keeps it; real exports
are often opset 9 to 12), from opset 9 (``Where``) on:

* ``Cast`` to bfloat16 exists from opset 13: below it the bfloat16 round trip is emulated
  for every library (same range rule as above); ``Cast`` to float16 is valid from opset 6;
* ``GreaterOrEqual``/``LessOrEqual`` (opset 12) become ``Not(Less)``/``Not(Greater)``
  (they differ only for NaN, which every branch they select maps to NaN);
* ``Round`` (opset 11) becomes half-to-even rounding from ``Floor``;
* ``Clip`` takes its bounds as attributes before opset 11.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from anpred.errors import UsageError
from anpred.inject.math import FaultMath
from anpred.inject.spec import FaultSpec, Target, fault_kind
from anpred.inject.stages import node_key
from anpred.interchange.loaded import facts_of

#: Significant bits (implicit bit included) of each reduced format.
_SIGNIFICANT_BITS = {"bfloat16": 8, "float16": 11}
_CAST_TO = {"bfloat16": TensorProto.BFLOAT16, "float16": TensorProto.FLOAT16}
#: Magnitudes the arithmetic emulations handle exactly; others pass unchanged (above, the
#: splitting could overflow; below, OpenVINO flushes the subnormal intermediates to zero).
_SPLIT_RANGE = (2.0**-100, 2.0**100)
#: float16's smallest normal (below it, its grid is 2**-24), and the largest float32 that
#: rounds to a finite float16 (from 65520 on, float16 rounding gives infinity).
_F16_MIN_NORMAL = 2.0**-14
_F16_FINITE = float(np.nextafter(np.float32(65520.0), np.float32(0.0)))
#: Oldest opset the rewrite supports (``Where`` appears in opset 9).
MIN_OPSET = 9
#: Opsets where the operators the rewrite needs appear in the default domain.
_BF16_CAST_OPSET = 13
_ORDER_OPSET = 12  # GreaterOrEqual, LessOrEqual
_ROUND_OPSET = 11  # Round; Clip with bounds as inputs


def graph_opset(model: onnx.ModelProto) -> int:
    """The default-domain opset ``model`` imports (the newest one onnx knows if none)."""
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    return int(onnx.defs.onnx_opset_version())


class OnnxFaultMath(FaultMath):
    """:class:`~anpred.inject.math.FaultMath` whose "tensors" are ONNX value names.

    Every operation appends nodes (and initializers) and returns the name of its result.

    Args:
        prefix: Unique prefix of the new names (one per target node).
        float_names: Names of the graph's float32 values.
        emulate_casts: Round with arithmetic instead of ``Cast`` pairs (OpenVINO).
        opset: Default-domain opset of the graph the nodes go into (default: the newest).
        shapes: Static shapes of graph values (``None`` for an unknown dimension), for
            partial faults on channels.

    Raises:
        UsageError: For an opset older than :data:`MIN_OPSET`.
    """

    library = "onnx"

    def __init__(
        self,
        prefix: str,
        float_names: Collection[str],
        emulate_casts: bool,
        opset: int | None = None,
        shapes: Mapping[str, tuple[int | None, ...]] | None = None,
    ) -> None:
        self.opset = int(onnx.defs.onnx_opset_version()) if opset is None else int(opset)
        if self.opset < MIN_OPSET:
            raise UsageError(
                f"fault injection into an ONNX graph needs opset {MIN_OPSET} or newer "
                f"(this graph: opset {self.opset})"
            )
        self.prefix = prefix
        self.float_names = set(float_names)
        self.emulate_casts = emulate_casts
        self.shapes = dict(shapes or {})
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0

    def _name(self, what: str) -> str:
        self._count += 1
        return f"{self.prefix}/{what}_{self._count}"

    def const(self, value: Any, dtype: Any = np.float32) -> str:
        """Add an initializer; return its name."""
        name = self._name("const")
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def op(self, op_type: str, *inputs: str, float_out: bool = True, **attrs: Any) -> str:
        """Append one node; return the name of its (single) output."""
        out = self._name(op_type)
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=out, **attrs))
        if float_out:
            self.float_names.add(out)
        return out

    def is_float32(self, x: Any) -> bool:
        return x in self.float_names

    def _split(self, x: str, keep_bits: int) -> str:
        """Veltkamp: ``x`` rounded to nearest with ``keep_bits`` significant bits."""
        big = self.op("Mul", x, self.const(2.0 ** (24 - keep_bits) + 1.0))
        return self.op("Sub", big, self.op("Sub", big, x))

    def _compare(self, op_type: str, x: str, y: str) -> str:
        """Boolean ``x op y``; before opset 12, ``>=`` is ``Not(<)`` and ``<=`` ``Not(>)``."""
        if self.opset < _ORDER_OPSET and op_type in ("GreaterOrEqual", "LessOrEqual"):
            strict = "Less" if op_type == "GreaterOrEqual" else "Greater"
            return self.op("Not", self.op(strict, x, y, float_out=False), float_out=False)
        return self.op(op_type, x, y, float_out=False)

    def _where_magnitude(self, x: str, low: float, high: float, inside: str, outside: str) -> str:
        """``inside`` where ``low <= |x| <= high``, else ``outside``."""
        magnitude = self.op("Abs", x)
        test = self.op(
            "And",
            self._compare("GreaterOrEqual", magnitude, self.const(low)),
            self._compare("LessOrEqual", magnitude, self.const(high)),
            float_out=False,
        )
        return self.op("Where", test, inside, outside)

    def _round_half_even(self, y: str) -> str:
        """``Round(y)`` (to the nearest integer, ties to even); from ``Floor`` before opset 11."""
        if self.opset >= _ROUND_OPSET:
            return self.op("Round", y)
        half = self.const(0.5)
        floor = self.op("Floor", y)
        fraction = self.op("Sub", y, floor)
        above = self.op("Greater", fraction, half, float_out=False)
        below = self.op("Less", fraction, half, float_out=False)
        tie = self.op("Not", self.op("Or", above, below, float_out=False), float_out=False)
        halved = self.op("Floor", self.op("Mul", floor, half))
        parity = self.op("Sub", floor, self.op("Add", halved, halved))  # 0 or 1
        odd = self.op("Greater", parity, half, float_out=False)
        up = self.op("Or", above, self.op("And", tie, odd, float_out=False), float_out=False)
        return self.op("Where", up, self.op("Add", floor, self.const(1.0)), floor)

    def casts_to(self, dtype: str) -> bool:
        """Whether a round trip to ``dtype`` is a ``Cast`` pair (else arithmetic)."""
        if self.emulate_casts:
            return False
        return dtype != "bfloat16" or self.opset >= _BF16_CAST_OPSET

    def round_trip(self, x: Any, dtype: str) -> Any:
        if self.casts_to(dtype):
            return self.op("Cast", self.op("Cast", x, to=_CAST_TO[dtype]), to=TensorProto.FLOAT)
        rounded = self._where_magnitude(
            x, _SPLIT_RANGE[0], _SPLIT_RANGE[1], self._split(x, _SIGNIFICANT_BITS[dtype]), x
        )
        if dtype != "float16":
            return rounded
        # float16 subnormals: multiples of 2**-24, rounded half to even by Round.
        grid = self.const(2.0**-24)
        subnormal = self.op("Mul", self._round_half_even(self.op("Div", x, grid)), grid)
        rounded = self._where_magnitude(x, 0.0, _F16_MIN_NORMAL, subnormal, rounded)
        overflow = self.op("Mul", x, self.const(np.inf))
        return self._where_magnitude(x, 0.0, _F16_FINITE, rounded, overflow)

    def truncate_mantissa(self, x: Any, bits: int) -> Any:
        magnitude = self.op("Abs", x)
        nearest = self._split(magnitude, 1)  # |x| rounded to a power of two
        above = self.op("Greater", nearest, magnitude, float_out=False)
        power = self.op("Where", above, self.op("Mul", nearest, self.const(0.5)), nearest)
        ulp = self.op("Mul", power, self.const(2.0**-bits))
        kept = self.op("Mul", self.op("Floor", self.op("Div", magnitude, ulp)), ulp)
        negative = self.op("Less", x, self.const(0.0), float_out=False)
        signed = self.op("Where", negative, self.op("Neg", kept), kept)
        return self._where_magnitude(x, _SPLIT_RANGE[0], _SPLIT_RANGE[1], signed, x)

    def lookup_linear(
        self, x: Any, start: float, step: float, values: np.ndarray, slopes: np.ndarray
    ) -> Any:
        n = len(values)
        if self.opset >= _ROUND_OPSET:
            clipped = self.op("Clip", x, self.const(start), self.const(start + n * step))
        else:
            clipped = self.op("Clip", x, min=float(start), max=float(start + n * step))
        t = self.op("Mul", self.op("Sub", clipped, self.const(start)), self.const(1.0 / step))
        i = self.op("Min", self.op("Floor", t), self.const(float(n - 1)))
        index = self.op("Cast", i, to=TensorProto.INT64, float_out=False)
        value = self.op("Gather", self.const(values), index)
        slope = self.op("Gather", self.const(slopes), index)
        return self.op("Add", value, self.op("Mul", self.op("Sub", t, i), slope))

    def blend(self, x: Any, y: Any, scale: float) -> Any:
        return self.op("Add", x, self.op("Mul", self.op("Sub", y, x), self.const(scale)))

    def shape(self, x: Any) -> tuple[int | None, ...]:
        if x not in self.shapes:
            raise UsageError(f"fault: ONNX shape inference gives no rank for {x!r}")
        return self.shapes[x]

    def above_rms(self, x: Any, factor: float) -> Any:
        # ReduceMean without axes reduces every axis, at every opset (keepdims: broadcasts)
        rms = self.op("Sqrt", self.op("ReduceMean", self.op("Mul", x, x)))
        threshold = self.op("Mul", rms, self.const(factor))
        return self.op("Greater", self.op("Abs", x), threshold, float_out=False)

    def first_channels(self, x: Any, axis: int, count: int) -> Any:
        shape = [1] * len(self.shape(x))
        shape[axis] = int(self.shape(x)[axis] or 0)
        return self.const(np.arange(shape[axis]).reshape(shape) < count, dtype=np.bool_)

    def where(self, mask: Any, x: Any, y: Any) -> Any:
        return self.op("Where", mask, x, y)


def _float_values(model: onnx.ModelProto) -> dict[str, tuple[int | None, ...] | None]:
    """The graph's float32 values and their static shapes (``None``: unknown rank)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    values: dict[str, tuple[int | None, ...] | None] = {}
    for vi in [*graph.value_info, *graph.output, *graph.input]:
        tensor = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or tensor.elem_type != TensorProto.FLOAT:
            continue
        values[vi.name] = (
            tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
            if tensor.HasField("shape")
            else None
        )
    for init in graph.initializer:
        if init.data_type == TensorProto.FLOAT:
            values[init.name] = tuple(int(d) for d in init.dims)
    return values


def rewrite_model(
    model: onnx.ModelProto,
    spec: FaultSpec,
    targets: Iterable[str],
    emulate_casts: bool = False,
    library: str = "onnxruntime",
) -> onnx.ModelProto:
    """Return a copy of ``model`` with the fault applied to the ``targets`` nodes.

    Args:
        model: An anchored, plain or isolation graph of the export.
        spec: The fault.
        targets: Node keys (see :func:`anpred.inject.stages.resolve_targets`).
        emulate_casts: Emulate bfloat16/float16 round trips with arithmetic (OpenVINO);
            bfloat16 ones are emulated anyway below opset 13.
        library: Who will run the graph (for error messages).

    Raises:
        UsageError: When a target node is not in ``model``, or the graph's opset is older
            than :data:`MIN_OPSET`.
    """
    kind = fault_kind(spec.kind)
    wanted = set(targets)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    found = {node_key(n) for n in graph.node} & wanted
    if found != wanted:
        missing = sorted(wanted - found)[:3]
        raise UsageError(
            f"{library}: fault {spec.label} targets node(s) missing from the "
            f"graph: {', '.join(missing)}"
        )
    values: dict[str, tuple[int | None, ...] | None] = {}
    if kind.target is not Target.ATTRIBUTE:  # once per model object (a campaign's faults)
        values = facts_of(model, "float values", lambda: _float_values(model))
    floats = set(values)
    shapes = {name: shape for name, shape in values.items() if shape is not None}
    opset = graph_opset(model)
    nodes: list[onnx.NodeProto] = []
    for index, node in enumerate(graph.node):
        key = node_key(node)
        if key not in wanted:
            nodes.append(node)
            continue
        if kind.target is Target.ATTRIBUTE:
            kind.rewrite_node(node, spec)
            nodes.append(node)
            continue
        math = OnnxFaultMath(f"fault.{index}", floats, emulate_casts, opset, shapes)
        if kind.target is Target.INPUT:
            faulted = kind.inputs(math, spec, node.op_type, list(node.input))
            nodes.extend(math.nodes)
            del node.input[:]
            node.input.extend(faulted)
            nodes.append(node)
        else:
            originals = list(node.output)
            renamed = [f"{o}/before_fault" if o and o in floats else o for o in originals]
            del node.output[:]
            node.output.extend(renamed)
            for renamed_name, original in zip(renamed, originals, strict=True):
                if renamed_name != original:
                    math.float_names.add(renamed_name)
                    if original in shapes:
                        math.shapes[renamed_name] = shapes[original]
            inputs = list(node.input) if kind.needs_inputs else []
            faulted = kind.outputs(math, spec, node.op_type, inputs, renamed)
            nodes.append(node)
            nodes.extend(math.nodes)
            for original, renamed_name, value in zip(originals, renamed, faulted, strict=True):
                if renamed_name != original:
                    nodes.append(
                        helper.make_node(
                            "Identity", [value], [original], name=f"{math.prefix}/{original}"
                        )
                    )
        graph.initializer.extend(math.initializers)
    del graph.node[:]
    graph.node.extend(nodes)
    return out
