"""ConvTranspose: ``tf.nn.conv2d_transpose`` / ``tf.nn.conv3d_transpose``, channels last.

1-D nodes run as 2-D with H=1, 2-D ones on NHWC, 3-D ones on NDHWC. The kernel computes the
full transposed convolution (``VALID``); ONNX's pads, output padding and ``output_shape``
then crop it by slicing or extend it with ``tf.pad``
(:mod:`anpred.translate.transposed_window`), and the bias is added. Groups run group by
group. TensorFlow's CPU kernel (oneDNN ``Conv2DBackpropInput``) rejects ``dilations``, so a
dilated kernel is written out with zeros between its taps (``tf.pad`` and ``tf.reshape``),
which is the same transposed convolution.
"""

from __future__ import annotations

from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow.layout import TFValue, layout_op, spatial_result
from anpred.translate.tensorflow.lean_import import tf
from anpred.translate.tensorflow.policy import NCHW
from anpred.translate.transposed_window import TransposedWindow, transposed_window


def _dilate_kernel(w: tf.Tensor, dilations: tuple[int, ...]) -> tf.Tensor:
    """Insert ``d - 1`` zeros between the taps of each spatial axis (leading axes)."""
    for axis, d in enumerate(dilations):
        if d == 1:
            continue
        k = int(w.shape[axis])
        w = tf.expand_dims(w, axis + 1)
        pad = [[0, 0]] * len(w.shape)
        pad[axis + 1] = [0, d - 1]
        w = tf.pad(w, pad)
        shape = w.shape.as_list()
        w = tf.reshape(w, [*shape[:axis], k * d, *shape[axis + 2 :]])
        w = w[(slice(None),) * axis + (slice(0, (k - 1) * d + 1),)]
    return w


def _transposed_channels_last(x: tf.Tensor, w: tf.Tensor, win: TransposedWindow) -> tf.Tensor:
    """Full transposed convolution of a channels-last tensor; ``w`` is ONNX's (C, M/g, k...)."""
    nd = len(win.strides)
    # (C, M/g, k...) -> (k..., M/g, C)
    w = tf.transpose(w, (*range(2, 2 + nd), 1, 0))
    w = _dilate_kernel(w, win.dilations)
    fn = tf.nn.conv2d_transpose if nd == 2 else tf.nn.conv3d_transpose
    strides = [1, *win.strides, 1]
    m = int(w.shape[-2])
    batch = tf.shape(x)[0]
    parts = []
    for xg, wg in zip(tf.split(x, win.group, axis=-1), tf.split(w, win.group, axis=-1),
                      strict=True):  # fmt: skip
        out_shape = tf.stack([batch, *win.full, m])
        parts.append(fn(xg, wg, out_shape, strides, "VALID"))
    return parts[0] if len(parts) == 1 else tf.concat(parts, axis=-1)


def _onnx_window(y: tf.Tensor, win: TransposedWindow) -> tf.Tensor:
    """Crop / zero-extend a channels-last full result to ONNX's output window."""
    if win.trivial:
        return y
    index = [slice(None)]
    grow = [[0, 0]]
    for begin, end_pad, full in zip(win.begin, win.end_pad, win.full, strict=True):
        index.append(slice(max(begin, 0), full + min(end_pad, 0)))
        grow.append([max(-begin, 0), max(end_pad, 0)])
    y = y[tuple(index)]
    if any(v for pair in grow for v in pair):
        y = tf.pad(y, [*grow, [0, 0]])
    return y


@layout_op("ConvTranspose")
def conv_transpose(call: NodeCall, x: TFValue, w: TFValue, b: TFValue | None = None) -> TFValue:
    """ONNX ConvTranspose: 1-3 spatial axes, strides, dilations, group, pads,
    output_padding, output_shape and ``auto_pad``.
    """
    w_t = w.nchw()
    kernel = [int(k) for k in w_t.shape[2:]]
    nd = len(kernel)
    spatial = [int(s) for s in x.onnx_shape()[2:]]
    win = transposed_window(call, spatial, kernel)
    if nd == 1:  # (N, C, L) -> (N, 1, L, C); weight (C, M/g, k) -> (C, M/g, 1, k)
        win2 = TransposedWindow((1, *win.strides), (1, *win.dilations), win.group,
                                (1, *win.full), (0, *win.begin), (1, *win.out))  # fmt: skip
        x_cl = tf.transpose(tf.expand_dims(x.nchw(), 2), (0, 2, 3, 1))
        y = _onnx_window(_transposed_channels_last(x_cl, tf.expand_dims(w_t, 2), win2), win2)
    elif nd == 2:
        y = _onnx_window(_transposed_channels_last(x.nhwc(), w_t, win), win)
    else:
        x_cl = tf.transpose(x.nchw(), (0, *range(2, 2 + nd), 1))
        y = _onnx_window(_transposed_channels_last(x_cl, w_t, win), win)
    if b is not None:
        y = tf.nn.bias_add(y, b.tensor)
    if nd == 2:
        return spatial_result(y)
    if nd == 1:
        return TFValue(tf.transpose(tf.squeeze(y, 1), (0, 2, 1)), NCHW)
    return TFValue(tf.transpose(y, (0, nd + 1, *range(1, nd + 1))), NCHW)
