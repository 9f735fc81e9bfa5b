"""Recurrent paddle translators. LSTM and GRU: ONNX's recurrence
(:mod:`anpred.translate.recurrent`) on ``paddle.matmul`` (``@``),
``F.sigmoid``/``paddle.tanh``/``F.relu`` and ``paddle.stack``; RNN: its own loop here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F

from anpred.errors import UsageError
from anpred.translate import recurrent
from anpred.translate.paddle.static_values import static_value
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


def _rnn_activation(name: str) -> Any:
    fn = KERNELS.activations.get(name)
    if fn is None:
        raise UsageError(f"RNN activation {name!r} is not translated (Tanh, Relu, Sigmoid)")
    return fn


def _rnn_direction(
    call: NodeCall, xs: list[Tensor], w: Tensor, r: Tensor, b: Tensor, h: Tensor,
    lengths: np.ndarray | None, activation: Any, reverse: bool,
) -> tuple[list[Tensor], Tensor]:  # fmt: skip
    """One direction of ONNX RNN over the time-major steps ``xs``; (Y per step, last H)."""
    clip = call.attr("clip")
    steps = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
    ys: list[Tensor] = [None] * len(xs)
    for t in steps:
        pre = paddle.matmul(xs[t], w, transpose_y=True) + paddle.matmul(h, r, transpose_y=True)
        if b is not None:
            pre = pre + b
        if clip is not None:
            pre = paddle.clip(pre, -float(clip), float(clip))
        new = activation(pre)
        if lengths is None:
            h = ys[t] = new
        else:  # entries whose sequence ended keep their state and output zeros
            alive = paddle.to_tensor((t < lengths).reshape(-1, 1))
            h = paddle.where(alive, new, h)
            ys[t] = paddle.where(alive, new, paddle.zeros_like(new))
    return ys, h


@register("paddle", "RNN")
def rnn(call: NodeCall, *inputs: Tensor) -> tuple[Tensor, Tensor]:
    """ONNX RNN ``H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb)``: a Python loop over the
    time steps around ``paddle.matmul`` and the activation (paddle's ``nn.SimpleRNN`` is a
    layer with its own parameter layout, not a functional kernel).

    ``direction`` forward / reverse / bidirectional, ``layout`` 0 and 1, ``clip``, optional
    bias and initial state, ``sequence_lens`` (ended entries keep their state, output 0),
    activations Tanh (default), Relu, Sigmoid per direction.
    """
    x, w, r, b, seq_lens, h0 = (*inputs, *([None] * (6 - len(inputs))))
    layout = int(call.attr("layout", 0))
    if layout:
        x = paddle.transpose(x, [1, 0, 2])
        h0 = None if h0 is None else paddle.transpose(h0, [1, 0, 2])
    direction = call.attr("direction", "forward")
    dirs = 2 if direction == "bidirectional" else 1
    hidden = int(w.shape[1])
    batch = int(x.shape[1])
    names = list(call.attr("activations", ["Tanh"] * dirs))
    lengths = None
    if seq_lens is not None:
        lengths = np.asarray(static_value(call, 4, "sequence_lens", seq_lens)).reshape(-1)
        if (lengths >= int(x.shape[0])).all():
            lengths = None
    xs = [x[t] for t in range(int(x.shape[0]))]
    outputs, finals = [], []
    for d in range(dirs):
        bias = None if b is None else b[d, :hidden] + b[d, hidden:]
        h = paddle.zeros([batch, hidden], dtype=x.dtype) if h0 is None else h0[d]
        reverse = direction == "reverse" or d == 1
        ys, h = _rnn_direction(call, xs, w[d], r[d], bias, h, lengths,
                               _rnn_activation(names[d]), reverse)  # fmt: skip
        outputs.append(paddle.stack(ys))  # (seq, batch, hidden)
        finals.append(h)
    y = paddle.stack(outputs, axis=1)  # (seq, dirs, batch, hidden)
    y_h = paddle.stack(finals)  # (dirs, batch, hidden)
    if layout:
        return paddle.transpose(y, [2, 0, 1, 3]), paddle.transpose(y_h, [1, 0, 2])
    return y, y_h
