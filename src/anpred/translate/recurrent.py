"""ONNX LSTM and GRU written once over a library's own tensor operators.

Each library's translator hands :func:`lstm` / :func:`gru` a :class:`RecurrentKernels`
object (its matmul through ``@``, its sigmoid/tanh/relu, stack, transpose ...); the
recurrence itself is ONNX's equations (opset 7-22), unrolled over the static sequence
length, with the input projections of all time steps computed by one matmul. Imports no
DL library.

Supported: ``direction`` forward / reverse / bidirectional, ``layout`` 0 and 1, optional
bias, initial states and LSTM peepholes, ``clip``, ``linear_before_reset`` (GRU), the
activations Sigmoid, Tanh and Relu in any position. Not supported (a clear error):
``sequence_lens`` shorter than the sequence, ``input_forget``, activations with
``activation_alpha`` / ``activation_beta``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from anpred.translate.registry import NodeCall

Tensor = Any


@dataclass(frozen=True)
class RecurrentKernels:
    """The tensor operators of one library that the recurrence needs.

    Attributes:
        transpose: Permute axes (``transpose(x, perm)``).
        activations: ``{"Sigmoid": fn, "Tanh": fn, "Relu": fn}``.
        stack: Stack tensors along a new axis (``stack(tensors, axis)``).
        zeros_like: Zeros of a tensor's shape and dtype.
        clip: ``clip(x, low, high)`` with Python floats.
    """

    transpose: Callable[[Tensor, Sequence[int]], Tensor]
    activations: dict[str, Callable[[Tensor], Tensor]]
    stack: Callable[[list[Tensor], int], Tensor]
    zeros_like: Callable[[Tensor], Tensor]
    clip: Callable[[Tensor, float, float], Tensor]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class _Recurrence:
    """Attributes and helpers shared by LSTM and GRU."""

    def __init__(self, call: NodeCall, k: RecurrentKernels, gates: int, n_act: int) -> None:
        self.call = call
        self.k = k
        direction = _text(call.attr("direction", "forward"))
        if direction not in ("forward", "reverse", "bidirectional"):
            raise ValueError(f"{call.op_type} node {call.name}: unknown direction {direction!r}")
        self.directions = ["forward", "reverse"] if direction == "bidirectional" else [direction]
        self.layout = int(call.attr("layout", 0))
        self.clip_value = call.attr("clip")
        if call.attr("activation_alpha") is not None or call.attr("activation_beta") is not None:
            raise NotImplementedError(
                f"{call.op_type} activations with activation_alpha/beta (node {call.name})"
            )
        names = call.attr("activations")
        default = ["Sigmoid", "Tanh", "Tanh"][:n_act]
        names = [_text(n) for n in names] if names is not None else default * len(self.directions)
        unknown = sorted({n for n in names if n not in k.activations})
        if unknown:
            raise NotImplementedError(f"{call.op_type} activation(s) {unknown} (node {call.name})")
        self.acts = [[k.activations[n] for n in names[d * n_act:(d + 1) * n_act]]
                     for d in range(len(self.directions))]  # fmt: skip
        self.gates = gates

    def check_lengths(self, seq_lens: Tensor | None, seq: int) -> None:
        if seq_lens is None:
            return
        lengths = self.call.const(4)
        if lengths is None or np.any(np.asarray(lengths) != seq):
            raise NotImplementedError(
                f"{self.call.op_type} node {self.call.name}: sequence_lens must be static and "
                "equal to the sequence length (shorter sequences are not translated)"
            )

    def clip(self, x: Tensor) -> Tensor:
        if self.clip_value is None:
            return x
        c = float(self.clip_value)
        return self.k.clip(x, -c, c)

    def seq_major(self, x: Tensor) -> Tensor:
        return self.k.transpose(x, (1, 0, 2)) if self.layout else x

    def state(self, value: Tensor | None, d: int) -> Tensor | None:
        if value is None:
            return None
        value = self.k.transpose(value, (1, 0, 2)) if self.layout else value
        return value[d]

    def outputs(self, ys: list[Tensor], finals: list[list[Tensor]]) -> tuple[Tensor, ...]:
        """ONNX outputs from per-direction step outputs [seq, batch, H] and final states."""
        y = self.k.stack(ys, 1)  # [seq, dirs, batch, H]
        states = [self.k.stack(list(f), 0) for f in finals]  # [dirs, batch, H] each
        if self.layout:
            y = self.k.transpose(y, (2, 0, 1, 3))
            states = [self.k.transpose(s, (1, 0, 2)) for s in states]
        return (y, *states)


def lstm(
    call: NodeCall,
    k: RecurrentKernels,
    x: Tensor,
    w: Tensor,
    r: Tensor,
    b: Tensor | None = None,
    seq_lens: Tensor | None = None,
    h0: Tensor | None = None,
    c0: Tensor | None = None,
    p: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """ONNX LSTM (gates i, o, f, c): returns ``(Y, Y_h, Y_c)``."""
    rec = _Recurrence(call, k, 4, 3)
    if int(call.attr("input_forget", 0)):
        raise NotImplementedError(f"LSTM input_forget (node {call.name})")
    hidden = int(r.shape[-1])
    x = rec.seq_major(x)
    seq = int(x.shape[0])
    rec.check_lengths(seq_lens, seq)
    ys, finals_h, finals_c = [], [], []
    for d, direction in enumerate(rec.directions):
        f, g, h_act = rec.acts[d]
        gx = x @ k.transpose(w[d], (1, 0))  # [seq, batch, 4H]
        if b is not None:
            gx = gx + (b[d][: 4 * hidden] + b[d][4 * hidden :])
        r_t = k.transpose(r[d], (1, 0))
        h, c = rec.state(h0, d), rec.state(c0, d)
        if h is None:
            h = k.zeros_like(gx[0][:, :hidden])
        if c is None:
            c = k.zeros_like(gx[0][:, :hidden])
        if p is not None:
            p_i, p_o, p_f = (p[d][j * hidden : (j + 1) * hidden] for j in range(3))
        steps = range(seq) if direction == "forward" else range(seq - 1, -1, -1)
        outs: list[Tensor] = [None] * seq
        for t in steps:
            gt = gx[t] + h @ r_t
            i_pre, o_pre = gt[:, :hidden], gt[:, hidden : 2 * hidden]
            f_pre, c_pre = gt[:, 2 * hidden : 3 * hidden], gt[:, 3 * hidden :]
            if p is not None:
                i_pre = i_pre + p_i * c
                f_pre = f_pre + p_f * c
            i_gate = f(rec.clip(i_pre))
            f_gate = f(rec.clip(f_pre))
            c = f_gate * c + i_gate * g(rec.clip(c_pre))
            if p is not None:
                o_pre = o_pre + p_o * c
            h = f(rec.clip(o_pre)) * h_act(c)
            outs[t] = h
        ys.append(k.stack(outs, 0))
        finals_h.append(h)
        finals_c.append(c)
    return rec.outputs(ys, [finals_h, finals_c])  # type: ignore[return-value]


def gru(
    call: NodeCall,
    k: RecurrentKernels,
    x: Tensor,
    w: Tensor,
    r: Tensor,
    b: Tensor | None = None,
    seq_lens: Tensor | None = None,
    h0: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """ONNX GRU (gates z, r, h; ``linear_before_reset``): returns ``(Y, Y_h)``."""
    rec = _Recurrence(call, k, 3, 2)
    before_reset = int(call.attr("linear_before_reset", 0))
    hidden = int(r.shape[-1])
    x = rec.seq_major(x)
    seq = int(x.shape[0])
    rec.check_lengths(seq_lens, seq)
    ys, finals = [], []
    for d, direction in enumerate(rec.directions):
        f, g = rec.acts[d]
        gx = x @ k.transpose(w[d], (1, 0))  # [seq, batch, 3H]
        rb_h = None
        if b is not None:
            wb, rb = b[d][: 3 * hidden], b[d][3 * hidden :]
            gx = gx + wb
            rb_zr, rb_h = rb[: 2 * hidden], rb[2 * hidden :]
        r_d = r[d]
        r_zr = k.transpose(r_d[: 2 * hidden], (1, 0))
        r_h = k.transpose(r_d[2 * hidden :], (1, 0))
        h = rec.state(h0, d)
        if h is None:
            h = k.zeros_like(gx[0][:, :hidden])
        steps = range(seq) if direction == "forward" else range(seq - 1, -1, -1)
        outs: list[Tensor] = [None] * seq
        for t in steps:
            zr = gx[t][:, : 2 * hidden] + h @ r_zr
            if rb_h is not None:
                zr = zr + rb_zr
            z_gate = f(rec.clip(zr[:, :hidden]))
            r_gate = f(rec.clip(zr[:, hidden:]))
            if before_reset:
                rh = h @ r_h
                if rb_h is not None:
                    rh = rh + rb_h
                h_pre = gx[t][:, 2 * hidden :] + r_gate * rh
            else:
                h_pre = gx[t][:, 2 * hidden :] + (r_gate * h) @ r_h
                if rb_h is not None:
                    h_pre = h_pre + rb_h
            h_new = g(rec.clip(h_pre))
            h = (1 - z_gate) * h_new + z_gate * h
            outs[t] = h
        ys.append(k.stack(outs, 0))
        finals.append(h)
    return rec.outputs(ys, [finals])  # type: ignore[return-value]
