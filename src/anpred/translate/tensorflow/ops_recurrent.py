"""LSTM and GRU TensorFlow translators: ONNX's recurrence (:mod:`anpred.translate.recurrent`)
on ``tf.linalg.matmul`` (``@``), ``tf.math.sigmoid``/``tf.math.tanh``/``tf.nn.relu`` and
``tf.stack``, in ONNX's layout (the values are 3-D).
"""

from __future__ import annotations

from anpred.translate import recurrent
from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow.layout import onnx_op
from anpred.translate.tensorflow.lean_import import tf

KERNELS = recurrent.RecurrentKernels(
    transpose=lambda x, perm: tf.transpose(x, list(perm)),
    activations={"Sigmoid": tf.math.sigmoid, "Tanh": tf.math.tanh, "Relu": tf.nn.relu},
    stack=lambda xs, axis: tf.stack(xs, axis),
    zeros_like=tf.zeros_like,
    clip=tf.clip_by_value,
)


@onnx_op("LSTM")
def lstm(call: NodeCall, *inputs: tf.Tensor | None) -> tuple[tf.Tensor, ...]:
    """ONNX LSTM (see :func:`anpred.translate.recurrent.lstm`)."""
    return recurrent.lstm(call, KERNELS, *inputs)


@onnx_op("GRU")
def gru(call: NodeCall, *inputs: tf.Tensor | None) -> tuple[tf.Tensor, ...]:
    """ONNX GRU (see :func:`anpred.translate.recurrent.gru`)."""
    return recurrent.gru(call, KERNELS, *inputs)
