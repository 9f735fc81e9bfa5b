"""Convolution and normalisation torch translators (NCHW).

Default epsilons are float32 values, as ONNX float attributes are.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - the conventional name

from anpred.translate.lrn_window import lrn_window
from anpred.translate.registry import NodeCall, register
from anpred.translate.torch.windows import resolve_pads, torch_pad

_LIB = "torch"

Tensor = torch.Tensor

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


@register(_LIB, "Conv")
def conv(call: NodeCall, x: Tensor, w: Tensor, b: Tensor | None = None) -> Tensor:
    """ONNX Conv: 1-3 spatial axes, groups, strides, dilations, pads and ``auto_pad``.

    Symmetric pads go to the torch kernel; asymmetric ones are applied with ``F.pad`` first.
    """
    nd = x.ndim - 2
    kernel = list(w.shape[2:])
    strides = list(call.attr("strides", [1] * nd))
    dilations = list(call.attr("dilations", [1] * nd))
    begin, end = resolve_pads(call, list(x.shape[2:]), kernel, strides, dilations)
    if begin != end:
        x = F.pad(x, torch_pad(begin, end))
        begin = [0] * nd
    return _CONV[nd](x, w, b, strides, begin, dilations, int(call.attr("group", 1)))


@register(_LIB, "BatchNormalization")
def batch_norm(
    call: NodeCall, x: Tensor, scale: Tensor, bias: Tensor, mean: Tensor, var: Tensor
) -> Tensor:
    """ONNX BatchNormalization in inference mode (running statistics)."""
    if call.attr("training_mode", 0):
        raise NotImplementedError("BatchNormalization with training_mode=1 is not inference")
    eps = float(call.attr("epsilon", np.float32(1e-5)))
    return F.batch_norm(x, mean, var, scale, bias, training=False, momentum=0.0, eps=eps)


@register(_LIB, "LayerNormalization")
def layer_norm(
    call: NodeCall, x: Tensor, scale: Tensor, bias: Tensor | None = None
) -> Tensor | tuple[Tensor, ...]:
    """ONNX LayerNormalization over the axes from ``axis`` (default -1) on.

    The optional Mean and InvStdDev outputs are computed when the node asks for them.
    """
    axis = int(call.attr("axis", -1)) % x.ndim
    eps = float(call.attr("epsilon", np.float32(1e-5)))
    shape = tuple(x.shape[axis:])
    if tuple(scale.shape) == shape and (bias is None or tuple(bias.shape) == shape):
        y = F.layer_norm(x, shape, scale, bias, eps)
    else:  # scale/bias broadcast to the normalised shape
        y = F.layer_norm(x, shape, None, None, eps) * scale
        y = y if bias is None else y + bias
    if len(call.output_shapes) == 1:
        return y
    dims = tuple(range(axis, x.ndim))
    mean = torch.mean(x, dim=dims, keepdim=True)
    var = torch.var(x, dim=dims, keepdim=True, correction=0)
    return y, mean, torch.rsqrt(var + eps)


@register(_LIB, "LRN")
def lrn(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX LRN: ``F.local_response_norm`` for an odd ``size`` (a centred window).

    An even ``size`` (ONNX puts the extra channel after the centre, torch before it) sums
    the squares of the window from channel-shifted slices.
    """
    win = lrn_window(call)
    if win.symmetric:
        return F.local_response_norm(x, win.size, win.alpha, win.beta, win.bias)
    sq = x * x
    channels = x.shape[1]
    padded = F.pad(sq, [0, 0] * (x.ndim - 2) + [win.before, win.after])
    total = sum(padded[:, i : i + channels] for i in range(win.size))
    return x / torch.pow(win.bias + (win.alpha / win.size) * total, win.beta)


@register(_LIB, "CausalConvWithState")
def causal_conv_with_state(
    call: NodeCall,
    x: Tensor,
    w: Tensor,
    b: Tensor | None = None,
    past_state: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """ONNX CausalConvWithState: a depthwise 1-D convolution over ``past_state`` (zeros by
    default) followed by the input, ``F.conv1d``; ``silu``/``swish`` activation
    (``F.silu``); the last ``k - 1`` steps are the present state.
    """
    batch, channels, _ = x.shape
    k = w.shape[2]
    if past_state is None:
        past_state = x.new_zeros((batch, channels, k - 1))
    padded = torch.cat([past_state, x], dim=2)
    y = F.conv1d(padded, w, b, groups=channels)
    if call.attr("activation", "none") in ("silu", "swish"):
        y = F.silu(y)
    return y, padded[:, :, padded.shape[2] - (k - 1) :]
