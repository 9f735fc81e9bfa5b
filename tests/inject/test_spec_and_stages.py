"""FaultSpec, the kind registry, node → stage mapping and target resolution (no DL library)."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from fault_chain import NODES, build_export

from anpred.errors import UsageError
from anpred.inject import (
    FaultKind,
    FaultSpec,
    apply_faults,
    fault_kinds,
    faulty_name,
    node_stages,
    register_fault,
    resolve_targets,
    rewrite_model,
    stage_ops,
)
from anpred.inject.plan import PlannedFault, plan_fault, stage_anchors
from anpred.participants import parse_participant


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> tuple[onnx.ModelProto, list]:
    export = build_export(tmp_path_factory.mktemp("chain"))
    return onnx.load(str(export.anchored_path)), stage_anchors(export)


def test_fault_spec_round_trips_and_fills_the_default_severity() -> None:
    spec = FaultSpec("neck.p4", "Conv", "mantissa", 7)
    assert FaultSpec.from_dict(spec.to_dict()) == spec
    assert spec.label == "mantissa@neck.p4"
    default = FaultSpec.from_dict({"stage": "s2", "op": "Conv", "kind": "bf16"})
    assert default.severity == 1.0


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ({"stage": "s2", "op": "Conv", "kind": "int4"}, "unknown fault kind"),
        ({"stage": "s2", "op": "Conv", "kind": "mantissa", "severity": 23}, "0..22"),
        ({"stage": "s2", "op": "Conv", "kind": "mantissa", "severity": 7.5}, "0..22"),
        ({"stage": "s2", "op": "Conv", "kind": "bf16", "severity": 0}, "> 0"),
        (
            {"stage": "s4", "op": "LayerNormalization", "kind": "eps", "severity": 1},
            "changes nothing",
        ),
        ({"stage": "s2", "op": "Conv", "kind": "approx_act"}, "applies to Erf, Exp, Sigmoid, Tanh"),
        ({"stage": "s2", "op": "Sigmoid", "kind": "lowp_accum"}, "applies to Conv"),
        ({"stage": "s2", "kind": "bf16"}, "missing op"),
    ],
)
def test_invalid_faults_are_usage_errors(fault: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        FaultSpec.from_dict(fault)


def test_the_six_kinds_are_registered_and_duplicates_are_refused() -> None:
    assert list(fault_kinds()) == ["bf16", "fp16", "mantissa", "lowp_accum", "approx_act", "eps"]

    class Again(FaultKind):
        name = "bf16"

    with pytest.raises(ValueError, match="duplicate fault kind 'bf16'"):
        register_fault(Again)

    class Nameless(FaultKind):
        pass

    with pytest.raises(ValueError, match="has no name"):
        register_fault(Nameless)


def test_every_node_maps_to_the_stage_of_the_earliest_anchor_that_needs_it(chain) -> None:
    model, anchors = chain
    expected = {node: stage for stage, nodes in NODES.items() for node in nodes}
    assert node_stages(model, anchors) == expected
    ops = stage_ops(model, anchors)
    assert dict(ops["s2"]) == {"Conv": 1}
    assert dict(ops["output"]) == {"MatMul": 1, "Erf": 1, "Tanh": 1, "Exp": 1, "Mul": 2, "Add": 1}


def test_a_node_two_anchors_need_is_in_the_earlier_stage_and_dead_code_in_none(
    tmp_path: Path,
) -> None:
    # The head's Add reads s3's Sigmoid output (not an anchor, so not cut) instead of
    # tanh·exp: the Sigmoid is needed by s3 and by the output; Tanh/Exp/Mul become dead.
    export = build_export(tmp_path)
    model = onnx.load(str(export.anchored_path))
    add = next(n for n in model.graph.node if n.name == "/head/Add")
    add.input[1] = "sig"
    stages = node_stages(model, stage_anchors(export))
    assert stages["/s3/Sigmoid"] == "s3"
    assert stages["/head/Add"] == "output" and stages["/head/Erf"] == "output"
    assert not {"/head/Tanh", "/head/Exp", "/head/Mul", "/head/Scale"} & set(stages)


@pytest.mark.parametrize(
    ("stage", "op", "kind", "nodes"),
    [
        ("s2", "Conv", "bf16", ["/s2/Conv"]),
        ("s3", "*", "bf16", ["/s3/Sigmoid", "/s3/Mul"]),
        ("output", "*", "approx_act", ["/head/Erf", "/head/Tanh", "/head/Exp"]),
        ("output", "*", "lowp_accum", ["/head/MatMul"]),
        ("s1", "*", "eps", ["/s1/BatchNormalization"]),
        ("s4", "LayerNormalization", "eps", ["/s4/LayerNormalization"]),
    ],
)
def test_targets_are_the_matching_nodes_of_the_stage(chain, stage, op, kind, nodes) -> None:
    model, anchors = chain
    spec = FaultSpec.from_dict({"stage": stage, "op": op, "kind": kind})
    assert resolve_targets(model, anchors, spec) == nodes


def test_a_fault_that_matches_no_node_is_a_clear_error(chain) -> None:
    model, anchors = chain
    with pytest.raises(UsageError, match=r"matches no node of stage 's2' \(it has Conv×1\)"):
        resolve_targets(model, anchors, FaultSpec("s2", "Sigmoid", "bf16", 1))
    with pytest.raises(UsageError, match="unknown stage 'neck.p4'; the anchors are s1, s2"):
        resolve_targets(model, anchors, FaultSpec("neck.p4", "Conv", "bf16", 1))
    with pytest.raises(UsageError, match="matches no node"):
        resolve_targets(model, anchors, FaultSpec("s2", "*", "eps", 10))


def test_plan_fault_records_the_nodes(tmp_path: Path) -> None:
    export = build_export(tmp_path)
    spec = FaultSpec.from_dict(
        {"stage": "s3", "op": "Sigmoid", "kind": "approx_act", "severity": 0.5}
    )
    planned = plan_fault(spec, export)
    assert PlannedFault.from_record(planned.record()) == planned
    assert planned.record() == {
        "stage": "s3",
        "op": "Sigmoid",
        "kind": "approx_act",
        "severity": 0.5,
        "label": "approx_act@s3",
        "acts_on": "output",
        "nodes": ["/s3/Sigmoid"],
    }


def test_rewriting_a_graph_without_the_target_node_is_an_error(chain) -> None:
    model, _ = chain
    with pytest.raises(UsageError, match="missing from the graph: /nowhere/Conv"):
        rewrite_model(model, FaultSpec("s2", "Conv", "bf16", 1), ["/nowhere/Conv"])


def test_output_rewrite_keeps_names_and_order(chain) -> None:
    model, _ = chain
    spec = FaultSpec("s2", "Conv", "bf16", 1)
    faulty = rewrite_model(model, spec, ["/s2/Conv"])
    onnx.checker.check_model(faulty)  # topologically sorted, every name defined once
    produced = [o for n in faulty.graph.node for o in n.output]
    assert produced.count("anchor.s2") == 1
    assert [o.name for o in faulty.graph.output] == [o.name for o in model.graph.output]
    casts = [n for n in faulty.graph.node if n.op_type == "Cast"]
    assert [c.attribute[0].i for c in casts] == [onnx.TensorProto.BFLOAT16, onnx.TensorProto.FLOAT]
    assert len(model.graph.node) == 14  # the input model is not modified


def test_faulty_participants_replace_their_clean_version() -> None:
    participants = [parse_participant(p) for p in ("torch", "onnxruntime", "jax")]
    fault = {"stage": "neck.p4", "op": "Conv", "kind": "bf16", "severity": 1}
    result = apply_faults(participants, {"onnxruntime": fault})
    assert [p.name for p in result] == ["torch", "onnxruntime!bf16@neck.p4", "jax"]
    # the fault is a transform of the job, not a setting of the library
    assert result[1].library == "onnxruntime" and result[1].settings == {}
    added = apply_faults(participants, {"tensorflow[xla]": fault})
    assert added[-1].name == "tensorflow[xla]!bf16@neck.p4"
    assert added[-1].settings == {"jit_compile": True}
    assert faulty_name("paddle", FaultSpec("neck.p4", "*", "fp16", 1)) == "paddle!fp16@neck.p4"
    with pytest.raises(UsageError, match="fp64 reference"):
        apply_faults(participants, {"torch[fp64]": fault})
    with pytest.raises(UsageError, match="native module"):
        apply_faults(participants, {"torch": fault})
    onnx_model = apply_faults(participants, {"torch": fault}, native_torch=False)
    assert onnx_model[0].name == "torch!bf16@neck.p4"
