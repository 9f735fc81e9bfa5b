"""The float64 reference when the torch translation cannot build it: ONNX's own evaluator.

A user's ONNX file gets its float64 reference from the torch translators run in float64.
When an op of the graph has no torch translator, the reference falls back to
:class:`onnx.reference.ReferenceEvaluator` (ONNX's complete implementation, NumPy) on the
graph made float64 (:func:`anpred.translate.double_graph.to_double`); the reference's
settings record that source and why. The torch participants still run the translators,
and the op they lack is their error, not the end of the run.

Precision: the evaluator computes in the graph's type, float64 here, except where its
kernels hold float32 steps (measured against the torch translators in float64 on ONNX's
node tests, tests/translate/torch/test_torch_float64_node_tests.py: GridSample, cubic
Resize, AffineGrid, LRN up to 8.7e-7; function bodies with float32 constants).
Its Erf, vectorised to float32, is replaced here by ``math.erf`` in float64.

Cost: the evaluator is NumPy, node by node. Measured on efficientnet_b0 (224x224, 1
thread, a shared 2-core machine): 2.3 s per input against 0.52 s for the torch float64
translation (4.4x), build 0.27 s; the two references agree to 1.2e-13 (max-abs relative,
output). A 16x16 two-conv model: 1.7 ms per input inside a run.

:class:`EvaluatorGraph` has the surface of :class:`~anpred.translate.graph.GraphProgram`
that runs use (``run``, ``outputs``, ``output_dtypes``, ``op_types``), so the anchored,
plain and stage-isolation graphs of a run execute through it unchanged.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from anpred.errors import UsageError
from anpred.translate.adapter import LibraryAdapter
from anpred.translate.double_graph import to_double
from anpred.translate.graph import NodeHook

#: What the reference's settings name as its source.
SOURCE = "onnx.reference.ReferenceEvaluator on the graph made float64"


def _erf64() -> type:
    """An Erf for the evaluator that computes in the input's type (``math.erf``)."""
    from onnx.reference.op_run import OpRun

    class Erf(OpRun):
        op_domain = ""

        def _run(self, x: np.ndarray) -> tuple[np.ndarray]:
            return (np.vectorize(math.erf, otypes=[x.dtype])(x),)

    return Erf


class EvaluatorAdapter(LibraryAdapter):
    """Values in and out of the evaluator: NumPy arrays, floats in float64.

    Args:
        settings: ``reason``: why the torch translation could not build the reference.
    """

    name = "onnx_reference"

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        settings = dict(settings or {})
        unknown = set(settings) - {"reason"}
        if unknown:
            raise UsageError(f"unknown evaluator setting(s): {', '.join(sorted(unknown))}")
        self.reason = str(settings.get("reason", ""))

    @staticmethod
    def _array(array: np.ndarray) -> np.ndarray:
        array = np.asarray(array)
        return array.astype(np.float64) if array.dtype.kind == "f" else array

    def const(self, array: np.ndarray) -> np.ndarray:
        """Return ``array`` (floats as float64)."""
        return self._array(array)

    def feed(self, array: np.ndarray) -> np.ndarray:
        """Return the input ``array`` (floats as float64)."""
        return self._array(array)

    def to_numpy(self, value: Any) -> np.ndarray:
        """Return ``value`` as an array."""
        return np.asarray(value)

    def settings(self) -> dict[str, Any]:
        """The reference's source, onnx's version and why the torch translation was not used."""
        return {
            "dtype": "float64",
            "reference_source": SOURCE,
            "onnx": onnx.__version__,
            "fallback_reason": self.reason,
        }


def make_adapter(settings: Mapping[str, Any] | None = None) -> EvaluatorAdapter:
    """Return the evaluator's adapter (the translator-package entry point runs use)."""
    return EvaluatorAdapter(settings)


class EvaluatorGraph:
    """An ONNX graph made float64 and executed by ONNX's reference evaluator.

    Args:
        model: The ONNX model.
        adapter: The evaluator's adapter.
        outputs: Names of the values to return (graph outputs or intermediate values);
            defaults to the graph outputs.
        feeds: Names of the values supplied at run time; defaults to the graph inputs
            that are not initializers.
        hook: Must be ``None``: the evaluator runs the graph as a whole.
        pre_hook: Must be ``None``.

    Raises:
        UsageError: When per-node hooks are asked for.
    """

    def __init__(
        self,
        model: onnx.ModelProto,
        adapter: LibraryAdapter,
        outputs: Sequence[str] | None = None,
        feeds: Sequence[str] | None = None,
        hook: NodeHook | None = None,
        pre_hook: NodeHook | None = None,
    ) -> None:
        if hook is not None or pre_hook is not None:
            raise UsageError("the float64 evaluator reference cannot apply per-node hooks")
        from onnx.reference import ReferenceEvaluator

        self.adapter = adapter
        graph = model.graph
        initializers = {init.name for init in graph.initializer}
        self.feeds = (
            list(feeds)
            if feeds is not None
            else [vi.name for vi in graph.input if vi.name not in initializers]
        )
        self.outputs = list(outputs) if outputs is not None else [o.name for o in graph.output]
        self.output_dtypes: dict[str, np.dtype | None] = dict.fromkeys(self.outputs)
        self.op_types = list(dict.fromkeys(node.op_type for node in graph.node))
        self._evaluator = ReferenceEvaluator(to_double(model), new_ops=[_erf64()])

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Execute the graph on NumPy feeds (floats as float64); return arrays by name."""
        values = {name: self.adapter.feed(np.asarray(feeds[name])) for name in self.feeds}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # overflow to inf, as float64 does
            results = self._evaluator.run(self.outputs, values)
        return {name: np.asarray(value) for name, value in zip(self.outputs, results, strict=True)}
