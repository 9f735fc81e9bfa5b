"""``anpred inject --node``: a fault on one ONNX node, planned and recorded."""

from __future__ import annotations

import onnx
import pytest
from fault_chain import build_export

from anpred.errors import UsageError
from anpred.inject import FaultSpec, resolve_targets, rewrite_model
from anpred.inject.plan import PlannedFault, plan_fault, stage_anchors
from anpred.inject.stages import stage_nodes, stage_of_node


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory):
    export = build_export(tmp_path_factory.mktemp("chain"))
    return export, onnx.load(str(export.anchored_path)), stage_anchors(export)


def test_a_node_fault_round_trips_and_stage_faults_stay_as_they_were() -> None:
    spec = FaultSpec.from_dict(
        {"stage": "s3", "op": "*", "kind": "bf16", "node": "/s3/Mul", "severity": 1}
    )
    assert spec.node == "/s3/Mul"
    assert FaultSpec.from_dict(spec.to_dict()) == spec
    assert "node" not in FaultSpec("s3", "*", "bf16", 1).to_dict()


def test_only_the_named_node_is_targeted_and_recorded(chain) -> None:
    export, model, anchors = chain
    assert resolve_targets(model, anchors, FaultSpec("s3", "*", "bf16", 1)) == [
        "/s3/Sigmoid",
        "/s3/Mul",
    ]
    spec = FaultSpec("s3", "*", "bf16", 1, node="/s3/Mul")
    planned = plan_fault(spec, export, model)
    assert planned.nodes == ("/s3/Mul",)
    record = planned.record()
    assert record["node"] == "/s3/Mul" and record["nodes"] == ["/s3/Mul"]
    assert PlannedFault.from_record(record) == planned
    rewritten = rewrite_model(model, spec, planned.nodes)
    mul = next(n for n in rewritten.graph.node if n.name == "/s3/Mul")
    assert mul.output[0].endswith("/before_fault")  # the fault sits after the node
    sigmoid = next(n for n in rewritten.graph.node if n.name == "/s3/Sigmoid")
    assert not any(o.endswith("/before_fault") for o in sigmoid.output)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (FaultSpec("s3", "*", "bf16", 1, node="/nope"), "no node '/nope' in the graph"),
        (FaultSpec("s2", "*", "bf16", 1, node="/s3/Mul"), "is in stage 's3', not 's2'"),
        (FaultSpec("s3", "Conv", "bf16", 1, node="/s3/Mul"), "is a Mul, not a Conv"),
    ],
)
def test_a_wrong_node_is_a_one_line_usage_error(chain, spec, message) -> None:
    _, model, anchors = chain
    with pytest.raises(UsageError, match=message):
        resolve_targets(model, anchors, spec)


def test_stage_listing_and_the_stage_of_a_node(chain) -> None:
    _, model, anchors = chain
    assert [(k, op) for k, op, _ in stage_nodes(model, anchors, "s3")] == [
        ("/s3/Sigmoid", "Sigmoid"),
        ("/s3/Mul", "Mul"),
    ]
    assert stage_of_node(model, anchors, "/s2/Conv") == "s2"
    with pytest.raises(UsageError, match="no node '/x' in any stage"):
        stage_of_node(model, anchors, "/x")
