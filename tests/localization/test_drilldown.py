"""Drill-down judgement on synthetic populations: which operator is named, and why."""

from __future__ import annotations

import numpy as np

from anpred.analysis.oracle import OracleParams, assess, judge_anchor
from anpred.localization.drilldown import OpInfo, drill_targets, judge_target
from anpred.participants import REFERENCE32
from anpred.store.summary_records import Finding

NAMES = [REFERENCE32, "onnxruntime", "openvino", "jax", "faulty"]
INPUTS = ["a", "b"]
#: fp32-sized relative noise of clean participants (the unit roundoff is 6e-8).
NOISE = 1e-7


def _verdicts(faulty_op: int | None, n_ops: int = 4, fault: float = 4e-3, chain: bool = True):
    """Verdicts of ``n_ops`` operators: the faulty participant introduces ``fault`` relative
    error at operator ``faulty_op`` (and carries it to the later ones in the chain).
    """
    rng = np.random.default_rng(0)
    verdicts = {}
    for k in range(n_ops):
        key = f"op{k + 1:04d}"
        evidence, introduced = [], {}
        for i in INPUTS:
            fp64 = rng.standard_normal(256)
            captures = {}
            for p in NAMES:
                own = fault if p == "faulty" and k == faulty_op else NOISE
                carried = fault if p == "faulty" and faulty_op is not None and k > faulty_op else 0
                rel = own + (carried if chain else 0.0)
                captures[p] = fp64 * (1 + rel * rng.standard_normal(256))
                introduced[(p, i)] = own * (1 + 0.1 * rng.random())
            evidence.append(assess(key, i, captures, captures[REFERENCE32], fp64))
        floor = {i: introduced[(REFERENCE32, i)] for i in INPUTS}
        for v in judge_anchor(
            evidence, OracleParams(), introduced=introduced, introduced_floor=floor
        ):
            verdicts[(v.participant, v.anchor, v.input_id)] = v
    ops = [OpInfo(f"op{k + 1:04d}", f"/n{k}", "Conv", f"m.{k}", "s") for k in range(n_ops)]
    return ops, verdicts


def test_the_operator_that_introduces_the_error_is_named_not_its_successors() -> None:
    ops, verdicts = _verdicts(faulty_op=2)
    target = judge_target("faulty", "s", ops, verdicts, INPUTS)
    assert target.named == "op0003"
    assert target.basis == "introduced"
    # the later operator inherits the error (chain finding) but introduces none
    last = target.ops[3]
    assert last.finding and not last.stands_out
    assert [o.stands_out for o in target.ops] == [False, False, True, False]
    assert target.named_op is not None and target.named_op.node == "/n2"


def test_a_clean_participant_gets_no_operator() -> None:
    ops, verdicts = _verdicts(faulty_op=2)
    target = judge_target("openvino", "s", ops, verdicts, INPUTS)
    assert target.named is None
    assert "stands out" in target.reason


def test_without_a_capture_the_reason_says_so() -> None:
    ops, verdicts = _verdicts(faulty_op=1)
    target = judge_target("paddle", "s", ops, verdicts, INPUTS)
    assert target.named is None and "no drill-down capture" in target.reason


def test_stages_drilled_are_emergence_and_introduced_ones() -> None:
    def finding(p: str, anchor: str, i: str, exceeded: str) -> Finding:
        return Finding(p, anchor, i, {"exceeded": exceeded})

    anchors = ["s1", "s2", "s3", "output"]
    findings = [
        finding("faulty", "s2", "a", "above_noise,introduced,outlier"),
        finding("faulty", "s3", "a", "above_noise,outlier"),  # inherited: not drilled
        finding("faulty", "output", "a", "above_noise,outlier"),
        finding("faulty", "s3", "b", "above_noise,outlier"),  # emergence on input b
        finding("other", "output", "a", "above_noise,introduced,outlier"),
    ]
    assert drill_targets(findings, anchors) == {"faulty": ["s2", "s3"], "other": ["output"]}
    assert drill_targets(findings, anchors, max_stages=1) == {
        "faulty": ["s2"],
        "other": ["output"],
    }
    assert drill_targets([], anchors) == {}


def test_with_two_participants_the_first_flagged_operator_is_named_by_finding() -> None:
    rng = np.random.default_rng(3)
    verdicts = {}
    for k, rel in enumerate([1e-7, 4e-3]):
        evidence = []
        for i in INPUTS:
            fp64 = rng.standard_normal(256)
            captures = {
                REFERENCE32: fp64 * (1 + NOISE * rng.standard_normal(256)),
                "faulty": fp64 * (1 + rel * rng.standard_normal(256)),
            }
            evidence.append(assess(f"op{k + 1:04d}", i, captures, captures[REFERENCE32], fp64))
        for v in judge_anchor(evidence, OracleParams()):
            verdicts[(v.participant, v.anchor, v.input_id)] = v
    ops = [OpInfo(f"op{k + 1:04d}", f"/n{k}", "Mul", None, "s") for k in range(2)]
    target = judge_target("faulty", "s", ops, verdicts, INPUTS)
    assert (target.named, target.basis) == ("op0002", "finding")
    clean = judge_target(REFERENCE32, "s", ops, verdicts, INPUTS)
    assert clean.named is None and "pairwise" in clean.reason
