import subprocess
import sys

import numpy as np
import pytest

from anpred.analysis import (
    NOISE_FACTOR,
    AlignmentError,
    Criterion,
    OracleParams,
    Verdict,
    assess,
    consensus_oracle,
    judge_anchor,
    judge_with_all,
)
from anpred.errors import UsageError

REFERENCE = "torch"


def _judge_run(run, perturb=None, params: OracleParams | None = None) -> list[Verdict]:
    """Phase 1 per (anchor, input), phase 2 per anchor; ``perturb(anchor, captures)`` edits."""
    verdicts: list[Verdict] = []
    for anchor in run.anchors:
        evidence = []
        for input_id in run.captures:
            captures = dict(run.at(input_id, anchor))
            if perturb is not None:
                perturb(anchor, captures)
            evidence.append(
                assess(
                    anchor,
                    input_id,
                    captures,
                    captures[REFERENCE],
                    run.fp64[input_id][anchor],
                    params=params,
                )
            )
        verdicts.extend(judge_anchor(evidence, params))
    return verdicts


def _relative_error(rng: np.random.Generator, x: np.ndarray, size: float) -> np.ndarray:
    """``x`` with an exact relative L2 error of ``size`` (random signs per element)."""
    return x * (1 + size * rng.choice([-1.0, 1.0], size=x.shape))


def test_pure_fp32_noise_gives_no_findings(five_participant_run):
    verdicts = _judge_run(five_participant_run)
    assert len(verdicts) == 4 * 5 * 4  # anchors x participants x inputs
    assert [v for v in verdicts if v.finding] == []
    assert all(v and not v.pairwise for v in verdicts)
    # the noise is real: participants do differ from each other
    assert min(v.primary.value for v in verdicts if v.participant == "block4") > 1e-8


def test_perturbed_participant_is_flagged_at_that_anchor_only(five_participant_run):
    rng = np.random.default_rng(11)

    def perturb(anchor, captures):
        if anchor == "stage2":
            captures["block4"] = _relative_error(rng, captures["block4"], 1e-3)

    verdicts = _judge_run(five_participant_run, perturb)
    found = {(v.participant, v.anchor, v.input_id) for v in verdicts if v.finding}
    assert found == {("block4", "stage2", f"in{i}") for i in range(4)}
    finding = next(v for v in verdicts if v.finding)
    assert finding.primary.value == pytest.approx(1e-3, rel=1e-3)
    assert finding.exceeded == {Criterion.OUTLIER, Criterion.ABOVE_NOISE}
    assert "cosine" in finding.corroborating and "max_abs" in finding.corroborating
    # the consensus ignored the deviant: the others stay at fp32-noise distance
    others = [v for v in verdicts if v.anchor == "stage2" and v.participant != "block4"]
    assert max(v.primary.value for v in others) < 1e-6


@pytest.mark.parametrize(("size", "found"), [(1e-5, True), (1e-6, True), (3e-7, False)])
def test_sensitivity_is_set_by_the_noise_criterion(five_participant_run, size, found):
    # stage0's noise floor is ~7.5e-8 (relative L2): 1e-6 is 13x the floor, 3e-7 only 4x;
    # the 3e-7 error is an outlier of the population but within NOISE_FACTOR of the floor
    rng = np.random.default_rng(12)

    def perturb(anchor, captures):
        if anchor == "stage0":
            captures["sequential"] = _relative_error(rng, captures["sequential"], size)

    verdicts = _judge_run(five_participant_run, perturb)
    findings = {(v.participant, v.anchor) for v in verdicts if v.finding}
    assert findings == ({("sequential", "stage0")} if found else set())
    if not found:
        perturbed = [v for v in verdicts if (v.participant, v.anchor) == ("sequential", "stage0")]
        assert all(v.primary.outlier and v.unmet == {Criterion.ABOVE_NOISE} for v in perturbed)


def test_noise_factor_covers_fp32_reorderings():
    """Deviation / noise floor for one reduction in several fp32 summation orders.

    Measured (seed 5): BLAS, blocked and permuted orders stay within 1.2x the floor;
    sequential summation reaches 1.8x (1024 terms) and 4.5x (8192 terms). NOISE_FACTOR
    must leave room above all of them.
    """
    rng = np.random.default_rng(5)
    worst = 0.0
    for terms in (64, 1024, 8192):
        a = rng.standard_normal((256, terms)).astype(np.float32)
        w = rng.standard_normal((terms, 8)).astype(np.float32)
        order = rng.permutation(terms)

        def blocked(block, a=a, w=w, terms=terms):
            out = np.zeros((a.shape[0], w.shape[1]), np.float32)
            for start in range(0, terms, block):
                out += a[:, start : start + block] @ w[start : start + block]
            return out

        sequential = np.cumsum(a[:, :, None] * w[None], axis=1, dtype=np.float32)[:, -1]
        captures = {
            "blas": a @ w,
            "block16": blocked(16),
            "block256": blocked(256),
            "permuted": a[:, order] @ w[order],
            "sequential": sequential,
        }
        captures = {p: x.astype(np.float64) for p, x in captures.items()}
        fp64 = a.astype(np.float64) @ w.astype(np.float64)
        evidence = assess("a", str(terms), captures, captures["blas"], fp64)
        floor = evidence.noise_floor["rel_l2"]
        worst = max(worst, *(d.metrics["rel_l2"] / floor for d in evidence.deviations))
        assert all(judge_anchor([evidence]))
    assert worst < NOISE_FACTOR / 2


def test_two_participants_degenerate_to_a_pairwise_comparison(five_participant_run):
    run = five_participant_run
    rng = np.random.default_rng(13)
    evidence = []
    for input_id in run.captures:
        captures = {
            p: x for p, x in run.at(input_id, "stage1").items() if p in (REFERENCE, "block16")
        }
        captures["block16"] = _relative_error(rng, captures["block16"], 1e-3)
        evidence.append(
            assess("stage1", input_id, captures, captures[REFERENCE], run.fp64[input_id]["stage1"])
        )
    verdicts = judge_anchor(evidence)
    assert all(v.pairwise for v in verdicts)
    assert all(v.required == {Criterion.ABOVE_NOISE, Criterion.FARTHER_FROM_FP64} for v in verdicts)
    # both deviate equally from their midpoint; fp64 says which one is wrong
    assert {v.participant for v in verdicts if v.finding} == {"block16"}
    reference = [v for v in verdicts if v.participant == REFERENCE]
    assert all(v and Criterion.ABOVE_NOISE in v.exceeded for v in reference)
    assert all(v.unmet == {Criterion.FARTHER_FROM_FP64} for v in reference)


def test_two_clean_participants_pass(five_participant_run):
    run = five_participant_run
    captures = {p: x for p, x in run.at("in0", "stage3").items() if p in (REFERENCE, "permuted")}
    verdicts = judge_anchor(
        [assess("stage3", "in0", captures, captures[REFERENCE], run.fp64["in0"]["stage3"])]
    )
    assert all(v.pairwise and v.passed for v in verdicts)


def test_all_equal_population_flags_nothing():
    rng = np.random.default_rng(0)
    fp64 = rng.standard_normal((1, 8, 6, 6))
    fp32 = fp64.astype(np.float32).astype(np.float64)
    evidence = [
        assess("a", "0", {p: fp32.copy() for p in "abcde"}, fp32, fp64),
        # near-identical deviations (differences of 1e-12 relative): MAD ~ 0
        assess("a", "1", {p: fp32 * (1 + 1e-12 * k) for k, p in enumerate("abcde")}, fp32, fp64),
    ]
    verdicts = judge_anchor(evidence)
    assert all(verdicts)
    assert not any(v.primary.outlier for v in verdicts)
    assert all(v.primary.scale > 0 for v in verdicts)


def test_non_finite_values_are_findings_even_within_the_population():
    rng = np.random.default_rng(1)
    fp64 = rng.standard_normal((1, 4, 5))
    fp32 = fp64.astype(np.float32).astype(np.float64)
    broken = fp32.copy()
    broken[0, 1, 2] = np.nan
    captures = {"torch": fp32, "b": fp32.copy(), "c": fp32.copy(), "d": broken}
    verdicts = {v.participant: v for v in judge_anchor([assess("a", "0", captures, fp32, fp64)])}
    assert not verdicts["d"] and verdicts["d"].non_finite == 1
    assert Criterion.NON_FINITE in verdicts["d"].exceeded
    assert all(verdicts[p] for p in ("torch", "b", "c"))


def test_infinite_values_are_findings_without_floating_point_warnings():
    rng = np.random.default_rng(3)
    fp64 = rng.standard_normal((1, 4, 5))
    fp32 = fp64.astype(np.float32).astype(np.float64)
    overflowed = fp32.copy()
    overflowed[0, 0, 0] = np.inf
    negative = fp32.copy()
    negative[0, 0, 0] = -np.inf
    captures = {"torch": fp32, "b": fp32.copy(), "c": overflowed, "d": negative}
    verdicts = {v.participant: v for v in judge_anchor([assess("a", "0", captures, fp32, fp64)])}
    assert {p for p, v in verdicts.items() if v.finding} == {"c", "d"}
    assert verdicts["c"].primary.value == np.inf
    outputs = {"torch": fp32, "c": overflowed, "d": negative}
    assert not any(judgement["c"] for judgement in judge_with_all(outputs, fp32, fp64).values())


def test_noise_floor_is_the_fp32_reference_against_fp64(five_participant_run):
    run = five_participant_run
    captures = run.at("in1", "stage2")
    fp64 = run.fp64["in1"]["stage2"]
    shared = assess("stage2", "in1", captures, captures[REFERENCE], fp64)
    separate = assess("stage2", "in1", captures, captures[REFERENCE].copy(), fp64)
    # separate: the generic metrics; shared: the one-pass kernel, whose compiled loops add
    # a block's terms in their own order (a few roundings: tests/analysis/test_onepass.py)
    assert shared.noise_floor.keys() == separate.noise_floor.keys()
    for name, value in separate.noise_floor.items():
        assert shared.noise_floor[name] == pytest.approx(value, rel=1e-12), name
    torch_vs_fp64 = next(d.vs_fp64 for d in shared.deviations if d.participant == REFERENCE)
    assert shared.noise_floor == torch_vs_fp64
    relative = np.linalg.norm(captures[REFERENCE] - fp64) / np.linalg.norm(fp64)
    assert shared.noise_floor["rel_l2"] == pytest.approx(relative, rel=1e-12)


def test_distributional_metric_needs_no_element_matching():
    rng = np.random.default_rng(2)
    fp64 = rng.standard_normal((1, 3, 40))
    fp32 = fp64.astype(np.float32).astype(np.float64)
    shuffled = fp32.copy()
    shuffled[0, 1] = rng.permutation(shuffled[0, 1])  # same values, other positions
    captures = {"torch": fp32, "b": fp32.copy(), "c": fp32.copy(), "shuffled": shuffled}
    deviation = next(
        d for d in assess("a", "0", captures, fp32, fp64).deviations if d.participant == "shuffled"
    )
    assert deviation.metrics["rel_l2"] > 0.5
    assert deviation.metrics["wasserstein"] == 0.0
    assert deviation.metrics["channel_moments"] < 1e-15


def test_verdicts_carry_their_statistics(five_participant_run):
    verdict = _judge_run(five_participant_run)[0]
    stats = verdict.statistics()
    assert stats["metric"] == "rel_l2" and stats["passed"] is True
    assert stats["outlier_threshold"] == pytest.approx(
        stats["population_median"] + 3.5 * stats["scale"]
    )
    assert stats["noise_threshold"] == pytest.approx(NOISE_FACTOR * stats["noise_floor"])
    # a clean run has no candidate: the corroborating metrics are computed nowhere ...
    assert verdict.secondary == {}
    # ... unless asked for everywhere
    verdict = _judge_run(five_participant_run, params=OracleParams(metrics_scope="all"))[0]
    assert set(verdict.secondary) == {
        "max_abs",
        "max_ulp",
        "cosine",
        "wasserstein",
        "channel_moments",
    }


def test_params_choose_the_primary_metric_and_the_metric_set(five_participant_run):
    params = OracleParams(primary_metric="wasserstein", metrics=("cosine",), metrics_scope="all")
    verdict = _judge_run(five_participant_run, params=params)[0]
    assert verdict.primary.metric == "wasserstein"
    assert set(verdict.secondary) == {"cosine"}
    with pytest.raises(KeyError, match="no metric"):
        OracleParams(metrics=("nope",)).metric_names()
    with pytest.raises(UsageError, match="metrics scope must be one of candidates, all"):
        OracleParams(metrics_scope="some")


def test_usage_errors():
    x = np.zeros((1, 2))
    with pytest.raises(UsageError, match="at least two participants"):
        assess("a", "0", {"torch": x}, x, x)
    with pytest.raises(AlignmentError, match="align captures"):
        assess("a", "0", {"torch": x, "b": np.zeros((2, 1))}, x, x)
    e1 = assess("a", "0", {"torch": x, "b": x}, x, x)
    e2 = assess("b", "0", {"torch": x, "b": x}, x, x)
    with pytest.raises(UsageError, match="several anchors"):
        judge_anchor([e1, e2])


def test_oracle_behind_the_shared_method_interface(five_participant_run):
    run = five_participant_run
    rng = np.random.default_rng(14)
    outputs = dict(run.at("in0", "stage3"))
    outputs["block16"] = _relative_error(rng, outputs["block16"], 1e-3)
    verdicts = consensus_oracle(outputs, outputs[REFERENCE], run.fp64["in0"]["stage3"])
    assert {p for p, v in verdicts.items() if not v} == {"block16"}


def test_importing_analysis_imports_no_dl_library():
    code = (
        "import sys, anpred.analysis\n"
        "libs = {'torch', 'tensorflow', 'jax', 'paddle', 'onnxruntime', 'openvino'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in libs))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_distributional_consensus_is_the_median_of_the_participants_descriptors():
    # for a distributional metric the consensus is the median quantile function, not the
    # distribution of the element-wise median (which is narrower than every participant's)
    rng = np.random.default_rng(4)
    fp64 = rng.standard_normal((1, 2, 500))
    captures = {p: rng.standard_normal((1, 2, 500)) for p in ("torch", "b", "c")}
    params = OracleParams(metrics_scope="all")  # no candidate here: the floor is as large
    evidence = assess("a", "0", captures, captures["torch"], fp64, params=params)
    sorted_values = {p: np.sort(x.ravel()) for p, x in captures.items()}
    consensus = np.median(np.stack(list(sorted_values.values())), axis=0)
    iqr = np.quantile(consensus, 0.75) - np.quantile(consensus, 0.25)
    for deviation in evidence.deviations:
        expected = np.mean(np.abs(sorted_values[deviation.participant] - consensus)) / iqr
        assert deviation.metrics["wasserstein"] == pytest.approx(expected, rel=1e-12)
        assert deviation.metrics["wasserstein"] < 0.2  # same distribution, other samples
        assert deviation.metrics["rel_l2"] > 0.5  # element-wise they are unrelated


def test_a_shared_majority_error_is_visible_through_the_fp64_distances():
    # three of four participants share one 1e-3 error; the consensus follows them and the
    # accurate participant becomes the outlier: the verdict says it is closer to fp64
    rng = np.random.default_rng(5)
    fp64 = rng.standard_normal((1, 8, 30))
    fp32 = fp64.astype(np.float32).astype(np.float64)
    shared = fp32 * (1 + 1e-3 * rng.choice([-1.0, 1.0], size=fp32.shape))
    captures = {"torch": fp32, "b": shared, "c": shared.copy(), "d": shared.copy()}
    verdicts = {v.participant: v for v in judge_anchor([assess("a", "0", captures, fp32, fp64)])}
    assert verdicts["torch"].finding and verdicts["torch"].closer_to_fp64
    assert not any(verdicts[p].closer_to_fp64 for p in "bcd")
    assert verdicts["torch"].statistics()["consensus_vs_fp64"] == pytest.approx(1e-3, rel=1e-2)


def _evidence_at(run, anchor: str, params: OracleParams | None = None) -> list:
    return [
        assess(
            anchor,
            input_id,
            dict(run.at(input_id, anchor)),
            run.at(input_id, anchor)[REFERENCE],
            run.fp64[input_id][anchor],
            params=params,
        )
        for input_id in run.captures
    ]


@pytest.mark.parametrize(("factor", "found"), [(50.0, True), (5.0, False)])
def test_an_introduced_error_that_stands_out_is_a_finding(five_participant_run, factor, found):
    """Stage isolation: a stage whose own error is far above the fp32 reference's is a
    finding even when its end-to-end deviation hides in the inherited noise."""
    run = five_participant_run
    anchor = run.anchors[-1]
    evidence = _evidence_at(run, anchor)
    participants = [d.participant for d in evidence[0].deviations]
    # introduced errors of clean fp32 participants: within 2x of the reference's (the
    # largest ratio measured on clean yolov8n/yolov5n/resnet50 runs was 2.0)
    introduced = {
        (p, i): 1e-6 * (1 + 0.2 * k) for k, p in enumerate(participants) for i in run.captures
    }
    faulty = next(p for p in participants if p != REFERENCE)
    for i in run.captures:
        introduced[(faulty, i)] = factor * 1e-6
    floor = {i: introduced[(REFERENCE, i)] for i in run.captures}
    plain = judge_anchor(evidence)
    assert not any(v.finding for v in plain)
    verdicts = judge_anchor(evidence, introduced=introduced, introduced_floor=floor)
    flagged = {v.participant for v in verdicts if v.finding}
    assert flagged == ({faulty} if found else set())
    for v in verdicts:
        assert v.introduced is not None
        assert (Criterion.INTRODUCED in v.exceeded) == (found and v.participant == faulty)
        assert v.statistics()["introduced"] == introduced[(v.participant, v.input_id)]


def test_introduced_error_is_judged_with_relative_l2_resolution(five_participant_run):
    """Introduced errors are relative L2 whatever the primary metric: with ``max_ulp``
    primary (resolution 1 ULP) they are still judged against rel_l2's 2**-24."""
    run = five_participant_run
    anchor = run.anchors[-1]
    params = OracleParams(primary_metric="max_ulp")
    evidence = _evidence_at(run, anchor, params)
    participants = [d.participant for d in evidence[0].deviations]
    introduced = {
        (p, i): 1e-6 * (1 + 0.2 * k) for k, p in enumerate(participants) for i in run.captures
    }
    faulty = next(p for p in participants if p != REFERENCE)
    for i in run.captures:
        introduced[(faulty, i)] = 50e-6
    floor = dict.fromkeys(run.captures, 0.0)  # a zero floor falls back to the resolution
    verdicts = judge_anchor(evidence, params, introduced=introduced, introduced_floor=floor)
    for v in verdicts:
        assert v.primary.metric == "max_ulp"
        assert v.introduced is not None and v.introduced.metric == "rel_l2"
        assert v.introduced.noise_threshold == NOISE_FACTOR * 2.0**-24
        assert (Criterion.INTRODUCED in v.exceeded) == (v.participant == faulty)


def test_clean_introduced_errors_add_no_finding(five_participant_run):
    run = five_participant_run
    anchor = run.anchors[0]
    evidence = _evidence_at(run, anchor)
    introduced = {
        (d.participant, e.input_id): 1e-6 * (1 + 0.5 * k)
        for e in evidence
        for k, d in enumerate(e.deviations)
    }
    floor = {i: introduced[(REFERENCE, i)] for i in run.captures}
    verdicts = judge_anchor(evidence, introduced=introduced, introduced_floor=floor)
    assert [v for v in verdicts if v.finding] == []


def test_pairwise_verdicts_ignore_stage_isolation(five_participant_run):
    run = five_participant_run
    anchor = run.anchors[0]
    pair = [REFERENCE, next(p for p in run.at(next(iter(run.captures)), anchor) if p != REFERENCE)]
    evidence = [
        assess(
            anchor,
            i,
            {p: run.at(i, anchor)[p] for p in pair},
            run.at(i, anchor)[REFERENCE],
            run.fp64[i][anchor],
        )
        for i in run.captures
    ]
    introduced = {(p, i): (1e-3 if p != REFERENCE else 1e-6) for p in pair for i in run.captures}
    floor = dict.fromkeys(run.captures, 1e-6)
    verdicts = judge_anchor(evidence, introduced=introduced, introduced_floor=floor)
    assert all(v.pairwise and v.introduced is None for v in verdicts)
    assert not any(Criterion.INTRODUCED in v.exceeded for v in verdicts)
