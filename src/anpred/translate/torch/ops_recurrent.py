"""LSTM, GRU and RNN torch translators.

Where the node is what torch's fused RNN kernels compute (``torch.lstm`` / ``torch.gru``,
the kernels behind ``nn.LSTM`` / ``nn.GRU``: default activations, no ``clip``, no
peepholes, no ``input_forget``; for GRU ``linear_before_reset=1``), the ONNX weights are
reordered into torch's gate order (ONNX i, o, f, c -> torch i, f, g, o; ONNX z, r, h ->
torch r, z, n) and the kernel runs; a ``reverse`` node runs it on the time-flipped
sequence. Every other node runs ONNX's recurrence (:mod:`anpred.translate.recurrent`) on
torch's matmul, ``torch.sigmoid`` / ``torch.tanh`` / ``torch.relu`` and ``torch.stack``.
"""

from __future__ import annotations

import torch

from anpred.translate import recurrent
from anpred.translate.registry import NodeCall, register

_LIB = "torch"

Tensor = torch.Tensor

KERNELS = recurrent.RecurrentKernels(
    transpose=lambda x, perm: x.permute(*perm),
    activations={"Sigmoid": torch.sigmoid, "Tanh": torch.tanh, "Relu": torch.relu},
    stack=lambda xs, axis: torch.stack(xs, axis),
    zeros_like=torch.zeros_like,
    clip=torch.clamp,
)

#: ONNX gate blocks in torch's order.
_LSTM_GATES = (0, 2, 3, 1)  # i, o, f, c -> i, f, g(c), o
_GRU_GATES = (1, 0, 2)  # z, r, h -> r, z, n


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _fused(call: NodeCall, n_act: int, seq_lens: Tensor | None) -> bool:
    """Whether torch's fused kernel computes exactly this node."""
    acts = call.attr("activations")
    default = ["Sigmoid", "Tanh", "Tanh"][:n_act]
    if acts is not None and any(
        [_text(a) for a in acts[i : i + n_act]] != default for i in range(0, len(acts), n_act)
    ):
        return False
    if seq_lens is not None:
        lengths = call.const(4)
        x_shape = call.input_shapes[0] if call.input_shapes else None
        if lengths is None or x_shape is None:
            return False
        seq = x_shape[1] if int(call.attr("layout", 0)) else x_shape[0]
        if any(int(v) != seq for v in lengths.reshape(-1)):
            return False
    return call.attr("clip") is None and call.attr("activation_alpha") is None


def _reorder(t: Tensor, order: tuple[int, ...], hidden: int) -> Tensor:
    return torch.cat([t[g * hidden : (g + 1) * hidden] for g in order], 0)


def _run_fused(
    call: NodeCall, kernel: object, order: tuple[int, ...], x: Tensor, w: Tensor, r: Tensor,
    b: Tensor | None, states: tuple[Tensor | None, ...],
) -> tuple[Tensor, ...]:  # fmt: skip
    """Run ``torch.lstm`` / ``torch.gru`` on an ONNX node; returns (Y, *final states)."""
    direction = _text(call.attr("direction", "forward"))
    dirs = 2 if direction == "bidirectional" else 1
    hidden = int(r.shape[-1])
    gates = len(order)
    layout = int(call.attr("layout", 0))
    if layout:
        x = x.transpose(0, 1)
        states = tuple(None if s is None else s.transpose(0, 1) for s in states)
    if direction == "reverse":
        x = torch.flip(x, (0,))
    batch = x.shape[1]
    params: list[Tensor] = []
    for d in range(dirs):
        params += [_reorder(w[d], order, hidden), _reorder(r[d], order, hidden)]
        if b is not None:
            params += [_reorder(b[d][: gates * hidden], order, hidden),
                       _reorder(b[d][gates * hidden :], order, hidden)]  # fmt: skip
    zeros = x.new_zeros((dirs, batch, hidden))
    hx = tuple(zeros if s is None else s.contiguous() for s in states)
    hx_arg = hx if len(hx) > 1 else hx[0]
    y, *finals = kernel(x, hx_arg, params, b is not None, 1, 0.0, False, dirs == 2, False)
    if direction == "reverse":
        y = torch.flip(y, (0,))
    y = y.reshape(y.shape[0], batch, dirs, hidden).permute(0, 2, 1, 3)  # [seq, dirs, batch, H]
    if layout:
        y = y.permute(2, 0, 1, 3)
        finals = [f.transpose(0, 1) for f in finals]
    return (y, *finals)


@register(_LIB, "LSTM")
def lstm(call: NodeCall, *inputs: Tensor | None) -> tuple[Tensor, ...]:
    """ONNX LSTM: ``torch.lstm`` where it applies, else ONNX's recurrence."""
    x, w, r, b, seq_lens, h0, c0, p = (*inputs, *([None] * (8 - len(inputs))))
    if p is None and not int(call.attr("input_forget", 0)) and _fused(call, 3, seq_lens):
        return _run_fused(call, torch.lstm, _LSTM_GATES, x, w, r, b, (h0, c0))
    return recurrent.lstm(call, KERNELS, *inputs)


@register(_LIB, "GRU")
def gru(call: NodeCall, *inputs: Tensor | None) -> tuple[Tensor, ...]:
    """ONNX GRU: ``torch.gru`` for ``linear_before_reset=1``, else ONNX's recurrence."""
    x, w, r, b, seq_lens, h0 = (*inputs, *([None] * (6 - len(inputs))))
    if int(call.attr("linear_before_reset", 0)) and _fused(call, 2, seq_lens):
        return _run_fused(call, torch.gru, _GRU_GATES, x, w, r, b, (h0,))
    return recurrent.gru(call, KERNELS, *inputs)


_RNN_KERNELS = {"Tanh": torch.rnn_tanh, "Relu": torch.rnn_relu}


@register(_LIB, "RNN")
def rnn(call: NodeCall, *inputs: Tensor | None) -> tuple[Tensor, ...]:
    """ONNX RNN: ``torch.rnn_tanh`` / ``torch.rnn_relu`` (the kernels behind ``nn.RNN``).

    One activation for every direction (Tanh default, or Relu), no ``clip``, full-length
    sequences; other nodes are not supported.
    """
    x, w, r, b, seq_lens, h0 = (*inputs, *([None] * (6 - len(inputs))))
    names = {_text(a) for a in call.attr("activations", ["Tanh"])}
    if len(names) != 1 or next(iter(names)) not in _RNN_KERNELS:
        raise NotImplementedError(f"RNN with activations {sorted(names)}")
    if call.attr("clip") is not None or (seq_lens is not None and not _full_length(call)):
        raise NotImplementedError("RNN with clip or shorter sequence_lens")
    kernel = _RNN_KERNELS[next(iter(names))]
    return _run_fused(call, kernel, (0,), x, w, r, b, (h0,))


def _full_length(call: NodeCall) -> bool:
    """Whether the static ``sequence_lens`` all equal the sequence length."""
    lengths, shape = call.const(4), call.input_shapes[0] if call.input_shapes else None
    if lengths is None or shape is None:
        return False
    seq = shape[1] if int(call.attr("layout", 0)) else shape[0]
    return all(int(v) == seq for v in lengths.reshape(-1))
