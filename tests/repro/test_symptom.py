"""The reduction's predicate: the same symptom, not any failure."""

from __future__ import annotations

import pytest

from anpred.analysis.verdict import Criterion, MetricJudgement, Verdict
from anpred.repro.symptom import SYMPTOM_FACTOR, Symptom, check

KEY = "c0/op0002"
INPUTS = ("bus", "zidane")
SYMPTOM = Symptom("onnxruntime", "s2", "op0002", "/block2/act/Sigmoid", "Sigmoid",
                  "introduced", 1.7e-3, frozenset({"openvino"}))  # fmt: skip


def _judgement(value: float, threshold: float) -> MetricJudgement:
    return MetricJudgement("rel_l2", value, 1e-7, 1e-8, 1e-8, threshold, 1e-8, threshold,
                           value > threshold, value > threshold)  # fmt: skip


def _verdict(participant: str, input_id: str, introduced: float, threshold: float = 6e-7,
             key: str = KEY) -> Verdict:  # fmt: skip
    stands_out = introduced > threshold
    exceeded = frozenset({Criterion.INTRODUCED}) if stands_out else frozenset()
    return Verdict(
        participant, key, input_id, _judgement(introduced, threshold), {},
        {"rel_l2": introduced}, {"rel_l2": 1e-8}, False, 0,
        frozenset({Criterion.OUTLIER, Criterion.ABOVE_NOISE}), exceeded,
        _judgement(introduced, threshold),
    )  # fmt: skip


def _case(errors: dict[str, float]) -> dict[tuple[str, str, str], Verdict]:
    return {(p, KEY, i): _verdict(p, i, e) for p, e in errors.items() for i in INPUTS}


CLEAN = {"torch": 4e-8, "jax": 5e-8}


def test_the_same_symptom_is_accepted() -> None:
    found = check(SYMPTOM, KEY, _case({**CLEAN, "onnxruntime": 1.6e-3}), INPUTS)
    assert found.reproduces, found.reason
    assert found.ratio == pytest.approx(1.6e-3 / 1.7e-3)
    assert found.flagged == ("onnxruntime",)


def test_another_participant_flagged_is_a_different_symptom() -> None:
    # the case makes jax deviate too, which the drill-down never saw at this operator
    found = check(SYMPTOM, KEY, _case({**CLEAN, "onnxruntime": 1.6e-3, "jax": 2e-3}), INPUTS)
    assert not found.reproduces
    assert "another participant is flagged there too: jax" in found.reason
    # one the drill-down also flagged there (openvino) is the same symptom
    same = check(SYMPTOM, KEY, _case({**CLEAN, "onnxruntime": 1.6e-3, "openvino": 2e-3}), INPUTS)
    assert same.reproduces, same.reason


def test_an_error_of_another_size_is_a_different_symptom() -> None:
    # still flagged (far above the threshold) but 10x larger: another mechanism
    found = check(SYMPTOM, KEY, _case({**CLEAN, "onnxruntime": 1.7e-2}), INPUTS)
    assert not found.reproduces and "10x the drill-down's" in found.reason
    # and a case that lost most of it
    smaller = 1.7e-3 / (SYMPTOM_FACTOR * 1.1)
    assert not check(SYMPTOM, KEY, _case({**CLEAN, "onnxruntime": smaller}), INPUTS).reproduces
    inside = 1.7e-3 / (SYMPTOM_FACTOR * 0.9)
    assert check(SYMPTOM, KEY, _case({**CLEAN, "onnxruntime": inside}), INPUTS).reproduces


def test_a_participant_not_flagged_or_flagged_elsewhere_does_not_reproduce() -> None:
    found = check(SYMPTOM, KEY, _case({**CLEAN, "onnxruntime": 3e-7}), INPUTS)
    assert not found.reproduces and "not flagged at the operator" in found.reason
    # flagged on another operator of the case, not the target
    elsewhere = _case({**CLEAN, "onnxruntime": 3e-7})
    for i in INPUTS:
        elsewhere[("onnxruntime", "c0/op0001", i)] = _verdict("onnxruntime", i, 1.7e-3,
                                                                key="c0/op0001")  # fmt: skip
    assert not check(SYMPTOM, KEY, elsewhere, INPUTS).reproduces
    # flagged on one input of two is at least half: a finding by the drill-down's rule
    half = _case({**CLEAN, "onnxruntime": 1.7e-3})
    half[("onnxruntime", KEY, "zidane")] = _verdict("onnxruntime", "zidane", 3e-7)
    assert check(SYMPTOM, KEY, half, INPUTS).flagged == ("onnxruntime",)
