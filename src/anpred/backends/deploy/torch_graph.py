"""The anchored ONNX graph as a traceable ``torch.nn.Module`` (for torch-based converters).

pnnx (TorchScript → ncnn) and ExecuTorch (``torch.export`` → ``.pte``) start from a torch
module. anpred gives them the ONNX graph it compares everything else on, translated by
anpred's own torch translators (:mod:`anpred.translate.torch`, the same translation the
``torch`` participant runs for a user's ONNX file): so what is converted is exactly the
anchored graph (anchors as extra outputs, in graph output order), for zoo models and user
ONNX files alike, and a rewrite of the graph (a fault, a drill-down) reaches the artifact.

The graph's constants become buffers of the module, so that tracers see weights as module
attributes (``prim::GetAttr`` for TorchScript, buffers for ``torch.export``) rather than
inputs or baked literals; pnnx folds them into its layers as it does for a native module.
Imported only inside worker processes (imports torch).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
import torch

from anpred.translate.graph import GraphProgram
from anpred.translate.torch import make_adapter
from anpred.translate.torch.adapter import TorchAdapter


class _GraphFunction:
    """Catches the whole-graph function and its constants from a torch adapter.

    :meth:`LibraryAdapter.compile` receives the whole-graph function
    ``fn(consts, *feeds)``; wrapping it here records ``fn`` and, on the first run, the
    constants dict it is called with.
    """

    def __init__(self, adapter: TorchAdapter) -> None:
        self.fn: Callable[..., Any] | None = None
        self.consts: dict[str, torch.Tensor] | None = None
        compile_ = adapter.compile

        def capture(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.fn = fn

            def recorded(consts: dict[str, torch.Tensor], *feeds: Any) -> Any:
                self.consts = consts
                return fn(consts, *feeds)

            return compile_(recorded)

        adapter.compile = capture  # type: ignore[method-assign]


class OnnxModule(torch.nn.Module):
    """An ONNX graph translated to torch, with its constants as (non-persistent) buffers.

    Args:
        model: The ONNX model (static shapes).
        input_shapes: Static shape of each graph input, in order.
        input_dtypes: NumPy dtype name of each input (default float32).

    ``forward(*inputs)`` returns a tuple of the graph outputs, in graph output order.
    """

    def __init__(
        self,
        model: onnx.ModelProto,
        input_shapes: Sequence[Sequence[int]],
        input_dtypes: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        adapter = make_adapter({"dtype": "float32"})
        graph = _GraphFunction(adapter)
        program = GraphProgram(model, adapter)
        dtypes = list(input_dtypes or ["float32"] * len(input_shapes))
        feeds = {
            name: np.zeros(tuple(shape), dtype=dtype)
            for name, shape, dtype in zip(program.feeds, input_shapes, dtypes, strict=True)
        }
        program.run(feeds)  # records the constants (and runs the graph once)
        if graph.fn is None or graph.consts is None:
            raise RuntimeError("the torch adapter did not hand over the graph function")
        self._fn = graph.fn
        self._const_names: dict[str, str] = {}
        for index, (name, value) in enumerate(graph.consts.items()):
            attr = f"c{index}"
            self.register_buffer(attr, value.detach().clone(), persistent=False)
            self._const_names[name] = attr
        self.output_names = tuple(program.outputs)

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        consts = {name: getattr(self, attr) for name, attr in self._const_names.items()}
        return tuple(self._fn(consts, *inputs))


def example_inputs(
    shapes: Sequence[Sequence[int]], seed: int = 0, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, ...]:
    """Seeded example inputs in [0, 1) for tracing (images are in that range)."""
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.rand(tuple(s), generator=generator, dtype=dtype) for s in shapes)
