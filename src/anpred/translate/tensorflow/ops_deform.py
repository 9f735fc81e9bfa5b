"""DeformConv (2-D), in ONNX's layout, composed from TensorFlow primitives.

TensorFlow has no deformable convolution. Each kernel tap of each output position reads
the input at its offset position by bilinear interpolation (the four neighbouring pixels
read with ``tf.gather``; neighbours outside the image count as zero, as ONNX's reference
samples with GridSample, ``align_corners=1``, zeros padding), is scaled by the mask, and
the grouped weighted sum over channels and taps is one ``tf.einsum``.
"""

from __future__ import annotations

import numpy as np

from anpred.errors import AnpredError
from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow.layout import onnx_op
from anpred.translate.tensorflow.lean_import import tf


@onnx_op("DeformConv", since=19)
def deform_conv(
    call: NodeCall,
    x: tf.Tensor,
    w: tf.Tensor,
    offset: tf.Tensor,
    b: tf.Tensor | None = None,
    mask: tf.Tensor | None = None,
) -> tf.Tensor:
    """ONNX DeformConv for 2-D images: ``group``, ``offset_group``, strides, pads,
    dilations, optional bias and mask (composed, see the module).
    """
    if x.shape.rank != 4:
        raise AnpredError(f"tensorflow DeformConv: only 2-D images (node {call.name})")
    _, channels, height, width = x.shape.as_list()
    out_channels, _, kh, kw = w.shape.as_list()
    oh, ow = offset.shape.as_list()[2:]
    groups = int(call.attr("group", 1))
    offset_groups = int(call.attr("offset_group", 1))
    sh, sw = (int(s) for s in call.attr("strides", [1, 1]))
    dh, dw = (int(d) for d in call.attr("dilations", [1, 1]))
    pt, pl = (int(p) for p in call.attr("pads", [0, 0, 0, 0])[:2])
    taps = kh * kw
    per_offset_group = channels // offset_groups
    # Pixel positions of every tap at every output position, before the offsets.
    tap_y = np.repeat(np.arange(kh) * dh, kw)  # (K,)
    tap_x = np.tile(np.arange(kw) * dw, kh)
    base_y = (np.arange(oh) * sh - pt)[None, :, None] + tap_y[:, None, None]  # (K, oH, 1)
    base_x = (np.arange(ow) * sw - pl)[None, None, :] + tap_x[:, None, None]  # (K, 1, oW)
    moved = tf.reshape(offset, [-1, offset_groups, taps, 2, oh, ow])
    dtype = x.dtype
    py = moved[:, :, :, 0] + tf.constant(base_y, dtype)  # (N, G, K, oH, oW)
    px = moved[:, :, :, 1] + tf.constant(base_x, dtype)
    image = tf.reshape(x, [-1, offset_groups, per_offset_group, height * width])
    y0, x0 = tf.floor(py), tf.floor(px)
    sampled = None
    for dy in (0, 1):
        for dx in (0, 1):
            cy, cx = y0 + dy, x0 + dx
            weight = (1 - tf.abs(py - cy)) * (1 - tf.abs(px - cx))
            inside = (cy >= 0) & (cy <= height - 1) & (cx >= 0) & (cx <= width - 1)
            weight = tf.where(inside, weight, tf.zeros_like(weight))
            iy = tf.cast(tf.clip_by_value(cy, 0, height - 1), tf.int64)
            ix = tf.cast(tf.clip_by_value(cx, 0, width - 1), tf.int64)
            flat = tf.reshape(iy * width + ix, [-1, offset_groups, taps * oh * ow])
            picked = tf.gather(image, flat, axis=3, batch_dims=2)  # (N, G, Cg, K*oH*oW)
            term = picked * tf.reshape(weight, [-1, offset_groups, 1, taps * oh * ow])
            sampled = term if sampled is None else sampled + term
    if mask is not None:
        sampled = sampled * tf.reshape(mask, [-1, offset_groups, 1, taps * oh * ow])
    columns = tf.reshape(sampled, [-1, groups, channels // groups, taps, oh * ow])
    kernel = tf.reshape(w, [groups, out_channels // groups, channels // groups, taps])
    y = tf.einsum("ngckp,gock->ngop", columns, kernel)
    y = tf.reshape(y, [-1, out_channels, oh, ow])
    if b is not None:
        y = y + tf.reshape(b, [1, -1, 1, 1])
    return y
