"""Matrix products: MatMul (batched, broadcasting, 1-D operands) and Gemm."""

from __future__ import annotations

from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow.layout import float_attr, onnx_op
from anpred.translate.tensorflow.lean_import import tf


@onnx_op("MatMul")
def matmul(call: NodeCall, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """``tf.linalg.matmul`` with NumPy semantics for 1-D operands."""
    a_vector, b_vector = a.shape.rank == 1, b.shape.rank == 1
    if a_vector:
        a = tf.expand_dims(a, 0)
    if b_vector:
        b = tf.expand_dims(b, -1)
    y = tf.linalg.matmul(a, b)
    if a_vector:  # (..., 1, m) -> (..., m); first, so that 1-D x 1-D ends as a scalar
        y = tf.squeeze(y, -2)
    if b_vector:
        y = tf.squeeze(y, -1)
    return y


@onnx_op("Gemm")
def gemm(call: NodeCall, a: tf.Tensor, b: tf.Tensor, c: tf.Tensor | None = None) -> tf.Tensor:
    """``alpha * A' @ B' + beta * C``; a 1-D C is a ``tf.nn.bias_add`` (Keras Dense's form)."""
    alpha = float_attr(call, "alpha", 1.0)
    beta = float_attr(call, "beta", 1.0)
    y = tf.linalg.matmul(
        a, b,
        transpose_a=bool(call.attr("transA", 0)),
        transpose_b=bool(call.attr("transB", 0)),
    )  # fmt: skip
    if alpha != 1.0:
        y = y * alpha
    if c is None or beta == 0.0:
        return y
    if beta != 1.0:
        c = c * beta
    if c.shape.rank == 2 and c.shape[0] == 1 and c.shape[1] == y.shape[-1]:
        # A (1, N) row is the same bias as a vector. As ``y + c`` TF's grappler remapper
        # fuses it into a _FusedMatMul whose kernel rejects the 2-D bias when transA=1
        # ("bias must be 1-dimensional", ONNX backend test test_gemm_transposeA).
        c = tf.reshape(c, [-1])
    if c.shape.rank == 1 and c.shape[0] == y.shape[-1]:
        return tf.nn.bias_add(y, c)
    return y + c
