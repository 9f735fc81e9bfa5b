"""Translators from ONNX ops to TensorFlow (``tf.nn`` / ``tf.math`` / ``tf.image`` kernels).

Importing this package imports no DL library; :func:`make_adapter` does, in the worker
process that runs the TensorFlow participant.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from anpred.translate.adapter import LibraryAdapter

__all__ = ["make_adapter"]


def make_adapter(settings: Mapping[str, Any] | None = None) -> LibraryAdapter:
    """Import TensorFlow, register the TensorFlow translators and return the adapter.

    Args:
        settings: See :class:`anpred.translate.tensorflow.adapter.TensorFlowAdapter`
            (``layout``, ``function``, ``jit_compile``, ``threads``, ``dtype``).

    Returns:
        The TensorFlow adapter.
    """
    from anpred.translate.tensorflow import (  # noqa: F401  (imports register the translators)
        ops_activation,
        ops_attention,
        ops_blocks,
        ops_control,
        ops_conv,
        ops_conv_transpose,
        ops_deform,
        ops_detection,
        ops_elementwise,
        ops_grid,
        ops_index,
        ops_loss,
        ops_math,
        ops_matmul,
        ops_norm,
        ops_pool,
        ops_quant,
        ops_recurrent,
        ops_reduce,
        ops_resize,
        ops_scatter,
        ops_shape,
        ops_state,
        ops_text,
        ops_transformer,
    )
    from anpred.translate.tensorflow.adapter import TensorFlowAdapter

    return TensorFlowAdapter(settings)
