"""The harder ground truth's grid keys: single-operator faults, ULP severities, reduced-precision
faulty participants (issue 35)."""

from __future__ import annotations

import json

import pytest

from anpred.errors import UsageError
from anpred.evaluation.campaign import fault_list
from anpred.evaluation.grid import FaultAxis, load_grid, sample_nodes


def test_nodes_are_drawn_once_and_for_all() -> None:
    nodes = [f"n{i}" for i in range(20)]
    first = sample_nodes(nodes, 3, "resnet50|layer3|mantissa|Conv")
    assert len(first) == 3 and first == sample_nodes(nodes, 3, "resnet50|layer3|mantissa|Conv")
    assert first == sorted(first, key=nodes.index)  # graph order kept
    assert sample_nodes(nodes, 3, "resnet50|layer4|mantissa|Conv") != first
    assert sample_nodes(nodes[:2], 3, "x") == nodes[:2]


def test_grid_axes_take_nodes_and_round_trip(tmp_path) -> None:
    path = tmp_path / "grid.json"
    path.write_text(json.dumps({
        "faulty": ["onnxruntime", "jax[bf16]"],
        "faults": [{"kind": "mantissa", "op": "Conv", "severities": [19, 22], "nodes": 2}],
    }))  # fmt: skip
    grid = load_grid(path)
    assert grid.faults == (FaultAxis("mantissa", "Conv", (19, 22), 2),)
    assert grid.faulty == ("onnxruntime", "jax[bf16]")
    assert grid.to_dict()["faults"] == [
        {"kind": "mantissa", "op": "Conv", "severities": [19, 22], "nodes": 2}
    ]
    for bad in ({"nodes": -1}, {"nodes": "2"}, {"sample": 1}):
        path.write_text(json.dumps({"faults": [{"kind": "mantissa", "severities": [20], **bad}]}))
        with pytest.raises(UsageError):
            load_grid(path)


def test_single_node_faults_of_the_tiny_model(tmp_path) -> None:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "pipeline"))
    from tiny_model import tiny_cnn

    from anpred.pipeline.run import run
    from anpred.settings import ExecutionSettings, RunOptions

    model = tiny_cnn(tmp_path / "tiny.onnx")
    base = tmp_path / "clean"
    run(RunOptions(model=str(model), libs=("torch,onnxruntime,jax",), images=1), base,
        ExecutionSettings(drill=False, calibration="off"))  # fmt: skip
    path = tmp_path / "grid.json"
    path.write_text(json.dumps({
        "models": [str(model)], "faulty": ["onnxruntime"],
        "faults": [{"kind": "mantissa", "op": "*", "severities": [20], "nodes": 1},
                   {"kind": "bf16", "severities": [1]}],
    }))  # fmt: skip
    faults = fault_list(load_grid(path), str(model), base, ["r1", "s2"])
    single = [spec for _lib, spec in faults if spec.kind == "mantissa"]
    assert [spec.stage for spec in single] == ["r1", "s2"]
    assert all(spec.node for spec in single)  # one node each, inside its stage
    assert single[0].node in ("/block1/conv/Conv", "/block1/act/Relu")
    whole = [spec for _lib, spec in faults if spec.kind == "bf16"]
    assert [spec.node for spec in whole] == [None, None]
