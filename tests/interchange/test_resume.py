"""Resumed graphs: which anchors a change reaches, and the pruned graph that recomputes them.

Checked with ONNX's reference evaluator (no DL library): the resumed graph, fed the whole
graph's values of the anchors it does not recompute, gives the whole graph's values of
those it does, exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from anpred.interchange.export import AnchoredExport, AnchorOutput
from anpred.interchange.isolation import fed_name
from anpred.interchange.loaded import facts_of, load_shared
from anpred.interchange.resume import (
    export_resumed,
    footprint,
    provide_anchored,
    provided_anchored,
    resumed_model,
)

ANCHORS = ["a1", "a2", "a3", "out"]


def _model() -> onnx.ModelProto:
    """Four stages; a non-anchor value (``skip``) of stage 1 crosses into stage 3, and the
    output reads the model input again (as a packed model's tail may)."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), "w")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m1"], name="s1/mm"),
        helper.make_node("Tanh", ["m1"], ["a1"], name="s1/tanh"),
        helper.make_node("Neg", ["m1"], ["skip"], name="s1/neg"),
        helper.make_node("Sigmoid", ["a1"], ["a2"], name="s2/sig"),
        helper.make_node("Add", ["a2", "skip"], ["a3"], name="s3/add"),
        helper.make_node("Mul", ["a3", "x"], ["out"], name="s4/mul"),
    ]
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 4]) for n in ANCHORS]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])], vi, [w]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    outputs = [o.name for o in model.graph.output]
    return dict(zip(outputs, ReferenceEvaluator(model).run(None, feeds), strict=True))


def test_footprint_follows_the_anchored_graph_or_the_isolation_graph() -> None:
    model = _model()
    assert footprint(model, ANCHORS, {"s2/sig"}, isolated=False) == ["a2", "a3", "out"]
    # in the isolation graph every consumer of an anchor reads it fed: only a2 changes
    assert footprint(model, ANCHORS, {"s2/sig"}, isolated=True) == ["a2"]
    # the skip value crosses stages without an anchor: stage 1's fault reaches a3 there too
    assert footprint(model, ANCHORS, {"s1/neg"}, isolated=True) == ["a3"]
    assert footprint(model, ANCHORS, {"nowhere"}, isolated=False) == []


def test_a_resumed_graph_gives_the_whole_graphs_values_from_the_others() -> None:
    model = _model()
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    whole = _run(model, {"x": x})
    changed = footprint(model, ANCHORS, {"s2/sig"}, isolated=False)
    fed = [a for a in ANCHORS if a not in changed]
    before = model.SerializeToString()
    resumed, inputs = resumed_model(model, fed, changed)
    assert model.SerializeToString() == before  # a shared model is left as it was
    # stage 1's nodes stay only for the value that crosses without an anchor
    assert {n.name for n in resumed.graph.node} == {"s1/mm", "s1/neg", "s2/sig", "s3/add", "s4/mul"}
    assert inputs == ["x", fed_name("a1")]
    values = _run(resumed, {"x": x, fed_name("a1"): whole["a1"]})
    assert list(values) == changed
    for name in changed:
        np.testing.assert_array_equal(values[name], whole[name])


def test_an_isolation_cut_keeps_only_the_changed_stage() -> None:
    model = _model()
    resumed, inputs = resumed_model(model, ANCHORS, ["a2"])
    assert [n.name for n in resumed.graph.node] == ["s2/sig"]
    assert inputs == [fed_name("a1")]
    assert not resumed.graph.initializer  # w is read by no kept node
    a1 = np.full((2, 4), 0.5, np.float32)
    (value,) = ReferenceEvaluator(resumed).run(None, {fed_name("a1"): a1})
    np.testing.assert_array_equal(value, 1 / (1 + np.exp(-a1)))


def test_an_output_nothing_computes_is_refused() -> None:
    with pytest.raises(ValueError, match="no node computes x"):
        resumed_model(_model(), [], ["x"])


def test_a_provided_anchored_graph_is_cut_instead_of_the_file(tmp_path: Path) -> None:
    model = _model()
    path = tmp_path / "model" / "anchored.onnx"  # never written
    export = AnchoredExport(
        tmp_path / "model",
        "x",
        (2, 4),
        17,
        tuple(AnchorOutput(a, a, a, "g", a, (2, 4)) for a in ANCHORS),
    )
    made: list[int] = []

    def make() -> onnx.ModelProto:
        made.append(1)
        return model

    provide_anchored(path, make)
    assert provided_anchored(path) is None  # made when first needed
    first, inputs = export_resumed(export, ["a1", "a2"], ["a3"])
    again, _ = export_resumed(export, ANCHORS, ["a2"])
    assert made == [1] and provided_anchored(path) is model
    expected = resumed_model(model, ["a1", "a2"], ["a3"])
    assert first.SerializeToString() == expected[0].SerializeToString()
    assert inputs == expected[1]
    assert provided_anchored(tmp_path / "other.onnx") is None
    provide_anchored(tmp_path / "other.onnx", make)  # replaces the one before
    with pytest.raises(FileNotFoundError):
        export_resumed(export, ["a1", "a2"], ["a3"])


def test_footprint_of_a_shared_graph_reads_its_consumers_once(tmp_path: Path) -> None:
    onnx.save(_model(), str(tmp_path / "anchored.onnx"))
    shared = load_shared(tmp_path / "anchored.onnx")
    plain = _model()
    for nodes, isolated in [({"s2/sig"}, False), ({"s1/neg"}, True), ({"s1/mm"}, False)]:
        expected = footprint(plain, ANCHORS, nodes, isolated)
        assert footprint(shared, ANCHORS, nodes, isolated) == expected
    consumers = facts_of(shared, "consumers", lambda: pytest.fail("read again"))
    assert sorted(consumers[0]) == ["a1", "a2", "a3", "m1", "skip", "w", "x"]
