"""One-node ONNX cases for the op conformance suite, and the builder of their models.

Every case is one ONNX node with seeded random inputs. Dynamic inputs become graph inputs
(fed at run time); weights and the static integer inputs ONNX passes as tensors (Reshape
shapes, Slice starts, Split sizes, Resize scales, reduction axes, Pad pads ...) become
initializers, as in a model exported by ``torch.onnx``. Float inputs are drawn in float32,
so the float64 copy of a case holds exactly the same values.

The catalogue itself (which shapes and attributes each op is tested with) lives in
:mod:`conformance.catalog`; :func:`all_cases` returns it.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

#: Opset of the cases unless a case says otherwise (what torch.onnx exports CNNs/ViT/YOLO with).
DEFAULT_OPSET = 17

#: Every op the translators must cover (docs/helper-brief.md, docs/zoo-ops.md); each has
#: several cases.
REQUIRED_OPS: tuple[str, ...] = (
    "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Erf", "Exp", "Log", "Neg", "Abs", "Tanh",
    "Sigmoid", "Relu", "LeakyRelu", "Clip", "HardSigmoid", "HardSwish", "Softmax", "Conv",
    "MaxPool", "AveragePool", "GlobalAveragePool", "BatchNormalization", "LayerNormalization",
    "Gemm", "MatMul", "Concat", "Split", "Slice", "Gather", "Reshape", "Transpose", "Flatten",
    "Squeeze", "Unsqueeze", "Expand", "Tile", "Resize", "ReduceMean", "ReduceSum", "ReduceMax",
    "Identity", "Cast", "Where", "Equal", "Min", "Max", "Pad", "Dropout", "ConstantOfShape",
    "Range",
    # ops of the model zoo beyond that list (docs/zoo-ops.md)
    "Mod", "Shape", "Constant",
)  # fmt: skip


class FloatType:
    """Attribute placeholder for "the case's float element type" (Cast ``to``).

    It becomes ``FLOAT`` in the float32 model and ``DOUBLE`` in the float64 copy, so the
    float64 reference stays float64 all the way through.
    """

    def __repr__(self) -> str:
        return "FLOAT_TYPE"


FLOAT_TYPE = FloatType()


@dataclass(frozen=True)
class CaseInput:
    """One input of a case's node.

    Attributes:
        value: The input's value; ``None`` for an omitted optional input.
        static: ``True`` for an initializer (weights, shapes, axes), ``False`` for a graph
            input fed at run time.
        fixed_dtype: Keep a float value's dtype in the float64 copy (Resize scales, which
            ONNX types as float32 only).
    """

    value: np.ndarray | None
    static: bool = False
    fixed_dtype: bool = False


@dataclass(frozen=True)
class OpCase:
    """A one-node ONNX model with its inputs.

    Attributes:
        op: ONNX op type.
        case_id: Short name, unique among the op's cases (``"3x3_pad1_bias"``).
        inputs: The node's inputs, in ONNX order.
        attrs: Node attributes (:data:`FLOAT_TYPE` and float arrays follow the model's dtype).
        n_outputs: Number of node outputs that are graph outputs.
        opset: Opset of the default domain.
        reference: Who computes the float64 reference: ``"onnx"`` (the ONNX reference
            evaluator) or ``"onnxruntime"`` where the evaluator is known to be wrong or
            to lack the variant; the catalogue says why next to each such case.
    """

    op: str
    case_id: str
    inputs: tuple[CaseInput, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    n_outputs: int = 1
    opset: int = DEFAULT_OPSET
    reference: str = "onnx"

    @property
    def key(self) -> str:
        """``"Op/case_id"``, unique in the catalogue."""
        return f"{self.op}/{self.case_id}"


@dataclass(frozen=True)
class Rand:
    """A seeded random input, drawn when the case is materialised.

    Attributes:
        shape: Tensor shape.
        low: Lower bound of the uniform distribution.
        high: Upper bound.
        static: Initializer (``True``) or fed graph input.
        kind: ``"float"`` (float32 values), ``"grid"`` (float32 holding small integers, so
            that ties occur, for Equal), ``"int"`` (int64) or ``"bool"``.
    """

    shape: tuple[int, ...]
    low: float = -1.0
    high: float = 1.0
    static: bool = False
    kind: str = "float"

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """Draw the values."""
        if self.kind == "float":
            return rng.uniform(self.low, self.high, self.shape).astype(np.float32)
        if self.kind == "grid":
            return rng.integers(int(self.low), int(self.high) + 1, self.shape).astype(np.float32)
        if self.kind == "int":
            return rng.integers(int(self.low), int(self.high) + 1, self.shape).astype(np.int64)
        if self.kind == "bool":
            return rng.random(self.shape) < 0.5
        raise ValueError(f"unknown input kind {self.kind!r}")


def feed(*shape: int, low: float = -1.0, high: float = 1.0, kind: str = "float") -> Rand:
    """Return a random graph input (activations)."""
    return Rand(tuple(shape), low, high, False, kind)


def weight(*shape: int, low: float = -1.0, high: float = 1.0) -> Rand:
    """Return a random float initializer (weights, biases, statistics)."""
    return Rand(tuple(shape), low, high, True)


def static(values: Any, dtype: Any = np.int64, fixed_dtype: bool = False) -> CaseInput:
    """Return a fixed initializer (shapes, axes, pads, scales ...).

    Args:
        values: The value.
        dtype: Its dtype.
        fixed_dtype: Keep a float dtype in the float64 copy (see :class:`CaseInput`).
    """
    return CaseInput(np.asarray(values, dtype=dtype), static=True, fixed_dtype=fixed_dtype)


InputSpec = Rand | CaseInput | None


def make_case(
    op: str,
    case_id: str,
    inputs: Sequence[InputSpec],
    *,
    n_outputs: int = 1,
    opset: int = DEFAULT_OPSET,
    reference: str = "onnx",
    **attrs: Any,
) -> OpCase:
    """Materialise a case; random inputs are seeded by ``crc32("op/case_id")``.

    Args:
        op: ONNX op type.
        case_id: Case name.
        inputs: Input specs in ONNX order (:func:`feed`, :func:`weight`, :func:`static`,
            or ``None`` for an omitted optional input).
        n_outputs: Number of node outputs.
        opset: Opset of the default domain.
        reference: Who computes the float64 reference (see :class:`OpCase`).
        **attrs: Node attributes.

    Returns:
        The case, with drawn input values.
    """
    rng = np.random.default_rng(zlib.crc32(f"{op}/{case_id}".encode()))
    materialised = []
    for spec in inputs:
        if spec is None:
            materialised.append(CaseInput(None))
        elif isinstance(spec, Rand):
            materialised.append(CaseInput(spec.draw(rng), spec.static))
        else:
            materialised.append(spec)
    return OpCase(op, case_id, tuple(materialised), dict(attrs), n_outputs, opset, reference)


def as_float_dtype(value: np.ndarray, float_dtype: Any) -> np.ndarray:
    """Return ``value`` cast to ``float_dtype`` if it is a float array, else unchanged."""
    return value.astype(float_dtype) if value.dtype.kind == "f" else value


def _input_value(inp: CaseInput, float_dtype: np.dtype) -> np.ndarray:
    assert inp.value is not None
    return inp.value if inp.fixed_dtype else as_float_dtype(inp.value, float_dtype)


def node_attribute(name: str, value: Any, float_dtype: Any) -> onnx.AttributeProto:
    """Make a node attribute whose float type follows the model's ``float_dtype``.

    Args:
        name: Attribute name.
        value: Its value: :data:`FLOAT_TYPE` becomes the tensor type of ``float_dtype``
            (Cast ``to``), a numpy array a tensor (float arrays cast to ``float_dtype``);
            anything else goes to :func:`onnx.helper.make_attribute` as it is.
        float_dtype: The model's float dtype.

    Returns:
        The attribute.
    """
    if value is FLOAT_TYPE:
        value = helper.np_dtype_to_tensor_dtype(float_dtype)
    elif isinstance(value, np.ndarray):
        value = numpy_helper.from_array(as_float_dtype(value, float_dtype))
    return helper.make_attribute(name, value)


def input_names(case: OpCase) -> list[str]:
    """Names of the node's inputs in the built model (``""`` for omitted ones)."""
    return ["" if inp.value is None else f"in{i}" for i, inp in enumerate(case.inputs)]


def output_names(case: OpCase) -> list[str]:
    """Names of the node's outputs (all of them graph outputs)."""
    return [f"out{i}" for i in range(case.n_outputs)]


def build_model(case: OpCase, float_dtype: Any = np.float32) -> onnx.ModelProto:
    """Build the one-node ONNX model of ``case`` with float tensors of ``float_dtype``.

    Args:
        case: The case.
        float_dtype: ``np.float32`` for the model under test, ``np.float64`` for the
            reference copy (float inputs, initializers, float attributes and
            :data:`FLOAT_TYPE` attributes follow it; integer and bool tensors do not).

    Returns:
        A checked model whose graph outputs carry inferred types and shapes.
    """
    float_dtype = np.dtype(float_dtype)
    names = input_names(case)
    graph_inputs, initializers = [], []
    for name, inp in zip(names, case.inputs, strict=True):
        if inp.value is None:
            continue
        value = _input_value(inp, float_dtype)
        if inp.static:
            initializers.append(numpy_helper.from_array(value, name))
        else:
            dtype = helper.np_dtype_to_tensor_dtype(value.dtype)
            graph_inputs.append(helper.make_tensor_value_info(name, dtype, value.shape))
    node = helper.make_node(case.op, names, output_names(case), name=f"{case.op}_0")
    node.attribute.extend(
        node_attribute(key, value, float_dtype) for key, value in sorted(case.attrs.items())
    )
    outputs = [helper.make_empty_tensor_value_info(name) for name in output_names(case)]
    graph = helper.make_graph([node], case.key, graph_inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])
    model.ir_version = 8
    model = shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model)
    return model


def case_feeds(case: OpCase, float_dtype: Any = np.float32) -> dict[str, np.ndarray]:
    """Return the run-time feeds of ``case`` (non-static inputs), floats in ``float_dtype``."""
    return {
        name: _input_value(inp, np.dtype(float_dtype))
        for name, inp in zip(input_names(case), case.inputs, strict=True)
        if inp.value is not None and not inp.static
    }


def all_cases(ops: Sequence[str] | None = None) -> list[OpCase]:
    """Return the catalogue's cases, optionally only those of ``ops`` (in catalogue order)."""
    from conformance.catalog import catalogue

    cases = catalogue()
    if ops is None:
        return list(cases)
    wanted = set(ops)
    return [case for case in cases if case.op in wanted]
