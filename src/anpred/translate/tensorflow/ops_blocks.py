"""Block rearrangements and p-norm pooling: SpaceToDepth, DepthToSpace and LpPool.

SpaceToDepth and DepthToSpace in ONNX's default DCR mode are ``tf.nn.space_to_depth`` /
``tf.nn.depth_to_space`` on the NHWC tensor (same channel order); CRD mode is composed of
``tf.reshape`` and ``tf.transpose`` in ONNX's layout. TensorFlow has no p-norm pooling:
LpPool is composed as ``(sum |x|^p)^(1/p)`` with the window sum a ``tf.nn.convolution``
of ``|x|^p`` (channels folded into the batch) with a ones kernel (zero pads count as 0),
at stride 1 then subsampled, since TensorFlow's convolutions refuse strides with dilations.
"""

from __future__ import annotations

from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow.layout import TFValue, layout_op, onnx_op, spatial_result
from anpred.translate.tensorflow.lean_import import tf
from anpred.translate.tensorflow.policy import NCHW
from anpred.translate.tensorflow.spatial import ceil_extra, node_pads, spatial_attrs


@layout_op("SpaceToDepth")
def space_to_depth(call: NodeCall, x: TFValue) -> TFValue:
    """ONNX SpaceToDepth: blocks to channels (DCR: ``tf.nn.space_to_depth``; CRD composed)."""
    b = int(call.attr("blocksize"))
    if call.attr("mode", "DCR") != "CRD":
        return spatial_result(tf.nn.space_to_depth(x.nhwc(), b))
    t = x.nchw()
    n, c, h, w = t.shape.as_list()
    y = tf.transpose(tf.reshape(t, [-1, c, h // b, b, w // b, b]), [0, 1, 3, 5, 2, 4])
    return TFValue(tf.reshape(y, [-1, c * b * b, h // b, w // b]), NCHW)


@layout_op("DepthToSpace")
def depth_to_space(call: NodeCall, x: TFValue) -> TFValue:
    """ONNX DepthToSpace: channels to blocks (DCR: ``tf.nn.depth_to_space``; CRD composed)."""
    b = int(call.attr("blocksize"))
    if call.attr("mode", "DCR") != "CRD":
        return spatial_result(tf.nn.depth_to_space(x.nhwc(), b))
    t = x.nchw()
    n, c, h, w = t.shape.as_list()
    y = tf.transpose(tf.reshape(t, [-1, c // (b * b), b, b, h, w]), [0, 1, 4, 2, 5, 3])
    return TFValue(tf.reshape(y, [-1, c // (b * b), h * b, w * b]), NCHW)


def _p(call: NodeCall) -> float:
    return float(call.attr("p", 2))


def _root(total: tf.Tensor, p: float) -> tf.Tensor:
    return tf.pow(total, 1.0 / p) if p != 1 else total


@onnx_op("LpPool")
def lp_pool(call: NodeCall, x: tf.Tensor) -> tf.Tensor:
    """ONNX LpPool ``(sum |x|^p)^(1/p)`` over each window (composed, see the module)."""
    p = _p(call)
    kernel = [int(k) for k in call.attr("kernel_shape")]
    n = len(kernel)
    strides, dilations = spatial_attrs(call, n, kernel)
    shape = x.shape.as_list()
    sizes = shape[2:]
    pads = node_pads(call, sizes, kernel, strides, dilations)
    if call.attr("ceil_mode", 0):
        spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
        pads = [
            (b, e + ceil_extra(s, span, st, (b, e)))
            for s, span, st, (b, e) in zip(sizes, spans, strides, pads, strict=True)
        ]
    powered = tf.pow(tf.abs(x), p) if p != 1 else tf.abs(x)
    folded = tf.reshape(powered, [-1, *sizes, 1])  # (N*C, spatial..., 1)
    folded = tf.pad(folded, [[0, 0], *([b, e] for b, e in pads), [0, 0]])
    ones = tf.ones([*kernel, 1, 1], x.dtype)
    total = tf.nn.convolution(folded, ones, strides=1, padding="VALID", dilations=dilations)
    total = total[(slice(None), *(slice(None, None, s) for s in strides))]
    out_sizes = total.shape.as_list()[1:-1]
    y = tf.reshape(total, [-1, shape[1], *out_sizes])
    return _root(y, p)
