"""``anpred run``/``inject`` on users' ONNX files with several inputs (issue 12).

The inputs are packed into one float32 graph input and unpacked in the graph
(:mod:`anpred.interchange.packing`); these tests run hand-built models end to end.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from anpred.store import RunStore
from conftest import anpred, summary


def _save(nodes, inputs, output, shape, inits, path, opset: int = 13) -> str:
    graph = helper.make_graph(
        nodes, "several", inputs, [helper.make_tensor_value_info(output, TensorProto.FLOAT, shape)],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return str(path)


def image_and_scale(path, opset: int = 13) -> str:
    """A float image [1, 3, 16, 16] through two convolutions, times a float scale [1]."""
    rng = np.random.default_rng(3)
    inits = [
        numpy_helper.from_array((rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32), "w1"),
        numpy_helper.from_array((rng.standard_normal((8, 8, 3, 3)) * 0.2).astype(np.float32), "w2"),
    ]
    nodes = [
        helper.make_node("Conv", ["image", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c2"], ["s2"]),
        helper.make_node("GlobalAveragePool", ["s2"], ["p"]),
        helper.make_node("Mul", ["p", "scale"], ["y"]),
    ]
    inputs = [
        helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 16, 16]),
        helper.make_tensor_value_info("scale", TensorProto.FLOAT, [1]),
    ]
    return _save(nodes, inputs, "y", [1, 8, 1, 1], inits, path, opset)


def tokens_and_mask(path) -> str:
    """Embedding (Gather) of int64 token ids [batch, seq], masked by a float mask [batch, seq]."""
    rng = np.random.default_rng(4)
    inits = [
        numpy_helper.from_array(rng.standard_normal((50, 8)).astype(np.float32), "emb"),
        numpy_helper.from_array((rng.standard_normal((8, 8)) * 0.4).astype(np.float32), "w1"),
        numpy_helper.from_array((rng.standard_normal((8, 4)) * 0.4).astype(np.float32), "w2"),
        numpy_helper.from_array(np.array([2], np.int64), "axis"),
    ]
    nodes = [
        helper.make_node("Gather", ["emb", "ids"], ["e"]),
        helper.make_node("Unsqueeze", ["mask", "axis"], ["m3"]),
        helper.make_node("Mul", ["e", "m3"], ["masked"]),
        helper.make_node("MatMul", ["masked", "w1"], ["h"]),
        helper.make_node("Tanh", ["h"], ["t"]),
        helper.make_node("MatMul", ["t", "w2"], ["o"]),
        helper.make_node("Relu", ["o"], ["r"]),
        helper.make_node("ReduceMean", ["r"], ["y"], axes=[1], keepdims=0),
    ]
    inputs = [
        helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"]),
        helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "seq"]),
    ]
    return _save(nodes, inputs, "y", ["batch", 4], inits, path)


def two_floats(path) -> str:
    """Two float inputs of different shapes: x [1, 6] and z [1, 2, 5], merged by Concat."""
    rng = np.random.default_rng(5)
    inits = [
        numpy_helper.from_array(rng.standard_normal((6, 10)).astype(np.float32), "wx"),
        numpy_helper.from_array(np.array([1, 10], np.int64), "flat"),
        numpy_helper.from_array(rng.standard_normal((20, 3)).astype(np.float32), "wo"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "wx"], ["hx"]),
        helper.make_node("Tanh", ["hx"], ["tx"]),
        helper.make_node("Reshape", ["z", "flat"], ["zf"]),
        helper.make_node("Sigmoid", ["zf"], ["sz"]),
        helper.make_node("Concat", ["tx", "sz"], ["cat"], axis=1),
        helper.make_node("MatMul", ["cat", "wo"], ["y"]),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6]),
        helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 2, 5]),
    ]
    return _save(nodes, inputs, "y", [1, 3], inits, path)


def _statuses(s: dict) -> dict[str, str]:
    return {p["participant"]: p["status"] for p in s["participants"]}


def test_tokens_and_mask_from_npz_run_packed(tmp_path) -> None:
    model = tokens_and_mask(tmp_path / "tok.onnx")
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 50, (3, 12)).astype(np.int64)
    mask = (rng.random((3, 12)) > 0.3).astype(np.float32)
    np.savez(tmp_path / "in.npz", ids=ids, mask=mask)
    out = tmp_path / "run"
    proc = anpred(
        "run", model, "--libs", "onnxruntime,jax", "--input-shape", "ids=1x12",
        "--input-shape", "mask=1x12", "--inputs", str(tmp_path / "in.npz"), "--keep-captures",
        "all", "--out", str(out),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "inputs: ids int64 1x12, mask float32 1x12 packed into one float32 input of 24" in (
        proc.stderr
    )
    s = summary(out)
    assert set(_statuses(s).values()) == {"ok"}, s["participants"]
    assert [i["id"] for i in s["inputs"]] == ["input0", "input1", "input2"]
    # the summary and the terminal name the model's own inputs, not the packed vector
    assert s["model"]["inputs"] == [
        {"name": "ids", "dtype": "int64", "shape": [1, 12]},
        {"name": "mask", "dtype": "float32", "shape": [1, 12]},
    ]
    assert "inputs ids int64 1x12, mask float32 1x12" in proc.stdout
    store = RunStore(out)
    packing = store.read_packing()
    assert [(t["name"], t["dtype"], t["shape"], t["offset"]) for t in packing["tensors"]] == [
        ("ids", "int64", [1, 12], 0), ("mask", "float32", [1, 12], 12)
    ]
    packed = store.load_inputs()["input1"]
    assert packed.dtype == np.float32 and packed.shape == (24,)
    assert np.array_equal(packed[:12].astype(np.int64), ids[1]) and np.array_equal(
        packed[12:], mask[1]
    )
    # the packed run gives what onnxruntime gives on the original two-input file
    import onnxruntime as ort

    expected = ort.InferenceSession(model).run(None, {"ids": ids[1:2], "mask": mask[1:2]})[0]
    got = store.participant("onnxruntime").load_capture("input1")
    assert np.array_equal(got["output"], expected)
    resumed = anpred(
        "run", model, "--libs", "onnxruntime,jax", "--input-shape", "ids=1x12",
        "--input-shape", "mask=1x12", "--inputs", str(tmp_path / "in.npz"), "--keep-captures",
        "all", "--out", str(out),
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "already done (resumed)" in resumed.stderr
    assert "inputs: ids int64 1x12, mask float32 1x12 packed" in resumed.stderr


def test_image_and_scale_seeded_and_fault_localized(tmp_path) -> None:
    model = image_and_scale(tmp_path / "img.onnx")
    out = tmp_path / "run"
    proc = anpred(
        "inject", model, "--libs", "onnxruntime,openvino,torch", "--lib", "onnxruntime",
        "--stage", "stage2.Relu", "--fault", "bf16", "--stages", "4", "--images", "1",
        "--no-drill", "--out", str(out),
    )
    assert proc.returncode == 1, proc.stderr[-3000:]  # 1 = findings
    s = summary(out)
    keys = [a["key"] for a in s["anchors"]]
    # cut points on the image's paths: the scale joins only at the end
    assert keys == ["stage1.Conv", "stage2.Relu", "stage3.Conv", "output"], keys
    truth = RunStore(out).read_ground_truth()
    assert truth["worker"]["state"] == "ok" and truth["worker"]["applied_as_planned"]
    detected = truth["detected"]
    assert detected["first_flagged_anchor"] == "stage2.Relu", detected
    assert detected["top_introduced_stage"] == "stage2.Relu" and detected["blamed"]
    assert detected["other_participants_flagged"] == {}
    sources = RunStore(out).read_input_sources()
    assert all(v.startswith("image: ") and "scale: seeded float32 N(0,1)" in v
               for v in sources.values()), sources


def test_bad_npz_and_inexact_values_are_one_line_errors(tmp_path) -> None:
    model = tokens_and_mask(tmp_path / "tok.onnx")
    shapes = ["--input-shape", "ids=1x4", "--input-shape", "mask=1x4"]
    np.savez(tmp_path / "n.npz", ids=np.zeros((3, 4), np.int64), mask=np.ones((2, 4), np.float32))
    np.savez(tmp_path / "miss.npz", ids=np.zeros((1, 4), np.int64))
    np.savez(tmp_path / "big.npz", ids=np.full((1, 4), 2**24 + 1, np.int64),
             mask=np.ones((1, 4), np.float32))
    for name, expected in [
        ("n.npz", "different numbers of inputs (ids 3, mask 2)"),
        ("miss.npz", "no array named 'mask'"),
        ("big.npz", "float32 cannot represent exactly"),
    ]:
        proc = anpred("run", model, "--libs", "onnxruntime", *shapes, "--inputs",
                      str(tmp_path / name), "--out", str(tmp_path / name.replace(".", "_")))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert expected in proc.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_several_inputs_run_in_every_translated_library(tmp_path) -> None:
    """torch, onnxruntime, openvino, jax and tensorflow on the three models (paddle needs its
    own process without tensorflow: it runs in a second run)."""
    for build, flags in [
        (image_and_scale, []),
        (tokens_and_mask, ["--input-shape", "ids=1x10", "--input-shape", "mask=1x10",
                           "--input-range", "0,49"]),
        (two_floats, []),
    ]:
        model = build(tmp_path / f"{build.__name__}.onnx")
        for libs in ("torch,onnxruntime,openvino,jax,tensorflow", "paddle"):
            out = tmp_path / f"{build.__name__}-{libs.split(',')[0]}"
            proc = anpred("run", model, "--libs", libs, "--images", "1", *flags,
                          "--out", str(out))
            assert proc.returncode in (0, 1), proc.stderr[-3000:]
            s = summary(out)
            assert set(_statuses(s).values()) == {"ok"}, (build.__name__, s["participants"])
            assert json.loads(RunStore(out).packing_path.read_text())["input"] == "anpred.inputs"


def test_an_input_float32_cannot_hold_is_refused_in_one_line(tmp_path) -> None:
    nodes = [helper.make_node("Cast", ["d"], ["df"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["df", "x"], ["y"])]
    inputs = [helper.make_tensor_value_info("d", TensorProto.DOUBLE, [1, 4]),
              helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])]
    model = _save(nodes, inputs, "y", [1, 4], [], tmp_path / "f64.onnx")
    proc = anpred("run", model, "--libs", "onnxruntime", "--out", str(tmp_path / "run"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert "input d of f64.onnx is float64" in last and "one float32 vector" in last


#: The deployment runtimes (``--libs runtimes``).
RUNTIMES = ("litert", "ncnn", "mnn", "tvm", "executorch", "paddle_inference")


def _runtimes_built() -> bool:
    from anpred.library import get_library
    from anpred.library.environments import runtime_env

    return all(runtime_env(get_library(n).environment) is not None for n in RUNTIMES)


@pytest.mark.slow
@pytest.mark.skipif(not _runtimes_built(), reason="a runtime environment is not built")
def test_every_deployment_runtime_takes_the_packed_graph(tmp_path) -> None:
    """Measured: the six converters take the unpacking of float inputs (1 image: 322 s cold,
    134 s with conversions cached)."""
    model = image_and_scale(tmp_path / "img.onnx")
    out = tmp_path / "run"
    proc = anpred("run", model, "--libs", "runtimes", "--images", "1", "--out", str(out),
                  timeout=1500)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    statuses = _statuses(summary(out))
    assert all(statuses[n] == "ok" for n in RUNTIMES), statuses


def test_a_range_per_input_and_an_unknown_name(tmp_path) -> None:
    model = tokens_and_mask(tmp_path / "tok.onnx")
    shapes = ["--input-shape", "ids=1x6", "--input-shape", "mask=1x6", "--images", "1"]
    out = tmp_path / "run"
    proc = anpred("run", model, "--libs", "onnxruntime", *shapes, "--input-range", "ids=40,49",
                  "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (packed,) = RunStore(out).load_inputs().values()
    assert packed[:6].min() >= 40 and packed[:6].max() <= 49
    assert packed[6:].min() < 0  # the mask keeps standard normal values
    proc = anpred("run", model, "--libs", "onnxruntime", *shapes, "--input-range", "idz=0,9",
                  "--out", str(tmp_path / "bad"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "--input-range names 'idz', which is not an input" in proc.stderr.splitlines()[-1]
