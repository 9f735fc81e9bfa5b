"""Ops of transformer and audio graphs, in ONNX's layout: RMS/Lp/instance/group normalisation,
Swish, PRelu, Shrink, Hardmax, GatherElements, GatherND, TopK, Size, MeanVarianceNormalization, Det,
SwiGLU.

Composed from ``tf.math``/``tf.nn`` kernels where TensorFlow has no single kernel for the
op (RMSNormalization: ``tf.math.rsqrt`` of the mean square; GatherElements:
``tf.gather_nd`` on index grids); each says so. Float attributes are float32 values.
"""

from __future__ import annotations

import numpy as np

from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow.layout import float_attr, normalize_axis, onnx_op
from anpred.translate.tensorflow.lean_import import tf


@onnx_op("RMSNormalization", since=23)
def rms_norm(call: NodeCall, x: tf.Tensor, scale: tf.Tensor) -> tf.Tensor:
    """``x * rsqrt(mean(x^2 over the axes from axis on) + epsilon) * scale`` (composed)."""
    axis = normalize_axis(int(call.attr("axis", -1)), x.shape.rank)
    eps = float_attr(call, "epsilon", 1e-5)
    square = tf.math.reduce_mean(
        tf.math.square(x), axis=list(range(axis, x.shape.rank)), keepdims=True
    )
    return x * tf.math.rsqrt(square + eps) * scale


@onnx_op("LpNormalization")
def lp_norm(call: NodeCall, x: tf.Tensor) -> tf.Tensor:
    """``x / ||x||_p`` along ``axis`` (p 1 or 2; ``tf.norm``); a zero norm gives 0."""
    axis = normalize_axis(int(call.attr("axis", -1)), x.shape.rank)
    norm = tf.norm(x, ord=int(call.attr("p", 2)), axis=axis, keepdims=True)
    return tf.math.divide_no_nan(x, norm)


@onnx_op("InstanceNormalization")
def instance_norm(call: NodeCall, x: tf.Tensor, scale: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
    """Per sample and channel over the spatial axes: ``tf.nn.moments`` and
    ``tf.nn.batch_normalization``.
    """
    axes = list(range(2, x.shape.rank))
    mean, variance = tf.nn.moments(x, axes=axes, keepdims=True)
    shape = [1, -1] + [1] * len(axes)
    return tf.nn.batch_normalization(
        x, mean, variance, tf.reshape(bias, shape), tf.reshape(scale, shape),
        float_attr(call, "epsilon", 1e-5),
    )  # fmt: skip


@onnx_op("GroupNormalization")
def group_norm(call: NodeCall, x: tf.Tensor, scale: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
    """Every sample's ``num_groups`` groups of channels normalised over their channels and
    spatial axes, composed (``tf.nn.moments`` of a ``(N, G, -1)`` view; Keras's
    GroupNormalization does the same). Opset 21 gives scale and bias per channel; opset 18
    gave them per group (``tf.repeat`` to the group's channels here).
    """
    groups = int(call.attr("num_groups"))
    channels = int(x.shape[1])
    grouped = tf.reshape(x, [tf.shape(x)[0], groups, -1])
    mean, variance = tf.nn.moments(grouped, axes=[2], keepdims=True)
    y = tf.reshape((grouped - mean) * tf.math.rsqrt(variance + float_attr(call, "epsilon", 1e-5)),
                   tf.shape(x))  # fmt: skip
    if int(scale.shape[0]) == groups and groups != channels:
        scale = tf.repeat(scale, channels // groups)
        bias = tf.repeat(bias, channels // groups)
    shape = [1, -1] + [1] * (x.shape.rank - 2)
    return y * tf.reshape(scale, shape) + tf.reshape(bias, shape)


@onnx_op("Swish")
def swish(call: NodeCall, x: tf.Tensor) -> tf.Tensor:
    """``x * sigmoid(alpha * x)``; ``tf.nn.silu`` for ``alpha`` 1."""
    alpha = float_attr(call, "alpha", 1.0)
    return tf.nn.silu(x) if alpha == 1.0 else x * tf.math.sigmoid(x * alpha)


@onnx_op("PRelu")
def prelu(call: NodeCall, x: tf.Tensor, slope: tf.Tensor) -> tf.Tensor:
    """``slope * x`` where ``x < 0`` (the slope broadcasts)."""
    return tf.where(x < 0, x * slope, x)


@onnx_op("Shrink")
def shrink(call: NodeCall, x: tf.Tensor) -> tf.Tensor:
    """``x + bias`` below ``-lambd``, ``x - bias`` above ``lambd``, else 0."""
    lambd, bias = float_attr(call, "lambd", 0.5), float_attr(call, "bias", 0.0)
    wide = x if x.dtype.is_floating else tf.cast(x, tf.float64)  # integer inputs
    low, high = tf.cast(wide + bias, x.dtype), tf.cast(wide - bias, x.dtype)
    zero = tf.zeros_like(x)
    return tf.where(x < -lambd, low, tf.where(x > lambd, high, zero))


@onnx_op("Hardmax", since=13)
def hardmax(call: NodeCall, x: tf.Tensor) -> tf.Tensor:
    """1 at the first maximum along ``axis``, 0 elsewhere (``tf.one_hot`` of ``argmax``)."""
    axis = normalize_axis(int(call.attr("axis", -1)), x.shape.rank)
    index = tf.math.argmax(x, axis=axis)
    return tf.one_hot(index, x.shape[axis], axis=axis, dtype=x.dtype)


@onnx_op("GatherND")
def gather_nd(call: NodeCall, x: tf.Tensor, indices: tf.Tensor) -> tf.Tensor:
    """``tf.gather_nd`` with ``batch_dims``; negative indices wrapped first (TensorFlow
    rejects them).
    """
    batch = int(call.attr("batch_dims", 0))
    depth = int(indices.shape[-1])
    indices = tf.cast(indices, tf.int64)
    dims = tf.constant([int(d) for d in x.shape[batch : batch + depth]], dtype=tf.int64)
    indices = tf.where(indices < 0, indices + dims, indices)
    return tf.gather_nd(x, indices, batch_dims=batch)


@onnx_op("GatherElements")
def gather_elements(call: NodeCall, x: tf.Tensor, indices: tf.Tensor) -> tf.Tensor:
    """``tf.gather_nd`` on the index grid with ``axis`` replaced by ``indices`` (composed)."""
    axis = normalize_axis(int(call.attr("axis", 0)), x.shape.rank)
    indices = tf.cast(indices, tf.int64)
    indices = tf.where(indices < 0, indices + x.shape[axis], indices)
    grids = tf.meshgrid(*[tf.range(n, dtype=tf.int64) for n in indices.shape], indexing="ij")
    grids[axis] = indices
    return tf.gather_nd(x, tf.stack(grids, axis=-1))


@onnx_op("TopK", since=10)
def top_k(call: NodeCall, x: tf.Tensor, k: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """``tf.math.top_k`` on the axis moved last (smallest: on ``-x``); ties by index."""
    static = call.const(1)
    count = (
        int(np.asarray(static).reshape(-1)[0])
        if static is not None
        else tf.cast(tf.reshape(k, []), tf.int32)
    )
    axis = normalize_axis(int(call.attr("axis", -1)), x.shape.rank)
    perm = [*range(axis), *range(axis + 1, x.shape.rank), axis]
    moved = tf.transpose(x, perm)
    largest = bool(call.attr("largest", 1))
    values, indices = tf.math.top_k(moved if largest else -moved, k=count, sorted=True)
    values = values if largest else -values
    back = np.argsort(perm).tolist()
    return tf.transpose(values, back), tf.transpose(tf.cast(indices, tf.int64), back)


@onnx_op("Size")
def size(call: NodeCall, x: tf.Tensor) -> tf.Tensor:
    """The number of elements, an int64 scalar."""
    return tf.size(x, out_type=tf.int64)


@onnx_op("MeanVarianceNormalization", since=9)
def mean_variance_norm(call: NodeCall, x: tf.Tensor) -> tf.Tensor:
    """ONNX MeanVarianceNormalization over ``axes`` (default N, H, W), as its function body:
    ``(x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9)`` with ``tf.reduce_mean``.
    """
    axes = [int(a) % x.shape.rank for a in call.attr("axes", [0, 2, 3])]
    mean = tf.reduce_mean(x, axis=axes, keepdims=True)
    variance = tf.reduce_mean(x * x, axis=axes, keepdims=True) - mean * mean
    return (x - mean) / (tf.sqrt(variance) + float(np.float32(1e-9)))


@onnx_op("Det", since=11)
def det(call: NodeCall, x: tf.Tensor) -> tf.Tensor:
    """ONNX Det: ``tf.linalg.det`` of the last two axes."""
    return tf.linalg.det(x)


@onnx_op("SwiGLU")
def swiglu(call: NodeCall, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """ONNX SwiGLU ``a * sigmoid(alpha * a) * b``; ``tf.nn.silu`` for ``alpha`` 1."""
    alpha = float_attr(call, "alpha", 1.0)
    gate = tf.nn.silu(a) if alpha == 1.0 else a * tf.math.sigmoid(a * alpha)
    return gate * b
