"""One-node ONNX test scaffolding shared by the jax, tensorflow and paddle translator tests.

A :class:`Case` is one ONNX node with its inputs. :func:`build` makes its one-node model
with float tensors of a given dtype: the float32 model runs through a library's
translators (:func:`run_case`), the float64 copy of the same (float32-representable)
values through :class:`onnx.reference.ReferenceEvaluator` (:func:`reference`). Each test
file keeps its own random generator, tolerances, cases and checks.

The model differs from :func:`conformance.cases.build_model` (which takes
an :class:`~conformance.cases.OpCase`): no strict shape inference or
checker, and the node is named by the caller; the attribute and dtype rules are shared.

This module imports no DL library (only numpy, onnx and anpred's translation core), so
each test file still imports exactly one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from conformance.cases import FLOAT_TYPE, as_float_dtype, node_attribute
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from anpred.translate.graph import GraphProgram

__all__ = [
    "BRIEF_OPS",
    "FLOAT_TYPE",
    "Case",
    "Static",
    "as_double",
    "build",
    "erf",
    "f32",
    "i64",
    "reference",
    "run_case",
    "softmax_rows",
    "static",
    "uniform",
]

#: Ops the brief requires (docs/helper-brief.md); every translator library covers them.
BRIEF_OPS: tuple[str, ...] = tuple(
    """Add Sub Mul Div Pow Sqrt Erf Exp Log Neg Abs Tanh Sigmoid Relu LeakyRelu Clip
    HardSigmoid HardSwish Softmax Conv MaxPool AveragePool GlobalAveragePool BatchNormalization
    LayerNormalization Gemm MatMul Concat Split Slice Gather Reshape Transpose Flatten Squeeze
    Unsqueeze Expand Tile Resize ReduceMean ReduceSum ReduceMax Identity Cast Where Equal Min
    Max Pad Dropout ConstantOfShape Range""".split()
)


@dataclass(frozen=True)
class Static:
    """An input given as an initializer (its value is known at translation time)."""

    value: np.ndarray


@dataclass
class Case:
    """One ONNX node with its inputs.

    Attributes:
        family: The op family, which selects the test's tolerance.
        op: ONNX op type.
        inputs: The node's inputs in ONNX order: an array is a fed graph input, a
            :class:`Static` an initializer, ``None`` an omitted optional input.
        attrs: Node attributes; :data:`FLOAT_TYPE` and float arrays follow the model's
            float dtype.
        outputs: Number of node outputs (all of them graph outputs).
        opset: Opset of the default domain.
        label: Variant name, appended to the op in :attr:`id`.
        expect: Float64 expectation from the float64 inputs, for the few cases where the
            reference evaluator departs from the spec (it replaces the evaluator then).
    """

    family: str
    op: str
    inputs: list[Any]
    attrs: dict[str, Any] = field(default_factory=dict)
    outputs: int = 1
    opset: int = 17
    label: str = ""
    expect: Callable[..., np.ndarray] | None = None

    @property
    def id(self) -> str:
        """``"Op-label"``, or ``"Op"`` without a label."""
        return f"{self.op}-{self.label}" if self.label else self.op


def uniform(
    rng: np.random.Generator, low: float = -2.0, high: float = 2.0
) -> Callable[..., np.ndarray]:
    """Return ``draw(*shape, low=low, high=high)``: uniform float32 values drawn from ``rng``.

    Args:
        rng: The test file's generator; every draw advances it, so a file's inputs depend
            on its seed and on the order of its draws only.
        low: Default lower bound.
        high: Default upper bound.
    """

    def draw(*shape: int, low: float = low, high: float = high) -> np.ndarray:
        return rng.uniform(low, high, size=shape).astype(np.float32)

    return draw


def static(values: Any, dtype: Any = np.int64) -> Static:
    """Return an initializer holding ``values`` as ``dtype``."""
    return Static(np.asarray(values, dtype=dtype))


def i64(*values: int) -> Static:
    """Return a 1-D int64 initializer (shapes, axes, pads ...)."""
    return static(values)


def f32(*values: float) -> Static:
    """Return a 1-D float32 initializer (scales, clip bounds ...)."""
    return static(values, np.float32)


def softmax_rows(rows: np.ndarray) -> np.ndarray:
    """Softmax of each row of a 2-D array (Softmax before opset 13, written out)."""
    e = np.exp(rows - rows.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def erf(x: np.ndarray) -> np.ndarray:
    """The error function in float64 (the reference evaluator rounds it to float32)."""
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))


def build(
    case: Case, float_dtype: Any, node_name: str = "node"
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Return the one-node model of ``case`` and its feeds.

    Args:
        case: The case.
        float_dtype: ``np.float32`` for the model under test, ``np.float64`` for the
            reference copy: float inputs, initializers and attributes follow it; integer and
            bool tensors do not.
        node_name: Name of the node (error messages quote it).

    Returns:
        The model (IR version 8) and the feeds of its graph inputs.
    """
    float_dtype = np.dtype(float_dtype)
    names, graph_inputs, initializers, feeds = [], [], [], {}
    for index, item in enumerate(case.inputs):
        if item is None:
            names.append("")
            continue
        name = f"in{index}"
        names.append(name)
        if isinstance(item, Static):
            initializers.append(
                numpy_helper.from_array(as_float_dtype(item.value, float_dtype), name)
            )
        else:
            value = as_float_dtype(np.asarray(item), float_dtype)
            feeds[name] = value
            elem = helper.np_dtype_to_tensor_dtype(value.dtype)
            graph_inputs.append(helper.make_tensor_value_info(name, elem, value.shape))
    outputs = [f"out{i}" for i in range(case.outputs)]
    node = helper.make_node(case.op, names, outputs, name=node_name)
    node.attribute.extend(
        node_attribute(key, value, float_dtype) for key, value in sorted(case.attrs.items())
    )
    graph = helper.make_graph(
        [node],
        case.id,
        graph_inputs,
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])
    model.ir_version = 8
    return model, feeds


def reference(case: Case) -> list[np.ndarray]:
    """Return the float64 reference outputs of ``case``.

    ``case.expect`` on the float64 inputs (``None`` kept in place) where the case has one,
    else the reference evaluator on the float64 model.
    """
    if case.expect is not None:
        inputs = [
            None if item is None else as_float_dtype(np.asarray(_value(item)), np.float64)
            for item in case.inputs
        ]
        return [np.asarray(case.expect(*inputs))]
    model, feeds = build(case, np.float64)
    return [np.asarray(v) for v in ReferenceEvaluator(model).run(None, feeds)]


def run_case(
    case: Case,
    adapter: Any,
    to_numpy: Callable[[Any, Any], np.ndarray] | None = None,
) -> list[np.ndarray]:
    """Run the float32 model of ``case`` through ``adapter``'s translators.

    Args:
        case: The case.
        adapter: A library adapter.
        to_numpy: ``to_numpy(adapter, value)`` turning an output into an array; defaults
            to ``adapter.to_numpy(value)``.

    Returns:
        The node's outputs, in order.
    """
    model, feeds = build(case, np.float32)
    program = GraphProgram(model, adapter)
    results = program.run(feeds)
    if to_numpy is None:
        return [adapter.to_numpy(results[name]) for name in program.outputs]
    return [to_numpy(adapter, results[name]) for name in program.outputs]


def as_double(model: onnx.ModelProto) -> onnx.ModelProto:
    """Return a float64 copy of ``model`` for the reference evaluator.

    Float32 initializers and FLOAT graph inputs and outputs become float64.
    """
    double = onnx.ModelProto()
    double.CopyFrom(model)
    for init in double.graph.initializer:
        array = numpy_helper.to_array(init)
        if array.dtype == np.float32:
            init.CopyFrom(numpy_helper.from_array(array.astype(np.float64), init.name))
    for vi in list(double.graph.input) + list(double.graph.output):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    return double


def _value(item: Any) -> Any:
    return item.value if isinstance(item, Static) else item
