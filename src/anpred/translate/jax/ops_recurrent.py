"""LSTM and GRU jax translators: ONNX's recurrence (:mod:`anpred.translate.recurrent`)
on ``jnp.matmul`` (``@``), ``jax.nn.sigmoid``/``jnp.tanh``/``jax.nn.relu`` and ``jnp.stack``.

The loop is unrolled over the static sequence length (``jax.jit`` traces it once).
"""

from __future__ import annotations

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
