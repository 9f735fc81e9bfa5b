"""LSTM, GRU and RNN TensorFlow translators, in ONNX's layout (the values are 3-D).

LSTM and GRU: ONNX's recurrence (:mod:`anpred.translate.recurrent`) on
``tf.linalg.matmul`` (``@``), ``tf.math.sigmoid``/``tf.math.tanh``/``tf.nn.relu`` and
``tf.stack``; RNN is unrolled here with the same kernels (and ``sequence_lens``).
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


def _masked(keep: tf.Tensor, new: tf.Tensor, old: tf.Tensor) -> tf.Tensor:
    return tf.where(keep, new, old)


@onnx_op("RNN")
def rnn(
    call: NodeCall,
    x: tf.Tensor,
    w: tf.Tensor,
    r: tf.Tensor,
    b: tf.Tensor | None = None,
    seq_lens: tf.Tensor | None = None,
    h0: tf.Tensor | None = None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """ONNX RNN ``h = f(x W^T + h R^T + Wb + Rb)``: returns ``(Y, Y_h)``.

    Unrolled over the static sequence length with ``tf.linalg.matmul``; ``sequence_lens``
    holds each entry's state after its last step and zeroes its outputs there (the reverse
    direction runs forward on ``tf.reverse_sequence`` of the input).
    """
    direction = str(call.attr("direction", "forward"))
    directions = ["forward", "reverse"] if direction == "bidirectional" else [direction]
    layout = int(call.attr("layout", 0))
    if call.attr("activation_alpha") is not None or call.attr("activation_beta") is not None:
        raise NotImplementedError(f"RNN activations with activation_alpha/beta ({call.name})")
    names = call.attr("activations") or ["Tanh"] * len(directions)
    acts = [KERNELS.activations[n if isinstance(n, str) else n.decode()] for n in names]
    clip = call.attr("clip")
    if layout:
        x = tf.transpose(x, [1, 0, 2])
        h0 = None if h0 is None else tf.transpose(h0, [1, 0, 2])
    seq, hidden = int(x.shape[0]), int(r.shape[-1])
    batch = tf.shape(x)[1]
    lengths = (
        tf.fill([batch], seq) if seq_lens is None else tf.cast(tf.reshape(seq_lens, [-1]), tf.int32)
    )
    ys, finals = [], []
    for d, name in enumerate(directions):
        inputs = x if name == "forward" else tf.reverse_sequence(x, lengths, 0, 1)
        gx = tf.linalg.matmul(inputs, w[d], transpose_b=True)
        if b is not None:
            gx = gx + b[d][:hidden] + b[d][hidden:]
        h = tf.zeros_like(gx[0]) if h0 is None else h0[d]
        outs = []
        for t in range(seq):
            pre = gx[t] + tf.linalg.matmul(h, r[d], transpose_b=True)
            if clip is not None:
                pre = tf.clip_by_value(pre, -float(clip), float(clip))
            new = acts[d](pre)
            keep = (t < lengths)[:, None]
            h = _masked(keep, new, h)
            outs.append(_masked(keep, new, tf.zeros_like(new)))
        y = tf.stack(outs, 0)  # [seq, batch, H]
        if name == "reverse":
            y = tf.reverse_sequence(y, lengths, 0, 1)
        ys.append(y)
        finals.append(h)
    y = tf.stack(ys, 1)  # [seq, dirs, batch, H]
    y_h = tf.stack(finals, 0)
    if layout:
        y = tf.transpose(y, [2, 0, 1, 3])
        y_h = tf.transpose(y_h, [1, 0, 2])
    return y, y_h
