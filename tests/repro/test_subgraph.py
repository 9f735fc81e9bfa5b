"""Reduced cases: cut, fed, batched side by side, and written alone as ``model.onnx``."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from repro_models import tiny_drill_graph

from anpred.errors import UsageError
from anpred.repro.subgraph import (
    BATCH_OUTPUT,
    STANDALONE_OUTPUT,
    StageCases,
    batch_graph,
    input_names,
    prefix,
    standalone_model,
)


@pytest.fixture(scope="module")
def stage() -> StageCases:
    return StageCases(tiny_drill_graph(), "s2")


def _values(stage: StageCases) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """A packed stage input and every operator output the stage computes from it (in
    float64, as the fp64 reference captures them)."""
    import onnxruntime as ort

    rng = np.random.default_rng(1)
    packed = rng.standard_normal(stage.graph.packed_size).astype(np.float32)
    session = ort.InferenceSession(stage.graph.anchored.SerializeToString())
    names = [o.output for o in stage.graph.ops]
    outs = session.run(names, {"drill.input": packed})
    return packed, {o.key: v.astype(np.float64) for o, v in zip(stage.graph.ops, outs, strict=True)}


def test_the_operator_alone_is_fed_its_inputs_from_the_reference(stage: StageCases) -> None:
    add = stage.case(["/block2/Add"], "op0003")
    assert add.nodes == ("/block2/Add",) and add.ops == ("op0003",)
    # one input from the sigmoid's captured output, one from the packed stage input
    assert [(f.name, f.op) for f in add.fed] == [("s2", "op0002"), ("r1.fed", None)]
    assert add.size == 1


def test_operators_the_target_does_not_read_are_left_out(stage: StageCases) -> None:
    # the Sigmoid reads the Conv; the Add is after the target and cannot change it
    case = stage.case(["/block2/conv/Conv", "/block2/act/Sigmoid", "/block2/Add"], "op0002")
    assert case.nodes == ("/block2/conv/Conv", "/block2/act/Sigmoid")
    assert [f.name for f in case.fed] == ["r1.fed"]
    with pytest.raises(UsageError, match="must hold its node"):
        stage.case(["/block2/conv/Conv"], "op0002")


def test_a_batch_computes_each_case_as_it_stands_alone(stage: StageCases) -> None:
    import onnxruntime as ort

    packed, fp64 = _values(stage)
    single = stage.case(["/block2/Add"], "op0003")
    chain = stage.case(["/block2/conv/Conv", "/block2/act/Sigmoid", "/block2/Add"], "op0003")
    batch = batch_graph([single, chain], stage)
    # only each case's target is exposed (an exposed intermediate would block fusions)
    assert [a.key for a in batch.anchors] == [f"{prefix(0)}op0003", f"{prefix(1)}op0003",
                                              "output"]  # fmt: skip
    feeds = [stage.fed_values(c, packed, fp64) for c in (single, chain)]
    session = ort.InferenceSession(batch.anchored.SerializeToString())
    names = [a.onnx_name for a in batch.anchors]
    got = dict(zip(names, session.run(names, {"repro.input": batch.pack(feeds)}), strict=True))
    np.testing.assert_array_equal(got[BATCH_OUTPUT], got[f"{prefix(0)}a2"])
    for case, fed in zip((single, chain), feeds, strict=True):
        model = standalone_model(case, stage)
        onnx.checker.check_model(model)
        names_in = input_names(case)
        assert [i.name for i in model.graph.input] == [names_in[f.name] for f in case.fed]
        assert [o.name for o in model.graph.output] == [STANDALONE_OUTPUT]
        alone = ort.InferenceSession(model.SerializeToString()).run(
            None, {names_in[k]: v for k, v in fed.items()}
        )[0]
        index = 0 if case is single else 1
        np.testing.assert_allclose(alone, got[f"{prefix(index)}a2"], rtol=0, atol=0)
    # both compute the Add of the stage from (nearly) the same values
    np.testing.assert_allclose(got[f"{prefix(0)}a2"], fp64["op0003"], rtol=1e-5, atol=1e-6)
