"""LiteRT (``ai-edge-litert``): onnx2tf's TFLite model, as ultralytics exports it.

Conversion is ``onnx2tf.convert`` on the onnxslim-simplified model (the raw export fails in
onnx2tf: a shape error at ``model.22/Mul_2`` of yolov8n) with the options ultralytics uses
(``not_use_onnxsim``, ``enable_batchmatmul_unfold``, ``output_signaturedefs``). onnx2tf
writes ``<stem>_float32.tflite`` and ``<stem>_float16.tflite`` (float16 weights, dequantized
to float32 at load); the configuration's ``precision`` picks one.

**Offline.** For every model whose inputs are all 4-D with 3 channels, onnx2tf loads a
calibration file ``calibration_image_sample_data_20x128x128x3_float32.npy`` from the
current folder and *downloads it from GitHub when it is not there* (dying offline with a
``ConnectionError``). It only uses it as sample input of its dummy inferences (ONNX vs TF
checks that settle transpose ambiguities), so anpred writes its own seeded file of that
name into the conversion folder and converts with that folder as the current one: nothing
is downloaded. Ultralytics puts a file there for the same reason.

**Constant outputs.** onnx2tf drops graph outputs that are initializers (an anchor that
onnxslim folded into a constant); each gets an Identity node first, so that every anchor
stays an output.

**Layouts and names.** onnx2tf makes 4-D inputs and outputs NHWC: the runner transposes
NCHW feeds to what each input wants (inputs matched by name) and returns outputs untouched
(the framework maps them back). The TFLite file has no signature (the saved model has);
its outputs are TF's ``Identity``, ``Identity_1``, ... in the ONNX output order, returned
sorted by that number, under those names.

Loading: ``Interpreter`` with ``num_threads``; ``xnnpack: False`` selects the builtin kernels
without the default XNNPACK delegate. Imported only in the worker of LiteRT's own
environment (``requirements/runtimes/litert.txt``: tensorflow 2.19, onnx2tf 1.28.8).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import os
import re
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anpred.backends.converted import ConversionError, ConversionSource, ConvertedRunner

#: The file onnx2tf downloads unless it is in the current folder (onnx2tf 1.28.8,
#: ``utils.common_functions.download_test_image_data``), and its shape (NHWC, float32).
CALIBRATION_FILE = "calibration_image_sample_data_20x128x128x3_float32.npy"
CALIBRATION_SHAPE = (20, 128, 128, 3)
#: onnx2tf's output file of each precision, after the ONNX file's stem.
PRECISION_SUFFIXES = {"fp32": "_float32.tflite", "fp16": "_float16.tflite"}
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: Revision of how this runner calls onnx2tf (part of the converter version, so that cached
#: conversions made another way are not reused). 2: constant outputs behind an Identity;
#: 3: the float32 and float16 models kept in one conversion.
RECIPE = 3


def calibration_data() -> np.ndarray:
    """The stand-in for onnx2tf's calibration images: seeded uniform [0, 1), NHWC."""
    rng = np.random.default_rng(20)
    return rng.random(CALIBRATION_SHAPE, dtype=np.float32)


@contextlib.contextmanager
def _working_folder(folder: Path) -> Iterator[None]:
    """Run with ``folder`` as the current folder (onnx2tf reads the calibration file there)."""
    previous = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(previous)


@dataclass
class LiteRtModel:
    """A loaded artifact: the interpreter, its input and output tensor indices, in the ONNX
    graph's order, and the output names.
    """

    interpreter: Any
    inputs: list[dict[str, Any]]
    outputs: list[int]
    names: list[str]


class LiteRtRunner(ConvertedRunner):
    """LiteRT running onnx2tf's TFLite model of the anchored model.

    Settings: ``precision`` (``"fp32"`` default, ``"fp16"``: onnx2tf's float16-weight
    model), ``xnnpack`` (default ``True``), ``threads``.
    """

    library = "litert"
    #: onnx2tf writes the float32 and float16 models in one conversion: ``precision`` only
    #: picks the file to load, so both configurations share one (cached) conversion.
    runtime_settings = ("xnnpack", "precision")
    #: onnx2tf turns every 4-D tensor channels last (its (1, 84, 8400) 3-D output stays).
    known_layouts = {4: "NHWC"}  # noqa: RUF012 - read-only class constant
    needs_slim = True

    def converter_version(self) -> str:
        versions = []
        for dist in ("onnx2tf", "tensorflow", "tf-keras"):
            try:
                versions.append(f"{dist} {importlib.metadata.version(dist)}")
            except importlib.metadata.PackageNotFoundError:
                versions.append(f"{dist} ?")
        return ", ".join([*versions, f"anpred recipe {RECIPE}"])

    def convert_impl(self, source: ConversionSource, folder: Path) -> Path:
        np.save(folder / CALIBRATION_FILE, calibration_data())
        onnx_path = _constant_outputs_computed(source.onnx_path, folder / "onnx2tf-input")
        out = folder / "onnx2tf"
        log = io.StringIO()
        try:
            import onnx2tf

            with (
                _working_folder(folder),
                contextlib.redirect_stdout(log),
                contextlib.redirect_stderr(log),
            ):
                onnx2tf.convert(
                    input_onnx_file_path=str(onnx_path),
                    output_folder_path=str(out),
                    not_use_onnxsim=True,
                    verbosity="error",
                    enable_batchmatmul_unfold=True,
                    output_signaturedefs=True,
                )
        except BaseException as err:  # onnx2tf ends with sys.exit(1) on most errors
            if isinstance(err, (KeyboardInterrupt, MemoryError)):
                raise  # not the model's fault: not cached as its conversion's failure
            raise ConversionError(_reason(err, log.getvalue())) from err
        for suffix in PRECISION_SUFFIXES.values():
            written = out / (source.onnx_path.stem + suffix)
            if not written.exists():
                raise ConversionError(f"onnx2tf wrote no {written.name}: {_last_line(log)}")
        for path in out.iterdir():  # the saved model onnx2tf also writes: not run, not kept
            if path.suffix != ".tflite":
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        return out / (source.onnx_path.stem + PRECISION_SUFFIXES["fp32"])

    def select_artifact(self, artifact: Path) -> Path:
        precision = str(self.settings.get("precision", "fp32"))
        if precision not in PRECISION_SUFFIXES:
            raise ConversionError(f"unsupported precision {precision!r} (fp32 or fp16)")
        stem = artifact.name.removesuffix(PRECISION_SUFFIXES["fp32"])
        chosen = artifact.with_name(stem + PRECISION_SUFFIXES[precision])
        if not chosen.exists():
            raise ConversionError(f"the conversion holds no {chosen.name}")
        return chosen

    def load_impl(self, artifact: Path, source: ConversionSource) -> LiteRtModel:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        options: dict[str, Any] = {}
        if not self.settings.get("xnnpack", True):
            options["experimental_op_resolver_type"] = (
                OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
            )
        interpreter = Interpreter(model_path=str(artifact), num_threads=self.threads, **options)
        interpreter.allocate_tensors()
        inputs = _input_order(interpreter.get_input_details(), source.input_names)
        outputs = _output_order(interpreter.get_output_details())
        names = [d["name"] for d in outputs]
        return LiteRtModel(interpreter, inputs, [d["index"] for d in outputs], names)

    def artifact_output_names(self, handle: LiteRtModel) -> Sequence[str] | None:
        return handle.names

    def run_impl(self, handle: LiteRtModel, feeds: Sequence[np.ndarray]) -> list[np.ndarray]:
        interpreter = handle.interpreter
        for detail, feed in zip(handle.inputs, feeds, strict=True):
            interpreter.set_tensor(detail["index"], _to_layout(feed, tuple(detail["shape"])))
        interpreter.invoke()
        return [interpreter.get_tensor(index) for index in handle.outputs]


def _constant_outputs_computed(onnx_path: Path, folder: Path) -> Path:
    """The model with every graph output that is an initializer computed by an Identity.

    onnx2tf drops graph outputs that no node computes (an anchor on an operator whose
    output onnxslim folded into a constant, as in yolov8n's drill-down). Behind an Identity
    it keeps them, as the runtime holds them (float16 in the float16 model). Returns
    ``onnx_path`` itself when there is nothing to rewrite, else the rewritten copy (same
    file name, inside ``folder``).
    """
    import onnx
    from onnx import helper

    model = onnx.load(str(onnx_path))
    graph = model.graph
    initializers = {i.name: i for i in graph.initializer}
    constant = [o.name for o in graph.output if o.name in initializers]
    if not constant:
        return onnx_path
    for name in constant:
        renamed = f"{name}.anpred_constant"
        initializers[name].name = renamed
        for node in graph.node:
            for k, used in enumerate(node.input):
                if used == name:
                    node.input[k] = renamed
        graph.node.append(helper.make_node("Identity", [renamed], [name], name=f"{name}.output"))
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(folder / onnx_path.name))
    return folder / onnx_path.name


def _input_order(details: list[dict[str, Any]], onnx_names: Sequence[str]) -> list[dict[str, Any]]:
    """The input tensor details in the ONNX graph's input order, matched by name.

    onnx2tf keeps input names (``:`` becomes ``__``, a leading ``/`` becomes ``wa/``; TF may
    add ``serving_default_`` and ``:0``). When the names do not single out every input, the
    interpreter's order is kept.
    """
    if len(details) <= 1:
        return list(details)

    def bare(name: str) -> str:
        name = re.sub(r":\d+$", "", name.removeprefix("serving_default_"))
        return re.sub("^wa/", "/", name).replace("__", ":")

    by_name = {bare(d["name"]): d for d in details}
    if len(by_name) == len(details) and all(n in by_name for n in onnx_names):
        return [by_name[n] for n in onnx_names]
    return list(details)


def _output_order(details: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The output tensor details in the ONNX graph's output order.

    onnx2tf's model has no signature in the TFLite file, so outputs have no ONNX names:
    they are TF's ``Identity``, ``Identity_1``, ... numbered in the Keras model's output
    order, which is the ONNX graph's. Sorting by that number keeps the order even where the
    file lists ``Identity_10`` before ``Identity_2``; other names keep the file's order.
    """

    def number(name: str) -> int | None:
        found = re.fullmatch(r"(?:StatefulPartitionedCall:)?Identity(?:_(\d+))?(?::0)?", name)
        return None if found is None else int(found.group(1) or 0)

    numbers = [number(d["name"]) for d in details]
    if None in numbers or len(set(numbers)) != len(numbers):
        return list(details)
    return [d for _, d in sorted(zip(numbers, details, strict=True), key=lambda p: p[0])]


def _to_layout(feed: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``feed`` (graph layout, channels first) as the input of ``shape`` wants it."""
    feed = np.asarray(feed, dtype=np.float32)
    if feed.shape == shape:
        return feed
    last = (0, *range(2, feed.ndim), 1)
    if feed.ndim >= 3 and tuple(feed.shape[i] for i in last) == shape:
        return np.ascontiguousarray(feed.transpose(last))
    raise ValueError(f"input of shape {feed.shape} does not fit the TFLite input {shape}")


def _last_line(log: io.StringIO | str) -> str:
    text = log.getvalue() if isinstance(log, io.StringIO) else log
    lines = [_ANSI.sub("", ln).strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln]
    errors = [ln for ln in lines if "ERROR" in ln or "Error" in ln]
    return (errors or lines or ["no output"])[-1][:300]


def _reason(err: BaseException, log: str) -> str:
    """One line: onnx2tf's own last error message, else the exception."""
    if isinstance(err, SystemExit) or not str(err).strip():
        return f"onnx2tf: {_last_line(log)}"
    first = next((ln.strip() for ln in str(err).splitlines() if ln.strip()), "")
    return f"{type(err).__name__}: {first[:300]}"
