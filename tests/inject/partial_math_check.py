"""Apply partial faults through one library's FaultMath to float32, bfloat16 and float16
tensors (and, in TensorFlow, to a value stored NHWC); save the results.

``python partial_math_check.py LIBRARY OUT.npz`` (run by ``test_partial_faults.py`` in a
subprocess, so that no two libraries share a process). For every case of :data:`CASES` it
writes ``<case>/clean`` and ``<case>/faulty`` (widened to float32, exactly, in ONNX's
NCHW order), and for the activation case ``<case>/input``. Cases stored NHWC run in
TensorFlow only (only its values carry a layout).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from anpred.inject.math import library_math
from anpred.inject.spec import FaultSpec, fault_kind

#: case → (dtype, storage layout, fault). The tensors are ``data()`` cast to the dtype.
CASES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "f32_above": ("float32", "NCHW", {"kind": "mantissa", "severity": 3, "partial": "above:1.5"}),
    "bf16_above": ("bfloat16", "NCHW", {"kind": "mantissa", "severity": 3, "partial": "above:1.5"}),
    "fp16_channels": (
        "float16",
        "NCHW",
        {"kind": "mantissa", "severity": 3, "partial": "channels:0.5"},
    ),
    "f32_channels_nhwc": (
        "float32",
        "NHWC",
        {"kind": "mantissa", "severity": 3, "partial": "channels:0.5"},
    ),
    "bf16_approx_above": (
        "bfloat16",
        "NCHW",
        {"kind": "approx_act", "op": "Sigmoid", "severity": 0.5, "partial": "above:1"},
    ),
}


def data() -> np.ndarray:
    """The tensors' values, NCHW [2, 6, 5, 4] (seeded)."""
    return (np.random.default_rng(3).standard_normal((2, 6, 5, 4)) * 3).astype(np.float32)


class Tensors:
    """Convert numpy arrays to and from one library's tensors (its own casts)."""

    def __init__(self, library: str) -> None:
        self.library = library
        if library == "torch":
            import torch

            self._torch = torch
        elif library == "jax":
            import jax.numpy as jnp

            self._jnp = jnp
        elif library == "tensorflow":
            from anpred.translate.tensorflow.layout import TFValue
            from anpred.translate.tensorflow.lean_import import tf

            self._tf, self._value = tf, TFValue
        else:
            from anpred.translate.paddle.adapter import import_paddle

            self._paddle = import_paddle()

    def make(self, array: np.ndarray, dtype: str, layout: str) -> Any:
        """The library value of ``array`` (NCHW) in ``dtype``, stored in ``layout``."""
        if layout == "NHWC":
            array = np.ascontiguousarray(array.transpose(0, 2, 3, 1))
        if self.library == "torch":
            return self._torch.from_numpy(array).to(getattr(self._torch, dtype))
        if self.library == "jax":
            return self._jnp.asarray(array).astype(dtype)
        if self.library == "tensorflow":
            tf = self._tf
            return self._value(tf.cast(tf.constant(array), tf.as_dtype(dtype)), layout)
        return self._paddle.cast(self._paddle.to_tensor(array), dtype)

    def sigmoid(self, value: Any) -> Any:
        """The library's sigmoid, in the value's dtype."""
        if self.library == "torch":
            return self._torch.sigmoid(value)
        if self.library == "jax":
            import jax

            return jax.nn.sigmoid(value)
        if self.library == "tensorflow":
            return self._value(self._tf.sigmoid(value.tensor), value.layout)
        paddle = self._paddle  # its CPU sigmoid has no bfloat16 kernel: through float32
        return paddle.cast(paddle.nn.functional.sigmoid(paddle.cast(value, "float32")), value.dtype)

    def back(self, value: Any, layout: str) -> np.ndarray:
        """``value`` widened to float32 (exact), as NCHW numpy."""
        if self.library == "torch":
            out = value.to(self._torch.float32).numpy()
        elif self.library == "jax":
            out = np.asarray(value.astype(self._jnp.float32))
        elif self.library == "tensorflow":
            out = self._tf.cast(value.tensor, self._tf.float32).numpy()
        else:
            out = self._paddle.cast(value, "float32").numpy()
        return out.transpose(0, 3, 1, 2) if layout == "NHWC" else out


def main() -> int:
    library, out = sys.argv[1:3]
    math = library_math(library)
    tensors = Tensors(library)
    arrays = {}
    for name, (dtype, layout, fault) in CASES.items():
        if layout != "NCHW" and library != "tensorflow":
            continue  # only TensorFlow's values carry a layout
        spec = FaultSpec.from_dict({"stage": "s", "op": "*", **fault})
        kind = fault_kind(spec.kind)
        x = tensors.make(data(), dtype, layout)
        if kind.needs_inputs:
            clean = tensors.sigmoid(x)
            faulty = kind.outputs(math, spec, spec.op, [x], [clean])[0]
            arrays[f"{name}/input"] = tensors.back(x, layout)
        else:
            clean = x
            faulty = kind.outputs(math, spec, spec.op, [], [clean])[0]
        arrays[f"{name}/clean"] = tensors.back(clean, layout)
        arrays[f"{name}/faulty"] = tensors.back(faulty, layout)
    np.savez(out, **arrays)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
