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
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from anpred.errors import UsageError
from anpred.inject.math import FaultMath
from anpred.inject.spec import FaultSpec, Target, fault_kind
from anpred.inject.stages import node_key

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


class OnnxFaultMath(FaultMath):
    """:class:`~anpred.inject.math.FaultMath` whose "tensors" are ONNX value names.

    Every operation appends nodes (and initializers) and returns the name of its result.

    Args:
        prefix: Unique prefix of the new names (one per target node).
        float_names: Names of the graph's float32 values.
        emulate_casts: Round with arithmetic instead of ``Cast`` pairs (OpenVINO).
    """

    library = "onnx"

    def __init__(self, prefix: str, float_names: Collection[str], emulate_casts: bool) -> None:
        self.prefix = prefix
        self.float_names = set(float_names)
        self.emulate_casts = emulate_casts
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

    def _where_magnitude(self, x: str, low: float, high: float, inside: str, outside: str) -> str:
        """``inside`` where ``low <= |x| <= high``, else ``outside``."""
        magnitude = self.op("Abs", x)
        test = self.op(
            "And",
            self.op("GreaterOrEqual", magnitude, self.const(low), float_out=False),
            self.op("LessOrEqual", magnitude, self.const(high), float_out=False),
            float_out=False,
        )
        return self.op("Where", test, inside, outside)

    def round_trip(self, x: Any, dtype: str) -> Any:
        if not self.emulate_casts:
            return self.op("Cast", self.op("Cast", x, to=_CAST_TO[dtype]), to=TensorProto.FLOAT)
        rounded = self._where_magnitude(
            x, _SPLIT_RANGE[0], _SPLIT_RANGE[1], self._split(x, _SIGNIFICANT_BITS[dtype]), x
        )
        if dtype != "float16":
            return rounded
        # float16 subnormals: multiples of 2**-24, rounded half to even by Round.
        grid = self.const(2.0**-24)
        subnormal = self.op("Mul", self.op("Round", self.op("Div", x, grid)), grid)
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
        clipped = self.op("Clip", x, self.const(start), self.const(start + n * step))
        t = self.op("Mul", self.op("Sub", clipped, self.const(start)), self.const(1.0 / step))
        i = self.op("Min", self.op("Floor", t), self.const(float(n - 1)))
        index = self.op("Cast", i, to=TensorProto.INT64, float_out=False)
        value = self.op("Gather", self.const(values), index)
        slope = self.op("Gather", self.const(slopes), index)
        return self.op("Add", value, self.op("Mul", self.op("Sub", t, i), slope))

    def blend(self, x: Any, y: Any, scale: float) -> Any:
        return self.op("Add", x, self.op("Mul", self.op("Sub", y, x), self.const(scale)))


def _float_names(model: onnx.ModelProto) -> set[str]:
    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    names = {
        vi.name
        for vi in [*graph.value_info, *graph.output, *graph.input]
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type == TensorProto.FLOAT
    }
    names |= {init.name for init in graph.initializer if init.data_type == TensorProto.FLOAT}
    return names


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
        emulate_casts: Emulate bfloat16/float16 round trips with arithmetic (OpenVINO).
        library: Who will run the graph (for error messages).

    Raises:
        UsageError: When a target node is not in ``model``.
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
    floats = _float_names(model) if kind.target is not Target.ATTRIBUTE else set()
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
        math = OnnxFaultMath(f"fault.{index}", floats, emulate_casts)
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
            math.float_names |= {r for r, o in zip(renamed, originals, strict=True) if r != o}
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
