"""Paddle Inference: x2paddle converts the anchored ONNX model, Paddle Inference runs it on CPU.

The path Paddle users deploy: ``x2paddle`` (ONNX → a Paddle inference model, PIR
``model.json`` + ``model.pdiparams``) → ``paddle.inference.create_predictor`` on CPU with
oneDNN, in fp32 or, with ``precision="bf16"``, oneDNN bf16 (``enable_onednn_bfloat16``).

Runs in its own environment (``requirements/runtimes/paddle_inference.txt``): x2paddle 1.6.0
breaks with onnx newer than 1.16.2, and Paddle 3.3.1 with oneDNN cannot run x2paddle's
models (``ConvertPirAttribute2RuntimeAttribute``), so the environment pins Paddle 3.2.2
(measured in ``../shared/ENVIRONMENT.md``).

What x2paddle needs, done here and recorded in the conversion folder (``rewrites.json``):

- the graph simplified by onnxslim first (:attr:`PaddleInferenceRunner.needs_slim`; the raw
  graph fails);
- :func:`prepare_for_x2paddle` rewrites the ONNX without changing what it computes: every
  initializer shared by several Conv nodes is duplicated per Conv (x2paddle turns each
  Conv's weight and bias into that layer's own parameter; yolov8n's head shares one bias
  among three Convs), a pooling ``dilations`` attribute that is all ones (the default) is
  dropped (x2paddle refuses any ``dilations`` attribute), a Conv without ``kernel_shape``
  (optional in ONNX) gets it from its weight's shape (x2paddle requires it), and an IR
  version newer than this onnx's checker knows is lowered to the newest it knows.

Offline: x2paddle sends feedback to a server (``x2paddle.utils.ConverterCheck``, a thread
doing ``requests.get``) unless ``disable_feedback=True``; it is called with that, and the
class is replaced by a no-op during the conversion, so no code path of it can phone home.

Outputs come back as ``fetch_name_0``… in the ONNX graph's output order, NCHW; the input is
renamed ``x2paddle_<name>`` (x2paddle's ``make_variable_name``), so feeds are matched by
that name. Paddle and x2paddle are imported inside functions: the ONNX rewrite is usable
(and tested) from anpred's main environment.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import json
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper

from anpred.backends.converted import ConversionError, ConversionSource, ConvertedRunner

#: Bump when :func:`prepare_for_x2paddle` or the conversion call changes (cache key).
REWRITE_REVISION = 2
#: Precision settings this runner understands.
PRECISIONS = ("fp32", "bf16")
#: Conv-like ops whose initializer inputs x2paddle turns into the layer's own parameters.
_PARAMETER_OPS = ("Conv", "ConvTranspose")
#: Pooling ops x2paddle refuses when they carry a ``dilations`` attribute at all.
_POOL_OPS = ("MaxPool", "AveragePool")


def paddle_name(onnx_name: str) -> str:
    """The name x2paddle gives an ONNX tensor (``ONNXDecoder.make_variable_name``)."""
    for char in " .*?\\/-:;":
        onnx_name = onnx_name.replace(char, "_")
    return "x2paddle_" + onnx_name


def prepare_for_x2paddle(model: onnx.ModelProto) -> list[dict[str, Any]]:
    """Rewrite ``model`` in place so that x2paddle converts it; return what was changed.

    Every rewrite leaves the computation unchanged (see the module docstring).
    """
    rewrites: list[dict[str, Any]] = []
    if model.ir_version > onnx.IR_VERSION:
        rewrites.append(
            {"rewrite": "lower_ir_version", "from": model.ir_version, "to": onnx.IR_VERSION}
        )
        model.ir_version = onnx.IR_VERSION
    graph = model.graph
    initializers = {init.name: init for init in graph.initializer}
    names = set(initializers) | {o for node in graph.node for o in node.output}
    first_user: dict[str, str] = {}
    copies: list[onnx.TensorProto] = []
    for index, node in enumerate(graph.node):
        if node.op_type in _POOL_OPS:
            for attribute in list(node.attribute):
                if attribute.name == "dilations" and all(v == 1 for v in attribute.ints):
                    node.attribute.remove(attribute)
                    rewrites.append({"rewrite": "drop_unit_dilations", "node": node.name})
        if node.op_type not in _PARAMETER_OPS:
            continue
        weight = initializers.get(node.input[1]) if len(node.input) > 1 else None
        if weight is not None and not any(a.name == "kernel_shape" for a in node.attribute):
            kernel = list(weight.dims[2:])
            node.attribute.append(helper.make_attribute("kernel_shape", kernel))
            rewrites.append({"rewrite": "add_kernel_shape", "node": node.name, "kernel": kernel})
        for position, name in enumerate(node.input):
            if name not in initializers:
                continue
            if name not in first_user:
                first_user[name] = node.name
                continue
            copy_name = _unique(f"{name}.{node.name or index}", names)
            copy = onnx.TensorProto()
            copy.CopyFrom(initializers[name])
            copy.name = copy_name
            copies.append(copy)
            node.input[position] = copy_name
            rewrites.append(
                {
                    "rewrite": "duplicate_shared_initializer",
                    "initializer": name,
                    "node": node.name,
                    "copy": copy_name,
                    "shared_with": first_user[name],
                }
            )
    graph.initializer.extend(copies)
    return rewrites


def _unique(name: str, taken: set[str]) -> str:
    candidate, k = name, 1
    while candidate in taken:
        candidate, k = f"{name}.{k}", k + 1
    taken.add(candidate)
    return candidate


class _NoFeedback(threading.Thread):
    """Stands in for ``x2paddle.utils.ConverterCheck``: a thread that sends nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(daemon=True)

    def run(self) -> None:
        return None


@dataclass
class _Handle:
    """A loaded predictor and the Paddle name of each ONNX input, in ONNX order."""

    predictor: Any
    inputs: list[str]
    outputs: list[str]


class PaddleInferenceRunner(ConvertedRunner):
    """x2paddle → Paddle Inference on CPU.

    Settings: ``precision`` (``"fp32"`` or ``"bf16"``: oneDNN bf16), ``onednn`` (default
    on, as Paddle Inference on x86; off runs Paddle's plain CPU kernels), ``ir_optim``
    (Paddle's inference passes, default on), ``threads``.
    """

    library = "paddle_inference"
    runtime_settings = ("precision", "onednn", "ir_optim")
    needs_slim = True

    def converter_version(self) -> str:
        versions = [f"{d}=={importlib.metadata.version(d)}" for d in ("x2paddle", "paddlepaddle")]
        return "+".join([*versions, f"rewrite{REWRITE_REVISION}"])

    def describe_settings(self) -> dict[str, Any]:
        settings = {
            "precision": self._precision(),
            "onednn": bool(self.settings.get("onednn", True)),
            "ir_optim": bool(self.settings.get("ir_optim", True)),
            **super().describe_settings(),
        }
        if settings["precision"] == "bf16":
            settings.update(_bf16_support())
        return settings

    def _precision(self) -> str:
        precision = str(self.settings.get("precision", "fp32"))
        if precision not in PRECISIONS:
            raise ValueError(f"paddle_inference: precision {precision!r} not in {PRECISIONS}")
        return precision

    # --- conversion ----------------------------------------------------------------------

    def convert_impl(self, source: ConversionSource, folder: Path) -> Path:
        folder = Path(folder).resolve()
        model = onnx.load(str(source.onnx_path))
        if not source.slimmed:  # the framework slims when needs_slim; a direct call may not
            model = _slim(model)
        rewrites = prepare_for_x2paddle(model)
        prepared = folder / "x2paddle_input.onnx"
        onnx.save(model, str(prepared))
        (folder / "rewrites.json").write_text(json.dumps(rewrites, indent=1))
        save_dir = folder / "x2paddle"
        _run_x2paddle(prepared, save_dir, folder / "x2paddle.log")
        artifact = save_dir / "inference_model" / "model.json"
        if not artifact.exists() or not artifact.with_suffix(".pdiparams").exists():
            raise ConversionError(
                f"x2paddle wrote no inference model (see {folder / 'x2paddle.log'})"
            )
        # Kept: the inference model, x2paddle's generated code and log, rewrites.json. Not
        # kept (each as large as the weights; the source ONNX plus rewrites.json rebuild
        # the first): the rewritten ONNX and x2paddle's dygraph parameters.
        prepared.unlink()
        (save_dir / "model.pdparams").unlink(missing_ok=True)
        return artifact

    # --- runtime -------------------------------------------------------------------------

    def load_impl(self, artifact: Path, source: ConversionSource) -> _Handle:
        from paddle import inference

        precision = self._precision()
        onednn = bool(self.settings.get("onednn", True))
        if precision == "bf16" and not onednn:
            raise ValueError("paddle_inference: bf16 runs through oneDNN; it needs onednn on")
        config = inference.Config(str(artifact), str(Path(artifact).with_suffix(".pdiparams")))
        config.disable_gpu()
        config.set_cpu_math_library_num_threads(self.threads)
        config.switch_ir_optim(bool(self.settings.get("ir_optim", True)))
        config.disable_glog_info()
        if onednn:
            config.enable_onednn()
            if precision == "bf16":
                config.enable_onednn_bfloat16()
        else:
            config.disable_onednn()
        predictor = inference.create_predictor(config)
        return _Handle(
            predictor,
            _input_names(predictor.get_input_names(), source.input_names),
            list(predictor.get_output_names()),
        )

    def artifact_output_names(self, handle: _Handle) -> list[str]:
        """Paddle's output names (``fetch_name_<k>``, k in the ONNX graph's output order)."""
        return list(handle.outputs)

    def run_impl(self, handle: _Handle, feeds: Sequence[np.ndarray]) -> list[np.ndarray]:
        predictor = handle.predictor
        if len(feeds) != len(handle.inputs):
            raise ValueError(f"paddle_inference: {len(feeds)} feeds, {len(handle.inputs)} inputs")
        for name, feed in zip(handle.inputs, feeds, strict=True):
            tensor = predictor.get_input_handle(name)
            array = np.ascontiguousarray(feed)
            tensor.reshape(list(array.shape))
            tensor.copy_from_cpu(array)
        predictor.run()
        return [predictor.get_output_handle(name).copy_to_cpu() for name in handle.outputs]


def _input_names(predictor_inputs: Sequence[str], onnx_inputs: Sequence[str]) -> list[str]:
    """The predictor's input for each ONNX input, by x2paddle's renaming rule (never by order
    alone: an isolation model's inputs need not come back in ONNX order).
    """
    available = set(predictor_inputs)
    names = [paddle_name(name) for name in onnx_inputs]
    missing = [n for n in names if n not in available]
    if missing or len(set(names)) != len(names):
        raise ValueError(
            f"paddle_inference: cannot match ONNX inputs {list(onnx_inputs)} to the "
            f"predictor's inputs {list(predictor_inputs)}"
        )
    return names


def _slim(model: onnx.ModelProto) -> onnx.ModelProto:
    import onnxslim

    try:
        return onnxslim.slim(model)
    except Exception as err:
        raise ConversionError(f"onnxslim: {_first_line(err)}") from err


def _run_x2paddle(onnx_path: Path, save_dir: Path, log_path: Path) -> None:
    """Run ``x2paddle.convert.onnx2paddle`` offline, its prints into ``log_path``.

    Raises:
        ConversionError: x2paddle failed (its one-line reason).
    """
    import paddle
    import x2paddle.convert
    import x2paddle.utils

    patched = (x2paddle.convert, x2paddle.utils)
    saved = [module.ConverterCheck for module in patched]
    path_before = list(sys.path)
    with open(log_path, "w") as log:
        try:
            for module in patched:
                module.ConverterCheck = _NoFeedback
            sys.modules.pop("x2paddle_code", None)  # x2paddle imports its generated code
            # A fresh parameter-name scope: Paddle refuses a parameter name a conversion
            # earlier in this process used (the plain model's after the anchored model's).
            with (
                contextlib.redirect_stdout(log),
                contextlib.redirect_stderr(log),
                paddle.utils.unique_name.guard(),
            ):
                x2paddle.convert.onnx2paddle(
                    str(onnx_path),
                    str(save_dir),
                    disable_feedback=True,
                    enable_optim=False,
                    convert_to_lite=False,
                )
        except (Exception, SystemExit) as err:  # x2paddle calls exit(0) on some failures
            log.flush()
            raise ConversionError(_reason(err, log_path)) from err
        finally:
            for module, original in zip(patched, saved, strict=True):
                module.ConverterCheck = original
            sys.path[:] = path_before
            sys.modules.pop("x2paddle_code", None)
            importlib.invalidate_caches()


def _reason(err: BaseException, log_path: Path) -> str:
    """x2paddle's one-line reason: its message, the error beneath it, unsupported ops."""
    if isinstance(err, SystemExit):
        text = f"x2paddle exited ({err.code})"
    else:
        text = _first_line(err)
    cause = err.__cause__ or err.__context__
    if cause is not None and _first_line(cause) != text:
        text += f" ({cause.__class__.__name__}: {_first_line(cause)})"
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    unsupported: list[str] = []
    for k, line in enumerate(lines):  # x2paddle prints "== N OPs are not supported yet =="
        if "OPs are not supported yet" in line:
            unsupported = [
                op.strip("= ").strip() for op in lines[k + 1 :] if op.startswith("==========")
            ]
    if unsupported:
        text += f"; unsupported ops: {', '.join(sorted(set(unsupported)))}"
    return text[:300]


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return (lines[0].strip() if lines else "") or err.__class__.__name__


def _bf16_support() -> dict[str, Any]:
    """Whether this CPU computes bf16 in hardware (AVX512-BF16) or oneDNN emulates it."""
    try:
        from paddle.base import core

        return {
            "bf16_supported": bool(core.supports_bfloat16()),
            "bf16_native": bool(core.supports_bfloat16_fast_performance()),
        }
    except (ImportError, AttributeError):
        return {}
