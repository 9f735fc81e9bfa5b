"""Text featurisation: TfIdfVectorizer (integer n-grams), in ONNX's layout.

TensorFlow has no n-gram counter over a fixed pool, so it is composed: for every gram
length, skip distance and pool n-gram (all static attributes), the positions where the
strided window of the (static-length) sequence equals the n-gram are found with
``tf.equal``/``tf.reduce_all`` and counted with ``tf.reduce_sum``; the counts go to the
n-gram's output column. Unigrams are counted once (skips do not apply to them).
"""

from __future__ import annotations

import numpy as np

from anpred.errors import AnpredError
from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow import policy
from anpred.translate.tensorflow.layout import onnx_op
from anpred.translate.tensorflow.lean_import import tf


def _pool(call: NodeCall) -> list[tuple[int, tuple[int, ...]]]:
    """(output column, n-gram) of every n-gram of the pool, in pool order."""
    pool = call.attr("pool_int64s")
    if pool is None:
        raise AnpredError(f"tensorflow TfIdfVectorizer: only integer pools (node {call.name})")
    starts = [int(c) for c in call.attr("ngram_counts")]
    indexes = [int(i) for i in call.attr("ngram_indexes")]
    grams = []
    for level, start in enumerate(starts):
        end = starts[level + 1] if level + 1 < len(starts) else len(pool)
        n = level + 1
        grams += [tuple(int(v) for v in pool[i : i + n]) for i in range(start, end, n)]
    return list(zip(indexes, grams, strict=True))


@onnx_op("TfIdfVectorizer", since=9)
def tfidf_vectorizer(call: NodeCall, x: tf.Tensor) -> tf.Tensor:
    """ONNX TfIdfVectorizer (modes TF, IDF, TFIDF; integer pools; composed)."""
    squeeze = x.shape.rank == 1
    rows = x[None] if squeeze else x
    length = int(rows.shape[1])
    low, high = int(call.attr("min_gram_length")), int(call.attr("max_gram_length"))
    max_skip = int(call.attr("max_skip_count", 0))
    grams = _pool(call)
    width = max(i for i, _ in grams) + 1
    columns: list[list[tf.Tensor]] = [[] for _ in range(width)]
    for column, gram in grams:
        n = len(gram)
        if not low <= n <= high:
            continue
        for skip in range(max_skip + 1) if n > 1 else [0]:
            step = skip + 1
            span = (n - 1) * step
            if span >= length:
                continue
            hits = [
                tf.equal(rows[:, k * step : length - span + k * step], tf.cast(g, rows.dtype))
                for k, g in enumerate(gram)
            ]
            found = tf.reduce_all(tf.stack(hits, 0), 0)
            columns[column].append(tf.reduce_sum(tf.cast(found, tf.int64), 1))
    zero = tf.zeros(tf.shape(rows)[:1], tf.int64)
    counts = tf.stack([tf.add_n(c) if c else zero for c in columns], 1)
    dtype = policy.current().tf_float
    counts = tf.cast(counts, dtype)
    weights = call.attr("weights")
    scale = tf.constant(np.ones(width) if weights is None else np.asarray(weights), dtype)
    mode = call.attr("mode")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode == "IDF":
        y = tf.cast(counts > 0, dtype) * scale
    elif mode == "TFIDF":
        y = counts * scale
    else:
        y = counts
    return y[0] if squeeze else y
