"""PyTorch translators: ONNX ops on torch / torch.nn.functional, NCHW, eager by default.

When a user brings only an ONNX file, this translation run with ``{"dtype": "float64"}``
is the float64 reference of the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from anpred.translate.adapter import LibraryAdapter


def make_adapter(settings: Mapping[str, Any] | None = None) -> LibraryAdapter:
    """Import torch, register the torch translators and return the torch adapter.

    Args:
        settings: ``dtype`` (``"float32"`` default, or ``"float64"``: every float constant
            and feed, and every float cast, in float64), ``compile`` (``False`` default;
            ``True`` wraps the graph in ``torch.compile``), ``autocast`` (``None`` or
            ``"bfloat16"``: ``torch.autocast`` on CPU) and ``env``; see
            :class:`anpred.translate.torch.adapter.TorchAdapter`.

    Returns:
        The adapter.
    """
    from anpred.translate.torch import (  # noqa: F401 - importing registers the translators
        ops_activation,
        ops_attention,
        ops_control,
        ops_conv_transpose,
        ops_detection,
        ops_elementwise,
        ops_index,
        ops_linear,
        ops_loss,
        ops_math,
        ops_nn,
        ops_norm,
        ops_pool,
        ops_recurrent,
        ops_reduce,
        ops_resize,
        ops_spatial,
        ops_tensor,
        ops_text,
    )
    from anpred.translate.torch.adapter import TorchAdapter

    return TorchAdapter(settings)
