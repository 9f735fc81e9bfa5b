import json

import pytest

from anpred.errors import UsageError
from anpred.localization import masking_case, summarize_masking


def test_masked_when_baseline_calls_output_clean_despite_inner_finding():
    case = masking_case(
        "tf",
        "i0",
        {"stem": False, "layer1": True, "layer2": True, "out": False},
        {"allclose": True, "max_abs": False},
    )
    assert case.finding_anchors == ("layer1", "layer2")
    assert case.masked_by == ("allclose",)
    assert case.masked_in_model
    json.dumps(case.to_dict(), allow_nan=False)


def test_output_finding_alone_is_not_masking():
    case = masking_case("tf", "i0", {"stem": False, "out": True}, {"allclose": True})
    assert case.finding_anchors == () and case.masked_by == ()
    assert case.output_finding and not case.masked_in_model


def test_several_output_anchors():
    flags = {"p3": True, "det_small": True, "det_large": False}
    case = masking_case(
        "tf", "i0", flags, {"allclose": True}, output_anchors=["det_small", "det_large"]
    )
    assert case.finding_anchors == ("p3",)
    assert case.output_finding and not case.masked_in_model
    assert case.masked_by == ("allclose",)
    with pytest.raises(UsageError, match="output anchors"):
        masking_case("tf", "i0", flags, {}, output_anchors=["nope"])


def test_summary_counts_per_baseline():
    cases = [
        masking_case(
            "tf", "i0", {"a": True, "b": True, "out": False}, {"allclose": True, "dmad": True}
        ),
        masking_case(
            "tf", "i1", {"a": True, "b": False, "out": True}, {"allclose": False, "dmad": True}
        ),
        masking_case(
            "jax", "i0", {"a": False, "b": False, "out": False}, {"allclose": True, "dmad": True}
        ),
    ]
    summary = summarize_masking(cases)
    assert summary.baselines == ("allclose", "dmad")
    assert (summary.n_cases, summary.n_cases_with_inner_finding) == (3, 2)
    assert summary.masked_cases == {"allclose": 1, "dmad": 2}
    assert summary.masked_findings == {"allclose": 2, "dmad": 3}
    assert summary.n_masked_in_model == 1
    json.dumps(summary.to_dict(), allow_nan=False)
