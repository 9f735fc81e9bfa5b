"""Where the corroborating metrics are computed (issue 41): the primary metric everywhere,
the others where the oracle has a candidate, with the values they have everywhere.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from anpred.analysis import OracleParams, assess, judge_anchor, onepass
from anpred.analysis.oracle import METRICS_ALL, noise_candidates

REFERENCE = "torch"
OTHERS = ("max_abs", "max_ulp", "cosine", "wasserstein", "channel_moments")


def _captures(seed: int, shape=(1, 8, 24, 24), fault: float = 0.0) -> tuple[dict, np.ndarray]:
    """fp64 and five float32 participants within ~1e-7 of it; ``c`` off by ``fault``."""
    rng = np.random.default_rng(seed)
    fp64 = rng.standard_normal(shape)
    captures = {}
    for k, p in enumerate((REFERENCE, "a", "b", "c", "d")):
        noise = 0.0 if k == 0 else 1e-7 * rng.standard_normal(shape)
        if p == "c" and fault:
            noise = noise + fault * rng.choice([-1.0, 1.0], size=shape)
        captures[p] = (fp64 * (1 + noise)).astype(np.float32)
    return captures, fp64


def _assess_all(scope: str, faults: dict[str, float], introduced=None):
    params = OracleParams(metrics_scope=scope)
    evidence = []
    for i, fault in faults.items():
        captures, fp64 = _captures(int(i), fault=fault)
        given = None if introduced is None else introduced.get(i)
        evidence.append(
            assess("a", i, captures, captures[REFERENCE], fp64, params=params, introduced=given)
        )
    return evidence, params


@pytest.fixture(params=[True, False], ids=["compiled", "numpy"])
def path(request):
    previous = onepass.use_compiled(request.param)
    yield request.param
    onepass.use_compiled(previous)


def test_primary_everywhere_the_others_where_a_candidate_is_and_the_same_values(path):
    faults = {"0": 0.0, "1": 1e-4, "2": 0.0, "3": 0.0}  # input 1: c is far above noise
    everywhere, params_all = _assess_all(METRICS_ALL, faults)
    scoped, params = _assess_all("candidates", faults)
    for full, part in zip(everywhere, scoped, strict=True):
        candidate = part.input_id == "1"
        for d_full, d in zip(full.deviations, part.deviations, strict=True):
            # the verdict path's numbers, bit for bit
            assert d.metrics["rel_l2"] == d_full.metrics["rel_l2"]
            assert d.vs_fp64["rel_l2"] == d_full.vs_fp64["rel_l2"]
            if candidate:  # every participant of the cell, with today's values
                assert dict(d.metrics) == dict(d_full.metrics)
                assert dict(d.vs_fp64) == dict(d_full.vs_fp64)
            else:  # absent, not zero
                assert set(d.metrics) == set(d.vs_fp64) == {"rel_l2"}
        assert part.noise_floor["rel_l2"] == full.noise_floor["rel_l2"]
        assert part.consensus_vs_fp64["rel_l2"] == full.consensus_vs_fp64["rel_l2"]
        assert set(part.noise_floor) == ({"rel_l2", *OTHERS} if candidate else {"rel_l2"})
    # the verdicts are the same; a finding carries its corroborating metrics
    verdicts_all = judge_anchor(everywhere, params_all)
    verdicts = judge_anchor(scoped, params)
    for v_all, v in zip(verdicts_all, verdicts, strict=True):
        assert (v.finding, v.exceeded, v.primary) == (v_all.finding, v_all.exceeded, v_all.primary)
        if v.input_id != "1":
            assert v.secondary == {}
    found = [v for v in verdicts if v.finding]
    assert [(v.participant, v.input_id) for v in found] == [("c", "1")]
    assert set(found[0].secondary) == set(OTHERS) and found[0].corroborating
    # every finding is a candidate of noise_candidates, and its cell computed everything
    assert {("c", "1")} <= noise_candidates(scoped, params)


def test_an_introduced_error_above_its_noise_makes_a_candidate():
    faults = dict.fromkeys(("0", "1", "2"), 0.0)
    floor = 1e-6
    introduced = {i: {p: floor for p in (REFERENCE, "a", "b", "c", "d")} for i in faults}
    introduced["2"]["b"] = 100 * floor  # far above 10x the fp32 reference's
    scoped, params = _assess_all("candidates", faults, introduced)
    computed = {e.input_id: set(e.deviations[0].metrics) for e in scoped}
    assert computed == {"0": {"rel_l2"}, "1": {"rel_l2"}, "2": {"rel_l2", *OTHERS}}


def test_non_finite_values_make_a_candidate():
    captures, fp64 = _captures(7)
    captures["d"] = captures["d"].copy()
    captures["d"][0, 0, 0, 0] = np.nan
    evidence = assess("a", "0", captures, captures[REFERENCE], fp64)
    d = next(d for d in evidence.deviations if d.participant == "d")
    assert d.non_finite == 1 and set(d.metrics) == {"rel_l2", *OTHERS}
    assert math.isnan(d.metrics["wasserstein"])  # computed: NaN by the metric's convention


def test_a_reduced_class_computes_its_metrics_where_a_member_is_a_candidate():
    captures, fp64 = _captures(9)
    rng = np.random.default_rng(10)
    ideal = (fp64 * (1 + 4e-3 * rng.standard_normal(fp64.shape))).astype(np.float32)
    captures["torch[ideal-bf16]"] = ideal
    captures["torch[bf16]"] = (fp64 * (1 + 4e-3 * rng.standard_normal(fp64.shape))).astype(
        np.float32
    )
    classes = {"torch[bf16]": "bf16"}
    clean = assess("a", "0", captures, captures[REFERENCE], fp64, classes=classes)
    bf16 = next(d for d in clean.deviations if d.precision == "bf16")
    assert set(bf16.metrics) == {"rel_l2"} and set(clean.class_floors["bf16"]) == {"rel_l2"}
    captures["torch[bf16]"] = (fp64 * (1 + 0.1 * rng.standard_normal(fp64.shape))).astype(
        np.float32
    )  # 25x the ideal's error: above the class factor
    faulty = assess("a", "0", captures, captures[REFERENCE], fp64, classes=classes)
    bf16 = next(d for d in faulty.deviations if d.precision == "bf16")
    assert set(bf16.metrics) == {"rel_l2", *OTHERS}
    assert set(faulty.class_floors["bf16"]) == {"rel_l2", *OTHERS}
    # the fp32 class had no candidate: its corroborating metrics stay absent
    assert all(set(d.metrics) == {"rel_l2"} for d in faulty.deviations if d.precision == "fp32")
