"""Sorted captures and descriptors kept across passes (a campaign's fault runs): the same
numbers, fewer sorts."""

from __future__ import annotations

import numpy as np
import pytest

from anpred.analysis import onepass, sorted_cache
from anpred.analysis.metrics import get_metric, metric_names


def _case(seed: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    fp64 = rng.standard_normal((2, 8, 16, 16))
    arrays = {
        f"p{i}": (fp64 + rng.standard_normal(fp64.shape) * 1e-6).astype(np.float32)
        for i in range(4)
    }
    return arrays, fp64


def test_kept_rows_are_dropped_after_the_block_and_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    row = np.arange(8, dtype=np.float32)
    sorted_cache.put("a", row)
    assert sorted_cache.get("a") is None  # outside kept(): nothing is kept
    monkeypatch.setattr(sorted_cache, "LIMIT_BYTES", 2 * row.nbytes)
    with sorted_cache.kept():
        for key in "abc":
            sorted_cache.put(key, row)
        assert sorted_cache.get("a") is None  # the oldest went over the limit
        np.testing.assert_array_equal(sorted_cache.get("c"), row)
        assert sorted_cache.get("c") is not row  # a copy: the caller's row may change
    assert sorted_cache.get("c") is None


def test_a_pass_with_kept_sorted_rows_gives_the_same_numbers_with_fewer_sorts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANPRED_NO_JIT", raising=False)
    loops = onepass.kernels()
    if loops is None:
        pytest.skip("numba is not installed")
    metrics = [get_metric(n) for n in metric_names()]
    arrays, fp64 = _case(0)
    expected = onepass.measure_anchor(metrics, arrays, fp64)
    sorts: list[int] = []
    real = loops.sort_rows

    def counted(rows: np.ndarray) -> None:
        sorts.append(rows.shape[0])
        real(rows)

    monkeypatch.setattr(loops, "sort_rows", counted)
    described: list[int] = []
    moments = onepass.channel_moments

    def described_once(x: np.ndarray) -> np.ndarray:
        described.append(1)
        return moments(x)

    monkeypatch.setattr(onepass, "channel_moments", described_once)
    keys = {**{p: ("file", p) for p in arrays if p != "p3"}, None: ("file", "fp64")}
    with sorted_cache.kept():
        first = onepass.measure_anchor(metrics, arrays, fp64, sort_keys=keys)
        assert sum(sorts) == 4  # every row sorted once, three of them kept
        assert len(described) == 5  # channel moments: every array and fp64, once
        changed = dict(arrays, p3=(arrays["p3"] * np.float32(1.001)))  # the faulty one
        second = onepass.measure_anchor(metrics, changed, fp64, sort_keys=keys)
        assert sum(sorts) == 5  # only the row without a key sorted again
        assert len(described) == 6  # and described again
    assert first == expected
    assert second == onepass.measure_anchor(metrics, changed, fp64)  # bit for bit
