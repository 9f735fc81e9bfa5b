"""ONNX's own backend node tests, prepared for anpred's translators (imports no DL library).

onnx >= 1.23 builds its backend node tests in memory
(:func:`onnx.backend.test.loader.load_model_tests`); their input data come from
``numpy.random`` when the test modules are collected, so :func:`load_tests` seeds it first
(:data:`SEED`) and every process sees the same data.

A test is *runnable* here when its first data set holds only plain tensors of float32,
integer or bool type and at least one float32 tensor (anpred's graphs are float32). The
*vision subset* is the runnable tests whose graphs use only :data:`VISION_OPS`.

Two ways to run a test (:func:`static_model`):

* ``static``: the first input is fed, every other input becomes an initializer, as weights,
  shapes and scales are constants in an exported model. This is how a run uses a graph.
* ``fed``: every input is fed at run time (what the ONNX backend runner does).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
import onnx
from onnx import numpy_helper

#: numpy.random seed set before the backend tests are collected (their data are random).
SEED = 0

#: Op types of the vision subset: the 35 ops of anpred's model zoo (docs/zoo-ops.md) and
#: the ops other common vision models export (pooling and normalisation variants, Clip of
#: ReLU6, Pad, upsampling, ConvTranspose of segmentation decoders, LSTM/GRU of OCR heads).
VISION_OPS: tuple[str, ...] = (
    "Add", "AveragePool", "BatchNormalization", "Cast", "Clip", "Concat", "Constant",
    "ConstantOfShape", "Conv", "ConvTranspose", "Div", "Equal", "Erf", "Expand", "Flatten",
    "GRU", "Gather", "Gemm", "GlobalAveragePool", "HardSigmoid", "HardSwish", "Identity",
    "LSTM", "LayerNormalization", "MatMul", "MaxPool", "Mod", "Mul", "Pad", "Relu",
    "Reshape", "Resize", "Shape", "Sigmoid", "Slice", "Softmax", "Sqrt", "Squeeze", "Sub",
    "Transpose", "Unsqueeze", "Upsample", "Where",
)  # fmt: skip

_TENSOR_DTYPES = frozenset(
    np.dtype(name)
    for name in ("float32", "int64", "int32", "int16", "int8", "uint8", "uint16", "bool")
)


@dataclass(frozen=True)
class BackendTest:
    """One runnable ONNX backend node test.

    Attributes:
        name: Test name (``test_conv_with_strides_padding``).
        model: The test's ONNX model.
        inputs: Input arrays, in graph-input order (first data set).
        outputs: Expected outputs, in graph-output order.
        rtol: Relative tolerance of the test (ONNX default 1e-3).
        atol: Absolute tolerance (ONNX default 1e-7).
    """

    name: str
    model: onnx.ModelProto
    inputs: tuple[np.ndarray, ...]
    outputs: tuple[np.ndarray, ...]
    rtol: float
    atol: float

    @property
    def op_types(self) -> frozenset[str]:
        """Op types of the test's graph."""
        return frozenset(node.op_type for node in self.model.graph.node)

    @property
    def vision(self) -> bool:
        """Whether the test belongs to the vision subset."""
        return self.op_types <= set(VISION_OPS)


def _runnable(inputs: Sequence[object], outputs: Sequence[object]) -> bool:
    values = list(inputs) + list(outputs)
    if not values or not all(isinstance(v, np.ndarray) for v in values):
        return False
    dtypes = {v.dtype for v in values}  # type: ignore[union-attr]
    return dtypes <= _TENSOR_DTYPES and np.dtype("float32") in dtypes


@cache
def load_tests() -> tuple[BackendTest, ...]:
    """Return every runnable backend node test, by name (seeded, see :data:`SEED`)."""
    from onnx.backend.test import loader

    np.random.seed(SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = loader.load_model_tests(kind="node")
    tests = []
    for case in cases:
        if case.model is None or not case.data_sets:
            continue
        inputs, outputs = case.data_sets[0]
        if not _runnable(inputs, outputs) or len(inputs) != len(case.model.graph.input):
            continue
        tests.append(BackendTest(case.name, case.model, tuple(inputs), tuple(outputs),
                                 float(case.rtol), float(case.atol)))  # fmt: skip
    return tuple(sorted(tests, key=lambda t: t.name))


def select(tests: Sequence[BackendTest], subset: str) -> list[BackendTest]:
    """Return the tests of ``subset`` (``"vision"`` or ``"all"``)."""
    return [t for t in tests if subset == "all" or t.vision]


def static_model(test: BackendTest) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Return ``test``'s model with every input but the first as an initializer, and feeds.

    Returns:
        The model (a copy) and the feed of its one remaining graph input (none when the
        graph has no inputs).
    """
    model = onnx.ModelProto()
    model.CopyFrom(test.model)
    graph = model.graph
    if not graph.input:
        return model, {}
    for vi, value in zip(graph.input[1:], test.inputs[1:], strict=True):
        graph.initializer.append(numpy_helper.from_array(value, vi.name))
    del graph.input[1:]
    return model, {graph.input[0].name: test.inputs[0]}


def fed_feeds(test: BackendTest) -> dict[str, np.ndarray]:
    """Return the feeds of ``test`` with every input fed."""
    names = [vi.name for vi in test.model.graph.input]
    return dict(zip(names, test.inputs, strict=True))
