"""Per-anchor calibrated noise thresholds (issue 14, item 2): populations with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from anpred.analysis import OracleParams, assess, judge_anchor
from anpred.analysis.metrics import RELATIVE_L2_RESOLUTION
from anpred.analysis.oracle import FIXED_RULE
from anpred.calibration.rule import (
    MIN_FACTOR,
    MIN_SAMPLES,
    RULE,
    AnchorThreshold,
    Calibration,
    calibrate_rows,
    fit_threshold,
    noise_ratio,
    tolerance_factor,
)
from anpred.errors import UsageError

REFERENCE = "torch"


def _shared_helpers():
    """tests/analysis's conftest (``conftest`` alone may name another folder's module)."""
    import importlib.util
    import sys
    from pathlib import Path

    name = "anpred_tests_analysis_conftest"
    if name not in sys.modules:
        conftest = Path(__file__).parents[1] / "analysis" / "conftest.py"
        spec = importlib.util.spec_from_file_location(name, conftest)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while being defined
        spec.loader.exec_module(module)
    return sys.modules[name]


make_run = _shared_helpers().make_run
MATMULS = _shared_helpers().MATMULS


@pytest.mark.parametrize(
    ("n", "coverage", "confidence", "expected"),
    # one-sided normal tolerance factors, Natrella, Experimental Statistics (NBS Handbook
    # 91, 1963), table A-7; also in NIST/SEMATECH e-Handbook §7.2.6.3
    [(10, 0.99, 0.95, 3.981), (20, 0.95, 0.95, 2.396), (6, 0.90, 0.90, 2.494)],
)
def test_tolerance_factor_matches_the_published_tables(n, coverage, confidence, expected):
    assert tolerance_factor(n, 1 - coverage, confidence) == pytest.approx(expected, abs=2e-3)


def test_tolerance_factor_refuses_what_has_no_bound():
    with pytest.raises(UsageError):
        tolerance_factor(1, 1e-3, 0.9)
    with pytest.raises(UsageError):
        tolerance_factor(10, 0.0, 0.9)


def test_the_bound_covers_the_stated_quantile_with_the_stated_confidence():
    """Log-normal ratios of known spread: the bound exceeds the true 1 − α quantile in a
    share γ of calibration samples (2000 samples: binomial sd 0.0067)."""
    rng = np.random.default_rng(3)
    sigma, mu, n, alpha, gamma = 0.4, -0.3, 18, 1e-3, 0.9
    true_quantile = math.exp(mu + sigma * 3.090232)  # z_{0.999}
    covered = [
        fit_threshold(np.exp(rng.normal(mu, sigma, n)), alpha, gamma).factor >= true_quantile
        for _ in range(2000)
    ]
    assert np.mean(covered) == pytest.approx(gamma, abs=0.03)


def test_a_tight_population_gets_a_tight_threshold_and_a_wide_one_a_wide_one():
    rng = np.random.default_rng(4)
    tight = fit_threshold(np.exp(rng.normal(0.0, 0.05, 24)))
    wide = fit_threshold(np.exp(rng.normal(0.0, 0.8, 24)))
    k = tolerance_factor(24, 1e-3, 0.9)
    assert tight.factor == pytest.approx(math.exp(tight.mean_log + k * tight.sd_log))
    assert 1.0 < tight.factor < 1.5 < 10 < wide.factor
    assert tight.n == wide.n == 24


def test_too_few_samples_keep_the_fixed_factor_and_the_floor_holds():
    assert fit_threshold([1.0] * (MIN_SAMPLES - 1)).factor is None
    assert fit_threshold([0.1, 0.11, 0.1, 0.12, 0.1, 0.11]).factor == MIN_FACTOR
    # non-finite and non-positive ratios are not samples
    assert fit_threshold([math.nan, math.inf, 0.0, 1.0, 1.0]).n == 2


def test_noise_ratio_clips_at_the_resolution():
    assert noise_ratio(1e-12, 1e-9, 1e-8) == 1.0
    assert noise_ratio(4e-7, 1e-7, 1e-8) == pytest.approx(4.0)
    assert math.isnan(noise_ratio(math.nan, 1e-7, 1e-8))


def _evidence(run, anchor, inputs, perturb=None):
    evidence = []
    for input_id in inputs:
        captures = dict(run.at(input_id, anchor))
        if perturb is not None:
            perturb(anchor, captures)
        evidence.append(
            assess(anchor, input_id, captures, captures[REFERENCE], run.fp64[input_id][anchor])
        )
    return evidence


def _judge(run, inputs, params, perturb=None):
    verdicts = []
    for anchor in run.anchors:
        verdicts.extend(judge_anchor(_evidence(run, anchor, inputs, perturb), params))
    return verdicts


def _rows(verdicts):
    return [
        {
            "participant": v.participant,
            "anchor": v.anchor,
            "input": v.input_id,
            "rel_l2": v.primary.value,
            "noise_floor": v.primary.noise_floor,
            "introduced": None,
            "pairwise": v.pairwise,
        }
        for v in verdicts
    ]


@pytest.fixture(scope="module")
def eight_input_run():
    # the same weights as the shared fixture (make_run draws weights first); in0-in3 are the
    # judged inputs, in4-in7 the calibration inputs
    return make_run(tuple(MATMULS), inputs=8)


@pytest.fixture(scope="module")
def calibration(eight_input_run):
    calibrating = [f"in{i}" for i in range(4, 8)]
    clean = _judge(eight_input_run, calibrating, OracleParams())
    return calibrate_rows(
        _rows(clean), REFERENCE, resolution=RELATIVE_L2_RESOLUTION, model="synthetic"
    )


def test_calibration_on_other_inputs_flags_no_clean_cell(eight_input_run, calibration):
    assert set(calibration.inputs) == {"in4", "in5", "in6", "in7"}
    assert all(t.n == 20 for t in calibration.anchors.values())  # 5 participants x 4 inputs
    params = OracleParams(calibration=calibration)
    verdicts = _judge(eight_input_run, [f"in{i}" for i in range(4)], params)
    assert [v for v in verdicts if v.finding] == []
    # the thresholds are the calibrated ones, below the fixed factor (reorderings are tight)
    v = next(v for v in verdicts if v.anchor == "stage0")
    assert v.primary.noise_threshold == pytest.approx(
        calibration.factor("stage0") * max(v.primary.noise_floor, RELATIVE_L2_RESOLUTION)
    )
    assert all(MIN_FACTOR <= t.factor < 10 for t in calibration.anchors.values())


def test_calibration_closes_the_blind_band(eight_input_run, calibration):
    """A 4x-floor error at stage0 is an outlier that the fixed factor 10 misses (see
    test_oracle.py::test_sensitivity_is_set_by_the_noise_criterion); the calibrated
    threshold, learnt on other inputs, flags it and nothing else."""
    rng = np.random.default_rng(12)

    def perturb(anchor, captures):
        if anchor == "stage0":
            x = captures["sequential"]
            captures["sequential"] = x * (1 + 3e-7 * rng.choice([-1.0, 1.0], size=x.shape))

    judged = [f"in{i}" for i in range(4)]
    fixed = _judge(eight_input_run, judged, OracleParams(), perturb)
    assert not any(v.finding for v in fixed)
    calibrated = _judge(eight_input_run, judged, OracleParams(calibration=calibration), perturb)
    found = {(v.participant, v.anchor, v.input_id) for v in calibrated if v.finding}
    assert found == {("sequential", "stage0", i) for i in judged}


def test_anchors_without_a_calibrated_factor_use_the_fixed_one():
    calibration = Calibration(anchors={"a": AnchorThreshold(2.5, 24)})
    params = OracleParams(calibration=calibration)
    assert params.factor("a") == 2.5 and params.factor("b") == params.noise_factor
    assert params.introduced_factor("a") == params.noise_factor
    assert params.threshold_rule == RULE and OracleParams().threshold_rule == FIXED_RULE


def test_calibration_round_trips_and_refuses_another_version(calibration):
    again = Calibration.from_dict(calibration.to_dict())
    assert again == calibration
    record = calibration.to_dict() | {"version": 99}
    with pytest.raises(UsageError, match="version 99"):
        Calibration.from_dict(record)
    with pytest.raises(UsageError, match="malformed"):
        Calibration.from_dict({"rule": RULE, "version": 1, "anchors": []})


def test_pairwise_rows_cannot_calibrate():
    rows = [{"participant": "a", "anchor": "x", "input": "0", "rel_l2": 1.0, "pairwise": True}]
    with pytest.raises(UsageError, match="three or more"):
        calibrate_rows(rows, "a", resolution=1e-8)


def test_introduced_errors_get_their_own_factor():
    rng = np.random.default_rng(6)
    rows = []
    for i in range(4):
        rows.append(
            {
                "participant": "ref",
                "anchor": "s",
                "input": str(i),
                "rel_l2": 1e-7,
                "noise_floor": 1e-7,
                "introduced": 1e-6,
                "pairwise": False,
            }
        )
        for p in ("a", "b", "c"):
            rows.append(
                {
                    "participant": p,
                    "anchor": "s",
                    "input": str(i),
                    "rel_l2": 1e-7,
                    "noise_floor": 1e-7,
                    "introduced": 1e-6 * math.exp(rng.normal(0, 0.2)),
                    "pairwise": False,
                }
            )
    cal = calibrate_rows(rows, "ref", resolution=1e-8)
    assert cal.introduced["s"].n == 12  # the reference's own ratio (1) is left out
    assert 1.0 < cal.introduced_factor("s") < 10


def test_a_reduced_class_is_calibrated_from_its_ratios_to_its_ideal() -> None:
    from anpred.analysis.oracle import CLASS_FACTOR, OracleParams

    rng = np.random.default_rng(5)
    rows = []
    for i in range(4):
        for p in ("torch", "onnxruntime", "jax"):
            rows.append({"participant": p, "anchor": "a", "input": f"i{i}", "rel_l2": 1e-7,
                         "noise_floor": 1e-7, "introduced": 1e-7, "pairwise": False})
        for p in ("torch[bf16]", "jax[bf16]", "tensorflow[bf16]"):
            ratio = float(rng.uniform(0.9, 1.3))  # clean bf16 members: ~the ideal's error
            rows.append({"participant": p, "anchor": "a", "input": f"i{i}",
                         "rel_l2": 4e-3 * ratio, "noise_floor": 4e-3, "introduced": 2e-3,
                         "introduced_floor": 2e-3, "pairwise": False, "precision": "bf16"})
    cal = calibrate_rows(rows, "torch", resolution=1e-12)
    factor = cal.class_factor("bf16", "a")
    assert factor is not None and 1.3 < factor < CLASS_FACTOR * 2
    assert cal.class_factor("bf16", "a", introduced=True) == pytest.approx(1.0)
    assert cal.class_factor("fp16", "a") is None
    params = OracleParams(calibration=cal)
    assert params.factor_of("bf16", "a") == factor
    assert params.factor_of("fp16", "a") == CLASS_FACTOR
    assert Calibration.from_dict(cal.to_dict()).classes == cal.classes
    # the fp32 factors are learnt from the fp32 rows alone
    assert cal.factor("a") == calibrate_rows(rows[:0] + [r for r in rows if "precision" not in r],
                                             "torch", resolution=1e-12).factor("a")
