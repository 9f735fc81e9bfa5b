"""The TensorFlow :class:`~anpred.translate.adapter.LibraryAdapter`.

Graphs run in NHWC by default (TensorFlow's native CPU layout): 4-D feeds enter as NHWC
and the layout propagates through the translators (see
:mod:`anpred.translate.tensorflow.layout`), so a value comes back in the layout
:meth:`TensorFlowAdapter.layout` reports. The whole graph runs as one ``tf.function``
(optionally XLA-compiled) unless ``function`` is off.

Precision configurations (measured with tensorflow-cpu 2.21 on an AVX2-only AMD EPYC):
oneDNN is *off* by default on this CPU (TensorFlow turns it on by default only on CPUs
with AVX512_VNNI/AVX512_BF16/AMX), ``TF_ENABLE_ONEDNN_OPTS=1`` turns it on and changes a
3x3 conv's fp32 result by a few ulp; ``mixed_precision="bfloat16"`` enables grappler's
``auto_mixed_precision_onednn_bfloat16`` rewrite, which only acts when oneDNN is on
(with it off, conv and matmul results stay bitwise fp32). The adapter records both as
they really are: ``onednn`` (``IsMklEnabled``) and ``bf16_in_effect`` (a one-conv probe).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from anpred.errors import UsageError
from anpred.translate.adapter import LibraryAdapter
from anpred.translate.process_env import check_process_env
from anpred.translate.tensorflow import policy
from anpred.translate.tensorflow.layout import LIBRARY, TO_NHWC, TFValue
from anpred.translate.tensorflow.lean_import import tf
from anpred.translate.tensorflow.policy import LAYOUTS, NCHW, NHWC, Policy

#: Settings the adapter understands, with their defaults.
DEFAULT_SETTINGS: dict[str, Any] = {
    "layout": NHWC,
    "function": True,
    "jit_compile": False,
    "threads": None,
    "dtype": "float32",
    "mixed_precision": None,
    "env": None,
}

#: ``mixed_precision`` values → the grappler option that implements them.
MIXED_PRECISION = {"bfloat16": "auto_mixed_precision_onednn_bfloat16"}


class TensorFlowAdapter(LibraryAdapter):
    """Runs translated graphs with TensorFlow.

    Args:
        settings: ``layout`` (``"NHWC"``, default: 4-D values stay channels-last between
            ops; ``"NCHW"``: ONNX's layout, the spatial ops transpose around their NHWC
            kernels), ``function`` (bool, default ``True``: the graph is one
            ``tf.function``; ``False`` runs eagerly, op by op), ``jit_compile`` (bool,
            default ``False``: XLA-compile that function), ``threads`` (int: TensorFlow's
            intra-op thread pool size, with one inter-op thread; must be set before any
            TensorFlow op runs in the process), ``dtype`` (``"float32"`` or
            ``"float64"``: the float type of the whole graph), ``mixed_precision``
            (``None`` or ``"bfloat16"``: grappler's oneDNN bf16 auto-mixed-precision
            rewrite of the ``tf.function`` graph; process-wide), ``env`` (environment
            variables the worker was started with, checked and recorded, e.g.
            ``{"TF_ENABLE_ONEDNN_OPTS": "0"}``).

    Raises:
        UsageError: For an unknown setting, a bad value, ``jit_compile`` without
            ``function``, ``mixed_precision`` without a (non-XLA) ``tf.function``, a
            missing ``env`` variable, or ``threads`` that can no longer be changed.
    """

    name = LIBRARY

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        merged = dict(DEFAULT_SETTINGS)
        for key, value in (settings or {}).items():
            if key not in DEFAULT_SETTINGS:
                raise UsageError(
                    f"unknown tensorflow setting {key!r}; known: {sorted(DEFAULT_SETTINGS)}"
                )
            merged[key] = value
        merged["layout"] = str(merged["layout"]).upper()
        if merged["layout"] not in LAYOUTS:
            raise UsageError(f"tensorflow layout must be NHWC or NCHW, not {merged['layout']!r}")
        if merged["dtype"] not in ("float32", "float64"):
            raise UsageError(
                f"tensorflow dtype must be float32 or float64, not {merged['dtype']!r}"
            )
        merged["function"] = bool(merged["function"])
        merged["jit_compile"] = bool(merged["jit_compile"])
        if merged["jit_compile"] and not merged["function"]:
            raise UsageError("tensorflow jit_compile needs function=True (XLA compiles a graph)")
        merged["env"] = check_process_env("tensorflow", merged["env"])
        mixed = merged["mixed_precision"]
        if mixed is not None and mixed not in MIXED_PRECISION:
            raise UsageError(
                f"tensorflow mixed_precision must be one of {sorted(MIXED_PRECISION)}"
                f" or None, not {mixed!r}"
            )
        if mixed is not None and (
            not merged["function"] or merged["jit_compile"] or merged["dtype"] != "float32"
        ):
            raise UsageError(
                "tensorflow mixed_precision rewrites a float32 tf.function graph: "
                "it needs function=True, jit_compile=False, dtype=float32"
            )
        if merged["threads"] is not None:
            merged["threads"] = _set_threads(merged["threads"])
        merged["onednn"] = _onednn_enabled()
        merged["bf16_in_effect"] = False
        if mixed is not None:
            tf.config.optimizer.set_experimental_options({MIXED_PRECISION[mixed]: True})
            merged["bf16_in_effect"] = _mixed_precision_acts()
        self._settings = merged
        self._policy = Policy(layout=merged["layout"], float_dtype=merged["dtype"])

    def _array(self, array: np.ndarray) -> np.ndarray:
        array = np.asarray(array)
        if np.issubdtype(array.dtype, np.floating):
            return array.astype(self._policy.float_dtype, copy=False)
        return array

    def const(self, array: np.ndarray) -> TFValue:
        """Return a constant as a tensor in ONNX's layout; floats in the graph's dtype."""
        return TFValue(tf.constant(self._array(array)), NCHW)

    def feed(self, array: np.ndarray) -> TFValue:
        """Return a graph input (NCHW array) as a tensor; 4-D inputs as NHWC in NHWC mode."""
        array = self._array(array)
        if array.ndim == 4 and self._policy.layout == NHWC:
            return TFValue(tf.constant(np.ascontiguousarray(array.transpose(TO_NHWC))), NHWC)
        return TFValue(tf.constant(array), NCHW)

    def to_numpy(self, value: TFValue) -> np.ndarray:
        """Return ``value`` as a numpy array in the layout :meth:`layout` reports."""
        return value.tensor.numpy()

    def layout(self, value: TFValue) -> str:
        """Return ``"NHWC"`` or ``"NCHW"`` (ONNX's order; every non-4-D value)."""
        return value.layout

    def cast(self, value: TFValue, dtype: str) -> TFValue:
        """Cast to a numpy dtype name (``"float16"``, ``"bfloat16"`` ...), keeping the layout."""
        return TFValue(tf.cast(value.tensor, tf.as_dtype(dtype)), value.layout)

    def settings(self) -> dict[str, Any]:
        """Return the settings in effect.

        Besides the settings given: ``onednn`` (whether TensorFlow runs its oneDNN kernels
        in this process) and ``bf16_in_effect`` (whether a probe conv in a ``tf.function``
        really came out of bfloat16 arithmetic).
        """
        return dict(self._settings)

    def compile(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Run ``fn`` under this adapter's policy, as a ``tf.function`` unless it is off.

        Layouts are static (Python) information: the traced function takes plain tensors
        plus the input layouts as a static argument and records the output layouts while
        tracing; the wrapper re-attaches them to the results.
        """
        run_policy = self._policy
        if not self._settings["function"]:

            def run_eagerly(consts: dict[str, TFValue], *feeds: TFValue) -> tuple[Any, ...]:
                with policy.use(run_policy):
                    return tuple(fn(consts, *feeds))

            return run_eagerly

        out_layouts: dict[Any, tuple[str | None, ...]] = {}

        def traced(
            const_tensors: dict[str, tf.Tensor],
            feed_tensors: list[tf.Tensor],
            layouts: tuple[tuple[tuple[str, str], ...], tuple[str, ...]],
        ) -> tuple[tf.Tensor, ...]:
            const_layouts = dict(layouts[0])
            with policy.use(run_policy):
                consts = {k: TFValue(t, const_layouts[k]) for k, t in const_tensors.items()}
                feeds = [TFValue(t, lay) for t, lay in zip(feed_tensors, layouts[1], strict=True)]
                outputs = tuple(fn(consts, *feeds))
            out_layouts[layouts] = tuple(out.layout for out in outputs)
            return tuple(out.tensor for out in outputs)

        graph_fn = tf.function(traced, jit_compile=self._settings["jit_compile"], autograph=False)

        def run(consts: dict[str, TFValue], *feeds: TFValue) -> tuple[TFValue, ...]:
            layouts = (
                tuple(sorted((k, v.layout) for k, v in consts.items())),
                tuple(f.layout for f in feeds),
            )
            tensors = graph_fn(
                {k: v.tensor for k, v in consts.items()}, [f.tensor for f in feeds], layouts
            )
            return tuple(
                TFValue(t, lay) for t, lay in zip(tensors, out_layouts[layouts], strict=True)
            )

        return run


def _onednn_enabled() -> bool | None:
    """Return whether TensorFlow uses oneDNN in this process (``None``: cannot tell)."""
    try:
        from tensorflow.python.util import _pywrap_util_port
    except ImportError:  # private module; moved in some release
        return None
    return bool(_pywrap_util_port.IsMklEnabled())


def _mixed_precision_acts() -> bool:
    """Return whether a graph-mode 3x3 conv now differs from the eager (fp32) one.

    The probe's values have full fp32 mantissas, so any bfloat16 rounding of the operands
    changes the result; when the rewrite does not act, graph and eager agree bitwise.
    """
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((1, 8, 8, 16)).astype(np.float32))
    w = tf.constant(rng.standard_normal((3, 3, 16, 16)).astype(np.float32))

    def conv(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.nn.conv2d(a, b, 1, "SAME")

    graph = tf.function(conv, autograph=False)(x, w).numpy()
    return not np.array_equal(graph, conv(x, w).numpy())


def _set_threads(threads: Any) -> int:
    """Size TensorFlow's thread pools: ``threads`` intra-op threads, one inter-op thread.

    Raises:
        UsageError: For a bad value, or when TensorFlow already runs with other pools.
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise UsageError(f"tensorflow threads must be a positive integer, not {threads!r}")
    config = tf.config.threading
    wanted = (threads, 1)
    if (config.get_intra_op_parallelism_threads(), config.get_inter_op_parallelism_threads()) == (
        wanted
    ):
        return threads
    try:
        config.set_intra_op_parallelism_threads(threads)
        config.set_inter_op_parallelism_threads(1)
    except RuntimeError as err:
        raise UsageError(
            f"tensorflow threads={threads} must be set before any TensorFlow op runs in the "
            f"process (it already runs with other thread pools): {err}"
        ) from err
    return threads
