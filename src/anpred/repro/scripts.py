"""``repro_<library>.py``: a script that needs only that library and numpy.

Every script has the same frame (:data:`_FRAME`): it reads ``inputs.npz`` (one array per
model input, the run's inputs stacked on a leading axis), ``expected_fp64.npz`` (``y``, the
fp64 reference's output) and ``floor.json`` (the floor and threshold), runs the case once
per input with the participant's settings, prints each input's relative L2 error next to
the floor, a last line ``REPRO {json}`` for :mod:`anpred.repro.verify`, and exits 1 when the
median error is beyond the threshold (the error is reproduced), 0 when it is not.

What differs is how the library runs the case (:func:`script_for`):

- onnxruntime, openvino: ``model.onnx`` with the library's own loader and the
  configuration's options;
- tensorflow, jax, paddle, torch (anpred's translators): the case's operators written out
  in the library's ops (:mod:`anpred.repro.script_ops`), weights from ``weights.npz``;
- mnn (a converted runtime): ``model.mnn``, converted from ``model.onnx`` by MNN's own
  converter (``convert_mnn.py``, run first by the verification), loaded the way
  ultralytics' MNN backend does, with the configuration's hints.

Other runtimes have no script writer yet: :func:`script_for` says so, and the reproducer is
reported as not verified.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from anpred.repro.script_ops import IMPORTS, TENSOR, UnsupportedOp, body

_FRAME = '''"""{title}

Run from this folder: python {name}
Needs only {needs} and numpy. Exit status 1: the error is reproduced (beyond the floor's
threshold); 0: it is not.
"""

{setup}import json
import os
import sys

import numpy as np
{imports}

HERE = os.path.dirname(os.path.abspath(__file__))
INPUTS = {inputs!r}

{definition}


def main():
    feeds = np.load(os.path.join(HERE, "inputs.npz"))
    expected = np.load(os.path.join(HERE, "expected_fp64.npz"))["y"]
    with open(os.path.join(HERE, "floor.json")) as handle:
        floor = json.load(handle)
    errors = []
    for k in range(expected.shape[0]):
        y = np.asarray(run(*[feeds[name][k] for name in INPUTS]), dtype=np.float64)
        exact = expected[k]
        errors.append(float(np.linalg.norm(y - exact) / np.linalg.norm(exact)))
    error = float(np.median(errors))
    print("relative L2 error against the fp64 reference, per input:",
          " ".join(f"{{e:.4g}}" for e in errors))
    print(f"median {{error:.4g}}; floor ({{floor['reference']}}) {{floor['floor']:.4g}}; "
          f"threshold {{floor['threshold']:.4g}} ({{floor['factor']:g}} x floor)")
    reproduced = error > floor["threshold"]
    print("REPRODUCED" if reproduced else "NOT REPRODUCED")
    print("REPRO " + json.dumps({{"errors": errors, "error": error, "reproduced": reproduced}}))
    sys.exit(1 if reproduced else 0)


if __name__ == "__main__":
    main()
'''


@dataclass(frozen=True)
class Script:
    """A script to write into the reproducer's folder.

    Attributes:
        name: File name (``repro_tensorflow.py``).
        text: Its source.
        files: Other files it needs: name → bytes (``weights.npz``, ``convert_mnn.py``).
        prepare: A script run before it in the same environment (``convert_mnn.py``), or ``""``.
    """

    name: str
    text: str
    files: Mapping[str, bytes]
    prepare: str = ""


class NoScript(Exception):
    """The library has no script writer for this case; ``str(err)`` says why."""


def _translated(library: str, settings: Mapping[str, Any], model: onnx.ModelProto,
                inputs: list[str]) -> tuple[str, str, dict[str, bytes]]:  # fmt: skip
    """``(setup, definition, files)`` of a translated library's script."""
    import io

    names = {name: name for name in inputs}
    weights = {}
    for i, init in enumerate(model.graph.initializer):
        names[init.name] = f"w{i}"
        weights[f"w{i}"] = numpy_helper.to_array(init)
    try:
        lines = body(library, model, names)
    except UnsupportedOp as err:
        raise NoScript(str(err)) from err
    to_tensor, to_numpy = TENSOR[library]
    setup, wrap = "", ""
    env = dict(settings.get("env") or {})
    if env:
        assigned = "".join(f"os.environ[{k!r}] = {str(v)!r}\n" for k, v in env.items())
        setup = f"import os\n\n{assigned}\n"
    out = names[model.graph.output[0].name]
    args = ", ".join(inputs)
    head = 'WEIGHTS = dict(np.load(os.path.join(HERE, "weights.npz")))\n'
    if library == "tensorflow":
        unknown = set(settings) - {"env", "jit_compile", "function", "mixed_precision"}
        if unknown:
            raise NoScript(f"tensorflow settings {sorted(unknown)} have no script form yet")
        if settings.get("mixed_precision"):
            head += ("tf.config.optimizer.set_experimental_options("
                     "{\"auto_mixed_precision_onednn_bfloat16\": True})\n")  # fmt: skip
        if settings.get("function", True):
            jit = ", jit_compile=True" if settings.get("jit_compile") else ""
            wrap = f"@tf.function(autograph=False{jit})  # as anpred: one tf.function\n"
    elif library == "jax":
        if set(settings) - {"env", "jit"}:
            raise NoScript(f"jax settings {sorted(settings)} have no script form yet")
        if settings.get("jit", True):
            wrap = "@jax.jit\n"
    elif set(settings) - {"env"}:
        raise NoScript(f"{library} settings {sorted(settings)} have no script form yet")
    weights_in = [f"    {k} = {to_tensor.format(f'WEIGHTS[{k!r}]')}" for k in weights]
    compute = "\n".join([*weights_in, *(f"    {line}" for line in lines), f"    return {out}"])
    tensors = ", ".join(to_tensor.format(n) for n in inputs)
    definition = (
        f"{head}\n\n{wrap}def compute({args}):\n{compute}\n\n\n"
        f"def run({args}):\n    return {to_numpy.format(f'compute({tensors})')}\n"
    )
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **weights)
    return setup, definition, {"weights.npz": buffer.getvalue()}


_ORT = """LEVELS = {{"O0": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
          "O1": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
          "O2": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
          "O3": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}}
options = ort.SessionOptions()
options.intra_op_num_threads = 1
options.graph_optimization_level = LEVELS[{level!r}]
SESSION = ort.InferenceSession(os.path.join(HERE, "model.onnx"), options,
                               providers=["CPUExecutionProvider"])


def run(*xs):
    return SESSION.run(None, dict(zip(INPUTS, xs)))[0]
"""

_OPENVINO = """CORE = ov.Core()
COMPILED = CORE.compile_model(os.path.join(HERE, "model.onnx"), "CPU",
                              {{"INFERENCE_PRECISION_HINT": {hint!r}, "INFERENCE_NUM_THREADS": 1}})


def run(*xs):
    return COMPILED(list(xs))[0]
"""

_MNN = """CONFIG = {{"precision": {precision!r}, "backend": "CPU", "numThread": 1}}
MANAGER = MNN.nn.create_runtime_manager((CONFIG,))
{winograd}MODULE = MNN.nn.load_module_from_file(
    os.path.join(HERE, "model.mnn"), INPUTS, ["y"], runtime_manager=MANAGER, rearrange=False
)


def run(*xs):
    feeds = [F.const(np.ascontiguousarray(x, dtype=np.float32), list(x.shape), F.NCHW)
             for x in xs]
    return np.array(F.convert(MODULE.onForward(feeds)[0], F.NCHW).read(), copy=True)
"""

#: MNN's ``Interpreter::HintMode::WINOGRAD_MEMORY_LEVEL`` 0, as ``mnn[nowinograd]`` sets it.
_NO_WINOGRAD = "MANAGER.set_hint(3, 0)  # WINOGRAD_MEMORY_LEVEL 0: 3x3 convolutions off Winograd\n"

_MNN_CONVERT = '''"""Convert model.onnx to model.mnn with MNN's own converter (its wheel's binding).

Run from this folder before repro_mnn.py: python convert_mnn.py
"""

import os

import _tools  # MNNConvert's C++ binding, shipped in the MNN wheel

HERE = os.path.dirname(os.path.abspath(__file__))
argv = ["mnnconvert", "-f", "ONNX", "--modelFile", os.path.join(HERE, "model.onnx"),
        "--MNNModel", os.path.join(HERE, "model.mnn"), "--bizCode", "repro"{fp16}]
_tools.mnnconvert(argv)
'''


def script_for(library: str, settings: Mapping[str, Any], model: onnx.ModelProto,
               title: str) -> Script:  # fmt: skip
    """The reproducer script of ``library`` in the configuration ``settings``.

    Args:
        library: The participant's library.
        settings: Its configuration settings (as its job ran it).
        model: The reproducer's ``model.onnx``.
        title: One sentence: what is wrong.

    Raises:
        NoScript: No script writer for this library, setting or op.
    """
    inputs = [i.name for i in model.graph.input]
    name = f"repro_{library}.py"
    files: dict[str, bytes] = {}
    setup, prepare = "", ""
    if library == "onnxruntime":
        imports, needs = "import onnxruntime as ort", "onnxruntime"
        definition = _ORT.format(level=str(settings.get("optimization", "O3")))
    elif library == "openvino":
        imports, needs = "import openvino as ov", "openvino"
        definition = _OPENVINO.format(hint=str(settings.get("precision", "f32")))
    elif library == "mnn":
        imports, needs = "import MNN\nimport MNN.expr as F", "MNN"
        hint = "" if settings.get("winograd", True) else _NO_WINOGRAD
        definition = _MNN.format(precision=str(settings.get("precision", "normal")), winograd=hint)
        fp16 = ', "--fp16"' if settings.get("fp16_weights") else ""
        files["convert_mnn.py"] = _MNN_CONVERT.format(fp16=fp16).encode()
        prepare = "convert_mnn.py"
    elif library in IMPORTS:
        imports, needs = "\n".join(IMPORTS[library]), library
        setup, definition, more = _translated(library, settings, model, inputs)
        files.update(more)
    else:
        raise NoScript(f"{library} has no reproducer script writer yet (a converted runtime)")
    text = _FRAME.format(
        title=title, name=name, needs=needs, setup=setup, imports=imports, inputs=inputs,
        definition=definition.rstrip("\n"),
    )  # fmt: skip
    return Script(name, text, files, prepare)
