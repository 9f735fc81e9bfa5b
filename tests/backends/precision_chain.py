"""A tiny conv/matmul ONNX chain, its float64 reference, and every participant run on it.

The chain is ``Conv 3x3 (8→16) → Relu → Conv 3x3 (16→16) → Reshape → MatMul (4096→32)``
with module scopes in its node names, so anchors are inferred as for a user's file:
``r1`` (after block1), ``c2`` (after block2) and the final ``output``. Weights are scaled by
1/sqrt(fan-in), so activations are O(1) and relative errors are not dominated by a few
large values. The float64 reference comes from ``onnx.reference`` (NumPy), independent of
every library under test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from anpred.backends.base import ModelJob
from anpred.execution.pool import WorkerResult, run_workers
from anpred.interchange.export import AnchoredExport
from anpred.participants import Participant
from anpred.pipeline.model_export import run_export
from anpred.settings import ExecutionSettings
from anpred.store import ParticipantStore, RunStore

INPUT_SHAPE = (1, 8, 16, 16)
INPUT_ID = "x0"


def _weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)

    def scaled(shape: tuple[int, ...], fan_in: int) -> np.ndarray:
        return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)

    return {
        "w1": scaled((16, 8, 3, 3), 72),
        "b1": scaled((16,), 72),
        "w2": scaled((16, 16, 3, 3), 144),
        "w3": scaled((4096, 32), 4096),
        "shape": np.array([1, 4096], dtype=np.int64),
    }


def chain_model(float_type: int = TensorProto.FLOAT) -> onnx.ModelProto:
    """Return the chain; ``float_type=DOUBLE`` gives the float64 copy of the same weights."""
    np_float = np.float64 if float_type == TensorProto.DOUBLE else np.float32
    inits = [
        numpy_helper.from_array(v if v.dtype == np.int64 else v.astype(np_float), k)
        for k, v in _weights().items()
    ]
    nodes = [
        helper.make_node(
            "Conv", ["x", "w1", "b1"], ["c1"], name="/block1/conv/Conv", pads=[1, 1, 1, 1]
        ),
        helper.make_node("Relu", ["c1"], ["r1"], name="/block1/act/Relu"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="/block2/conv/Conv", pads=[1, 1, 1, 1]),
        helper.make_node("Reshape", ["c2", "shape"], ["flat"], name="/head/Reshape"),
        helper.make_node("MatMul", ["flat", "w3"], ["y"], name="/head/fc/MatMul"),
    ]
    graph = helper.make_graph(
        nodes,
        "precision_chain",
        [helper.make_tensor_value_info("x", float_type, list(INPUT_SHAPE))],
        [helper.make_tensor_value_info("y", float_type, [1, 32])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def chain_input() -> np.ndarray:
    """The one input, float32."""
    return np.random.default_rng(1).standard_normal(INPUT_SHAPE).astype(np.float32)


def reference64(feed: np.ndarray) -> dict[str, np.ndarray]:
    """Anchors of the chain in float64 (``onnx.reference``), keyed like the captures."""
    model = chain_model(TensorProto.DOUBLE)
    r1, c2, y = ReferenceEvaluator(model).run(["r1", "c2", "y"], {"x": feed.astype(np.float64)})
    return {"r1": r1, "c2": c2, "output": y}


def prepare_export(folder: Path) -> AnchoredExport:
    """Write the chain and anchor it through the export job (``anpred.pipeline.prepare``)."""
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "chain.onnx"
    onnx.save(chain_model(), str(source))
    request = {"onnx": str(source), "folder": str(folder / "model")}
    return run_export(request, ParticipantStore(folder / "job"), "chain.onnx", timeout=600)


def run_participants(
    run_dir: Path, participants: list[Participant], threads: int = 1, parallel: int = 2
) -> dict[str, WorkerResult]:
    """Run ``participants`` on the chain in worker processes (the real pool)."""
    export = prepare_export(run_dir / "prepare")
    store = RunStore(run_dir)
    store.write_inputs({INPUT_ID: chain_input()}, {INPUT_ID: "chain_input()"})
    job: dict[str, Any] = {
        "model": ModelJob(export).to_dict(),
        "inputs": str(store.inputs_path),
    }
    # Libraries write caches under HOME (~/.keras, ~/intel, inductor's cache): a temp dir.
    env = {
        "HOME": str(run_dir / "home"),
        "TORCHINDUCTOR_CACHE_DIR": str(run_dir / "home" / "inductor"),
    }
    settings = ExecutionSettings(threads=threads, parallel=parallel, timeout=600, env=env)
    return run_workers(run_dir, participants, job, [INPUT_ID], settings)


def capture(run_dir: Path, participant: str) -> dict[str, np.ndarray]:
    """One participant's anchors, in NCHW (TensorFlow's NHWC captures transposed back)."""
    folder = RunStore(run_dir).participant(participant)
    arrays = folder.load_capture(INPUT_ID)
    layouts = folder.read_capture_meta(INPUT_ID)["layouts"]
    for key, layout in layouts.items():
        if layout == "NHWC":
            arrays[key] = arrays[key].transpose(0, 3, 1, 2)
    return arrays


def rel_l2(value: np.ndarray, reference: np.ndarray) -> float:
    """Relative L2 distance, in float64."""
    ref = reference.astype(np.float64)
    return float(np.linalg.norm(value.astype(np.float64) - ref) / np.linalg.norm(ref))
