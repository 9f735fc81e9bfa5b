"""The jax :class:`~anpred.translate.adapter.LibraryAdapter`: NCHW tensors, ``jax.jit``.

``dtype="bfloat16"`` is jax's "bf16 mode" as jmp/flax users set it (compute dtype
bfloat16): weights and float inputs are rounded to bfloat16 (inputs where they are first
computed with, so that integers packed into a float32 input reach their ``Cast`` exact, see
:mod:`anpred.translate.jax.registration`), every op of the graph computes in
bfloat16 (XLA:CPU decides internally where it widens, e.g. inside dot/conv), and the
anchors are widened back to float32 (exactly) when they leave the library.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from anpred.errors import UsageError
from anpred.translate.adapter import LibraryAdapter
from anpred.translate.jax import numerics
from anpred.translate.process_env import check_process_env

#: Graph float dtypes the adapter runs.
FLOAT_DTYPES = ("float32", "float64", "bfloat16")

#: Settings the adapter understands, with their defaults.
DEFAULT_SETTINGS: dict[str, Any] = {
    "jit": True,
    "dtype": "float32",
    "matmul_precision": "highest",
    "env": None,
}

#: 64-bit integer types and what jax holds them as without ``jax_enable_x64``.
_NARROWED = {np.dtype(np.int64): np.dtype(np.int32), np.dtype(np.uint64): np.dtype(np.uint32)}


class JaxAdapter(LibraryAdapter):
    """Runs translated graphs with jax, in the ONNX layout (NCHW).

    Args:
        settings: ``jit`` (bool, default ``True``: the whole graph is one ``jax.jit``
            program; ``False`` runs op by op), ``dtype`` (``"float32"`` or
            ``"float64"``; float64 needs ``jax_enable_x64``, which
            :func:`anpred.translate.jax.make_adapter` turns on; or ``"bfloat16"``: the
            bf16 compute mode), ``env`` (environment variables the worker was started
            with; checked and recorded), ``matmul_precision``
            (``"highest"`` = full fp32 products everywhere, ``"high"``, ``"default"`` =
            whatever the platform picks, e.g. TF32/bf16 passes on GPUs).

    Raises:
        UsageError: For an unknown setting or value.
    """

    name = "jax"

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        merged = dict(DEFAULT_SETTINGS)
        for key, value in (settings or {}).items():
            if key not in DEFAULT_SETTINGS:
                raise UsageError(f"unknown jax setting {key!r}; known: {sorted(DEFAULT_SETTINGS)}")
            merged[key] = value
        if merged["dtype"] not in FLOAT_DTYPES:
            raise UsageError(
                "jax dtype must be float32 or float64 (or bfloat16, the bf16 compute mode), "
                f"not {merged['dtype']!r}"
            )
        if merged["matmul_precision"] not in ("default", "high", "highest"):
            raise UsageError(
                "jax matmul_precision must be default, high or highest, "
                f"not {merged['matmul_precision']!r}"
            )
        if merged["dtype"] == "float64" and not jax.config.jax_enable_x64:
            raise UsageError(
                "jax float64 needs jax_enable_x64; create the adapter with make_adapter"
            )
        self.env = check_process_env("jax", merged["env"])
        self.jit = bool(merged["jit"])
        self.numerics = numerics.Numerics(merged["dtype"], merged["matmul_precision"])
        self._seen: set[str] = set()

    def const(self, array: np.ndarray) -> Any:
        """Return ``array`` as a jax array in the dtype the graph computes it in.

        float64 becomes float32 in a float32 graph, every float becomes float64 in a
        float64 graph; float16/bfloat16 stay as they are in a float32 graph.
        """
        array = np.asarray(array)
        # device_put, not jnp.asarray: the same array (dtype canonicalised alike), but
        # jnp.asarray compiles a small program per new shape (~18 ms each; 46 for yolov8n)
        return jax.device_put(
            array.astype(numerics.dtype_in_graph(array.dtype, self.numerics.float_dtype))
        )

    def feed(self, array: np.ndarray) -> Any:
        """Return a graph input as a jax array (same conversion as constants).

        In the bf16 mode a float input stays float32, exact: a packed input carries
        integer tensors (token ids, masks) that bfloat16 would corrupt above 256; the
        float tensors round to bfloat16 at their first computing op
        (:mod:`anpred.translate.jax.registration`).
        """
        array = np.asarray(array)
        if self.numerics.float_dtype == "bfloat16" and array.dtype.kind == "f":
            if array.dtype.itemsize >= 4:
                return jax.device_put(array.astype(np.float32))
        return self.const(array)

    def to_numpy(self, value: Any) -> np.ndarray:
        """Return ``value`` as a numpy array (NCHW); bfloat16 is widened to float32 exactly.

        The dtypes seen here are recorded (``output_dtypes`` in :meth:`settings`): they show
        whether the graph really computed in the configured dtype.
        """
        array = np.asarray(value)
        self._seen.add(str(array.dtype))
        if array.dtype == jnp.bfloat16:
            return array.astype(np.float32)
        return array

    def restore_dtype(self, array: np.ndarray, dtype: np.dtype | None) -> np.ndarray:
        """Widen an int32/uint32 output back to the graph's int64/uint64 (exact).

        Without ``jax_enable_x64`` jax holds 64-bit integers as 32-bit ones (it is turned on
        only for float64 graphs: it would change the dtype jax picks for Python scalars
        and array constructors in float32 graphs). Only the dtype of the output is
        restored; values beyond the 32-bit range were already lost inside jax. Floats are
        never touched.
        """
        if dtype is not None and _NARROWED.get(np.dtype(dtype)) == array.dtype:
            return array.astype(dtype)
        return array

    def compile(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap the whole-graph function in ``jax.jit`` (unless ``jit`` is off).

        ``fn(consts, *feeds)`` gets the constants as an argument, so ``jax.jit`` traces
        them as inputs instead of baking the weights into the program.
        """
        config = self.numerics

        def run(consts: dict[str, Any], *feeds: Any) -> Any:
            with numerics.use(config):
                return fn(consts, *feeds)

        return jax.jit(run) if self.jit else run

    def cast(self, value: Any, dtype: str) -> Any:
        """Cast ``value`` to ``dtype`` (a numpy dtype name, ``"bfloat16"`` included)."""
        return jnp.asarray(value).astype(jnp.dtype(dtype))

    def settings(self) -> dict[str, Any]:
        """Return the settings in force, with the jax version and platform."""
        return {
            "library": "jax",
            "version": jax.__version__,
            "platform": jax.default_backend(),
            "jit": self.jit,
            "dtype": self.numerics.float_dtype,
            "matmul_precision": self.numerics.matmul_precision,
            "jax_default_matmul_precision": jax.config.jax_default_matmul_precision,
            "jax_enable_x64": bool(jax.config.jax_enable_x64),
            "layout": "NCHW",
            "env": dict(self.env),
            "output_dtypes": sorted(self._seen),
        }
