"""Faults as transforms: which transform each library gets, the rewritten graphs, records.

What the faults compute in every library is checked by ``test_fault_kinds.py``; this file
checks the planning done in the main process (no DL library is imported here).
"""

from __future__ import annotations

import json

import onnx
import pytest
from fault_chain import build_export

from anpred.backends.base import ModelJob
from anpred.errors import UsageError
from anpred.inject.spec import FaultSpec
from anpred.inject.transforms import (
    FaultNodeHooks,
    FaultyGraphs,
    deferred_graph,
    deferred_graphs,
    fault_transform,
    recorded_fault,
    write_deferred_graphs,
)
from anpred.interchange.transform import TRANSFORMS_KEY, Transforms, transform_from_record
from anpred.pipeline.transforms import MODEL_FOLDER, plan_transforms
from anpred.store import RunStore

BF16 = FaultSpec("s2", "Conv", "bf16", 1)
EPS = FaultSpec("s4", "LayerNormalization", "eps", 50)


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory):
    return build_export(tmp_path_factory.mktemp("export"))


@pytest.mark.parametrize("library", ["jax", "tensorflow", "paddle", "torch"])
def test_translated_libraries_get_node_hooks_and_no_files(export, tmp_path, library) -> None:
    transform = fault_transform(library, BF16, export, tmp_path / "model")
    assert isinstance(transform, FaultNodeHooks)
    assert transform.planned.nodes == ("/s2/Conv",)
    assert not (tmp_path / "model").exists()
    job = ModelJob(export, None)
    assert transform.model(job) == job  # the graphs stay the export's


@pytest.mark.parametrize(
    ("library", "spec", "casts"),
    [("onnxruntime", BF16, 2), ("openvino", BF16, 0), ("jax", EPS, 0)],
)
def test_graph_faults_are_rewritten_before_the_worker_starts(
    export, tmp_path, library, spec, casts
) -> None:
    transform = fault_transform(library, spec, export, tmp_path / "model")
    assert isinstance(transform, FaultyGraphs)
    job = transform.model(ModelJob(export, None))
    assert job.export.folder == tmp_path / "model"
    assert job.export.anchors == export.anchors
    for path in (job.export.anchored_path, job.export.plain_path):
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
        # bf16 round trips are Cast pairs, except for OpenVINO (it removes them: emulated)
        assert sum(n.op_type == "Cast" for n in model.graph.node) == casts
    if spec is EPS:
        (node,) = [n for n in onnx.load(str(job.export.plain_path)).graph.node
                   if n.op_type == "LayerNormalization"]  # fmt: skip
        epsilon = next(a.f for a in node.attribute if a.name == "epsilon")
        assert epsilon == pytest.approx(1e-5 * 50)


def test_the_record_carries_the_plan_the_worker_reports(export, tmp_path) -> None:
    transform = fault_transform("onnxruntime", BF16, export, tmp_path / "model")
    record = transform.record()
    assert record["kind"] == "fault-graphs" and record["module"] == "anpred.inject.transforms"
    rebuilt = transform_from_record(record)
    assert isinstance(rebuilt, FaultyGraphs) and rebuilt.planned == transform.planned
    status = {"state": "ok", TRANSFORMS_KEY: Transforms((rebuilt,)).records()}
    assert recorded_fault(status) == transform.planned.record()
    assert recorded_fault({"state": "ok", "settings": {}}) is None


def test_a_run_plans_faults_and_hands_over_given_transforms(export, tmp_path) -> None:
    given = {"jax": [{"kind": "fault-hooks", "module": "anpred.inject.transforms",
                      "fault": {**BF16.to_dict(), "nodes": ["/s2/Conv"]}}]}  # fmt: skip
    extra = {"faults": {"onnxruntime": BF16.to_dict()}, TRANSFORMS_KEY: given}
    planned = plan_transforms(extra, export, tmp_path)
    assert planned["jax"] == given["jax"]
    (record,) = planned["onnxruntime!bf16@s2"]
    folder = RunStore(tmp_path).participant("onnxruntime!bf16@s2").folder / MODEL_FOLDER
    assert record["folder"] == str(folder) and (folder / "anchored.onnx").exists()
    assert plan_transforms({}, export, tmp_path) == {}
    with pytest.raises(UsageError, match="matches no node"):
        plan_transforms({"faults": {"jax": {**BF16.to_dict(), "op": "Sigmoid"}}}, export, tmp_path)


@pytest.mark.parametrize(("library", "spec"), [("onnxruntime", BF16), ("openvino", BF16)])
def test_deferred_graphs_are_the_graphs_the_driver_writes(export, tmp_path, library, spec) -> None:
    written = fault_transform(library, spec, export, tmp_path / "driver")
    nodes = written.planned.nodes
    deferred = fault_transform(library, spec, export, tmp_path / "worker", graphs=False)
    assert deferred.record() == {**written.record(), "folder": str(tmp_path / "worker")}
    assert not any((tmp_path / "worker").iterdir())  # nothing written
    plan = deferred_graphs(library, spec, export, tmp_path / "worker", nodes)
    assert plan is not None
    assert json.loads(json.dumps(plan)) == plan  # travels in the job file
    anchored = deferred_graph(plan, "anchored")
    write_deferred_graphs(plan, anchored)
    for name in ("anchored.onnx", "plain.onnx"):
        ours = (tmp_path / "worker" / name).read_bytes()
        assert ours == (tmp_path / "driver" / name).read_bytes(), name


def test_graphs_are_deferred_only_to_runners_that_read_them_when_needed(export, tmp_path) -> None:
    nodes = ("/s2/Conv",)
    assert deferred_graphs("onnxruntime", BF16, export, tmp_path, nodes) is not None
    assert deferred_graphs("jax", EPS, export, tmp_path, nodes) is not None  # attribute fault
    assert deferred_graphs("jax", BF16, export, tmp_path, nodes) is None  # hooks: no graphs
    assert deferred_graphs("ncnn", BF16, export, tmp_path, nodes) is None  # converted
