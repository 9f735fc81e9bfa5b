"""TfIdfVectorizer jax translator (integer n-grams), composed: jax has no n-gram kernel.

Every n-gram of the static pool is matched against shifted views of the input rows
(``==`` and ``&`` over ``jnp`` slices) for every skip distance, the matches are summed per
row, and the counts are weighted (TF, IDF or TFIDF), as ONNX's reference counts them:
unigrams once, longer n-grams once per skip distance ``1 .. max_skip_count + 1``.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from onnx import TensorProto

from anpred.errors import UsageError
from anpred.translate.jax.numerics import onnx_dtype
from anpred.translate.jax.registration import register
from anpred.translate.registry import NodeCall


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _grams(call: NodeCall, low: int, high: int) -> list[tuple[int, list[int], int]]:
    """(size, items, output column) of every pool n-gram with ``low <= size <= high``."""
    pool = [int(v) for v in call.attr("pool_int64s")]
    starts = [int(v) for v in call.attr("ngram_counts")]
    columns = [int(v) for v in call.attr("ngram_indexes")]
    grams, ident = [], 0
    for i, start in enumerate(starts):
        size = i + 1
        end = starts[i + 1] if i + 1 < len(starts) else len(pool)
        for j in range(start, end, size):
            if low <= size <= high:
                grams.append((size, pool[j : j + size], columns[ident]))
            ident += 1
    return grams


@register("TfIdfVectorizer")
def tfidf_vectorizer(call: NodeCall, x: Any) -> Any:
    """ONNX TfIdfVectorizer over integer input ``[C]`` or ``[N, C]`` (``pool_int64s``)."""
    if call.attr("pool_int64s") is None:
        raise UsageError(f"TfIdfVectorizer node {call.name}: string pools have no jax translation")
    low, high = int(call.attr("min_gram_length")), int(call.attr("max_gram_length"))
    skips = int(call.attr("max_skip_count"))
    width = max(int(v) for v in call.attr("ngram_indexes")) + 1
    rows = x if x.ndim == 2 else x.reshape(1, -1)
    length = rows.shape[1]
    counts = jnp.zeros((rows.shape[0], width), jnp.int32)
    for size, items, column in _grams(call, low, high):
        total = jnp.zeros((rows.shape[0],), jnp.int32)
        for distance in [1] if size == 1 else range(1, skips + 2):
            span = distance * (size - 1)
            if span >= length:
                continue
            starts = length - span
            match = jnp.ones((rows.shape[0], starts), bool)
            for k, item in enumerate(items):
                window = rows[:, k * distance : k * distance + starts]
                match = match & (window == item)
            total = total + jnp.sum(match, axis=1, dtype=jnp.int32)
        counts = counts.at[:, column].add(total)
    dtype = onnx_dtype(TensorProto.FLOAT)
    given = call.attr("weights")
    weights = jnp.ones((width,), dtype) if given is None else jnp.asarray(given, dtype)
    mode = _text(call.attr("mode"))
    if mode == "TF":
        y = counts.astype(dtype)
    elif mode == "IDF":
        y = jnp.where(counts > 0, weights, jnp.zeros((), dtype))
    else:
        y = counts.astype(dtype) * weights
    return y if x.ndim == 2 else y.reshape(width)
