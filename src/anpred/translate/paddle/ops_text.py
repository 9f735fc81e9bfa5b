"""ONNX TfIdfVectorizer over integer tokens, composed from paddle ops (no paddle kernel).

For every n-gram length ``n`` and skip distance ``d`` (unigrams once, longer n-grams for
``d = 1 .. max_skip_count + 1``), the windows ``x[i], x[i + d], ..., x[i + (n-1) d]`` are
strided slices of the input; each is compared with every pool n-gram (``paddle.equal``,
``paddle.all``), the matches are summed over positions, and a 0/1 matrix
(``paddle.matmul``) adds them to their ``ngram_indexes`` output column. This counts what
ONNX's reference trie walk counts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import paddle

from anpred.errors import UsageError
from anpred.translate.paddle.dtypes import float_dtype
from anpred.translate.registry import NodeCall, register

Tensor = Any


def _pool(call: NodeCall) -> dict[int, np.ndarray]:
    """Pool n-grams by length: ``{n: (count, n) int64 array}`` in pool order."""
    pool = np.asarray(call.attr("pool_int64s", []), dtype=np.int64)
    if call.attr("pool_strings") is not None or not pool.size:
        raise UsageError(f"node {call.name}: TfIdfVectorizer needs pool_int64s (no strings)")
    starts = [int(s) for s in call.attr("ngram_counts")] + [pool.size]
    return {
        n: pool[starts[n - 1] : starts[n]].reshape(-1, n)
        for n in range(1, len(starts))
        if starts[n] > starts[n - 1]
    }


@register("paddle", "TfIdfVectorizer")
def tfidf_vectorizer(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX TfIdfVectorizer (modes TF, IDF, TFIDF; integer pool; 1-D or 2-D input)."""
    rows = paddle.cast(x if x.ndim == 2 else paddle.unsqueeze(x, 0), "int64")
    length = int(rows.shape[1])
    indexes = np.asarray(call.attr("ngram_indexes"), dtype=np.int64)
    size = int(indexes.max()) + 1
    lo, hi = int(call.attr("min_gram_length")), int(call.attr("max_gram_length"))
    max_skip = int(call.attr("max_skip_count"))
    counts = paddle.zeros([int(rows.shape[0]), size], dtype=float_dtype())
    offset = 0
    for n, grams in sorted(_pool(call).items()):
        columns = np.zeros((len(grams), size))
        columns[np.arange(len(grams)), indexes[offset : offset + len(grams)]] = 1
        offset += len(grams)
        if not lo <= n <= hi:
            continue
        target = paddle.to_tensor(grams)  # (count, n)
        for d in [1] if n == 1 else range(1, max_skip + 2):
            positions = length - (n - 1) * d
            if positions <= 0:
                continue
            window = paddle.stack(
                [rows[:, k * d : k * d + positions] for k in range(n)], axis=-1
            )  # (rows, positions, n)
            hits = paddle.all(
                paddle.equal(paddle.unsqueeze(window, 2), target), axis=-1
            )  # (rows, positions, count)
            found = paddle.sum(paddle.cast(hits, float_dtype()), axis=1)
            counts = counts + paddle.matmul(found, paddle.to_tensor(columns, float_dtype()))
    weights = call.attr("weights")
    weights = np.ones(size) if weights is None else np.asarray(weights, dtype=np.float64)
    mode = call.attr("mode", "TF")
    if mode == "IDF":
        counts = paddle.cast(counts > 0, counts.dtype)
    if mode in ("IDF", "TFIDF"):
        counts = counts * paddle.to_tensor(weights, counts.dtype)
    return counts if x.ndim == 2 else counts[0]
