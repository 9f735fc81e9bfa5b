"""Normalisations composed from paddle reductions: MeanVarianceNormalization and
BatchNormalization in training mode (batch statistics).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import paddle

from anpred.translate.registry import NodeCall, register

Tensor = Any


@register("paddle", "MeanVarianceNormalization")
def mean_variance_norm(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX MeanVarianceNormalization over ``axes`` (default N, H, W), as its function body:
    ``(x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9)`` with ``paddle.mean`` / ``paddle.sqrt``.
    """
    axes = [int(a) % x.ndim for a in call.attr("axes", [0, 2, 3])]
    mean = paddle.mean(x, axis=axes, keepdim=True)
    variance = paddle.mean(x * x, axis=axes, keepdim=True) - mean * mean
    return (x - mean) / (paddle.sqrt(variance) + float(np.float32(1e-9)))


def batch_norm_training(
    call: NodeCall, x: Tensor, scale: Tensor, bias: Tensor, mean: Tensor, var: Tensor
) -> list[Tensor]:
    """ONNX BatchNormalization with ``training_mode=1``: normalise with the batch's own
    mean and (biased) variance over every axis but the channels; the optional outputs are
    the running statistics updated with ``momentum``. Composed from ``paddle.mean`` /
    ``paddle.var`` (paddle's ``F.batch_norm(training=True)`` updates its inputs in place).
    """
    axes = [a for a in range(x.ndim) if a != 1]
    shape = [1, -1] + [1] * (x.ndim - 2)
    batch_mean = paddle.mean(x, axis=axes)
    batch_var = paddle.var(x, axis=axes, unbiased=False)
    epsilon = float(np.float32(call.attr("epsilon", 1e-5)))
    momentum = float(np.float32(call.attr("momentum", 0.9)))
    normalised = (x - batch_mean.reshape(shape)) / paddle.sqrt(batch_var.reshape(shape) + epsilon)
    y = normalised * scale.reshape(shape) + bias.reshape(shape)
    running_mean = mean * momentum + batch_mean * (1 - momentum)
    running_var = var * momentum + batch_var * (1 - momentum)
    return [y, running_mean, running_var][: max(1, len(call.output_shapes))]
