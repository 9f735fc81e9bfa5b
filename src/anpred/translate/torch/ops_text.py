"""TfIdfVectorizer torch translator (integer n-grams), composed: torch has no n-gram kernel.

For every n-gram length ``n`` of the static pool and skip distance ``d`` (unigrams once,
longer n-grams for ``d = 1 .. max_skip_count + 1``, as ONNX's reference counts them), the
windows ``x[i], x[i + d], ..., x[i + (n-1) d]`` are strided slices of the input rows,
stacked (``torch.stack``) and compared with every pool n-gram of that length
(``torch.eq``, ``torch.all``); the matches summed over positions go to their
``ngram_indexes`` output column (``index_add``), and are weighted (TF, IDF or TFIDF).
"""

from __future__ import annotations

import numpy as np
import torch

from anpred.errors import UsageError
from anpred.translate.registry import NodeCall, register
from anpred.translate.torch.adapter import run_float

_LIB = "torch"

Tensor = torch.Tensor


def _pool(call: NodeCall) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Pool n-grams by length: ``{n: ((count, n) int64 n-grams, (count,) output columns)}``."""
    if call.attr("pool_int64s") is None:
        raise UsageError(f"TfIdfVectorizer node {call.name}: no torch translation of string pools")
    pool = np.asarray(call.attr("pool_int64s"), dtype=np.int64)
    indexes = np.asarray(call.attr("ngram_indexes"), dtype=np.int64)
    starts = [int(s) for s in call.attr("ngram_counts")] + [pool.size]
    grams: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    offset = 0
    for n in range(1, len(starts)):
        block = pool[starts[n - 1] : starts[n]].reshape(-1, n)
        grams[n] = (block, indexes[offset : offset + len(block)])
        offset += len(block)
    return grams


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@register(_LIB, "TfIdfVectorizer")
def tfidf_vectorizer(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX TfIdfVectorizer over integer input ``[C]`` or ``[N, C]`` (modes TF, IDF, TFIDF)."""
    grams = _pool(call)
    rows = (x if x.dim() == 2 else x.reshape(1, -1)).to(torch.int64)
    length = int(rows.shape[1])
    width = int(max(int(i) for i in call.attr("ngram_indexes"))) + 1
    low, high = int(call.attr("min_gram_length")), int(call.attr("max_gram_length"))
    max_skip = int(call.attr("max_skip_count", 0))
    counts = torch.zeros((rows.shape[0], width), dtype=torch.int64, device=rows.device)
    for n, (block, columns) in sorted(grams.items()):
        if not low <= n <= high or not len(block):
            continue
        target = torch.as_tensor(block, device=rows.device)  # (count, n)
        where = torch.as_tensor(columns, device=rows.device)
        for d in [1] if n == 1 else range(1, max_skip + 2):
            positions = length - (n - 1) * d
            if positions <= 0:
                continue
            window = torch.stack(
                [rows[:, k * d : k * d + positions] for k in range(n)], dim=-1
            )  # (rows, positions, n)
            hits = torch.all(torch.eq(window.unsqueeze(2), target), dim=-1)  # (rows, pos, count)
            counts = counts.index_add(1, where, hits.sum(dim=1))
    dtype = run_float(torch.float32)
    weights = call.attr("weights")
    scale = torch.as_tensor(
        np.ones(width) if weights is None else np.asarray(weights, dtype=np.float64),
        dtype=dtype,
        device=rows.device,
    )
    mode = _text(call.attr("mode", "TF"))
    if mode == "IDF":
        y = (counts > 0).to(dtype) * scale
    elif mode == "TFIDF":
        y = counts.to(dtype) * scale
    else:
        y = counts.to(dtype)
    return y if x.dim() == 2 else y[0]
