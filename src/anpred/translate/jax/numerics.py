"""The numeric configuration jax translators run under: float dtype and dot precision.

The adapter enters :func:`use` around every (traced or eager) execution of a graph, so
translators read the configuration with :func:`current` instead of receiving it as an
argument. Under ``jax.jit`` the configuration is read while tracing, which is when it
matters.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from onnx import helper

_PRECISIONS = {
    "default": lax.Precision.DEFAULT,
    "high": lax.Precision.HIGH,
    "highest": lax.Precision.HIGHEST,
}


@dataclass(frozen=True)
class Numerics:
    """How floating-point work is done.

    Attributes:
        float_dtype: Floating dtype of the whole graph (``"float32"``, ``"float64"``, or
            ``"bfloat16"``: the bf16 compute mode, every float of the graph in bfloat16).
        matmul_precision: ``"default"``, ``"high"`` or ``"highest"``; passed as
            ``precision=`` to every convolution and matrix product.
    """

    float_dtype: str = "float32"
    matmul_precision: str = "highest"

    @property
    def precision(self) -> lax.Precision:
        """The ``jax.lax.Precision`` for convolutions and matrix products."""
        return _PRECISIONS[self.matmul_precision]


_DEFAULT = Numerics()
_CURRENT: ContextVar[Numerics] = ContextVar("anpred_jax_numerics")


def current() -> Numerics:
    """Return the numeric configuration of the graph being executed."""
    return _CURRENT.get(_DEFAULT)


@contextmanager
def use(numerics: Numerics) -> Iterator[None]:
    """Run the enclosed code (graph execution or tracing) under ``numerics``."""
    token = _CURRENT.set(numerics)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def onnx_dtype(elem_type: int) -> Any:
    """Map an ONNX tensor element type to the jax dtype this graph computes it in.

    In a float64 graph every float is float64 (the fp64 reference must not round
    anywhere); in a float32 graph
    ``DOUBLE`` becomes float32 and float16/bfloat16 are kept (they are the model's
    own precision choice); in a bfloat16 graph every float of two or more bytes
    (float16 included) becomes bfloat16. Integer types wider than jax holds (int64 without
    ``jax_enable_x64``) become the widest it holds.
    """
    return dtype_in_graph(helper.tensor_dtype_to_np_dtype(elem_type), current().float_dtype)


def dtype_in_graph(dtype: Any, float_dtype: str) -> Any:
    """Return the jax dtype a value of numpy ``dtype`` has in a ``float_dtype`` graph.

    The rule of :func:`onnx_dtype`, shared with the adapter's constants and feeds.
    """
    dtype = jnp.dtype(dtype)
    if jnp.issubdtype(dtype, jnp.floating):
        graph_float = jnp.dtype(float_dtype)
        if dtype.itemsize >= graph_float.itemsize or graph_float == jnp.float64:
            return graph_float
        return dtype
    return jax.dtypes.canonicalize_dtype(dtype)


def index_dtype() -> Any:
    """Return the dtype of indices jax can hold: int64 with ``jax_enable_x64``, else int32."""
    return jax.dtypes.canonicalize_dtype(jnp.int64)
