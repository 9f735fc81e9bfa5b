"""LSTM, GRU and RNN jax translators: ONNX's recurrence (:mod:`anpred.translate.recurrent`)
on ``jnp.matmul`` (``@``), ``jax.nn.sigmoid``/``jnp.tanh``/``jax.nn.relu`` and ``jnp.stack``.

The loop is unrolled over the static sequence length (``jax.jit`` traces it once).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from anpred.translate import recurrent
from anpred.translate.jax.registration import register
from anpred.translate.registry import NodeCall

KERNELS = recurrent.RecurrentKernels(
    transpose=jnp.transpose,
    activations={"Sigmoid": jax.nn.sigmoid, "Tanh": jnp.tanh, "Relu": jax.nn.relu},
    stack=lambda xs, axis: jnp.stack(xs, axis),
    zeros_like=jnp.zeros_like,
    clip=jnp.clip,
)


@register("LSTM")
def lstm(call: NodeCall, *inputs: Any) -> tuple[Any, ...]:
    """ONNX LSTM (see :func:`anpred.translate.recurrent.lstm`)."""
    return recurrent.lstm(call, KERNELS, *inputs)


@register("GRU")
def gru(call: NodeCall, *inputs: Any) -> tuple[Any, ...]:
    """ONNX GRU (see :func:`anpred.translate.recurrent.gru`)."""
    return recurrent.gru(call, KERNELS, *inputs)


@register("RNN")
def rnn(
    call: NodeCall,
    x: Any,
    w: Any,
    r: Any,
    b: Any = None,
    seq_lens: Any = None,
    h0: Any = None,
) -> tuple[Any, Any]:
    """ONNX RNN ``H = f(X W^T + H R^T + Wb + Rb)`` (default Tanh), ONNX's recurrence on the
    shared helpers of :mod:`anpred.translate.recurrent` (directions, layout, clip).
    """
    if call.attr("activations") is None:  # the shared default (Sigmoid first) is LSTM's
        directions = (
            2 if call.attr("direction", "forward") in ("bidirectional", b"bidirectional") else 1
        )
        call = dataclasses.replace(call, attrs={**call.attrs, "activations": ["Tanh"] * directions})
    rec = recurrent._Recurrence(call, KERNELS, 1, 1)
    hidden = int(r.shape[-1])
    x = rec.seq_major(x)
    seq = int(x.shape[0])
    rec.check_lengths(seq_lens, seq)
    ys, finals = [], []
    for d, direction in enumerate(rec.directions):
        (f,) = rec.acts[d]
        gx = x @ jnp.transpose(w[d])  # [seq, batch, H]
        if b is not None:
            gx = gx + (b[d][:hidden] + b[d][hidden:])
        r_t = jnp.transpose(r[d])
        h = rec.state(h0, d)
        if h is None:
            h = jnp.zeros_like(gx[0])
        steps = range(seq) if direction == "forward" else range(seq - 1, -1, -1)
        outs: list[Any] = [None] * seq
        for t in steps:
            h = f(rec.clip(gx[t] + h @ r_t))
            outs[t] = h
        ys.append(jnp.stack(outs, 0))
        finals.append(h)
    return rec.outputs(ys, [finals])  # type: ignore[return-value]
