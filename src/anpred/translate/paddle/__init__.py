"""PaddlePaddle translators: ONNX ops executed with ``paddle`` / ``paddle.nn.functional``.

Nothing here imports paddle at module import time; :func:`make_adapter` does, inside the
worker process that runs the paddle participant. The package name shadows nothing: every
module uses absolute imports, so ``import paddle`` inside it is the real library.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from anpred.errors import UsageError
from anpred.translate.adapter import LibraryAdapter

#: Settings :func:`make_adapter` accepts.
SETTINGS = ("dtype", "threads", "static", "env")

#: Modules that register the paddle translators (imported by :func:`make_adapter`).
OPS_MODULES = (
    "anpred.translate.paddle.ops_activation",
    "anpred.translate.paddle.ops_attention",
    "anpred.translate.paddle.ops_control",
    "anpred.translate.paddle.ops_conv_transpose",
    "anpred.translate.paddle.ops_detection",
    "anpred.translate.paddle.ops_elementwise",
    "anpred.translate.paddle.ops_index",
    "anpred.translate.paddle.ops_linear_attention",
    "anpred.translate.paddle.ops_linalg",
    "anpred.translate.paddle.ops_lrn",
    "anpred.translate.paddle.ops_math",
    "anpred.translate.paddle.ops_matmul",
    "anpred.translate.paddle.ops_nn",
    "anpred.translate.paddle.ops_quant",
    "anpred.translate.paddle.ops_norm",
    "anpred.translate.paddle.ops_pool",
    "anpred.translate.paddle.ops_recurrent",
    "anpred.translate.paddle.ops_reduce",
    "anpred.translate.paddle.ops_resize",
    "anpred.translate.paddle.ops_spatial",
    "anpred.translate.paddle.ops_spectral",
    "anpred.translate.paddle.ops_tensor",
    "anpred.translate.paddle.ops_text",
    "anpred.translate.paddle.ops_transformer",
    "anpred.translate.paddle.ops_transformer_export",
)


def make_adapter(settings: Mapping[str, Any] | None = None) -> LibraryAdapter:
    """Import paddle, register the paddle translators and return the adapter.

    Args:
        settings: ``{"dtype": "float32" | "float64", "threads": int, "static": bool,
            "env": {...}}``; see
            :class:`~anpred.translate.paddle.adapter.PaddleAdapter`.

    Returns:
        A :class:`~anpred.translate.paddle.adapter.PaddleAdapter` running on CPU in
        dynamic-graph mode.

    Raises:
        MissingLibraryError: When paddlepaddle is not installed.
        UsageError: On an unknown setting or value.
    """
    from anpred.translate.paddle.adapter import PaddleAdapter, import_paddle

    settings = dict(settings or {})
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise UsageError(f"unknown paddle settings {unknown}; known: {list(SETTINGS)}")
    import_paddle()
    for module in OPS_MODULES:
        importlib.import_module(module)
    return PaddleAdapter(**settings)


__all__ = ["OPS_MODULES", "SETTINGS", "make_adapter"]
