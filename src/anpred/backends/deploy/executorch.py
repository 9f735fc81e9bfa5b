"""ExecuTorch: ``torch.export`` → XNNPACK delegate → ``.pte``, run by the ExecuTorch runtime.

The torch module exported is the anchored ONNX graph itself, translated by anpred's torch
translators (:mod:`anpred.backends.deploy.torch_graph`): anchors are extra outputs of the
exported program, the graph is the one every other participant runs (zoo models and user
ONNX files alike), and a rewritten graph (fault, drill-down) reaches the artifact. The
module runs twice before export; ``torch.export.export(strict=False)`` traces it (the
translators handle static attributes in Python, which non-strict export runs as Python),
``to_edge_transform_and_lower(XnnpackPartitioner())`` delegates what XNNPACK supports and
leaves the rest to ExecuTorch's portable kernels; how many operators were delegated is
written next to the artifact (``lowering.json``) and reported in the settings.

Configurations (setting ``dtype``): ``"float32"`` (default); ``"float16"``: the module and
its example inputs in half precision before export (``model.half()``, what ExecuTorch's
fp16 XNNPACK path expects); feeds are cast to float16 at run time and float16 outputs are
widened back to float32 (exactly) before they leave the runner.

Outputs come back positional, in the graph's output order, with ONNX's shapes (NCHW).
Measured on yolov8n (executorch 1.5.1, torch 2.14.1, 1 thread): export ~3 s, lowering
~30-40 s, ~0.3 s per image. The runtime's XNNPACK threadpool is sized to the runner's
``threads``.
"""

from __future__ import annotations

import importlib.metadata
import json
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from anpred.backends.converted import ConversionError, ConversionSource, ConvertedRunner

#: ``settings`` keys of this runner.
SETTINGS = ("dtype", "threads")
#: ``settings["dtype"]`` values and the torch dtype the program runs in.
DTYPES = {"float32": torch.float32, "float16": torch.float16}


class ExecuTorchRunner(ConvertedRunner):
    """ExecuTorch running the XNNPACK-delegated ``.pte``; settings: ``dtype``, ``threads``."""

    library = "executorch"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from anpred.errors import UsageError

        unknown = set(self.settings) - set(SETTINGS) - {"env"}
        if unknown:
            raise UsageError(f"unknown executorch setting(s): {', '.join(sorted(unknown))}")
        if self.dtype_name not in DTYPES:
            raise UsageError(
                f"executorch dtype must be one of {sorted(DTYPES)}, not {self.dtype_name!r}"
            )
        self._lowering: dict[str, Any] = {}

    @property
    def dtype_name(self) -> str:
        """The program's float dtype (``float32`` or ``float16``)."""
        return str(self.settings.get("dtype", "float32"))

    def converter_version(self) -> str:
        return (
            f"executorch {importlib.metadata.version('executorch')}, "
            f"torch {importlib.metadata.version('torch')}"
        )

    # --- conversion -----------------------------------------------------------------------

    def convert_impl(self, source: ConversionSource, folder: Path) -> Path:
        import onnx
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
            XnnpackPartitioner,
        )
        from executorch.exir import to_edge_transform_and_lower

        from anpred.backends.deploy.torch_graph import OnnxModule, example_inputs
        from anpred.errors import MissingTranslatorError

        folder.mkdir(parents=True, exist_ok=True)
        torch.set_num_threads(self.threads)
        dtype = DTYPES[self.dtype_name]
        try:
            module = OnnxModule(onnx.load(str(source.onnx_path)), source.input_shapes).eval()
        except MissingTranslatorError as err:
            raise ConversionError(f"no torch translation: {err}") from None
        inputs = example_inputs(source.input_shapes)
        if dtype != torch.float32:
            module = module.to(dtype)
            inputs = tuple(x.to(dtype) for x in inputs)
        record: dict[str, Any] = {}
        try:
            start = time.perf_counter()
            with torch.no_grad():
                module(*inputs)
                module(*inputs)
                exported = torch.export.export(module, inputs, strict=False)
            record["export_s"] = round(time.perf_counter() - start, 2)
        except Exception as err:  # torch.export's own error, as the conversion's reason
            raise ConversionError(f"torch.export: {_one_line(err)}") from None
        try:
            start = time.perf_counter()
            edge = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])
            record.update(_delegation(edge.exported_program().graph_module))
            program = edge.to_executorch()
            record["lower_s"] = round(time.perf_counter() - start, 2)
        except Exception as err:  # the lowering's own error
            raise ConversionError(f"XNNPACK lowering: {_one_line(err)}") from None
        artifact = folder / "model.pte"
        artifact.write_bytes(program.buffer)
        (folder / "lowering.json").write_text(json.dumps(record, indent=1))
        return artifact

    # --- runtime --------------------------------------------------------------------------

    def load_impl(self, artifact: Path, source: ConversionSource) -> Any:
        from executorch.extension.pybindings import portable_lib
        from executorch.runtime import Runtime

        portable_lib._unsafe_reset_threadpool(self.threads)
        lowering = artifact.with_name("lowering.json")
        self._lowering = json.loads(lowering.read_text()) if lowering.exists() else {}
        program = Runtime.get().load_program(artifact)
        return program.load_method("forward")

    def run_impl(self, handle: Any, feeds: Sequence[np.ndarray]) -> list[np.ndarray]:
        dtype = DTYPES[self.dtype_name]
        inputs = [torch.from_numpy(np.array(feed, copy=True)).to(dtype) for feed in feeds]
        outputs = handle.execute(inputs)
        arrays = []
        for value in outputs:
            tensor = value.detach()
            if tensor.dtype in (torch.float16, torch.bfloat16):
                tensor = tensor.to(torch.float32)  # exact widening
            arrays.append(np.array(tensor.numpy(), copy=True))
        return arrays

    def describe_settings(self) -> dict[str, Any]:
        described: dict[str, Any] = dict(super().describe_settings())
        described.update(
            {
                "dtype": self.dtype_name,
                "threads": self.threads,
                "delegate": "XnnpackPartitioner",
                **{k: v for k, v in self._lowering.items() if k.endswith("ops")},
            }
        )
        return described


def _delegation(graph_module: Any) -> dict[str, Any]:
    """How many operators XNNPACK took, and which ops were left to portable kernels."""
    delegated = 0
    left: Counter[str] = Counter()
    for module in graph_module.modules():
        if module is graph_module:
            continue
        inner = getattr(module, "original_module", None)
        if inner is not None:  # a lowered (delegated) submodule
            delegated += sum(1 for n in inner.graph_module.graph.nodes if n.op == "call_function")
    for node in graph_module.graph.nodes:
        if node.op != "call_function":
            continue
        name = getattr(node.target, "__name__", str(node.target))
        if "call_delegate" in name or name == "getitem":
            continue
        left[name] += 1
    return {"delegated_ops": delegated, "portable_ops": dict(sorted(left.items()))}


def _one_line(err: BaseException) -> str:
    first = (str(err).strip().splitlines() or [""])[0]
    return f"{type(err).__name__}: {first[:300]}"
