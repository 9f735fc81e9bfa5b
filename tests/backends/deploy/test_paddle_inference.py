"""Paddle Inference runner: x2paddle converts the ONNX model, Paddle Inference runs it (CPU),
hooks driven in the runtime's own environment (skipped when it is not built), compared
with onnxruntime here.

Measured with x2paddle 1.6.0 / paddlepaddle 3.2.2 on this machine (AMD EPYC with
AVX512-BF16, 1 thread), rel L2 vs onnxruntime: tiny model fp32 <= 2e-7 per output;
yolov8n fp32 7.3e-7 at the output, 1.5e-5 at the worst anchor (onnxruntime O0 vs O3 on the
same model: 7.4e-7 / 1.5e-5); oneDNN bf16 1.1e-2 at the output, 2.3e-1 at the worst anchor.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from anpred.library.environments import missing_reason, runtime_env, worker_pythonpath

ENV = runtime_env("paddle_inference")
pytestmark = pytest.mark.skipif(
    ENV is None, reason=f"paddle_inference: {missing_reason('paddle_inference')}"
)
RUNNER = "anpred.backends.deploy.paddle_inference:PaddleInferenceRunner"

#: fp32 rel L2 bound per output on the tiny model (measured <= 2e-7).
TINY_FP32 = 1e-5
#: fp32 bounds on yolov8n (measured 7.3e-7 at the output, 1.5e-5 at the worst anchor).
YOLO_FP32_OUTPUT, YOLO_FP32_ANCHOR = 1e-5, 2e-4
#: bf16 upper bound at the output (measured 1.1e-2 on yolov8n, 3e-3 on the tiny model).
BF16_OUTPUT = 0.1
#: With AVX512-BF16, oneDNN really computes in bf16: errors well above fp32 noise.
BF16_MIN = 1e-4

# Runs in the runtime's Python: converts the anchored and the plain model through anpred's
# conversion step (slimming included) in one process under anpred's offline guard, loads
# the anchored artifact in every configuration, runs it, then checks that the guard would
# have refused x2paddle's own feedback call (nothing leaves the machine: the guard refuses
# the name lookup).
DRIVER = r"""
import functools, json, sys
from pathlib import Path
import numpy as np, onnx
from anpred.execution.offline import install_guard
guard = install_guard()
from anpred.backends.conversion import convert_cached
from anpred.backends.converted import ConversionSource
from anpred.backends.deploy.paddle_inference import PaddleInferenceRunner

spec = json.loads(Path(sys.argv[1]).read_text())
out = Path(spec["out"])
record = {"configs": {}}
for kind in spec["kinds"]:
    runner = PaddleInferenceRunner({})
    make = functools.partial(ConversionSource, kind=kind, zoo_model=None, settings={})
    done = convert_cached(onnx.load(spec[kind]), runner.library, {}, runner.converter_version(),
                          runner.needs_slim, make, runner.convert_impl)
    rewrites = done.artifact.parents[2] / "rewrites.json"  # <folder>/x2paddle/inference_model
    record[kind] = {"artifact": str(done.artifact), "seconds": done.record["seconds"],
                    "rewrites": json.loads(rewrites.read_text())}
    if kind == "anchored":
        anchored = done
feeds = np.load(spec["feeds"])
for name, settings in spec["configs"].items():
    runner = PaddleInferenceRunner(settings)
    handle = runner.load_impl(anchored.artifact, anchored.source)
    outs = runner.run_impl(handle, [feeds["x"]])
    np.savez(out / f"{name}.npz", *outs)
    record["configs"][name] = {"names": runner.artifact_output_names(handle),
                               "settings": runner.describe_settings()}
record["guard_during_run"] = guard.record()
if spec.get("probe_feedback"):
    import x2paddle.utils
    probe = x2paddle.utils.ConverterCheck(task="ONNX", time_info=0, convert_state="probe")
    probe.start()
    probe.join(30)
    record["guard_after_probe"] = guard.record()
(out / "record.json").write_text(json.dumps(record, default=str))
"""


def _drive(spec: dict, folder: Path, prefix: list[str] | None = None) -> dict:
    """Run :data:`DRIVER` with the runtime's Python; return its record."""
    assert ENV is not None
    folder.mkdir(parents=True, exist_ok=True)
    spec = {**spec, "out": str(folder)}
    (folder / "spec.json").write_text(json.dumps(spec))
    (folder / "driver.py").write_text(DRIVER)
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(PYTHONPATH=worker_pythonpath(), ANPRED_CACHE=str(folder / "cache"))
    command = [
        *(prefix or []),
        str(ENV.python),
        str(folder / "driver.py"),
        str(folder / "spec.json"),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"driver failed:\n{done.stderr[-4000:]}"
    return json.loads((folder / "record.json").read_text())


def _no_network_prefix() -> list[str]:
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-rn", "true"], check=False).returncode == 0:
        return [unshare, "-rn"]
    return []


def _outputs(path: Path) -> list[np.ndarray]:
    with np.load(path) as data:
        return [data[f"arr_{j}"] for j in range(len(data.files))]


def _ort(onnx_path: Path, feed: np.ndarray) -> list[np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: feed})


def _rel_l2(value: np.ndarray, reference: np.ndarray) -> float:
    a, b = np.asarray(value, np.float64), np.asarray(reference, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def _has_avx512_bf16() -> bool:
    try:
        return "avx512_bf16" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def tiny_model(folder: Path) -> tuple[Path, Path]:
    """A small anchored model with what x2paddle cannot take as is: a bias shared by two
    Convs, a MaxPool with an explicit all-ones ``dilations``, Convs without ``kernel_shape``;
    an input name with a dot.
    Returns the anchored and the plain ONNX paths.
    """
    rng = np.random.default_rng(0)
    inits = {
        "w1": rng.standard_normal((8, 4, 3, 3)) / 6,
        "w2": rng.standard_normal((8, 8, 3, 3)) / 8.5,
        "bias": rng.standard_normal(8) / 6,
    }
    nodes = [
        helper.make_node("Conv", ["input.1", "w1", "bias"], ["c1"], name="/a/Conv", pads=[1] * 4),
        helper.make_node("Relu", ["c1"], ["anchor.a"], name="/a/Relu"),
        helper.make_node(
            "MaxPool",
            ["anchor.a"],
            ["p"],
            name="/b/MaxPool",
            kernel_shape=[3, 3],
            pads=[1] * 4,
            strides=[1, 1],
            dilations=[1, 1],
        ),
        helper.make_node(
            "Conv", ["p", "w2", "bias"], ["anchor.output"], name="/b/Conv", pads=[1] * 4
        ),
    ]

    def save(outputs: list[str], name: str) -> Path:
        graph = helper.make_graph(
            nodes,
            "tiny",
            [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [1, 4, 16, 16])],
            [helper.make_tensor_value_info(o, TensorProto.FLOAT, [1, 8, 16, 16]) for o in outputs],
            [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8  # as anpred's exports
        path = folder / f"{name}.onnx"
        onnx.save(model, path)
        return path

    return save(["anchor.output", "anchor.a"], "anchored"), save(["anchor.output"], "plain")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, list[np.ndarray]]:
    folder = tmp_path_factory.mktemp("paddle-tiny")
    anchored, plain = tiny_model(folder)
    feed = np.random.default_rng(1).random((1, 4, 16, 16), dtype=np.float32)
    np.savez(folder / "feeds.npz", x=feed)
    spec = {
        "anchored": str(anchored),
        "plain": str(plain),
        "kinds": ["anchored", "plain"],
        "feeds": str(folder / "feeds.npz"),
        "configs": {"fp32": {}, "bf16": {"precision": "bf16"}, "noonednn": {"onednn": False}},
        "probe_feedback": True,
    }
    record = _drive(spec, folder / "run", _no_network_prefix())
    return record, folder / "run", _ort(anchored, feed)


def test_tiny_converts_with_recorded_rewrites(tiny_run):
    record, _, _ = tiny_run
    rewrites = record["anchored"]["rewrites"]
    kinds = {r["rewrite"] for r in rewrites}
    assert kinds == {"duplicate_shared_initializer", "drop_unit_dilations", "add_kernel_shape"}
    shared = [r for r in rewrites if r["rewrite"] == "duplicate_shared_initializer"]
    assert [(r["initializer"], r["node"]) for r in shared] == [("bias", "/b/Conv")]
    # the plain model converted too, in the same process (fresh parameter-name scope)
    assert record["plain"]["artifact"].endswith("model.json")


def test_tiny_fp32_matches_onnxruntime(tiny_run):
    record, folder, expected = tiny_run
    for name in ("fp32", "noonednn"):
        outputs = _outputs(folder / f"{name}.npz")
        assert record["configs"][name]["names"] == ["fetch_name_0", "fetch_name_1"]
        assert [o.shape for o in outputs] == [e.shape for e in expected]  # ONNX order, NCHW
        for got, want in zip(outputs, expected, strict=True):
            assert _rel_l2(got, want) < TINY_FP32
    assert record["configs"]["noonednn"]["settings"]["onednn"] is False


def test_tiny_bf16_runs_through_onednn_bf16(tiny_run):
    record, folder, expected = tiny_run
    settings = record["configs"]["bf16"]["settings"]
    assert settings["precision"] == "bf16" and settings["onednn"] is True
    errors = [_rel_l2(g, w) for g, w in zip(_outputs(folder / "bf16.npz"), expected, strict=True)]
    assert max(errors) < BF16_OUTPUT
    if settings.get("bf16_native") and _has_avx512_bf16():
        assert min(errors) > BF16_MIN  # really computed in bf16 on this CPU


def test_conversion_and_inference_stay_offline(tiny_run):
    record, _, _ = tiny_run
    # nothing reached for the network nor started an installer while converting and running
    assert record["guard_during_run"]["refused"] == 0
    # ...and the guard sees x2paddle's feedback call when it is made (and refuses it)
    blocked = record["guard_after_probe"]["blocked"]
    assert record["guard_after_probe"]["refused"] >= 1
    assert any("paddlepaddle.org.cn" in b["target"] for b in blocked)


def test_x2paddle_failure_is_one_line_conversion_error(tmp_path):
    # Unique has no x2paddle mapping: ConversionError with x2paddle's reason, cached
    graph = helper.make_graph(
        [helper.make_node("Unique", ["x"], ["y"], name="unique")],
        "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "bad.onnx")
    script = (
        "import onnx, functools\n"
        "from anpred.backends.conversion import ConversionFailure, convert_cached\n"
        "from anpred.backends.converted import ConversionSource\n"
        "from anpred.backends.deploy.paddle_inference import PaddleInferenceRunner as R\n"
        "r = R({})\n"
        "make = functools.partial(ConversionSource, kind='anchored', zoo_model=None, settings={})\n"
        "try:\n"
        f"    convert_cached(onnx.load({str(tmp_path / 'bad.onnx')!r}), r.library, {{}},\n"
        "                   r.converter_version(), False, make, r.convert_impl)\n"
        "except ConversionFailure as err:\n"
        "    print('REASON:' + err.reason)\n"
    )
    env = {**os.environ, "PYTHONPATH": worker_pythonpath(), "ANPRED_CACHE": str(tmp_path)}
    assert ENV is not None
    done = subprocess.run(
        [str(ENV.python), "-c", script], env=env, capture_output=True, text=True, timeout=600
    )
    reason = [line for line in done.stdout.splitlines() if line.startswith("REASON:")]
    assert reason == ["REASON:Model is not supported yet.; unsupported ops: Unique"], done.stderr[
        -2000:
    ]
    records = list((tmp_path / "conversions" / "paddle_inference").glob("*/record.json"))
    assert len(records) == 1 and json.loads(records[0].read_text())["ok"] is False


@pytest.mark.slow
def test_yolov8n_fp32_at_the_noise_floor_and_bf16(tmp_path):
    from anpred.interchange.export import export_zoo_model

    export = export_zoo_model("yolov8n")
    feed = np.random.default_rng(1).random((1, 3, 640, 640), dtype=np.float32)
    np.savez(tmp_path / "feeds.npz", x=feed)
    spec = {
        "anchored": str(export.anchored_path),
        "kinds": ["anchored"],
        "feeds": str(tmp_path / "feeds.npz"),
        "configs": {"fp32": {}, "bf16": {"precision": "bf16"}},
    }
    record = _drive(spec, tmp_path / "run", _no_network_prefix())
    assert record["guard_during_run"]["refused"] == 0
    rewrites = record["anchored"]["rewrites"]
    assert sum(r["rewrite"] == "duplicate_shared_initializer" for r in rewrites) == 2
    expected = _ort(export.anchored_path, feed)
    fp32 = _outputs(tmp_path / "run" / "fp32.npz")
    assert len(fp32) == len(export.anchors) == len(expected)
    errors = [_rel_l2(g, w) for g, w in zip(fp32, expected, strict=True)]
    assert errors[0] < YOLO_FP32_OUTPUT  # graph output 0 is the model output
    assert max(errors) < YOLO_FP32_ANCHOR
    bf16 = _outputs(tmp_path / "run" / "bf16.npz")
    bf16_output = _rel_l2(bf16[0], expected[0])
    assert bf16_output < BF16_OUTPUT
    if record["configs"]["bf16"]["settings"].get("bf16_native") and _has_avx512_bf16():
        assert bf16_output > BF16_MIN
