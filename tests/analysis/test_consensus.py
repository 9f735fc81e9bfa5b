import warnings

import numpy as np
import pytest

from anpred.analysis import elementwise_median


@pytest.mark.parametrize("count", range(1, 15))
def test_median_equals_numpy_bitwise(count):
    rng = np.random.default_rng(count)
    arrays = [rng.standard_normal((3, 50)) for _ in range(count)]
    arrays[0][0, :5] = np.inf  # infinities order like any other value
    expected = np.median(np.stack(arrays), axis=0)
    assert np.array_equal(elementwise_median(arrays), expected)


def test_inputs_are_not_modified():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(20) for _ in range(5)]
    copies = [a.copy() for a in arrays]
    elementwise_median(arrays)
    assert all(np.array_equal(a, b) for a, b in zip(arrays, copies, strict=True))


def test_nan_of_one_participant_is_ignored_without_warnings():
    a = np.array([1.0, np.nan, np.nan])
    b = np.array([2.0, 5.0, np.nan])
    c = np.array([4.0, 7.0, np.nan])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = elementwise_median([a, b, c])
    assert np.array_equal(result[:2], [2.0, 6.0])
    assert np.isnan(result[2])


def test_a_deviant_among_five_does_not_move_the_consensus():
    # honest participants differ by at most one float32 ulp at every element (fp32 noise)
    rng = np.random.default_rng(7)
    base = rng.standard_normal(100_000).astype(np.float32)
    up = np.nextafter(base, np.float32(np.inf))
    honest = [np.where(rng.random(base.size) < 0.5, base, up).astype(np.float64) for _ in range(5)]
    deviant = base.astype(np.float64) * (1 + 1e-3 * rng.choice([-1.0, 1.0], size=base.size))
    clean = elementwise_median(honest)
    with_deviant = elementwise_median([*honest[:4], deviant])
    ulp = (up - base).astype(np.float64)
    assert np.all(np.abs(with_deviant - clean) <= ulp)
    # the deviant's 1e-3 error is not in the consensus (a mean would carry 2e-4 of it)
    assert np.max(np.abs(with_deviant - clean) / np.abs(clean)) < 1.2e-7
    mean = np.mean([*honest[:4], deviant], axis=0)
    assert np.max(np.abs(mean - clean) / np.abs(clean)) > 1e-4


def test_shapes_must_agree():
    with pytest.raises(ValueError, match="differ in shape"):
        elementwise_median([np.zeros(2), np.zeros(3)])
    with pytest.raises(ValueError, match="at least one"):
        elementwise_median([])


@pytest.mark.parametrize("count", range(2, 10))
def test_pruned_median_networks_select_the_middle_of_every_0_1_input(count):
    # 0-1 principle: a comparator network that selects the middle of every 0/1 input
    # selects it for any input
    from itertools import product

    from anpred.analysis.consensus import median_network, sorting_network

    middle = [count // 2] if count % 2 else [count // 2 - 1, count // 2]
    for network in (sorting_network(count), [(i, j) for i, j, *_ in median_network(count)]):
        for bits in product((0, 1), repeat=count):
            wires = list(bits)
            for i, j in network:
                wires[i], wires[j] = min(wires[i], wires[j]), max(wires[i], wires[j])
            assert [wires[k] for k in middle] == [sorted(bits)[k] for k in middle]


@pytest.mark.parametrize("count", [2, 3, 4, 5, 6, 7, 8])
def test_float32_inputs_give_the_float64_median_bitwise(count):
    rng = np.random.default_rng(count)
    arrays = [rng.standard_normal(70_001).astype(np.float32) for _ in range(count)]
    expected = np.median(np.stack(arrays).astype(np.float64), axis=0)
    got = elementwise_median(arrays)
    assert got.dtype == np.float64
    assert np.array_equal(got, expected)
