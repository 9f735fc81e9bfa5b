"""``anpred run``/``inject`` on users' own ONNX files (issue 12): dynamic shapes, typed and
given inputs, automatic anchors, the folding record, ``--list-targets`` on a file."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from anpred.store import RunStore
from conftest import anpred, summary


def _token_model(path, inputs: int = 1) -> str:
    """Embedding lookup on int64 token ids [batch, seq] (unnamed nodes, dynamic dims)."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((50, 8)).astype(np.float32), "emb"),
        numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "w"),
    ]
    nodes = [
        helper.make_node("Gather", ["emb", "ids"], ["e"]),
        helper.make_node("Tanh", ["e"], ["t"]),
        helper.make_node("MatMul", ["t", "w"], ["m"]),
        helper.make_node("Relu", ["m"], ["r"]),
        helper.make_node("ReduceMean", ["r"], ["y"], axes=[1], keepdims=0),
    ]
    declared = [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])]
    if inputs == 2:
        declared.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", 4]))
        nodes.append(helper.make_node("Mul", ["y", "mask"], ["z"]))
    out = "z" if inputs == 2 else "y"
    graph = helper.make_graph(
        nodes, "tokens", declared,
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["batch", 4])], inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, str(path))
    return str(path)


def _flatten_cnn(path) -> str:
    """Conv on a grey image [batch, 1, h, w], then a flatten by shape arithmetic (Shape → Gather →
    Unsqueeze → Concat → Reshape), which jax can only run once it is folded."""
    rng = np.random.default_rng(1)
    inits = [
        numpy_helper.from_array((rng.standard_normal((4, 1, 3, 3)) * 0.3).astype(np.float32), "w"),
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array([0], np.int64), "axes"),
        numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Shape", ["r"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["r", "target"], ["flat"]),
        helper.make_node("Sigmoid", ["flat"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "flatten",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "k"])], inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, str(path))
    return str(path)


def test_inject_list_targets_on_a_file(tiny_onnx) -> None:
    proc = anpred("inject", str(tiny_onnx), "--list-targets", "--libs", "onnxruntime")
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0].split()[0] == "r1" and "Conv×1" in lines[0]
    assert [line.split()[0] for line in lines] == ["r1", "s2", "output"]


def test_dynamic_dims_refused_in_one_line(tmp_path) -> None:
    model = _token_model(tmp_path / "tok.onnx")
    proc = anpred("run", model, "--libs", "onnxruntime", "--out", str(tmp_path / "run"))
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert "Traceback" not in proc.stderr
    assert "dynamic dimensions batch, seq" in last and "--input-shape ids=NxN" in last


def test_int_input_with_range_and_automatic_anchors(tmp_path) -> None:
    model = _token_model(tmp_path / "tok.onnx")
    out = tmp_path / "run"
    proc = anpred(
        "run", model, "--libs", "onnxruntime,jax", "--input-shape", "1x16",
        "--input-range", "0,49", "--stages", "3", "--out", str(out),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = summary(out)
    assert s["model"]["weights"] == "from the ONNX file"
    assert s["model"]["input_shape"] == [1, 16]
    # cut points: e, t, m, r (every path passes them); K=3 stages of about equal cost
    assert [a["key"] for a in s["anchors"]] == ["stage1.Tanh", "stage2.MatMul", "output"]
    assert all(p["status"] == "ok" for p in s["participants"]), s["participants"]
    inputs = RunStore(out).load_inputs()
    for array in inputs.values():
        assert array.dtype == np.int64 and array.shape == (1, 16)
        assert 0 <= array.min() and array.max() <= 49
    folding = json.loads(RunStore(out).folding_path.read_text())
    assert folding["input_shapes"] == {"ids": [1, 16]} and folding["used"] is False


def test_npz_inputs_and_folded_shape_arithmetic_run_in_jax(tmp_path) -> None:
    model = _flatten_cnn(tmp_path / "flat.onnx")
    given = np.random.default_rng(2).standard_normal((3, 1, 12, 20)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=given)
    out = tmp_path / "run"
    proc = anpred(
        "run", model, "--libs", "onnxruntime,jax", "--input-shape", "x=1x1x12x20",
        "--inputs", str(tmp_path / "in.npz"), "--out", str(out),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = summary(out)
    assert [i["id"] for i in s["inputs"]] == ["input0", "input1", "input2"]
    inputs = RunStore(out).load_inputs()
    assert np.array_equal(inputs["input1"], given[1:2])
    by_name = {p["participant"]: p for p in s["participants"]}
    assert by_name["jax"]["status"] == "ok", by_name["jax"]
    folding = json.loads(RunStore(out).folding_path.read_text())
    assert folding["used"] is True and "Shape" in folding["removed_ops"]
    assert folding["outputs"][0]["max_abs_diff"] == 0.0


@pytest.mark.parametrize("flag", [["--preprocess", "scale"], ["--input-shape", "1x3x8x8"]])
def test_own_model_flags_refused_for_zoo_models(flag, tmp_path) -> None:
    proc = anpred("run", "resnet18", *flag, "--out", str(tmp_path / "run"))
    assert proc.returncode == 2 and "applies to an ONNX file" in proc.stderr


def test_run_json_of_earlier_runs_still_matches() -> None:
    """New settings stay out of run.json at their defaults: earlier runs still resume."""
    from anpred.settings import RunOptions

    earlier = {
        "model", "libs", "images", "image_paths", "granularity", "anchors", "weights", "seed",
        "synthetic", "isolation", "input_size", "extra",
    }
    assert set(RunOptions(model="tiny.onnx").to_dict()) == earlier
    given = RunOptions(model="m.onnx", input_shapes=("1x3",), input_range=(0.0, 9.0), stages=4)
    data = given.to_dict()
    assert data["input_shapes"] == ["1x3"] and data["input_range"] == [0.0, 9.0]
    assert data["stages"] == 4 and "preprocess" not in data
