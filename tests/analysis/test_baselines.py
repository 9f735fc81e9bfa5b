import math

import numpy as np
import pytest

from anpred.analysis import (
    cradle_dmad,
    dynamo_same,
    get_method,
    judge_with_all,
    method_names,
    polygraphy_allclose,
)
from anpred.analysis.baselines import _median, dynamo_multiplier
from anpred.analysis.methods import register_method


def _one(method, output, reference, fp64=None, **kwargs):
    reference = np.asarray(reference, dtype=np.float64)
    fp64 = reference if fp64 is None else np.asarray(fp64, dtype=np.float64)
    outputs = {"p": np.asarray(output, dtype=np.float64)}
    return method(outputs, reference, fp64, **kwargs)["p"]


@pytest.mark.parametrize(
    ("reference", "difference", "passed"),
    [
        (1e-6, 2e-5, False),  # abs 2e-5 > atol and rel 20 > rtol: mismatch
        (100.0, 5e-4, True),  # abs > atol but rel 5e-6 <= rtol
        (1e-7, 5e-6, True),  # rel 50 > rtol but abs <= atol
        (1.0, 7e-6, True),  # both within
        (0.0, 2e-5, False),  # zero reference: epsilon keeps rel finite and huge
    ],
)
def test_polygraphy_fails_only_when_both_tolerances_are_exceeded(reference, difference, passed):
    verdict = _one(polygraphy_allclose, [reference + difference, 3.0], [reference, 3.0])
    assert bool(verdict) is passed
    assert verdict.statistics()["mismatches"] == (0 if passed else 1)
    assert verdict.stats["max_absdiff"] == pytest.approx(difference)


def test_polygraphy_nan_and_statistics():
    verdict = _one(polygraphy_allclose, [np.nan, 1.0], [1.0, 1.0])
    assert not verdict
    verdict = _one(polygraphy_allclose, [2.0, 1.0], [1.0, 4.0], atol=10.0, rtol=10.0)
    assert verdict and verdict.stats["max_reldiff"] == 1.0  # |2-1|/1 and |1-4|/4
    assert verdict.stats["mean_reldiff"] == 0.875 and verdict.stats["mean_absdiff"] == 2.0
    # a difference equal to both tolerances is not greater than them: passes
    assert _one(polygraphy_allclose, [1.5], [1.0], atol=0.5, rtol=0.5)
    assert not _one(polygraphy_allclose, [1.5], [1.0], atol=0.25, rtol=0.25)


def test_max_abs_levels_are_separate_baselines():
    names = ("max_abs_1e-3", "max_abs_1e-4", "max_abs_1e-5")
    assert set(names) <= set(method_names())
    results = {n: _one(get_method(n), [1.0 + 5e-4, 2.0], [1.0, 2.0]) for n in names}
    assert [bool(results[n]) for n in names] == [True, False, False]
    assert results["max_abs_1e-4"].stats["max_absdiff"] == pytest.approx(5e-4)
    assert not _one(get_method("max_abs_1e-3"), [np.nan], [0.0])


def test_cradle_dmad_formula():
    truth = np.zeros(4)
    reference = np.full(4, 1.0)  # δ(O2, G) = 1
    verdict = _one(cradle_dmad, np.full(4, 3.0), reference, truth)  # δ(O1, G) = 3
    assert verdict.stats["d_mad"] == pytest.approx(abs(3 - 1) / (3 + 1))
    assert not verdict  # 0.5 > T_MAD
    assert _one(cradle_dmad, np.full(4, 1.2), reference, truth)  # 0.2/2.2 = 0.09
    assert _one(cradle_dmad, [-1.0, 1.0, -1.0, 1.0], reference, truth).stats["d_mad"] == 0.0
    assert _one(cradle_dmad, truth, truth, truth).stats["d_mad"] == 0.0  # 0/0
    assert not _one(cradle_dmad, np.full(4, 1.2), reference, truth, t_mad=0.05)


def test_dynamo_passes_allclose_outputs_without_fp64():
    reference = np.linspace(-1, 1, 2000)
    fp64 = reference + 1.0  # far away, but allclose(ref, res) comes first
    verdict = _one(dynamo_same, reference + 5e-5, reference, fp64)
    assert verdict and verdict.stats["allclose"]


def test_dynamo_rmse_rule_with_multiplier_two():
    rng = np.random.default_rng(0)
    fp64 = rng.standard_normal(2000)
    reference = fp64 + 1e-3 * rng.choice([-1.0, 1.0], size=2000)  # RMSE(ref, fp64) = 1e-3
    assert dynamo_multiplier(fp64, 1e-4) == 2.0
    threshold = 2.0 * 1e-3 + 1e-5
    within = fp64 + 0.999 * threshold * rng.choice([-1.0, 1.0], size=2000)
    beyond = fp64 + 1.001 * threshold * rng.choice([-1.0, 1.0], size=2000)
    passed = _one(dynamo_same, within, reference, fp64)
    assert passed and not passed.stats["allclose"]
    assert passed.stats["threshold"] == pytest.approx(threshold)
    assert passed.stats["rmse_participant_fp64"] == pytest.approx(0.999 * threshold)
    assert not _one(dynamo_same, beyond, reference, fp64)


def test_dynamo_uses_multiplier_three_for_small_and_1x1_outputs():
    assert dynamo_multiplier(np.zeros(999), 1e-4) == 3.0
    assert dynamo_multiplier(np.zeros((8, 256, 1, 1)), 1e-4) == 3.0
    assert dynamo_multiplier(np.zeros(5000), 2e-2) == 3.0
    fp64 = np.zeros(100)
    reference = np.full(100, 1e-3)
    output = np.full(100, 2.5e-3)  # 2.5x the reference's error: passes only with 3.0
    assert _one(dynamo_same, output, reference, fp64)
    assert not _one(dynamo_same, output, reference, fp64, multiplier=2.0)


def test_dynamo_nan_handling():
    fp64 = np.linspace(1, 2, 2000)
    reference = fp64.copy()
    reference[0] = np.nan  # the fp32 reference broke; the participant did not
    assert _one(dynamo_same, fp64 + 1e-3, reference, fp64)  # NaN rescue (within 4e-2)
    broken = fp64.copy()
    broken[3] = np.nan
    assert not _one(dynamo_same, broken, fp64, fp64)


def test_all_methods_share_one_interface_and_loop():
    rng = np.random.default_rng(1)
    fp64 = rng.standard_normal((1, 84, 50))
    reference = fp64.astype(np.float32).astype(np.float64)
    outputs = {
        "torch": reference,
        "ort": reference * (1 + 1e-7 * rng.standard_normal(reference.shape)),
        "tf": reference * (1 + 2e-7 * rng.standard_normal(reference.shape)),
        "bad": reference * (1 + 1e-2 * rng.standard_normal(reference.shape)),
    }
    results = judge_with_all(outputs, reference, fp64)
    assert (
        set(results)
        == set(method_names())
        >= {
            "anpred_oracle",
            "polygraphy_allclose",
            "cradle_dmad",
            "dynamo_same",
        }
    )
    for method, verdicts in results.items():
        assert set(verdicts) == set(outputs), method
        for verdict in verdicts.values():
            assert bool(verdict) is verdict.passed
            assert verdict.statistics()["passed"] is verdict.passed
        assert not verdicts["bad"], method  # a 1e-2 relative error fails every method
        assert verdicts["torch"], method  # the reference never fails against itself


def test_duplicate_method_registration_is_an_error():
    with pytest.raises(ValueError, match="registered twice"):
        register_method("dynamo_same")(dynamo_same)
    with pytest.raises(KeyError, match="no method"):
        get_method("nope")
    assert math.isfinite(len(method_names()))


@pytest.mark.parametrize("size", [1, 2, 3, 4, 7, 10, 1001, 4096])
def test_median_is_bitwise_numpys(size: int) -> None:
    rng = np.random.default_rng(size)
    for _ in range(20):
        # absolute differences: ties (many zeros), spread over decades, odd and even sizes
        values = np.abs(rng.standard_normal(size) * rng.choice([0.0, 1e-9, 1.0, 1e30], size))
        assert _median(values) == float(np.median(values))
        assert _median(values.reshape(1, -1)) == float(np.median(values))
    values = np.abs(rng.standard_normal(size))
    values[-1] = np.inf
    assert _median(values) == float(np.median(values))
    values[0] = np.nan
    assert math.isnan(_median(values))


def _numba_or_skip():
    from anpred.analysis import onepass

    if onepass.kernels() is None:
        pytest.skip("numba is not installed")
    from anpred.analysis import compiled_outputs

    return compiled_outputs


def _outputs(rng, shape):
    """Outputs as the analysis hands them over: float32 values as float64, with the
    corners a baseline must get right (zeros in the reference, NaN, inf, exact ties)."""
    fp64 = rng.standard_normal(shape) * 100
    fp32 = fp64.astype(np.float32).astype(np.float64)
    fp32.reshape(-1)[: min(5, fp32.size - 1)] = 0.0
    outputs = {"ref": fp32.copy()}
    for k, scale in enumerate((1e-7, 1e-5, 1e-3)):
        noisy = fp32 + rng.standard_normal(shape) * scale * np.abs(fp32)
        outputs[f"p{k}"] = noisy.astype(np.float32).astype(np.float64)
    if fp32.size:
        odd = outputs["p2"].copy()
        odd.reshape(-1)[-1] = np.inf
        outputs["inf"] = odd
        odd = odd.copy()
        odd.reshape(-1)[0] = np.nan
        outputs["nan"] = odd
    return outputs, fp32, fp64


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("shape", [(1, 84, 8400), (2, 5), (1,), (3, 1, 1), (0,)])
def test_the_compiled_baselines_give_numpys_numbers(shape) -> None:
    from anpred.analysis import onepass

    _numba_or_skip()
    rng = np.random.default_rng(len(shape))
    outputs, fp32, fp64 = _outputs(rng, shape)
    previous = onepass.use_compiled(False)
    try:
        numpy_path = judge_with_all(outputs, fp32, fp64)
        onepass.use_compiled(True)
        compiled = judge_with_all(outputs, fp32, fp64)
    finally:
        onepass.use_compiled(previous)
    for method, per in numpy_path.items():
        for participant, verdict in per.items():
            got = compiled[method][participant].statistics()
            expected = verdict.statistics()
            assert got.keys() == expected.keys()
            for key, value in expected.items():  # bit for bit, and the same types
                assert _same(got[key], value), (method, participant, key, got[key], value)


@pytest.mark.parametrize("shape", [(1, 84, 8400), (2, 5), (1,), (3, 1, 1), (0,)])
@pytest.mark.parametrize("wanted", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize("narrow", [True, False], ids=["float32", "float64"])
def test_judging_together_gives_every_baselines_own_numbers(shape, wanted, narrow) -> None:
    """judge_baselines shares max |a − b|, the fp64 errors and the fp32 reference's own
    numbers among the baselines, and hands float32 outputs to the compiled loops as they
    are: every statistic bit for bit what each baseline gives on its own."""
    from anpred.analysis import onepass
    from anpred.analysis.baselines import judge_baselines

    if wanted:
        _numba_or_skip()
    rng = np.random.default_rng(len(shape))
    outputs, fp32, fp64 = _outputs(rng, shape)
    names = [n for n in method_names() if n != "anpred_oracle"]
    previous = onepass.use_compiled(wanted)
    try:
        expected = judge_with_all(outputs, outputs["ref"], fp64, names)
        given = {p: x.astype(np.float32) for p, x in outputs.items()} if narrow else outputs
        for reference in (given["ref"], fp32.astype(np.float32) if narrow else fp32.copy()):
            # the fp32 reference judged (the same array) or not among the outputs
            judged = judge_baselines(given, reference, fp64, names)
            assert list(judged) == names
            for method, per in expected.items():
                assert list(judged[method]) == list(per)
                for participant, verdict in per.items():
                    got = judged[method][participant].statistics()
                    for key, value in verdict.statistics().items():
                        assert _same(got[key], value), (method, participant, key)
    finally:
        onepass.use_compiled(previous)


@pytest.mark.parametrize("wanted", [True, False], ids=["compiled", "numpy"])
def test_the_median_of_magnitudes_is_numpys(wanted) -> None:
    from anpred.analysis import onepass
    from anpred.analysis.baselines import _magnitude_median

    if wanted:
        _numba_or_skip()
    rng = np.random.default_rng(5)
    previous = onepass.use_compiled(wanted)
    try:
        for size in (1, 2, 3, 7, 10, 4096, 100_001):
            for _ in range(10):
                # ties (zeros, one value repeated, most of them equal), spread over decades,
                # subnormals, inf
                scale = rng.choice([0.0, 1e-310, 1e-300, 1.0, 1e300, np.inf], size)
                values = np.abs(rng.standard_normal(size) * scale)
                values[: rng.integers(0, size + 1)] = rng.choice([0.0, 3.5])
                expected = float(np.median(values))
                got = _magnitude_median(values.copy(), float(np.max(values)))
                assert got == expected and np.signbit(got) == np.signbit(expected)
        assert _magnitude_median(np.zeros(4), 0.0) == 0.0
        assert math.isnan(_magnitude_median(np.array([1.0, np.nan]), math.nan))
    finally:
        onepass.use_compiled(previous)
