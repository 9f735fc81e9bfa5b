"""LSTM and GRU paddle translators: ONNX's recurrence (:mod:`anpred.translate.recurrent`)
on ``paddle.matmul`` (``@``), ``F.sigmoid``/``paddle.tanh``/``F.relu`` and ``paddle.stack``.
"""

from __future__ import annotations

from typing import Any

import paddle
import paddle.nn.functional as F

from anpred.translate import recurrent
from anpred.translate.registry import NodeCall, register

Tensor = Any

KERNELS = recurrent.RecurrentKernels(
    transpose=lambda x, perm: paddle.transpose(x, list(perm)),
    activations={"Sigmoid": F.sigmoid, "Tanh": paddle.tanh, "Relu": F.relu},
    stack=lambda xs, axis: paddle.stack(xs, axis),
    zeros_like=paddle.zeros_like,
    clip=lambda x, low, high: paddle.clip(x, low, high),
)


@register("paddle", "LSTM")
def lstm(call: NodeCall, *inputs: Tensor) -> tuple[Tensor, ...]:
    """ONNX LSTM (see :func:`anpred.translate.recurrent.lstm`)."""
    return recurrent.lstm(call, KERNELS, *inputs)


@register("paddle", "GRU")
def gru(call: NodeCall, *inputs: Tensor) -> tuple[Tensor, ...]:
    """ONNX GRU (see :func:`anpred.translate.recurrent.gru`)."""
    return recurrent.gru(call, KERNELS, *inputs)
