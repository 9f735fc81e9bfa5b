"""Drive a deployment runner's hooks directly (convert → load → run), in the runtime's env.

The runtime's own environment holds the converter and runtime, the main environment holds
onnxruntime: tests export a model here, run the hooks in the runtime's Python
(``python deploy_hooks.py ...``, which writes the raw outputs to an ``.npz``), and compare
here. Until the framework's environments land (``anpred.library.environments``), the
Python of a hand-built environment can be named with ``ANPRED_DEPLOY_PYTHON``.

Script use: ``python deploy_hooks.py RUNTIME SETTINGS_JSON ONNX FEEDS_NPZ OUT_DIR``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[3]
#: Environment variable naming the Python of a hand-built runtime environment.
PYTHON_ENV = "ANPRED_DEPLOY_PYTHON"
#: Runner class of each runtime (as its descriptor names it).
RUNNERS = {
    "ncnn": "anpred.backends.deploy.ncnn:NcnnRunner",
    "executorch": "anpred.backends.deploy.executorch:ExecuTorchRunner",
}


def env_python(library: str) -> str | None:
    """The Python of ``library``'s runtime environment, ``None`` when it is not built."""
    try:
        from anpred.library import get_library
        from anpred.library.environments import runtime_env  # the framework's (may not exist)

        env = runtime_env(get_library(library).environment)
        python = getattr(env, "python", None) if env is not None else None
        if python and Path(python).exists():
            return str(python)
    except ImportError:
        pass
    python = os.environ.get(PYTHON_ENV)
    return python if python and Path(python).exists() else None


def run_hooks(
    python: str,
    library: str,
    settings: Mapping[str, Any],
    onnx_path: Path,
    feeds: np.ndarray,
    folder: Path,
    wrapper: Sequence[str] = (),
    timeout: int = 900,
) -> tuple[list[np.ndarray], dict[str, Any]]:
    """Convert, load and run ``onnx_path`` on each feed (batch of 1) in ``python``.

    Returns:
        Per graph output (artifact order), the raw outputs of all feeds stacked; and the
        driver's record (timings, describe_settings).
    """
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "feeds.npy", feeds)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    command = [
        *wrapper,
        python,
        __file__,
        library,
        json.dumps(dict(settings)),
        str(onnx_path),
        str(folder / "feeds.npy"),
        str(folder),
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, env=env, check=False
    )
    if done.returncode != 0:
        raise AssertionError(f"driver failed ({done.returncode}):\n{done.stderr[-3000:]}")
    record = json.loads((folder / "record.json").read_text())
    with np.load(folder / "outputs.npz") as data:
        outputs = [data[f"out{j}"] for j in range(record["outputs"])]
    return outputs, record


def rel_l2(value: np.ndarray, reference: np.ndarray) -> float:
    """Relative L2 distance (float64), shapes matched by size (batch dropped by ncnn)."""
    a = np.asarray(value, dtype=np.float64).reshape(reference.shape)
    b = np.asarray(reference, dtype=np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def ort_outputs(onnx_path: Path, feeds: np.ndarray) -> list[np.ndarray]:
    """onnxruntime's outputs (graph order), feeds run one by one and stacked."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    runs = [session.run(None, {name: feeds[i : i + 1]}) for i in range(len(feeds))]
    return [np.concatenate([r[j] for r in runs]) for j in range(len(runs[0]))]


def tiny_export(folder: Path) -> Path:
    """Export a small CNN (conv/bn/relu, residual add, pools, linear; 3 anchors + output)
    with anchors as outputs; return the anchored ONNX path. Seeded weights.
    """
    import torch

    from anpred.interchange.export import export_anchored
    from anpred.zoo.plans import with_output
    from anpred.zoo.spec import Anchor

    class Block(torch.nn.Module):
        def __init__(self, channels: int) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(channels, channels, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(channels)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x + self.bn(self.conv(x)))

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = torch.nn.Sequential(
                torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.SiLU()
            )
            self.block = Block(8)
            self.down = torch.nn.Sequential(torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 16, 1))
            self.pool = torch.nn.AdaptiveAvgPool2d(1)
            self.fc = torch.nn.Linear(16, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.pool(self.down(self.block(self.stem(x))))
            return torch.softmax(self.fc(torch.flatten(x, 1)), dim=1)

    torch.manual_seed(0)
    model = Tiny().eval()
    with torch.no_grad():  # non-trivial batch-norm statistics
        model.block.bn.running_mean.uniform_(-0.5, 0.5)
        model.block.bn.running_var.uniform_(0.5, 2.0)
    anchors = with_output(
        [
            Anchor("stem", "stem", "stem"),
            Anchor("block", "block", "body"),
            Anchor("down", "down", "body"),
        ]
    )
    return export_anchored(model, anchors, (1, 3, 32, 32), folder).anchored_path


def tiny_feeds(count: int = 2) -> np.ndarray:
    """Seeded feeds in [0, 1) for :func:`tiny_export`'s model."""
    return np.random.default_rng(0).random((count, 3, 32, 32), dtype=np.float32)


def yolo_feeds(count: int = 1) -> np.ndarray:
    """The first ``count`` bundled images, letterboxed for yolov8n (1, 3, 640, 640) each."""
    from anpred.inputs.images import sample_images
    from anpred.inputs.preprocess import preprocess

    images = sample_images(count)
    return np.concatenate([preprocess(im, "letterbox", 640) for im in images]).astype(np.float32)


def offline_wrapper() -> list[str]:
    """``unshare -rn`` (a network namespace without network) where this machine allows it."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return []
    probe = subprocess.run([unshare, "-rn", "true"], capture_output=True, check=False)
    return [unshare, "-rn"] if probe.returncode == 0 else []


def _source(onnx_path: Path, settings: Mapping[str, Any]) -> Any:
    import onnx

    from anpred.backends.converted import ConversionSource

    model = onnx.load(str(onnx_path))
    inits = {i.name for i in model.graph.initializer}

    def shape(vi: Any) -> tuple[int, ...]:
        return tuple(int(d.dim_value) for d in vi.type.tensor_type.shape.dim)

    inputs = [vi for vi in model.graph.input if vi.name not in inits]
    return ConversionSource(
        onnx_path=onnx_path,
        input_names=tuple(vi.name for vi in inputs),
        input_shapes=tuple(shape(vi) for vi in inputs),
        output_names=tuple(vi.name for vi in model.graph.output),
        output_shapes=tuple(shape(vi) for vi in model.graph.output),
        kind="anchored",
        zoo_model=None,
        settings=dict(settings),
    )


def _main(argv: Sequence[str]) -> None:
    import importlib

    library, settings_json, onnx_path, feeds_path, out = argv
    settings = json.loads(settings_json)
    module_name, _, class_name = RUNNERS[library].partition(":")
    runner = getattr(importlib.import_module(module_name), class_name)(settings)
    source = _source(Path(onnx_path), settings)
    folder = Path(out) / "artifact"
    record: dict[str, Any] = {"converter": runner.converter_version()}
    start = time.perf_counter()
    artifact = runner.select_artifact(runner.convert_impl(source, folder))
    record["convert_s"] = round(time.perf_counter() - start, 2)
    start = time.perf_counter()
    handle = runner.load_impl(artifact, source)
    record["load_s"] = round(time.perf_counter() - start, 2)
    feeds = np.load(feeds_path)
    runs, times = [], []
    for i in range(len(feeds)):
        start = time.perf_counter()
        runs.append(runner.run_impl(handle, [feeds[i : i + 1]]))
        times.append(round(time.perf_counter() - start, 3))
    record["run_s"] = times
    record["outputs"] = len(runs[0])
    record["raw_shapes"] = [list(o.shape) for o in runs[0]]
    record["raw_dtypes"] = [str(o.dtype) for o in runs[0]]
    record["settings"] = runner.describe_settings()
    np.savez(
        Path(out) / "outputs.npz",
        **{f"out{j}": np.stack([r[j] for r in runs]) for j in range(len(runs[0]))},
    )
    (Path(out) / "record.json").write_text(json.dumps(record, indent=1, default=str))


if __name__ == "__main__":
    _main(sys.argv[1:])
