"""MNN: MNN's converter (ONNX → ``.mnn``) and the MNN runtime on CPU, as users deploy it.

Conversion calls the converter's C++ binding ``_tools.mnnconvert`` (shipped in the ``MNN``
wheel). Never the console-script module ``MNN.tools.mnnconvert``: importing it runs
``pip install`` of a telemetry SDK and calls home (``../shared/ENVIRONMENT.md``); the
worker's offline guard would refuse both, and the run would depend on it.

Inference uses the Module API the way ultralytics' MNN backend does
(``MNN.nn.create_runtime_manager`` + ``MNN.nn.load_module_from_file(..., rearrange=False)``),
with the outputs named as in the ONNX graph (MNN keeps names, layouts NCHW).

Configurations (``anpred.library.runtimes``): ``precision`` is the runtime's precision
hint (``normal``; ``low`` is ultralytics' default), ``fp16_weights`` converts with
``--fp16`` (weights stored as float16), ``winograd: False`` keeps 3x3 convolutions off
Winograd (the hint ``WINOGRAD_MEMORY_LEVEL`` 0), which is where MNN's fp32 error comes from.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anpred.backends.converted import ConversionError, ConversionSource, ConvertedRunner

#: Words of the converter's log lines that give its reason for failing.
_ERROR_WORDS = ("error", "failed", "not exist", "not support", "unsupported")
#: ``Interpreter::HintMode::WINOGRAD_MEMORY_LEVEL``; level 0 keeps 3x3 convolutions off
#: Winograd (measured, yolov8n seeded: neck.p5 1.5e-3 → 1.1e-5 from onnxruntime, the fp32
#: floor; no other precision hint changes anything on this CPU).
_WINOGRAD_MEMORY_LEVEL = 3
#: The time stamp and source line MNNConvert puts before a message.
_STAMP = re.compile(r"^\[\d\d:\d\d:\d\d\]\s*:\d+:\s*")


@contextlib.contextmanager
def _captured_fds(log: Path) -> Iterator[None]:
    """Send this process's stdout and stderr (file descriptors 1 and 2, where the C++
    converter writes) to ``log`` while the block runs.
    """
    saved = [os.dup(1), os.dup(2)]
    with open(log, "wb") as handle:
        os.dup2(handle.fileno(), 1)
        os.dup2(handle.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


def _reason(log: Path) -> str:
    """The converter's reason for failing: the first log line that says so, without its
    time stamp (``[22:22:40] :35: Check failed: ... read onnx model failed: m.onnx``).
    """
    lines = [_STAMP.sub("", line).strip() for line in log.read_text(errors="replace").splitlines()]
    said = [line for line in lines if any(w in line.lower() for w in _ERROR_WORDS)]
    return (said or [line for line in lines if line][-1:] or ["MNNConvert wrote no model"])[0]


class MnnRunner(ConvertedRunner):
    """MNN 3.x on CPU; settings: ``precision`` (normal/low/high), ``fp16_weights``."""

    library = "mnn"
    runtime_settings = ("precision", "winograd")
    needs_slim = False

    def converter_version(self) -> str:
        return importlib.metadata.version("MNN")

    def convert_impl(self, source: ConversionSource, folder: Path) -> Path:
        import _tools  # the converter's C++ binding; never MNN.tools.mnnconvert

        artifact = folder / "model.mnn"
        argv = [
            "mnnconvert",
            "-f",
            "ONNX",
            "--modelFile",
            str(source.onnx_path),
            "--MNNModel",
            str(artifact),
            "--bizCode",
            "anpred",
        ]
        if source.settings.get("fp16_weights"):
            argv.append("--fp16")
        log = folder / "mnnconvert.log"
        with _captured_fds(log):
            _tools.mnnconvert(argv)
        if not artifact.exists() or artifact.stat().st_size == 0:
            raise ConversionError(f"MNNConvert: {_reason(log)}")
        return artifact

    def load_impl(self, artifact: Path, source: ConversionSource) -> Any:
        import MNN

        config = {
            "precision": str(self.settings.get("precision", "normal")),
            "backend": "CPU",
            "numThread": self.threads,
        }
        manager = MNN.nn.create_runtime_manager((config,))
        if not self.settings.get("winograd", True):
            manager.set_hint(_WINOGRAD_MEMORY_LEVEL, 0)
        module = MNN.nn.load_module_from_file(
            str(artifact),
            list(source.input_names),
            list(source.output_names),
            runtime_manager=manager,
            rearrange=False,
        )
        return module, list(source.output_names), [tuple(s) for s in source.input_shapes]

    def artifact_output_names(self, handle: Any) -> Sequence[str] | None:
        return list(handle[1])

    def run_impl(self, handle: Any, feeds: Sequence[np.ndarray]) -> list[np.ndarray]:
        import MNN.expr as F

        module, _, shapes = handle
        inputs = [
            F.const(np.ascontiguousarray(feed, dtype=np.float32), list(shape), F.NCHW)
            for feed, shape in zip(feeds, shapes, strict=True)
        ]
        outputs = module.onForward(inputs)
        if len(outputs) != len(handle[1]):  # MNN logs why (an operator it cannot run)
            raise RuntimeError(
                f"MNN returned {len(outputs)} of {len(handle[1])} outputs: it could not run "
                "the model (its reason is in the worker log)"
            )
        return [np.array(F.convert(out, F.NCHW).read(), copy=True) for out in outputs]

    def describe_settings(self) -> dict[str, Any]:
        return {
            **super().describe_settings(),
            "precision": str(self.settings.get("precision", "normal")),
            "fp16_weights": bool(self.settings.get("fp16_weights", False)),
            "winograd": bool(self.settings.get("winograd", True)),
            "backend": "CPU",
            "api": "MNN.nn.load_module_from_file (as ultralytics)",
        }
