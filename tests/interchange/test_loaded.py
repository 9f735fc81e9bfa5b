"""ONNX graphs loaded once per file version, and what is derived from them once per model."""

from __future__ import annotations

import os
from pathlib import Path

import onnx
from onnx import TensorProto, helper

from anpred.interchange.loaded import facts_of, load_shared


def _write(path: Path, op: str) -> None:
    node = helper.make_node(op, ["x"], ["y"])
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in "xy"]
    graph = helper.make_graph([node], "g", vi[:1], vi[1:])
    onnx.save(helper.make_model(graph), str(path))


def test_a_file_is_loaded_once_per_version(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    _write(path, "Relu")
    first = load_shared(path)
    assert load_shared(path) is first
    _write(path, "Sigmoid")
    os.utime(path, ns=(1, 1))  # a new version even within the clock's resolution
    second = load_shared(path)
    assert second is not first and second.graph.node[0].op_type == "Sigmoid"


def test_facts_are_derived_once_per_model_object(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    _write(path, "Relu")
    model = load_shared(path)
    calls: list[int] = []

    def derive() -> int:
        calls.append(1)
        return len(calls)

    assert facts_of(model, "count", derive) == 1
    assert facts_of(model, "count", derive) == 1  # not derived again
    other = onnx.load(str(path))  # not a shared model: its owner may change it
    assert facts_of(other, "count", derive) == 2
    assert facts_of(other, "count", derive) == 3  # derived every time
