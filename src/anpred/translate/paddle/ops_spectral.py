"""Spectral paddle translators: DFT and STFT on ``paddle.fft``.

ONNX carries complex values as a trailing axis of size 2 (real, imaginary) and real
signals with a trailing axis of size 1; the signal is made complex (``paddle.complex``)
or kept real, transformed with ``paddle.fft.fft`` / ``ifft`` / ``irfft`` along the
signal axis, and split back into the trailing pair. STFT frames the signal with strided
slices, weighs each frame by the window and runs the same DFT along the frame axis.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import paddle

from anpred.translate.paddle.static_values import static_value
from anpred.translate.registry import NodeCall, register

Tensor = Any


def _signal(x: Tensor) -> Tensor:
    """The (real or complex) signal of an ONNX ``[..., 1 | 2]`` tensor."""
    if int(x.shape[-1]) == 1:
        return paddle.squeeze(x, -1)
    return paddle.complex(x[..., 0], x[..., 1])


def _pair(y: Tensor, dtype: Any) -> Tensor:
    """ONNX's ``[..., 2]`` form of a complex result, in ``dtype``."""
    return paddle.cast(paddle.stack([paddle.real(y), paddle.imag(y)], axis=-1), dtype)


def _dft(x: Tensor, length: int | None, axis: int, inverse: bool, onesided: bool) -> Tensor:
    axis %= x.ndim
    if length is None:
        length = 2 * (int(x.shape[axis]) - 1) if inverse and onesided else int(x.shape[axis])
    signal = _signal(x)
    if inverse and onesided:
        return paddle.unsqueeze(paddle.cast(paddle.fft.irfft(signal, length, axis), x.dtype), -1)
    if inverse:
        return _pair(paddle.fft.ifft(signal, length, axis), x.dtype)
    y = paddle.fft.fft(signal, length, axis)
    if onesided:
        y = paddle.slice(y, [axis], [0], [length // 2 + 1])
    return _pair(y, x.dtype)


def _int_input(call: NodeCall, index: int, value: Tensor) -> int | None:
    if value is None:
        return None
    return int(np.asarray(static_value(call, index, "length", value)).reshape(-1)[0])


@register("paddle", "DFT", since=17)
def dft_17(call: NodeCall, x: Tensor, dft_length: Tensor = None) -> Tensor:
    """ONNX DFT opset 17-19 (``axis`` attribute, default 1)."""
    return _dft(x, _int_input(call, 1, dft_length), int(call.attr("axis", 1)),
                bool(call.attr("inverse", 0)), bool(call.attr("onesided", 0)))  # fmt: skip


@register("paddle", "DFT", since=20)
def dft(call: NodeCall, x: Tensor, dft_length: Tensor = None, axis: Tensor = None) -> Tensor:
    """ONNX DFT opset 20+ (``axis`` input, default -2): forward, inverse, one-sided (rfft,
    irfft) with ``paddle.fft``.
    """
    chosen = -2 if axis is None else _int_input(call, 2, axis)
    return _dft(x, _int_input(call, 1, dft_length), chosen,
                bool(call.attr("inverse", 0)), bool(call.attr("onesided", 0)))  # fmt: skip


@register("paddle", "STFT", since=17)
def stft(
    call: NodeCall, x: Tensor, frame_step: Tensor, window: Tensor = None,
    frame_length: Tensor = None,
) -> Tensor:  # fmt: skip
    """ONNX STFT: frames ``[batch, frames, frame_length, 1|2]`` (strided slices, zero
    padded at the end), weighed by ``window`` (ones without), DFT along the frame axis.
    """
    step = _int_input(call, 1, frame_step)
    length = _int_input(call, 3, frame_length)
    if length is None:
        length = int(x.shape[-2]) if window is None else int(window.shape[0])
    if window is None:
        window = paddle.ones([length], dtype=x.dtype)
    size = int(window.shape[0])
    signal_length = int(x.shape[-2])
    count = 1 + (signal_length - length) // step
    frames = []
    for f in range(count):
        begin = f * step
        frame = paddle.slice(x, [1], [begin], [min(begin + size, signal_length)])
        missing = size - int(frame.shape[1])
        if missing:
            pad = paddle.zeros([int(x.shape[0]), missing, int(x.shape[2])], dtype=x.dtype)
            frame = paddle.concat([frame, pad], axis=1)
        frames.append(frame)
    framed = paddle.stack(frames, axis=1) * paddle.reshape(window, [1, 1, size, 1])
    return _dft(framed, length, 2, False, bool(call.attr("onesided", 1)))
