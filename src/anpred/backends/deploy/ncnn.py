"""ncnn: pnnx converts the anchored model to an ncnn ``param``/``bin`` pair, ``ncnn.Net`` runs it.

How the model reaches pnnx (setting ``frontend``):

- ``"torchscript"`` (default): the path ultralytics' ncnn export takes, torch → TorchScript
  → pnnx. The torch module is the anchored ONNX graph itself, translated by anpred's torch
  translators (:mod:`anpred.backends.deploy.torch_graph`): anchors are extra outputs, the
  same graph every other participant runs, for zoo models and user ONNX files alike, and a
  rewritten graph (fault, drill-down) reaches the artifact. The module runs twice before
  ``torch.jit.trace`` (as ultralytics does; the trace check compares a third run).
- ``"onnx"``: pnnx's own ONNX frontend on the anchored ONNX file (no torch tracing).

Measured on yolov8n (pnnx 20261020, torch 2.14.1): both frontends give the same ncnn graph
(same layers, other order) and the same outputs; TorchScript trace ~5 s, pnnx ~3 s.

pnnx is called as its binary (the ``pnnx.convert`` wrapper ignores its exit status and
discards its output); ``fp16=0`` unless ``fp16_weights`` (pnnx's default stores fp16
weights). It runs with ``cwd`` in the conversion folder, every output path named, no
network access (checked with ``strace``: no ``connect``).

Runtime configuration (``ncnn.Option``, set before loading): the default configuration
turns every reduced-precision flag off (ncnn's own defaults turn fp16 storage, packing
and arithmetic on wherever the CPU has them); ``fp16_storage`` (with fp16 packing),
``fp16_arithmetic`` and ``bf16_storage`` (with bf16 packing) turn them on. What they do
depends on the CPU's kernels; measured on an AMD EPYC (AVX-512, AVX512-BF16, F16C, no fp16
arithmetic): the fp16 flags leave convolutions in fp32 (yolov8n bit-identical to fp32) but
the fully connected layer stores fp16 (resnet output 4e-4, every earlier anchor unchanged);
bf16 storage rounds every layer (yolov8n 7e-3 at the output, 2e-1 at neck.p5). That is a
finding, not an error.

Outputs are ncnn's ``out0``, ``out1``, ... in that order (pnnx numbers them in the graph's
output order), returned untouched: without the batch dimension (``CHW``, a ``(1, K)``
tensor comes back as ``(K,)``); the base class maps them to anchors. Inputs ``in0``, ...
get the feeds without their batch dimension. ``ncnn.Mat(array)`` borrows the array's
memory without keeping it alive: feeds are copied into ncnn-owned mats and kept referenced
until the outputs are extracted (a temporary array there reads freed memory or segfaults).
"""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ncnn
import numpy as np

from anpred.backends.converted import ConversionError, ConversionSource, ConvertedRunner

#: ``settings`` keys of this runner.
SETTINGS = (
    "fp16_storage",
    "fp16_arithmetic",
    "bf16_storage",
    "fp16_weights",
    "frontend",
    "threads",
)
#: ``settings["frontend"]`` values.
FRONTENDS = ("torchscript", "onnx")
#: Seconds pnnx may take on one model before the conversion counts as failed.
PNNX_TIMEOUT_S = 600

_BLOB = re.compile(r"^(in|out)(\d+)$")


def _pnnx_exe() -> str:
    """The pnnx binary (its Python package only wraps it)."""
    import pnnx

    return str(pnnx.EXEC_PATH)


def _shape_arg(shapes: Sequence[Sequence[int]]) -> str:
    return ",".join(f"[{','.join(str(int(d)) for d in s)}]f32" for s in shapes)


def _reason(output: str, returncode: int) -> str:
    """The one-line reason pnnx gives for a failed conversion."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in reversed(lines):
        low = line.lower()
        if any(word in low for word in ("error", "fail", "unsupported", "not supported")):
            return f"pnnx: {line[:300]}"
    return f"pnnx exited with code {returncode}" + (f": {lines[-1][:300]}" if lines else "")


def blob_names(param: Path) -> tuple[list[str], list[str]]:
    """The input (``in0``...) and output (``out0``...) blob names of an ncnn param file,
    each list in numeric order.
    """
    names: dict[str, set[int]] = {"in": set(), "out": set()}
    lines = param.read_text().splitlines()
    for line in lines[2:]:
        for token in line.split()[2:]:
            match = _BLOB.match(token)
            if match:
                names[match.group(1)].add(int(match.group(2)))
    return (
        [f"in{i}" for i in sorted(names["in"])],
        [f"out{i}" for i in sorted(names["out"])],
    )


class NcnnRunner(ConvertedRunner):
    """ncnn running pnnx's conversion; settings: see the module docstring."""

    library = "ncnn"
    runtime_settings = ("fp16_arithmetic", "fp16_storage", "bf16_storage")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        unknown = set(self.settings) - set(SETTINGS) - {"env"}
        if unknown:
            from anpred.errors import UsageError

            raise UsageError(f"unknown ncnn setting(s): {', '.join(sorted(unknown))}")
        if self.frontend not in FRONTENDS:
            from anpred.errors import UsageError

            raise UsageError(f"ncnn frontend must be one of {FRONTENDS}, not {self.frontend!r}")

    @property
    def frontend(self) -> str:
        """How the model reaches pnnx (``torchscript`` or ``onnx``)."""
        return str(self.settings.get("frontend", "torchscript"))

    def converter_version(self) -> str:
        version = f"pnnx {importlib.metadata.version('pnnx')}"
        if self.frontend == "torchscript":
            version += f", torch {importlib.metadata.version('torch')}"
        return version

    # --- conversion -----------------------------------------------------------------------

    def convert_impl(self, source: ConversionSource, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        if self.frontend == "torchscript":
            model_path = folder / "model.pt"
            self._trace(source, model_path)
        else:
            model_path = source.onnx_path
        param, weights = folder / "model.ncnn.param", folder / "model.ncnn.bin"
        command = [
            _pnnx_exe(),
            str(model_path),
            f"inputshape={_shape_arg(source.input_shapes)}",
            f"fp16={1 if self.settings.get('fp16_weights') else 0}",
            "device=cpu",
            f"pnnxparam={folder / 'model.pnnx.param'}",
            f"pnnxbin={folder / 'model.pnnx.bin'}",
            f"pnnxpy={folder / 'model_pnnx.py'}",
            f"pnnxonnx={folder / 'model.pnnx.onnx'}",
            f"ncnnparam={param}",
            f"ncnnbin={weights}",
            f"ncnnpy={folder / 'model_ncnn.py'}",
        ]
        start = time.perf_counter()
        try:
            done = subprocess.run(
                command,
                cwd=folder,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=PNNX_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ConversionError(f"pnnx took more than {PNNX_TIMEOUT_S} s") from None
        output = done.stdout + done.stderr
        (folder / "pnnx.log").write_text(output)
        if done.returncode != 0 or not (param.exists() and weights.exists()):
            raise ConversionError(_reason(output, done.returncode))
        self._check_artifact(param, weights, source, output)
        (folder / "pnnx.seconds").write_text(f"{time.perf_counter() - start:.2f}\n")
        return param

    def _trace(self, source: ConversionSource, path: Path) -> None:
        """TorchScript of the translated graph (run twice first, then traced and checked)."""
        import onnx
        import torch

        from anpred.backends.deploy.torch_graph import OnnxModule, example_inputs
        from anpred.errors import MissingTranslatorError

        torch.set_num_threads(self.threads)
        try:
            module = OnnxModule(onnx.load(str(source.onnx_path)), source.input_shapes).eval()
        except MissingTranslatorError as err:
            raise ConversionError(f"no torch translation: {err}") from None
        inputs = example_inputs(source.input_shapes)
        try:
            with torch.no_grad():
                module(*inputs)
                module(*inputs)
                traced = torch.jit.trace(module, inputs, check_trace=True)
        except Exception as err:  # the tracer's own error, as the conversion's reason
            raise ConversionError(
                f"torch.jit.trace: {type(err).__name__}: {str(err).splitlines()[0][:300]}"
            ) from None
        traced.save(str(path))

    def _check_artifact(
        self, param: Path, weights: Path, source: ConversionSource, output: str
    ) -> None:
        """Load the artifact once: pnnx writes layers ncnn does not know when it cannot
        convert an op (its log says ``ignore ...``); that is a conversion failure.
        """
        net = ncnn.Net()
        if net.load_param(str(param)) != 0 or net.load_model(str(weights)) != 0:
            ignored = [line.strip() for line in output.splitlines() if "ignore" in line]
            detail = f": {ignored[0][:200]}" if ignored else ""
            raise ConversionError(f"ncnn cannot load pnnx's param file{detail}")
        inputs, outputs = blob_names(param)
        if len(inputs) != len(source.input_names) or len(outputs) != len(source.output_names):
            raise ConversionError(
                f"pnnx made {len(inputs)} inputs and {len(outputs)} outputs; the graph has "
                f"{len(source.input_names)} and {len(source.output_names)}"
            )

    # --- runtime --------------------------------------------------------------------------

    def options(self) -> dict[str, bool]:
        """The ``ncnn.Option`` precision flags of this configuration."""
        fp16 = bool(self.settings.get("fp16_storage"))
        bf16 = bool(self.settings.get("bf16_storage"))
        return {
            "use_fp16_storage": fp16,
            "use_fp16_packed": fp16,
            "use_fp16_arithmetic": bool(self.settings.get("fp16_arithmetic")),
            "use_bf16_storage": bf16,
            "use_bf16_packed": bf16,
        }

    def load_impl(self, artifact: Path, source: ConversionSource) -> Any:
        net = ncnn.Net()
        net.opt.num_threads = self.threads
        for flag, value in self.options().items():
            if hasattr(net.opt, flag):  # an older release lacks some (1.0.20230223: bf16 packed)
                setattr(net.opt, flag, value)
            elif value:
                raise RuntimeError(f"ncnn {ncnn.__version__} has no Option.{flag}")
        weights = artifact.with_suffix(".bin")
        if net.load_param(str(artifact)) != 0 or net.load_model(str(weights)) != 0:
            raise RuntimeError(f"ncnn could not load {artifact.name}")
        inputs, outputs = blob_names(artifact)
        return net, inputs, outputs

    def artifact_output_names(self, handle: Any) -> Sequence[str] | None:
        return list(handle[2])  # out0, out1, ... (recorded with the output mapping)

    def run_impl(self, handle: Any, feeds: Sequence[np.ndarray]) -> list[np.ndarray]:
        net, input_blobs, output_blobs = handle
        kept = []  # the arrays ncnn's mats point into, alive until extraction ends
        with net.create_extractor() as extractor:
            for blob, feed in zip(input_blobs, feeds, strict=True):
                array = np.ascontiguousarray(feed[0] if feed.shape[:1] == (1,) else feed)
                array = array.astype(np.float32, copy=False)
                kept.append(array)
                mat = ncnn.Mat(array).clone()
                kept.append(mat)
                extractor.input(blob, mat)
            outputs = []
            for blob in output_blobs:
                status, mat = extractor.extract(blob)
                if status != 0:
                    raise RuntimeError(f"ncnn could not compute {blob} (status {status})")
                outputs.append(np.array(mat.numpy(), copy=True))
        del kept
        return outputs

    def describe_settings(self) -> dict[str, Any]:
        described: dict[str, Any] = dict(super().describe_settings())
        described.update(
            {"threads": self.threads, "frontend": self.frontend, "ncnn": ncnn.__version__}
        )
        described["fp16_weights"] = bool(self.settings.get("fp16_weights"))
        described.update(self.options())
        return described
