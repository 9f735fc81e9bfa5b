"""Apache TVM: the relax ONNX frontend, compiled for the host CPU with LLVM (untuned).

Conversion is ``relax.frontend.onnx.from_onnx`` on the onnxslim-simplified model (the raw
export fails in the frontend: ``shape_of expects a tensor input``), then, for the ``fp16``
configuration, ``relax.transform.ToMixedPrecision`` (convolutions and matmuls take float16
inputs, accumulate in ``accumulate``, float32 by default), then ``tvm.compile`` for LLVM
on the host CPU (its ``mcpu``) and ``export_library`` to a shared object (the artifact,
linked with the system C++ compiler). Loading runs the artifact in a relax ``VirtualMachine`` on the
CPU; outputs come back positionally, in the ONNX graph's output order and layout (NCHW).

Imported only in the worker of TVM's own environment (``requirements/runtimes/tvm.txt``).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anpred.backends.converted import ConversionError, ConversionSource, ConvertedRunner

#: The artifact's file name inside the conversion folder.
ARTIFACT = "model.so"


def host_target() -> dict[str, str]:
    """The LLVM target of this CPU (``{"kind": "llvm", "mcpu": <name>}``).

    Code is generated for the host's instruction set (the CPU name is part of the converter
    version, so an artifact built for another CPU is never reused).
    """
    import tvm

    cpu = tvm.target.codegen.llvm_get_system_cpu()
    return {"kind": "llvm", "mcpu": cpu} if cpu and cpu != "generic" else {"kind": "llvm"}


@dataclass
class TvmModel:
    """A loaded artifact: the relax VM, its device and the number of outputs."""

    vm: Any
    device: Any
    outputs: int


class TvmRunner(ConvertedRunner):
    """TVM relax (llvm) running the converted anchored model.

    Settings: ``mixed_precision`` (``"float16"``: ``ToMixedPrecision``), ``accumulate``
    (accumulator dtype under mixed precision, ``"float32"`` unless set), ``threads``.
    """

    library = "tvm"
    needs_slim = True

    def converter_version(self) -> str:
        return (
            f"apache-tvm {importlib.metadata.version('apache-tvm')} relax onnx frontend, "
            f"llvm mcpu={host_target().get('mcpu', 'generic')}"
        )

    def convert_impl(self, source: ConversionSource, folder: Path) -> Path:
        import onnx
        import tvm
        from tvm import relax
        from tvm.relax.frontend.onnx import from_onnx

        model = onnx.load(str(source.onnx_path))
        shapes = {n: list(s) for n, s in zip(source.input_names, source.input_shapes, strict=True)}
        try:
            mod = from_onnx(model, shape_dict=shapes, keep_params_in_input=False)
            mod = relax.transform.DecomposeOpsForInference()(mod)
            mixed = source.settings.get("mixed_precision")
            if mixed:
                if mixed != "float16":
                    raise ConversionError(f"unsupported mixed_precision {mixed!r} (float16 only)")
                accumulate = str(source.settings.get("accumulate", "float32"))
                mod = relax.transform.ToMixedPrecision(out_dtype=accumulate)(mod)
            executable = tvm.compile(mod, target=tvm.target.Target(host_target()))
            artifact = folder / ARTIFACT
            executable.export_library(str(artifact))
        except ConversionError:
            raise
        except Exception as err:  # the frontend or the compiler refused the model
            raise ConversionError(_one_line(err)) from err
        return artifact

    def load_impl(self, artifact: Path, source: ConversionSource) -> TvmModel:
        import tvm
        from tvm import relax

        config = tvm.get_global_func("runtime.config_threadpool", allow_missing=True)
        if config is not None:
            config(0, self.threads)  # 0: big cores (default affinity), n worker threads
        device = tvm.cpu()
        vm = relax.VirtualMachine(tvm.runtime.load_module(str(artifact)), device)
        return TvmModel(vm, device, len(source.output_names))

    def run_impl(self, handle: TvmModel, feeds: Sequence[np.ndarray]) -> list[np.ndarray]:
        import tvm

        args = [tvm.runtime.tensor(np.ascontiguousarray(f), handle.device) for f in feeds]
        result = handle.vm["main"](*args)
        if handle.outputs == 1 and not isinstance(result, (tuple, list, tvm.ir.Array)):
            result = [result]
        return [np.asarray(r.numpy()) for r in result]


def _one_line(err: BaseException) -> str:
    """The first non-empty line of ``err`` with its class name (TVM errors span pages)."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    text = next((ln for ln in lines if not ln.startswith(("Traceback", "File ", "0:"))), "")
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
