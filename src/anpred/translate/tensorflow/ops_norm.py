"""Normalizations: BatchNormalization (any layout; training_mode too), LayerNormalization.

Both use ``tf.nn.batch_normalization`` (the fused kernel has no float64 CPU version);
LayerNormalization takes its statistics from ``tf.nn.moments``, as Keras does.
"""

from __future__ import annotations

from anpred.errors import AnpredError
from anpred.translate.lrn_window import lrn_window
from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow.layout import (
    TFValue,
    float_attr,
    layout_op,
    normalize_axis,
    onnx_op,
)
from anpred.translate.tensorflow.lean_import import tf
from anpred.translate.tensorflow.policy import NHWC


@layout_op("BatchNormalization")
def batch_normalization(
    call: NodeCall,
    x: TFValue,
    scale: TFValue,
    bias: TFValue,
    mean: TFValue,
    var: TFValue,
) -> TFValue:
    """Inference batch norm in the input's layout (channels last in NHWC, axis 1 in ONNX's)."""
    if call.attr("training_mode", 0):
        return _batch_norm_training(call, x, scale, bias, mean, var)
    params = [p.tensor for p in (scale, bias, mean, var)]
    if x.layout != NHWC and x.rank > 2:
        shape = [-1] + [1] * (x.rank - 2)  # (C,) -> (C, 1, ..., 1) broadcasts over axis 1
        params = [tf.reshape(p, shape) for p in params]
    gamma, beta, mu, sigma2 = params
    y = tf.nn.batch_normalization(
        x.tensor, mu, sigma2, offset=beta, scale=gamma,
        variance_epsilon=float_attr(call, "epsilon", 1e-5),
    )  # fmt: skip
    if len(call.output_shapes) > 1:
        raise AnpredError(
            f"tensorflow BatchNormalization: running statistics outputs are not translated "
            f"(node {call.name})"
        )
    return TFValue(y, x.layout)


def _batch_norm_training(
    call: NodeCall, x: TFValue, scale: TFValue, bias: TFValue, mean: TFValue, var: TFValue
) -> tuple[TFValue, ...]:
    """``training_mode=1``: normalise with the batch's own statistics (``tf.nn.moments``,
    population variance) and output the running statistics blended with ``momentum``.
    """
    t = x.nchw()
    axes = [0, *range(2, x.rank)]
    current_mean, current_var = tf.nn.moments(t, axes)
    shape = [-1] + [1] * (x.rank - 2)
    epsilon = float_attr(call, "epsilon", 1e-5)
    y = tf.nn.batch_normalization(
        t, tf.reshape(current_mean, shape), tf.reshape(current_var, shape),
        offset=tf.reshape(bias.tensor, shape), scale=tf.reshape(scale.tensor, shape),
        variance_epsilon=epsilon,
    )  # fmt: skip
    momentum = float_attr(call, "momentum", 0.9)
    running_mean = mean.tensor * momentum + current_mean * (1 - momentum)
    running_var = var.tensor * momentum + current_var * (1 - momentum)
    outputs = (TFValue(y), TFValue(running_mean), TFValue(running_var))
    return outputs[: max(1, len(call.output_shapes))]


@onnx_op("LayerNormalization")
def layer_normalization(
    call: NodeCall, x: tf.Tensor, scale: tf.Tensor, bias: tf.Tensor | None = None
) -> tuple[tf.Tensor, ...]:
    """Normalize over axes ``axis..rank-1``; also Mean and InvStdDev when the node asks."""
    rank = int(x.shape.rank)
    axis = normalize_axis(int(call.attr("axis", -1)), rank)
    epsilon = float_attr(call, "epsilon", 1e-5)
    mean, variance = tf.nn.moments(x, list(range(axis, rank)), keepdims=True)
    y = tf.nn.batch_normalization(x, mean, variance, bias, scale, epsilon)
    outputs = [y, mean, tf.math.rsqrt(variance + epsilon)]
    return tuple(outputs[: max(1, len(call.output_shapes))])


@layout_op("LRN")
def lrn(call: NodeCall, x: TFValue) -> TFValue:
    """ONNX LRN: ``tf.nn.local_response_normalization`` on NHWC for an odd ``size``.

    TensorFlow multiplies the sum by ``alpha`` itself (ONNX by ``alpha / size``). An even
    ``size`` or a non-4-D input sums the squares of channel-shifted slices (NCHW).
    """
    win = lrn_window(call)
    if win.symmetric and x.rank == 4:
        y = tf.nn.local_response_normalization(
            x.nhwc(), win.before, win.bias, win.alpha / win.size, win.beta
        )
        return TFValue(y, NHWC)
    t = x.nchw()
    pad = [[0, 0], [win.before, win.after]] + [[0, 0]] * (x.rank - 2)
    padded = tf.pad(t * t, pad)
    channels = int(t.shape[1])
    total = tf.add_n([padded[:, i : i + channels] for i in range(win.size)])
    return TFValue(t / tf.pow(win.bias + (win.alpha / win.size) * total, win.beta))
