"""The calibration cache (issue 14, item 2): keyed by model, shape, anchors, fp32
participants and rule version; looked up by ``anpred run``; never learnt on judged inputs.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from anpred.analysis.oracle import NOISE_FACTOR, OracleParams
from anpred.calibration.cache import (
    SEED_OFFSET,
    calibration_key,
    calibration_mode,
    calibration_options,
    fp32_participants,
    lookup,
    resolve,
    store_calibration,
)
from anpred.calibration.rule import AnchorThreshold, Calibration
from anpred.calibration.stored import operator_params
from anpred.errors import UsageError
from anpred.interchange.export import AnchoredExport, AnchorOutput
from anpred.participants import parse_participants
from anpred.settings import RunOptions

ANCHORS = ("stem", "layer1", "output")
LIBS = "torch,onnxruntime,jax"


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ANPRED_CACHE", str(tmp_path / "cache"))


def _export(shape=(1, 3, 224, 224), anchors=ANCHORS, weights="seed0") -> AnchoredExport:
    outputs = tuple(AnchorOutput(a, a, a, "", a, (1,)) for a in anchors)
    return AnchoredExport(Path("unused"), "images", shape, 17, outputs, weights)


def _key(options=None, export=None, libs=LIBS):
    options = options or RunOptions(model="resnet50", libs=(libs,))
    return calibration_key(
        options, export or _export(), parse_participants(libs.split(",")), "rel_l2"
    )


def _calibration(participants=("torch", "onnxruntime", "jax"), inputs=("synthetic0",)):
    return Calibration(
        anchors={a: AnchorThreshold(2.0, 12) for a in ANCHORS},
        introduced={a: AnchorThreshold(3.0, 8) for a in ANCHORS},
        participants=participants,
        inputs=inputs,
    )


def test_fp32_participants_strip_faults_and_reduced_precision():
    from anpred.inject.participants import FAULT_MARK

    faulty = parse_participants(["onnxruntime"])[0]
    faulty = replace(faulty, name=f"{faulty.name}{FAULT_MARK}bf16@stem")
    got = fp32_participants([faulty, *parse_participants(["jax[bf16]", "jax"])])
    assert got == ("jax", "onnxruntime", "torch")  # the fp32 reference is always in


def test_a_stored_calibration_is_found_under_its_key():
    key = _key()
    path = store_calibration(key, _calibration())
    found = lookup(key)
    assert found.calibration is not None
    assert found.calibration.factor("stem") == 2.0
    assert found.calibration.source == f"cache:{path}"


@pytest.mark.parametrize(
    "other",
    [
        {"options": RunOptions(model="yolov8n", libs=(LIBS,))},  # another model
        {"export": _export(weights="seed1")},  # other weights
        {"export": _export(shape=(1, 3, 256, 256))},  # another input shape
        {"export": _export(anchors=("stem", "output"))},  # another anchor plan
        {"libs": "torch,onnxruntime"},  # another participant set
        {"libs": "torch,onnxruntime,jax,tensorflow"},
    ],
)
def test_another_model_shape_anchor_plan_or_participant_set_misses(other):
    store_calibration(_key(), _calibration())
    assert lookup(_key(**other)).calibration is None


def test_reduced_precision_participants_do_not_change_the_key():
    assert _key(libs="torch,onnxruntime,jax,jax[bf16]") == _key()


def test_onnx_files_are_told_apart_by_their_content(tmp_path):
    first, second = tmp_path / "a.onnx", tmp_path / "b.onnx"
    first.write_bytes(b"one graph")
    second.write_bytes(b"another graph")
    key = _key(RunOptions(model=str(first), libs=(LIBS,)))
    store_calibration(key, _calibration())
    assert lookup(key).calibration is not None
    assert lookup(_key(RunOptions(model=str(second), libs=(LIBS,)))).calibration is None
    same = tmp_path / "copy.onnx"
    same.write_bytes(b"one graph")  # same content, another path: the same model
    assert lookup(_key(RunOptions(model=str(same), libs=(LIBS,)))).calibration is not None


def test_another_participant_set_is_named_in_the_fallback_message():
    store_calibration(_key(), _calibration())
    found = resolve("auto", _key(libs="torch,onnxruntime"), ["bus"])
    assert found.calibration is None
    assert "jax,onnxruntime,torch" in found.message and "fixed noise rule" in found.message
    assert "--libs onnxruntime,torch" in found.message


def test_auto_never_uses_a_calibration_learnt_on_a_judged_input():
    store_calibration(_key(), _calibration(inputs=("synthetic0", "synthetic1")))
    assert resolve("auto", _key(), ["bus", "zidane"]).calibration is not None
    found = resolve("auto", _key(), ["bus", "synthetic1"])
    assert found.calibration is None and "synthetic1" in found.message


def test_off_and_explicit_files(tmp_path):
    path = store_calibration(_key(), _calibration())
    assert resolve("off", _key(), ["bus"]).calibration is None
    given = resolve(str(path), _key(), ["bus"])
    assert given.calibration is not None and given.calibration.source.startswith("file:")
    with pytest.raises(UsageError, match="its participants differ"):
        resolve(str(path), _key(libs="torch,onnxruntime"), ["bus"])
    with pytest.raises(UsageError, match="this run judges"):
        resolve(str(path), _key(), ["synthetic0"])
    raw = tmp_path / "calibration.json"  # a run directory's record: participants checked
    raw.write_text(__import__("json").dumps(_calibration(("torch", "jax")).to_dict()))
    with pytest.raises(UsageError, match="fp32 participants"):
        resolve(str(raw), _key(), ["bus"])


def test_calibration_runs_draw_held_out_inputs_only():
    onnx = RunOptions(model="m.onnx", images=3, image_paths=("a.png",), synthetic=2, seed=5)
    cal = calibration_options(onnx, 4)
    assert (cal.images, cal.image_paths, cal.synthetic, cal.inputs_file) == (0, (), 4, None)
    assert cal.seed == 5 + SEED_OFFSET  # seeded tensors differ from any run's with seed 5
    zoo = calibration_options(RunOptions(model="resnet50", seed=3), 4)
    assert zoo.seed == 3  # the seed makes the weights: kept
    # a reduced-precision participant calibrates its class (issue 35), no longer refused
    mixed = calibration_options(RunOptions(model="resnet50", libs=("torch,jax[bf16]",)), 4)
    assert mixed.libs == ("torch,jax[bf16]",)
    with pytest.raises(UsageError, match="at least 2"):
        calibration_options(RunOptions(model="resnet50"), 1)


def test_the_drill_judges_operators_with_their_stage_introduced_factor():
    params = OracleParams(calibration=_calibration())
    ops = operator_params(params, {"op1": "stem", "op2": "stem", "op3": "unknown"})
    assert ops.factor("op1") == ops.factor("op2") == 3.0  # the stage's introduced factor
    assert ops.factor("op3") == NOISE_FACTOR  # no calibrated stage: fixed
    assert ops.introduced_factor("op1") == NOISE_FACTOR  # one operator alone: fixed
    assert operator_params(OracleParams(), {"op1": "stem"}).calibration is None


def test_calibration_modes_are_checked(tmp_path):
    assert calibration_mode("auto") == "auto" and calibration_mode("off") == "off"
    path = tmp_path / "calibration.json"
    path.write_text("{}")
    assert calibration_mode(path) == str(path.resolve())  # a path-like object is taken
    with pytest.raises(UsageError, match="--calibration takes auto, off or a calibration file"):
        calibration_mode(tmp_path / "missing.json")


def test_the_ideal_references_are_left_out_by_their_declared_precision():
    # torch[ideal-bf16] computes in float64 but declares its class's format (bf16) in the
    # torch descriptor, which is what leaves it out
    got = fp32_participants(parse_participants(["torch[ideal-bf16]", "torch[ideal-fp16]", "jax"]))
    assert got == ("jax", "torch")
