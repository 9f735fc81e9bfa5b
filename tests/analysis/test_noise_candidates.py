"""``noise_candidates``: judged one input at a time, a superset of ``judge_anchor``'s findings
over all inputs (what a run in chunks keeps before the rest of its inputs exist)."""

from __future__ import annotations

import numpy as np
import pytest

from anpred.analysis.oracle import (
    AnchorEvidence,
    Deviation,
    OracleParams,
    judge_anchor,
    noise_candidates,
)

PARTICIPANTS = ("torch", "onnxruntime", "openvino", "tensorflow", "jax")


def _evidence(rng: np.random.Generator, input_id: str, n: int) -> AnchorEvidence:
    floor = float(rng.uniform(0.5e-7, 2e-7))
    deviations = []
    for p in PARTICIPANTS[:n]:
        # mostly fp32 noise, sometimes a fault 2x-100x the floor, sometimes non-finite
        value = floor * float(rng.choice([rng.uniform(0.2, 3), rng.uniform(2, 100)], p=[0.7, 0.3]))
        bad = int(rng.random() < 0.05)
        deviations.append(
            Deviation(p, "s2", input_id, {"rel_l2": value}, {"rel_l2": value * 1.1}, bad)
        )
    return AnchorEvidence("s2", input_id, tuple(deviations), {"rel_l2": floor}, n, {})


@pytest.mark.parametrize("n", [2, 3, 5])
@pytest.mark.parametrize("factor", [10.0, 3.0])
def test_every_finding_is_a_candidate(n: int, factor: float) -> None:
    rng = np.random.default_rng(n * 100 + int(factor))
    params = OracleParams(metrics=("rel_l2",), noise_factor=factor)
    findings = candidates_total = 0
    for trial in range(40):
        evidence = [_evidence(rng, f"in{trial}-{k}", n) for k in range(6)]
        introduced = {
            (p, e.input_id): 1e-7 * float(rng.choice([rng.uniform(0.2, 3), rng.uniform(2, 60)]))
            for e in evidence
            for p in PARTICIPANTS[:n]
        }
        floor = {e.input_id: 1e-7 for e in evidence}
        verdicts = judge_anchor(evidence, params, introduced=introduced, introduced_floor=floor)
        found = {(v.participant, v.input_id) for v in verdicts if v.finding}
        candidates = set()
        for e in evidence:  # one input at a time, as a chunk of one input
            candidates |= noise_candidates(
                [e], params, introduced=introduced, introduced_floor=floor
            )
        assert found <= candidates
        findings += len(found)
        candidates_total += len(candidates)
    assert findings > 0  # the test judges something
    assert candidates_total < 40 * 6 * n  # and candidates are not everything


def test_candidates_below_every_threshold_are_none() -> None:
    quiet = AnchorEvidence(
        "s2",
        "a",
        tuple(Deviation(p, "s2", "a", {"rel_l2": 1e-7}, {"rel_l2": 1e-7}, 0) for p in PARTICIPANTS),
        {"rel_l2": 1e-7},
        5,
        {},
    )
    params = OracleParams(metrics=("rel_l2",))
    assert noise_candidates([quiet], params) == set()
    assert noise_candidates([quiet], params, introduced={("jax", "a"): 5e-6},
                            introduced_floor={"a": 1e-7}) == {("jax", "a")}  # fmt: skip
