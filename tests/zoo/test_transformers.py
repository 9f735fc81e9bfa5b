"""The zoo's transformer models: built from ``transformers`` (tiny configs, seeded), anchored
per block, exported and run; the zoo stays importable without ``transformers``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from anpred.zoo.registry import get_model, module_source

torch = pytest.importorskip("torch")


def test_zoo_names_map_to_their_module_source_and_others_stay() -> None:
    source = module_source("llama_tiny")
    path, function = source.rsplit(":", 1)
    assert function == "llama_tiny" and Path(path).name == "transformer_builders.py"
    assert Path(path).is_absolute() and Path(path).is_file()
    assert get_model("bert_tiny").source == "transformers"
    for other in ("yolov8n", "model.onnx", "my.py:build"):
        assert module_source(other) == other


def test_zoo_imports_without_transformers_and_building_says_how_to_install() -> None:
    code = (
        "import sys; sys.modules['transformers'] = None\n"
        "from anpred.zoo.registry import model_names, get_model\n"
        "assert 'bert_tiny' in model_names()\n"
        "assert 'torch' not in sys.modules\n"
        "from anpred.errors import UsageError\n"
        "try:\n    get_model('bert_tiny').build()\n"
        "except UsageError as err:\n    print(err)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "need the transformers package: pip install" in proc.stdout
    assert len(proc.stdout.strip().splitlines()) == 1


def test_one_float_input_taken_by_name_is_fed_by_name() -> None:
    from anpred.interchange.user_module import InputSpec, ModuleRecord, fed_module

    class ByName(torch.nn.Module):
        def forward(self, *, input_values: torch.Tensor) -> torch.Tensor:
            return input_values * 2

    spec = InputSpec("input_values", (1, 4), "float32")
    record = ModuleRecord("m.py:build", 0, (spec,), True, "sha256:0", "0")
    fed = fed_module(ByName(), record)  # wav2vec2_tiny's waveform: one float, by name
    assert torch.equal(fed(torch.ones(1, 4)), torch.full((1, 4), 2.0))


def test_token_ids_stay_exact_under_an_ideal_bf16_reference() -> None:
    """The ideal bf16 reference rounds every float result to bf16: packed token ids must
    leave the float feed before any float op (ids above 256 are not bf16 numbers).
    """
    from anpred.interchange.user_module import InputSpec, ModuleRecord, fed_module
    from anpred.translate.torch.emulation import RoundingMode

    class Ids(torch.nn.Module):
        def forward(self, *, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return input_ids * attention_mask

    specs = (InputSpec("input_ids", (1, 3), "int64"), InputSpec("attention_mask", (1, 3), "int64"))
    fed = fed_module(Ids(), ModuleRecord("m.py:build", 0, specs, True, "sha256:0", "0"))
    feed = torch.tensor([257.0, 999.0, 513.0, 1.0, 1.0, 0.0], dtype=torch.float64)
    with RoundingMode("bfloat16"):
        got = fed(feed)
    assert got.tolist() == [[257, 999, 0]]


def test_an_ideal_bf16_run_takes_its_input_unrounded() -> None:
    """The ideal bf16 reference (``torch[ideal-bf16]``) feeds its module the input as given:
    token ids carried in float (999 is not a bf16 number) reach the module exact, and only
    the module's own operators round (measured on bert_tiny: the class floor at the
    embeddings was 0.68 with the feed rounded, 3.2e-3 without).
    """
    from anpred.backends.torch_runner import NativeExecution

    class Echo(torch.nn.Module):
        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return ids.to(torch.int64)  # no float operator: nothing the mode rounds

    run = NativeExecution(Echo(), [], torch.float64, emulate="bfloat16")
    feed = np.array([[257.0, 999.0, 513.0]])
    assert run.plain(feed).tolist() == [[257, 999, 513]]
    assert run.anchored(feed)["output"].tolist() == [[257, 999, 513]]


pytest.importorskip("transformers")
onnxruntime = pytest.importorskip("onnxruntime")

from anpred.interchange.module_export import export_user_module  # noqa: E402
from anpred.interchange.packing import PACKED_MODEL_INPUT  # noqa: E402
from anpred.zoo import transformer_builders  # noqa: E402

#: Stage anchors of each model at opset 17: embedding, every block but the last (whose
#: output is the model's, the ``output`` anchor), the final norm where there is one.
STAGE_ANCHORS = {
    "bert_tiny": ["embeddings", "blocks.0", "blocks.1", "blocks.2", "output"],
    "llama_tiny": [
        "embed_tokens", "blocks.0", "blocks.1", "blocks.2", "blocks.3", "norm", "output",
    ],
    "wav2vec2_tiny": [
        "features", "projection:0", "projection:1", "position", "blocks.0", "blocks.1", "output",
    ],
}  # fmt: skip
#: Transformer blocks of each model.
BLOCKS = {"bert_tiny": 4, "llama_tiny": 4, "wav2vec2_tiny": 3}
#: fp32 torch vs onnxruntime on these graphs: at most 3e-6 measured on the output (hidden
#: states of unit scale, logits of 0.1); 1e-4 leaves room for other CPUs' kernels.
ATOL = 1e-4


def documented_ops(model: str) -> set[str]:
    """The ops docs/zoo-ops.md's first table lists for ``model``."""
    text = (Path(__file__).parents[2] / "docs" / "zoo-ops.md").read_text()
    table = text.split("\n## ")[0]
    rows = [line.strip("|").split("|") for line in table.splitlines() if line.startswith("| ")]
    return {op.strip() for op, models in rows if model in models.replace(" ", "").split(",")}


@pytest.mark.parametrize("name", sorted(STAGE_ANCHORS))
def test_transformer_exports_anchored_per_block_and_runs_in_onnxruntime(name, tmp_path) -> None:
    export = export_user_module(module_source(name), tmp_path, "stage")
    keys = [a.key for a in export.anchors]
    assert sorted(keys) == sorted(STAGE_ANCHORS[name])
    import onnx

    graph = onnx.load(str(export.anchored_path))
    ops = Counter(node.op_type for node in graph.graph.node)
    assert ops["Softmax"] == BLOCKS[name]  # eager attention: one Softmax per block
    assert set(ops) <= documented_ops(name), "docs/zoo-ops.md misses ops of " + name
    torch.manual_seed(0)
    module, example = transformer_builders.BUILDERS[name]()
    with torch.no_grad():
        expected = module(**example).numpy()
    if export.input_name == PACKED_MODEL_INPUT:  # ids and mask, packed into one vector
        feed = np.concatenate([t.numpy().reshape(-1) for t in example.values()])
    else:
        feed = next(iter(example.values())).numpy()
    session = onnxruntime.InferenceSession(str(export.anchored_path))
    got = session.run(None, {export.input_name: feed.astype(export.input_dtype)})
    outputs = dict(zip([o.name for o in session.get_outputs()], got, strict=True))
    output = next(a for a in export.anchors if a.key == "output")
    np.testing.assert_allclose(outputs[output.onnx_name], expected, atol=ATOL, rtol=0)


def test_layer_granularity_anchors_attention_and_mlp_of_each_block(tmp_path) -> None:
    from anpred.interchange.module_plan import module_plan

    module, example = transformer_builders.llama_tiny()
    anchors = [a.name for a in module_plan(module, "layer", list(example.values()), list(example))]
    for block in range(4):
        assert f"blocks.{block}.self_attn" in {a.split(":")[0] for a in anchors}
        assert f"blocks.{block}.mlp" in anchors


@pytest.mark.slow
def test_fused_export_emits_attention_and_rmsnorm_at_opset_23(tmp_path) -> None:
    from anpred.zoo.transformer_export import export_fused

    outputs, ops = export_fused("llama_tiny", tmp_path / "llama.onnx")
    assert outputs[0] == "anchor.output" and "anchor.blocks.0" in outputs
    assert ops["Attention"] == 4 and ops["RMSNormalization"] == 9
    assert ops["RotaryEmbedding"] == 0 and ops["Softmax"] == 0


#: The attention Softmax of llama_tiny's second block (legacy exporter's scope names).
LLAMA_SOFTMAX = "/model/model/model/blocks.1/self_attn/Softmax"


@pytest.mark.slow
def test_bf16_fault_in_one_llama_attention_is_localized_and_drilled(tmp_path) -> None:
    """bf16 on the attention Softmax of blocks.1 in onnxruntime, six libraries: the finding
    emerges at blocks.1 and the drill-down names the faulted node (measured: docs/zoo-ops.md).
    """
    from anpred.store import RunStore

    out = tmp_path / "run"
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(
        [sys.executable, "-m", "anpred", "inject", "llama_tiny", "--lib", "onnxruntime",
         "--node", LLAMA_SOFTMAX, "--fault", "bf16", "--libs", "all", "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=2400,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    store = RunStore(out)
    truth = store.read_ground_truth()["injected"]
    assert truth["stage"] == "blocks.1" and truth["nodes"] == [LLAMA_SOFTMAX]
    data = store.read_summary()
    faulty = [f for f in data["findings"] if f["participant"] == truth["participant"]]
    assert faulty and {f["anchor"] for f in faulty} >= {"blocks.1"}
    assert not [f for f in data["findings"] if f["participant"] != truth["participant"]]
    target = next(
        t for t in data["drill"]["targets"]
        if t["participant"] == truth["participant"] and t["stage"] == "blocks.1"
    )  # fmt: skip
    named = next(o for o in target["ops"] if o["key"] == target["named"])
    assert named["node"] == LLAMA_SOFTMAX
