from __future__ import annotations

import math
from typing import Any

import pytest

from anpred.report.run_summary import ParticipantView, RunSummary, as_float


@pytest.mark.parametrize(("value", "expected"), [(1, 1.0), (2.5e-7, 2.5e-7), (None, None),
                                                 (math.nan, None), (math.inf, None),
                                                 (True, None), ("1e-3", None)])
def test_as_float(value: Any, expected: float | None) -> None:
    assert as_float(value) == expected


def test_participant_record_reads_worker_fields_or_status_detail(sample: dict[str, Any]) -> None:
    openvino = ParticipantView.from_summary(sample["participants"][2])
    assert openvino.library == "openvino" and openvino.status == "ok"
    assert openvino.version.startswith("2026.4.1-") and openvino.short_version == "2026.4.1"
    assert openvino.settings["threads"] == 1 and not openvino.failed
    worker = ParticipantView.from_summary({
        "participant": "tensorflow[xla]", "library": "tensorflow", "status": "timeout",
        "step": "execute", "message": "", "version": "2.21.0", "settings": {"jit": True},
        "status_detail": {"version": "other"}})
    assert worker.version == "2.21.0" and worker.failed and worker.step == "execute"


def test_sample_accessors(sample: dict[str, Any]) -> None:
    view = RunSummary(sample)
    assert view.anchors[0] == "backbone.p1" and view.anchors[-1] == "output"
    assert view.judged == ["torch", "onnxruntime", "openvino"]
    assert view.anchor_shape("neck.p5") == [1, 256, 20, 20]
    assert view.baseline_verdict("max_abs_1e-3", "openvino") == (False, ["bus"])
    assert view.top_stage("onnxruntime") == "backbone.p5" and view.emergence("torch") is None
    assert view.alignment["torch"]["output"] == ["cast float32->float64"]


def test_garbage_gives_empty_values() -> None:
    view = RunSummary({"findings": "x", "anchors": [None, 3], "participants": {"a": 1},
                       "deviation": {"vs_fp64": {"p": {"a": "nan", "b": 2e-6}}},
                       "localization": {"participants": {"p": {"introduced": [1]}}},
                       "baselines": {"b": {"p": {"passed": "yes", "failed_inputs": None}}}})
    assert view.findings == [] and view.participants[0].status == "unknown"
    assert view.anchors == ["a", "b"]  # recovered from the deviation table
    assert view.deviation("vs_fp64") == {"p": {"a": None, "b": 2e-6}}
    assert view.introduced("p") == {} and view.baseline_verdict("b", "p") == (None, [])
    assert RunSummary(None).model_name == "?" and RunSummary([1]).judged == []
