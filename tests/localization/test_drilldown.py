"""Drill-down judgement on synthetic populations: which operator is named, and why."""

from __future__ import annotations

import numpy as np

from anpred.analysis.oracle import OracleParams, assess, judge_anchor
from anpred.localization.drilldown import (
    OpInfo,
    drill_layers,
    drill_targets,
    judge_target,
    named_layer,
)
from anpred.participants import REFERENCE32
from anpred.store.summary_records import Finding

NAMES = [REFERENCE32, "onnxruntime", "openvino", "jax", "faulty"]
INPUTS = ["a", "b"]
#: fp32-sized relative noise of clean participants (the unit roundoff is 6e-8).
NOISE = 1e-7


def _verdicts(faulty_op: int | None, n_ops: int = 4, fault: float = 4e-3, chain: bool = True):
    """Verdicts of ``n_ops`` operators: the faulty participant introduces ``fault`` relative
    error at operator ``faulty_op`` (and carries it to the later ones in the chain).
    """
    rng = np.random.default_rng(0)
    verdicts = {}
    for k in range(n_ops):
        key = f"op{k + 1:04d}"
        evidence, introduced = [], {}
        for i in INPUTS:
            fp64 = rng.standard_normal(256)
            captures = {}
            for p in NAMES:
                own = fault if p == "faulty" and k == faulty_op else NOISE
                carried = fault if p == "faulty" and faulty_op is not None and k > faulty_op else 0
                rel = own + (carried if chain else 0.0)
                captures[p] = fp64 * (1 + rel * rng.standard_normal(256))
                introduced[(p, i)] = own * (1 + 0.1 * rng.random())
            evidence.append(assess(key, i, captures, captures[REFERENCE32], fp64))
        floor = {i: introduced[(REFERENCE32, i)] for i in INPUTS}
        for v in judge_anchor(
            evidence, OracleParams(), introduced=introduced, introduced_floor=floor
        ):
            verdicts[(v.participant, v.anchor, v.input_id)] = v
    ops = [OpInfo(f"op{k + 1:04d}", f"/n{k}", "Conv", f"m.{k}", "s") for k in range(n_ops)]
    return ops, verdicts


def test_the_operator_that_introduces_the_error_is_named_not_its_successors() -> None:
    ops, verdicts = _verdicts(faulty_op=2)
    target = judge_target("faulty", "s", ops, verdicts, INPUTS)
    assert target.named == "op0003"
    assert target.basis == "introduced"
    # the later operator inherits the error (chain finding) but introduces none
    last = target.ops[3]
    assert last.finding and not last.stands_out
    assert [o.stands_out for o in target.ops] == [False, False, True, False]
    assert target.named_op is not None and target.named_op.node == "/n2"


def test_a_clean_participant_gets_no_operator() -> None:
    ops, verdicts = _verdicts(faulty_op=2)
    target = judge_target("openvino", "s", ops, verdicts, INPUTS)
    assert target.named is None
    assert "stands out" in target.reason


def test_without_a_capture_the_reason_says_so() -> None:
    ops, verdicts = _verdicts(faulty_op=1)
    target = judge_target("paddle", "s", ops, verdicts, INPUTS)
    assert target.named is None and "no drill-down capture" in target.reason


def test_stages_drilled_are_emergence_and_introduced_ones() -> None:
    def finding(p: str, anchor: str, i: str, exceeded: str) -> Finding:
        return Finding(p, anchor, i, {"exceeded": exceeded})

    anchors = ["s1", "s2", "s3", "output"]
    findings = [
        finding("faulty", "s2", "a", "above_noise,introduced,outlier"),
        finding("faulty", "s3", "a", "above_noise,outlier"),  # inherited: not drilled
        finding("faulty", "output", "a", "above_noise,outlier"),
        finding("faulty", "s3", "b", "above_noise,outlier"),  # emergence on input b
        finding("other", "output", "a", "above_noise,introduced,outlier"),
    ]
    assert drill_targets(findings, anchors) == {"faulty": ["s2", "s3"], "other": ["output"]}
    assert drill_targets(findings, anchors, max_stages=1) == {
        "faulty": ["s2"],
        "other": ["output"],
    }
    assert drill_targets([], anchors) == {}


def test_with_two_participants_the_first_flagged_operator_is_named_by_finding() -> None:
    rng = np.random.default_rng(3)
    verdicts = {}
    for k, rel in enumerate([1e-7, 4e-3]):
        evidence = []
        for i in INPUTS:
            fp64 = rng.standard_normal(256)
            captures = {
                REFERENCE32: fp64 * (1 + NOISE * rng.standard_normal(256)),
                "faulty": fp64 * (1 + rel * rng.standard_normal(256)),
            }
            evidence.append(assess(f"op{k + 1:04d}", i, captures, captures[REFERENCE32], fp64))
        for v in judge_anchor(evidence, OracleParams()):
            verdicts[(v.participant, v.anchor, v.input_id)] = v
    ops = [OpInfo(f"op{k + 1:04d}", f"/n{k}", "Mul", None, "s") for k in range(2)]
    target = judge_target("faulty", "s", ops, verdicts, INPUTS)
    assert (target.named, target.basis) == ("op0002", "finding")
    clean = judge_target(REFERENCE32, "s", ops, verdicts, INPUTS)
    assert clean.named is None and "pairwise" in clean.reason


#: Module paths of a ResNet-like stage ``layer2`` (two blocks) as the drill graph records
#: them; ``None``: an exporter's helper node without scope.
RESNET_MODULES = [
    "layer2.0.conv1",
    "layer2.0.relu",
    "layer2.0.conv2",
    None,
    "layer2.1.conv1",
    "layer2.1.relu",
]


def test_layers_group_the_operator_chain_and_the_faulty_operators_layer_is_named() -> None:
    _, verdicts = _verdicts(faulty_op=4, n_ops=6)
    ops = [
        OpInfo(f"op{k + 1:04d}", f"/n{k}", "Conv", m, "layer2")
        for k, m in enumerate(RESNET_MODULES)
    ]
    target = judge_target("faulty", "layer2", ops, verdicts, INPUTS)
    assert target.named == "op0005"
    layers = drill_layers(target.ops)
    # one level below what the stage's operators share; the scopeless op joins layer2.0
    assert [x.module for x in layers] == ["layer2.0", "layer2.1"]
    assert layers[0].ops == ("op0001", "op0002", "op0003", "op0004")
    # a layer's output is its last operator's: the error enters in layer2.1
    assert layers[0].output == "op0004" and not layers[0].finding
    assert layers[1].output == "op0006" and layers[1].finding
    assert layers[1].chain == target.ops[5].chain
    assert layers[1].introducing == ("op0005",)
    assert named_layer(target) == (layers[1], "introduced")
    # a clean participant: no operator, no layer
    assert named_layer(judge_target("openvino", "layer2", ops, verdicts, INPUTS)) == (None, None)


def test_layers_need_module_paths_and_descend_past_a_single_shared_module() -> None:
    ops, verdicts = _verdicts(faulty_op=1, n_ops=3)
    bare = [OpInfo(o.key, o.node, o.op_type, None, "s") for o in ops]
    assert drill_layers(judge_target("faulty", "s", bare, verdicts, INPUTS).ops) == ()
    # YOLO: every operator of the stage under model.4 -> layers model.4.cv1, model.4.m
    yolo = ["model.4.cv1.conv", "model.4.m.0.cv1.conv", "model.4.m.0.cv2.conv"]
    scoped = [OpInfo(o.key, o.node, o.op_type, m, "s") for o, m in zip(ops, yolo, strict=True)]
    layers = drill_layers(judge_target("faulty", "s", scoped, verdicts, INPUTS).ops)
    assert [x.module for x in layers] == ["model.4.cv1", "model.4.m"]
