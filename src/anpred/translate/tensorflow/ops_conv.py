"""Conv: ``tf.nn.conv2d`` / ``tf.nn.depthwise_conv2d`` on NHWC (1-D convs as 2-D with H=1).

Grouped convolutions that are not depthwise run group by group: TensorFlow's CPU kernels
reject grouped filters once grappler fuses the bias and activation into the convolution.
"""

from __future__ import annotations

from collections.abc import Sequence

from anpred.errors import AnpredError
from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow.layout import TFValue, layout_op, spatial_result
from anpred.translate.tensorflow.lean_import import tf
from anpred.translate.tensorflow.policy import NCHW
from anpred.translate.tensorflow.spatial import Pads, node_pads, spatial_attrs, tf_padding

#: OIHW (ONNX) -> HWIO (TensorFlow) filter permutation.
_OIHW_TO_HWIO = (2, 3, 1, 0)


def conv2d_nhwc(
    x: tf.Tensor,
    w_oihw: tf.Tensor,
    bias: tf.Tensor | None,
    strides: Sequence[int],
    dilations: Sequence[int],
    pads: Pads,
    group: int,
) -> tf.Tensor:
    """2-D convolution of an NHWC tensor with an ONNX (OIHW) filter; returns NHWC."""
    c_in = int(x.shape[3])
    c_out, _, kh, kw = (int(d) for d in w_oihw.shape)
    sizes = [x.shape[1], x.shape[2]]
    padding = tf_padding(pads, sizes, [kh, kw], strides, dilations)
    strides, dilations = list(strides), list(dilations)
    if group == 1:
        w = tf.transpose(w_oihw, _OIHW_TO_HWIO)
        y = tf.nn.conv2d(x, w, strides, padding, dilations=dilations)
    elif (
        group == c_in
        and c_out % group == 0
        and strides[0] == strides[1]
        and (strides[0] == 1 or dilations == [1, 1])
    ):
        # filter (C*M, 1, kh, kw), output channel c*M + m  ->  (kh, kw, C, M)
        w = tf.transpose(tf.reshape(w_oihw, (c_in, c_out // c_in, kh, kw)), (2, 3, 0, 1))
        if isinstance(padding, list) and strides != [1, 1]:
            # grappler's shape inference aborts the process (tensor_format.h "Invalid index
            # from the dimension") on a strided DepthwiseConv2dNative with explicit pads
            # inside a tf.function (PP-OCRv4 det): pad first, then VALID.
            x, padding = tf.pad(x, padding), "VALID"
        y = tf.nn.depthwise_conv2d(x, w, [1, *strides, 1], padding, dilations=dilations)
    else:
        w = tf.transpose(w_oihw, _OIHW_TO_HWIO)
        parts = [
            tf.nn.conv2d(xg, wg, strides, padding, dilations=dilations)
            for xg, wg in zip(tf.split(x, group, axis=3), tf.split(w, group, axis=3), strict=True)
        ]
        y = tf.concat(parts, axis=3)
    if bias is not None:
        y = tf.nn.bias_add(y, bias)
    return y


@layout_op("Conv")
def conv(call: NodeCall, x: TFValue, w: TFValue, b: TFValue | None = None) -> TFValue:
    """ONNX Conv (groups, depthwise, pads incl. asymmetric, strides, dilations, auto_pad)."""
    if x.rank not in (3, 4):
        raise AnpredError(
            f"tensorflow Conv: only 1-D and 2-D convolutions are translated, got a {x.rank}-D "
            f"input (node {call.name})"
        )
    group = int(call.attr("group", 1))
    bias = None if b is None else b.tensor
    w_t = w.nchw()
    kernel = [int(k) for k in w_t.shape[2:]]
    n = len(kernel)
    strides, dilations = spatial_attrs(call, n, kernel)
    sizes = x.onnx_shape()[2:]
    pads = node_pads(call, sizes, kernel, strides, dilations)
    if n == 2:
        y = conv2d_nhwc(x.nhwc(), w_t, bias, strides, dilations, pads, group)
        return spatial_result(y)
    # 1-D: (N, C, L) -> NHWC (N, 1, L, C); filter (O, I, k) -> (O, I, 1, k)
    x_nhwc = tf.transpose(tf.expand_dims(x.nchw(), 2), (0, 2, 3, 1))
    y = conv2d_nhwc(
        x_nhwc,
        tf.expand_dims(w_t, 2),
        bias,
        [1, *strides],
        [1, *dilations],
        [(0, 0), *pads],
        group,
    )
    return TFValue(tf.transpose(tf.squeeze(y, 1), (0, 2, 1)), NCHW)
