"""The torch adapter: numpy in and out, float32 or float64, eager or ``torch.compile``.

``autocast="bfloat16"`` runs the graph under ``torch.autocast(device_type="cpu",
dtype=torch.bfloat16)`` (torch's bf16 mode: conv/matmul/linear in bfloat16, the ops
autocast keeps in float32 in float32, the rest in their inputs' dtype).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import nullcontext
from contextvars import ContextVar
from typing import Any

import numpy as np
import torch

from anpred.errors import UsageError
from anpred.translate.adapter import LibraryAdapter
from anpred.translate.process_env import check_process_env
from anpred.translate.torch.emulation import RoundingMode, check_emulation, rounder

_FLOAT_DTYPES = {"float32": torch.float32, "float64": torch.float64}

#: Float dtype of the graph being executed; float64 runs make every float cast float64.
_RUN_FLOAT_DTYPE: ContextVar[torch.dtype] = ContextVar("anpred_torch_float", default=torch.float32)

#: ``autocast`` setting values → the autocast dtype on CPU.
AUTOCAST_DTYPES = {"bfloat16": torch.bfloat16}

_CAST_DTYPES = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
}


def float_dtype() -> torch.dtype:
    """Return the float dtype of the graph run in progress (float casts follow it)."""
    return _RUN_FLOAT_DTYPE.get()


def run_float(dtype: torch.dtype) -> torch.dtype:
    """Map a float target dtype to the run's: in a float64 run every float becomes float64."""
    if dtype.is_floating_point and float_dtype() == torch.float64:
        return torch.float64
    return dtype


#: Settings the adapter understands (``emulate``: an ideal reduced-precision reference).
_SETTINGS = ("dtype", "compile", "autocast", "env", "emulate", "emulate_scope")


class TorchAdapter(LibraryAdapter):
    """Executes ONNX graphs with torch, channels-first (the ONNX layout).

    Args:
        settings: ``{"dtype": "float32" | "float64", "compile": bool,
            "autocast": None | "bfloat16", "env": {...}}`` (``env``: variables the
            worker was started with, checked and recorded).

    Raises:
        UsageError: On an unknown setting or dtype, autocast in a float64 graph, or a
            missing ``env`` variable.
    """

    name = "torch"

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        settings = dict(settings or {})
        unknown = set(settings) - {*_SETTINGS}
        if unknown:
            raise UsageError(f"unknown torch setting(s): {', '.join(sorted(unknown))}")
        dtype = settings.get("dtype", "float32")
        if dtype not in _FLOAT_DTYPES:
            raise UsageError(f"torch dtype must be one of {sorted(_FLOAT_DTYPES)}, not {dtype!r}")
        autocast = settings.get("autocast")
        if autocast is not None and autocast not in AUTOCAST_DTYPES:
            raise UsageError(
                f"torch autocast must be one of {sorted(AUTOCAST_DTYPES)} or None, not {autocast!r}"
            )
        if autocast is not None and dtype != "float32":
            raise UsageError("torch autocast needs a float32 graph")
        self.env = check_process_env("torch", settings.get("env"))
        self._dtype_name = dtype
        self._float = _FLOAT_DTYPES[dtype]
        self._compile = bool(settings.get("compile", False))
        self._autocast = autocast
        # an ideal reduced-precision reference (anpred.translate.torch.emulation)
        self._emulate, self._emulate_scope = check_emulation(settings)
        self._seen: set[str] = set()

    def _tensor(self, array: np.ndarray) -> torch.Tensor:
        array = np.asarray(array)
        if array.dtype.kind == "f":
            return torch.from_numpy(np.array(array, copy=True)).to(self._float)
        return torch.from_numpy(np.array(array, copy=True))

    def const(self, array: np.ndarray) -> torch.Tensor:
        """Return ``array`` as a torch tensor; floats in the adapter's float dtype (rounded
        to the emulated format when emulating its ``weights`` scope).
        """
        tensor = self._tensor(array)
        if self._emulate is not None and self._emulate_scope == "weights":
            if tensor.is_floating_point():
                tensor = rounder(self._emulate)(tensor)
        return tensor

    def feed(self, array: np.ndarray) -> torch.Tensor:
        """Return the NCHW input ``array`` as a torch tensor; floats in the adapter's dtype."""
        return self._tensor(array)

    def to_numpy(self, value: Any) -> np.ndarray:
        """Return the tensor as a numpy array (bfloat16 widened to float32, exactly).

        The dtypes seen here are recorded (``output_dtypes`` in :meth:`settings`).
        """
        tensor = value.detach().cpu()
        self._seen.add(str(tensor.dtype).replace("torch.", ""))
        if tensor.dtype == torch.bfloat16:
            tensor = tensor.to(torch.float32)
        return tensor.numpy()

    def compile(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Run ``fn`` without autograd in the adapter's float dtype; ``torch.compile`` it if set."""
        target = _traced_then_compiled(fn) if self._compile else fn
        autocast = self._autocast
        emulate = self._emulate if self._emulate_scope != "weights" else None

        def run(*args: Any) -> Any:
            token = _RUN_FLOAT_DTYPE.set(self._float)
            try:
                with (
                    torch.no_grad(),
                    torch.autocast(
                        "cpu",
                        dtype=AUTOCAST_DTYPES.get(autocast, torch.bfloat16),
                        enabled=autocast is not None,
                    ),
                    RoundingMode(emulate, self._emulate_scope) if emulate else nullcontext(),
                ):
                    return target(*args)
            finally:
                _RUN_FLOAT_DTYPE.reset(token)

        return run

    def cast(self, value: Any, dtype: str) -> Any:
        """Cast a tensor to ``float16``, ``bfloat16``, ``float32`` or ``float64``."""
        if dtype not in _CAST_DTYPES:
            raise ValueError(f"torch adapter cannot cast to {dtype!r}")
        return value.to(_CAST_DTYPES[dtype])

    def settings(self) -> dict[str, Any]:
        """Return the settings, the torch version and the output dtypes seen so far."""
        return {
            "dtype": self._dtype_name,
            "compile": self._compile,
            "autocast": self._autocast,
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "env": dict(self.env),
            "output_dtypes": sorted(self._seen),
        }


def _traced_then_compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Return ``fn`` as ``torch.compile`` (inductor) of its traced graph, built on first call.

    Dynamo cannot trace the interpreter itself: the translators handle static attributes
    with NumPy (``NodeCall.consts``), and dynamo fails on them (``AssertionError: Expected
    np.nditer base`` in Reshape, torch 2.14). ``make_fx`` runs that Python normally and
    records only the tensor operations; the recorded whole graph is what gets compiled.
    """
    from torch.fx.experimental.proxy_tensor import make_fx

    compiled: list[Callable[..., Any]] = []

    def run(*args: Any) -> Any:
        if not compiled:
            compiled.append(torch.compile(make_fx(fn)(*args), dynamic=False))
        return compiled[0](*args)

    return run
