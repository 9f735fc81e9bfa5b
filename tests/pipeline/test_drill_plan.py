"""Planning the drill-down's jobs: faults follow their participant into the drill graph."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from anpred.inject.plan import PlannedFault
from anpred.inject.spec import FaultSpec
from anpred.inject.transforms import FAULT_KEY, FaultNodeHooks, FaultyGraphs
from anpred.interchange.drill_graph import PACKED_INPUT, build_drill_graph
from anpred.interchange.export import AnchoredExport, AnchorOutput
from anpred.interchange.transform import TRANSFORMS_KEY
from anpred.participants import Participant
from anpred.pipeline.drill import drill_transforms
from anpred.store import RunStore
from anpred.store.drill import DrillStore

SHAPE = (1, 2, 4, 4)


def _graph():
    w = numpy_helper.from_array(np.ones((2, 2, 1, 1), np.float32), "w")
    nodes = [
        helper.make_node("Relu", ["images"], ["a1"], name="/s1/Relu"),
        helper.make_node("Conv", ["a1", "w"], ["c2"], name="/s2/Conv"),
        helper.make_node("Sigmoid", ["c2"], ["a2"], name="/s2/Sigmoid"),
    ]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(SHAPE)) for n in ("a2", "a1")]
    inp = [helper.make_tensor_value_info("images", TensorProto.FLOAT, list(SHAPE))]
    model = helper.make_model(
        helper.make_graph(nodes, "g", inp, outs, [w]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    anchors = [
        AnchorOutput("s1", "s1", "", "s1", "a1", SHAPE),
        AnchorOutput("output", "output", "", "s2", "a2", SHAPE),
    ]
    return model, anchors


def _status(store: RunStore, name: str, records: list[dict]) -> None:
    store.participant(name).create().write_status({"state": "ok", TRANSFORMS_KEY: records})


def test_faults_are_rewritten_into_the_drill_graph_or_dropped(tmp_path: Path) -> None:
    model, anchors = _graph()
    graph = build_drill_graph(model, anchors, "images", SHAPE, ["output"])
    drill = DrillStore(tmp_path)
    export = AnchoredExport(drill.model_dir, PACKED_INPUT, (graph.packed_size,), 17, ())
    store = RunStore(tmp_path)
    inside = PlannedFault(FaultSpec("output", "*", "bf16", 1, node="/s2/Conv"), ("/s2/Conv",))
    outside = PlannedFault(FaultSpec("s1", "*", "bf16", 1), ("/s1/Relu",))
    hooks = FaultNodeHooks(inside).record()
    _status(store, "onnxruntime!bf16@output", [FaultyGraphs(inside, tmp_path / "x").record()])
    _status(store, "openvino!bf16@s1", [FaultyGraphs(outside, tmp_path / "y").record()])
    _status(store, "jax!bf16@output", [hooks])
    _status(store, "torch", [])
    people = [
        Participant("onnxruntime!bf16@output", "onnxruntime"),
        Participant("openvino!bf16@s1", "openvino"),
        Participant("jax!bf16@output", "jax"),
        Participant("torch", "torch"),
    ]
    planned = drill_transforms(store, drill, people, graph, export)
    assert set(planned) == {"onnxruntime!bf16@output", "jax!bf16@output"}
    assert planned["jax!bf16@output"] == [hooks]  # per-node hooks apply by node name
    (record,) = planned["onnxruntime!bf16@output"]
    assert record["kind"] == FaultyGraphs.kind and record[FAULT_KEY]["nodes"] == ["/s2/Conv"]
    folder = Path(record["folder"])
    assert folder == drill.participant_model_dir("onnxruntime!bf16@output")
    rewritten = onnx.load(str(folder / export.anchored_path.name))
    conv = next(n for n in rewritten.graph.node if n.name == "/s2/Conv")
    assert conv.output[0].endswith("/before_fault")
    assert any(n.op_type == "Cast" for n in rewritten.graph.node)
