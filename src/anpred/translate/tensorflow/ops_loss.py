"""Loss TensorFlow translators: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.

Training graphs export them; an inference graph may keep one to score its outputs.
TensorFlow's own losses (``tf.nn.sparse_softmax_cross_entropy_with_logits``) have no
class weights, ignored class or ONNX's weighted mean, so both are composed: the target
class's log-probability picked with ``tf.gather`` (``batch_dims``), weighted, zeroed where
ignored, and reduced with ``tf.reduce_sum`` (``mean`` divides by the summed weights of the
entries not ignored); SoftmaxCrossEntropyLoss first takes ``tf.nn.log_softmax`` over axis 1.
"""

from __future__ import annotations

from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow.layout import onnx_op
from anpred.translate.tensorflow.lean_import import tf


def _nll(
    call: NodeCall, log_prob: tf.Tensor, target: tf.Tensor, weight: tf.Tensor | None
) -> tf.Tensor:
    """ONNX's negative log-likelihood of ``target`` classes in ``log_prob`` (N, C, d...)."""
    rank = log_prob.shape.rank
    target = tf.cast(target, tf.int64)
    ignore = call.attr("ignore_index")
    kept = tf.ones_like(target, tf.bool) if ignore is None else tf.not_equal(target, int(ignore))
    safe = tf.where(kept, target, tf.zeros_like(target))
    by_class = tf.transpose(log_prob, [0, *range(2, rank), 1])  # (N, d..., C)
    picked = tf.gather(by_class, safe[..., None], batch_dims=rank - 1)[..., 0]
    scale = tf.ones_like(picked) if weight is None else tf.gather(weight, safe)
    scale = tf.where(kept, scale, tf.zeros_like(scale))
    loss = -picked * scale
    reduction = call.attr("reduction", "mean")
    if reduction == "none":
        return loss
    if reduction == "sum":
        return tf.reduce_sum(loss)
    return tf.reduce_sum(loss) / tf.reduce_sum(scale)


@onnx_op("NegativeLogLikelihoodLoss", since=12)
def nll_loss(
    call: NodeCall, x: tf.Tensor, target: tf.Tensor, weight: tf.Tensor | None = None
) -> tf.Tensor:
    """ONNX NegativeLogLikelihoodLoss (weights, ``ignore_index``, reduction; composed)."""
    return _nll(call, x, target, weight)


@onnx_op("SoftmaxCrossEntropyLoss", since=12)
def softmax_cross_entropy_loss(
    call: NodeCall, scores: tf.Tensor, labels: tf.Tensor, weight: tf.Tensor | None = None
) -> tuple[tf.Tensor, tf.Tensor] | tf.Tensor:
    """ONNX SoftmaxCrossEntropyLoss: the NLL loss of ``tf.nn.log_softmax`` over axis 1;
    the optional second output is the log-probabilities.
    """
    log_prob = tf.nn.log_softmax(scores, axis=1)
    loss = _nll(call, log_prob, labels, weight)
    return (loss, log_prob) if len(call.output_shapes) > 1 else loss
