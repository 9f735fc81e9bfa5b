"""Every zoo model exports with anchors; onnxruntime reproduces torch's anchors.

Tolerance: measured on all eight zoo models with seeded weights and a real photograph
(2026-11-30, this machine): the largest per-anchor relative L2 between onnxruntime and
torch was 2.6e-5 (vit_b_16 output; CNN anchors stay below 2e-5). fp32 execution of the
same graph in different libraries differs by about that much (ENVIRONMENT.md: ~1e-5 per
block). ``EXPORT_REL_L2_TOL`` = 1e-4 leaves a ~4x margin; a wrong anchor mapping or a
broken export gives errors of order 1.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

from anpred.inputs.images import sample_images  # noqa: E402
from anpred.inputs.preprocess import preprocess  # noqa: E402
from anpred.interchange.anchored import AnchorRecorder  # noqa: E402
from anpred.interchange.export import export_zoo_model  # noqa: E402
from anpred.zoo.registry import get_model  # noqa: E402
from anpred.zoo.spec import Anchor  # noqa: E402
from anpred.zoo.weights import load_model  # noqa: E402

EXPORT_REL_L2_TOL = 1e-4
FAST = {"yolov8n", "resnet50"}
MODELS = [
    "yolov8n",
    "resnet50",
    "yolov5n",
    "yolov5s",
    "yolov8s",
    "mobilenet_v3_large",
    "vit_b_16",
    "convnext_tiny",
]


def _rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


@pytest.mark.parametrize(
    "name", [m if m in FAST else pytest.param(m, marks=pytest.mark.slow) for m in MODELS]
)
def test_export_validates_and_onnxruntime_matches_torch(name: str) -> None:
    spec = get_model(name)
    export = export_zoo_model(name, "stage")
    onnx.checker.check_model(str(export.anchored_path))
    graph_outputs = [o.name for o in onnx.load(export.anchored_path).graph.output]
    assert sorted(graph_outputs) == sorted(a.onnx_name for a in export.anchors)
    assert export.keys[-1] == "output" and len(export.keys) >= 6

    model, _ = load_model(name, seed=0)
    image = sample_images(1)[0]
    feed = preprocess(image, spec.preprocessing, spec.input_size)
    anchors = [Anchor(a.anchor, a.module) for a in export.anchors if a.module]
    recorder = AnchorRecorder(model, anchors)
    with torch.no_grad():
        captured = recorder.captured(model(torch.from_numpy(feed)))
    recorder.remove()

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(
        str(export.anchored_path), options, providers=["CPUExecutionProvider"]
    )
    values = session.run([a.onnx_name for a in export.anchors], {export.input_name: feed})
    for record, value in zip(export.anchors, values, strict=True):
        expected = captured[record.key].numpy()
        assert value.shape == expected.shape == record.shape
        assert _rel_l2(value, expected) < EXPORT_REL_L2_TOL, record.key

    plain = ort.InferenceSession(
        str(export.plain_path), options, providers=["CPUExecutionProvider"]
    )
    (plain_out,) = plain.run(None, {export.input_name: feed})
    # Observer effect: exposing anchors must not change the output beyond fp32 noise.
    assert _rel_l2(values[-1], plain_out) < EXPORT_REL_L2_TOL


def test_export_is_cached() -> None:
    first = export_zoo_model("yolov8n", "stage")
    mtime = first.anchored_path.stat().st_mtime_ns
    second = export_zoo_model("yolov8n", "stage")
    assert second.folder == first.folder and second.anchored_path.stat().st_mtime_ns == mtime
    layer = export_zoo_model("yolov8n", "layer")
    assert layer.folder != first.folder and len(layer.keys) == 23
