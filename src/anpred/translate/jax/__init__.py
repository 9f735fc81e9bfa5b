"""Translators from ONNX ops to jax (``jax.lax`` / ``jax.numpy`` / ``jax.nn``).

Importing this package imports no DL library; :func:`make_adapter` does, in the worker
process that runs the jax participant.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from anpred.translate.adapter import LibraryAdapter

__all__ = ["make_adapter"]


def make_adapter(settings: Mapping[str, Any] | None = None) -> LibraryAdapter:
    """Import jax, register the jax translators and return the adapter.

    Args:
        settings: See :class:`anpred.translate.jax.adapter.JaxAdapter`. ``dtype="float64"``
            turns on ``jax_enable_x64`` for the whole process.

    Returns:
        The jax adapter.
    """
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    if settings and settings.get("dtype") == "float64":
        jax.config.update("jax_enable_x64", True)

    from anpred.translate.jax import (  # noqa: F401  (imports register the translators)
        ops_activation,
        ops_attention,
        ops_control,
        ops_conv_transpose,
        ops_deform,
        ops_detection,
        ops_elementwise,
        ops_grid,
        ops_index,
        ops_loss,
        ops_math,
        ops_matmul,
        ops_nn,
        ops_norm,
        ops_recurrent,
        ops_recurrent_state,
        ops_reduce,
        ops_resize,
        ops_scatter,
        ops_spatial,
        ops_tensor,
        ops_text,
        ops_unpool,
    )
    from anpred.translate.jax.adapter import JaxAdapter

    return JaxAdapter(settings)
