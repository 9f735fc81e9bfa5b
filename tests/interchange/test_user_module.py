"""A user's torch module: sources, example inputs, the anchor plan from the module tree, the
export (single, several and keyword inputs), the one-line export error, and the module a
worker rebuilds, fed as every runner feeds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from anpred.errors import UsageError
from anpred.interchange.module_export import export_user_module
from anpred.interchange.module_plan import candidates, module_plan
from anpred.interchange.packing import layout, pack
from anpred.interchange.user_module import (
    RECORD_FILE,
    ModuleRecord,
    example_ranges,
    example_tensors,
    is_module_source,
    is_onnx_path,
    load_user_module,
)

HERE = Path(__file__).parent
MODULES = HERE / "user_modules.py"


def _source(function: str) -> str:
    return f"{MODULES}:{function}"


def test_module_sources_are_told_apart_from_onnx_files_and_zoo_names() -> None:
    for source in ("net.py:build", "models/net.py:build_model", "/tmp/Net-0123.pt"):
        assert is_module_source(source) and not is_onnx_path(source)
    for other in ("yolov8n", "models/net.onnx", "net.py", "net.py:1build"):
        assert not is_module_source(other)
    assert is_onnx_path("models/net.onnx")


def test_example_inputs_a_tensor_a_tuple_or_named_tensors() -> None:
    x = torch.randn(1, 3, 8, 8, dtype=torch.float64)
    pairs, keywords = example_tensors(x, {}, 0)
    assert [n for n, _ in pairs] == ["input"] and not keywords
    assert pairs[0][1].dtype == torch.float32  # the module runs in float32
    pairs, keywords = example_tensors((x, torch.ones(2, dtype=torch.int64)), {}, 0)
    assert [n for n, _ in pairs] == ["input0", "input1"] and not keywords
    assert pairs[1][1].dtype == torch.int64
    pairs, keywords = example_tensors({"ids": torch.ones(1, 4, dtype=torch.int64)}, {}, 0)
    assert [n for n, _ in pairs] == ["ids"] and keywords
    pairs, _ = example_tensors(None, {None: (1, 3, 8, 8)}, 0)
    assert pairs[0][1].shape == (1, 3, 8, 8)
    with pytest.raises(UsageError, match="without example inputs"):
        example_tensors(None, {}, 0)
    with pytest.raises(UsageError, match="example input input1 is not a tensor"):
        example_tensors((x, 3), {}, 0)


def test_the_stage_plan_opens_containers_and_drops_anchors_that_repeat_a_tensor() -> None:
    from user_modules import SmallCnn

    model = SmallCnn().eval()
    assert candidates(model, "stage") == [
        "stem.0", "stem.1", "body.0", "body.1", "body.2", "drop", "pool", "head",
    ]  # fmt: skip
    plan = module_plan(model, "stage", (torch.randn(1, 3, 16, 16),))
    # eval-mode Dropout returns its own input, and head returns the output
    assert [a.name for a in plan] == [
        "stem.0", "stem.1", "body.0", "body.1", "body.2", "pool", "output",
    ]  # fmt: skip
    assert plan[0].group == "stem" and plan[-1].module == ""


def test_a_module_that_fails_on_its_inputs_is_one_line() -> None:
    from user_modules import SmallCnn

    with pytest.raises(UsageError, match="fails on its example inputs: RuntimeError") as err:
        module_plan(SmallCnn().eval(), "stage", (torch.randn(1, 4, 16, 16),))
    assert "\n" not in str(err.value)


@pytest.fixture(autouse=True)
def _importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))


def test_a_module_exports_with_its_anchors_and_a_worker_gets_the_same_module(
    tmp_path: Path,
) -> None:
    import onnxruntime as ort

    export = export_user_module(_source("build_cnn"), tmp_path, seed=3)
    assert export.keys == ["stem.0", "stem.1", "body.0", "body.1", "body.2", "pool", "output"]
    assert export.input_name == "input" and export.input_shape == (1, 3, 32, 32)
    record = ModuleRecord.from_dict(json.loads((tmp_path / RECORD_FILE).read_text()))
    assert record.weights_id == export.weights_id and record.weights_id.startswith("sha256:")
    model, weights_id = load_user_module(tmp_path)
    assert weights_id == export.weights_id
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(x)).numpy()
    session = ort.InferenceSession(str(export.plain_path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"input": x})[0]
    # fp32, same weights: the same logits up to float32 rounding (measured max 4e-7)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    # the fp64 reference is the module itself in float64
    with torch.no_grad():
        exact = model.double()(torch.from_numpy(x).double()).numpy()
    np.testing.assert_allclose(exact, expected, rtol=1e-4, atol=1e-5)


def test_named_inputs_of_several_dtypes_are_packed_and_unpacked_by_the_worker(
    tmp_path: Path,
) -> None:
    import onnxruntime as ort

    packing_record = tmp_path / "packing.json"
    export = export_user_module(
        _source("build_tokens"), tmp_path / "model", packing_record=packing_record
    )
    packing = json.loads(packing_record.read_text())
    assert [(t["name"], t["dtype"]) for t in packing["tensors"]] == [
        ("ids", "int64"), ("scale", "float32"),
    ]  # fmt: skip
    assert export.input_shape == (16,) and export.keys[0] == "emb"
    model, _ = load_user_module(tmp_path / "model")
    ids = np.arange(8, dtype=np.int64).reshape(1, 8) * 3
    scale = np.linspace(0.5, 1.5, 8, dtype=np.float32).reshape(1, 8, 1)
    tensors = layout([("ids", (1, 8), "int64"), ("scale", (1, 8, 1), "float32")])
    feed = pack(tensors, {"ids": ids, "scale": scale}, ["ids", "scale"])
    with torch.no_grad():
        fed = model(torch.from_numpy(feed)).numpy()
        direct = (
            type(model)
            .__mro__[1]
            .forward(model, torch.from_numpy(ids), torch.from_numpy(scale))
            .numpy()
        )
    np.testing.assert_array_equal(fed, direct)
    session = ort.InferenceSession(str(export.plain_path), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: feed})[0]
    np.testing.assert_allclose(got, direct, rtol=1e-5, atol=1e-5)


def test_an_operation_the_exporter_lacks_is_named_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot be exported to ONNX: .*aten::linalg_eigh") as err:
        export_user_module(_source("build_eigen"), tmp_path)
    assert "\n" not in str(err.value)


def test_a_builder_without_inputs_needs_input_shapes(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--input-shape"):
        export_user_module(_source("build_bare"), tmp_path)
    export = export_user_module(
        _source("build_bare"), tmp_path, input_shapes={None: (1, 3, 16, 16)}
    )
    assert export.input_shape == (1, 3, 16, 16)


def test_anchor_module_paths_replace_the_plan(tmp_path: Path) -> None:
    export = export_user_module(_source("build_cnn"), tmp_path, anchor_modules=["body", "stem"])
    assert export.keys == ["stem", "body", "output"]
    with pytest.raises(UsageError, match="unknown anchor module"):
        export_user_module(_source("build_cnn"), tmp_path / "b", anchor_modules=["nope"])


def test_a_worker_refuses_a_source_file_changed_since_the_export(tmp_path: Path) -> None:
    source = tmp_path / "net.py"
    source.write_text(MODULES.read_text())
    export_user_module(f"{source}:build_cnn", tmp_path / "model")
    load_user_module(tmp_path / "model")
    source.write_text(MODULES.read_text() + "\n# edited\n")
    with pytest.raises(UsageError, match="net.py changed since this run exported its module"):
        load_user_module(tmp_path / "model")


def test_constant_arithmetic_of_the_export_is_folded_and_recorded(tmp_path: Path) -> None:
    import onnx

    record = tmp_path / "folding.json"
    export = export_user_module(_source("build_masked"), tmp_path / "m", folding_record=record)
    for path in (export.anchored_path, export.plain_path):
        assert "ScatterND" not in {n.op_type for n in onnx.load(str(path)).graph.node}
    folding = json.loads(record.read_text())
    assert folding["used"] and folding["removed_ops"]["ScatterND"] >= 1
    assert all(o["ok"] for o in folding["outputs"])


def test_integer_inputs_default_to_their_example_span(tmp_path: Path) -> None:
    export_user_module(_source("build_tokens"), tmp_path)
    record = ModuleRecord.from_dict(json.loads((tmp_path / RECORD_FILE).read_text()))
    ids, scale = record.inputs
    assert ids.span is not None and 0 <= ids.span[0] <= ids.span[1] < 50 and scale.span is None
    assert example_ranges(tmp_path, (), ()) == (f"ids={ids.span[0]},{ids.span[1]}",)
    assert example_ranges(tmp_path, (), ("ids=0,9",)) == ()  # the user's own range wins
    assert example_ranges(tmp_path, (0.0, 9.0), ()) == ()  # and a bare --input-range
