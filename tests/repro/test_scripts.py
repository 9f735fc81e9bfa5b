"""Reproducer scripts: only the library and numpy, its ops as anpred's translators call
them, the error against the expected values next to the floor, exit 1 when beyond it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from repro_models import tiny_drill_graph

from anpred.repro.scripts import NoScript, script_for
from anpred.repro.subgraph import StageCases, input_names, standalone_model
from anpred.repro.verify import imports_anpred


def _folder(tmp_path: Path, threshold: float) -> tuple[Path, onnx.ModelProto]:
    """A reproducer folder of the tiny model's stage-2 Conv + Sigmoid, expected values from
    the ONNX reference evaluator in float64 (the model's weights widened)."""
    from onnx.reference import ReferenceEvaluator

    stage = StageCases(tiny_drill_graph(), "s2")
    case = stage.case(["/block2/conv/Conv", "/block2/act/Sigmoid"], "op0002")
    model = standalone_model(case, stage)
    onnx.save(model, str(tmp_path / "model.onnx"))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 1, 8, 16, 16)).astype(np.float32)
    wide = onnx.ModelProto()
    wide.CopyFrom(model)
    for t in wide.graph.initializer:
        t.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t).astype(np.float64),
                                                t.name))  # fmt: skip
    for v in [*wide.graph.input, *wide.graph.output]:
        v.type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    evaluator = ReferenceEvaluator(wide)
    name = input_names(case)["r1.fed"]
    expected = np.stack([evaluator.run(None, {name: x[k].astype(np.float64)})[0]
                         for k in range(2)])  # fmt: skip
    np.savez(tmp_path / "inputs.npz", **{name: x})
    np.savez(tmp_path / "expected_fp64.npz", y=expected)
    floor = {"reference": "torch", "floor": threshold / 10, "factor": 10.0, "threshold": threshold}
    (tmp_path / "floor.json").write_text(json.dumps(floor))
    return tmp_path, model


def _run(folder: Path, library: str, settings: dict | None = None) -> tuple[int, dict, str]:
    model = onnx.load(str(folder / "model.onnx"))
    script = script_for(library, settings or {}, model, "test case.")
    (folder / script.name).write_text(script.text)
    for name, data in script.files.items():
        (folder / name).write_bytes(data)
    assert not imports_anpred(script.text)
    done = subprocess.run([sys.executable, script.name], cwd=folder, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    said = next(json.loads(line[6:]) for line in done.stdout.splitlines()
                if line.startswith("REPRO "))  # fmt: skip
    return done.returncode, said, script.text


@pytest.mark.parametrize("library", ["onnxruntime", "torch"])
def test_a_script_reports_the_error_and_exits_1_only_beyond_the_threshold(
    tmp_path: Path, library: str
) -> None:
    folder, _ = _folder(tmp_path, threshold=1e-3)
    code, said, text = _run(folder, library)
    # a correct fp32 library: ~1e-7 from fp64, far below 1e-3
    assert code == 0 and not said["reproduced"] and 0 < said["error"] < 1e-5
    assert len(said["errors"]) == 2
    # the same run against a threshold below its own rounding: reproduced, exit 1
    (folder / "floor.json").write_text(json.dumps(
        {"reference": "torch", "floor": 1e-12, "factor": 10.0, "threshold": 1e-11}))  # fmt: skip
    code, said, _ = _run(folder, library)
    assert code == 1 and said["reproduced"]
    if library == "torch":
        assert "F.conv2d(" in text and "torch.sigmoid(" in text and "import torch\n" in text


@pytest.mark.slow
@pytest.mark.parametrize("library", ["tensorflow", "jax", "paddle"])
def test_translated_libraries_scripts_run_their_own_ops(tmp_path: Path, library: str) -> None:
    folder, _ = _folder(tmp_path, threshold=1e-3)
    code, said, text = _run(folder, library, {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}}
                            if library == "tensorflow" else None)  # fmt: skip
    assert code == 0 and 0 < said["error"] < 1e-5, said
    expected = {"tensorflow": "tf.nn.conv2d(", "jax": "lax.conv_general_dilated(",
                "paddle": "F.conv2d("}[library]  # fmt: skip
    assert expected in text
    if library == "tensorflow":  # the env setting before the import, as the worker starts
        assert text.index("os.environ['TF_ENABLE_ONEDNN_OPTS'] = '0'") < text.index(
            "import tensorflow"
        )


def test_scripts_say_what_they_cannot_write(tmp_path: Path) -> None:
    folder, model = _folder(tmp_path, threshold=1e-3)
    with pytest.raises(NoScript, match="has no reproducer script writer"):
        script_for("ncnn", {}, model, "x.")
    with pytest.raises(NoScript, match="settings"):
        script_for("torch", {"compile": True}, model, "x.")
    mnn = script_for("mnn", {"winograd": False}, model, "x.")
    assert mnn.prepare == "convert_mnn.py" and "set_hint(3, 0)" in mnn.text
    assert "set_hint" not in script_for("mnn", {}, model, "x.").text
    ov = script_for("openvino", {"precision": "bf16"}, model, "x.")
    assert "'bf16'" in ov.text
    for s in (mnn, ov):
        compile(s.text, s.name, "exec")
