"""The two settings of a run: ``RunOptions`` survives its trip through ``run.json``;
``ExecutionSettings`` is what ``anpred run`` defaults to and resolves once."""

from __future__ import annotations

import json

import pytest

from anpred.settings import AUTO, DEFAULT_MEMORY, ExecutionSettings, RunOptions


def test_run_options_come_back_from_run_json_as_they_went() -> None:
    options = RunOptions(
        model="m.onnx",
        libs=("torch", "onnxruntime[O1]"),
        image_paths=("a.jpg",),
        anchors=("layer1",),
        mean=(0.5, 0.5, 0.5),
        input_range=(0.0, 255.0),
        input_ranges=("ids=0,30000",),
        stages=4,
        extra={"faults": {"onnxruntime": {"kind": "bf16"}}},
    )
    back = RunOptions.from_dict(json.loads(json.dumps(options.to_dict())))
    assert back == options
    assert isinstance(back.libs, tuple) and isinstance(back.mean, tuple)


def test_an_earlier_run_json_without_later_fields_reads_with_their_defaults() -> None:
    earlier = {"model": "yolov8n", "libs": ["all"], "images": 2, "isolation": True}
    options = RunOptions.from_dict(earlier)
    assert options.input_shapes == () and options.stages is None and options.extra == {}
    assert options.to_dict()["libs"] == ["all"]
    with pytest.raises(ValueError, match="unknown fields"):
        RunOptions.from_dict({**earlier, "colour": "blue"})


def test_execution_settings_resolve_their_auto_values_once() -> None:
    settings = ExecutionSettings()
    assert settings.parallel == AUTO and settings.max_memory == DEFAULT_MEMORY
    with pytest.raises(ValueError, match="resolve"):
        _ = settings.workers
    with pytest.raises(ValueError, match="resolve"):
        _ = settings.budget
    resolved = settings.resolved(3, 2**30, {"ANPRED_MAX_MEMORY": "1073741824"})
    assert resolved.workers == 3 and resolved.budget == 2**30
    assert dict(resolved.env) == {"ANPRED_MAX_MEMORY": "1073741824"}
    assert settings.parallel == AUTO  # frozen: resolving made a new one
