"""MNN (anpred.backends.deploy.mnn): MNNConvert from ONNX and the MNN runtime, in its own
environment (requirements/runtimes/mnn.txt, `make runtimes`), offline.

Skipped where the MNN environment is not built.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from anpred.library import get_library
from anpred.library.environments import runtime_env, worker_pythonpath
from anpred.store import PLAIN_KEY, ParticipantStore

MNN = get_library("mnn")
pytestmark = pytest.mark.skipif(
    not MNN.available(), reason=f"the MNN environment is not built ({MNN.install_hint()})"
)
LIBS = ["torch", "mnn", "mnn[low]", "mnn[fp16]"]


def _unshare_works() -> bool:
    try:
        return subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode == 0
    except OSError:
        return False


def _freeze() -> str:
    env = runtime_env("mnn")
    assert env is not None
    return subprocess.run(
        [str(env.python), "-m", "pip", "freeze", "--all"],
        capture_output=True, text=True, check=True,
    ).stdout


def _run(out: Path, model: str, libs: list[str], *flags: str, offline: bool) -> str:
    command = [sys.executable, "-m", "anpred", "run", model, "--libs", ",".join(libs),
               "--images", str(2 if model == "yolov8n" else 1), "--keep-captures", "all",
               "--out", str(out), *flags]  # every input's captures are read below
    if offline:
        command = ["unshare", "-rn", *command]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=1700)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def _rel_l2_from_fp64(out: Path, name: str) -> dict[str, float]:
    """Max over inputs of each anchor's relative L2 from torch[fp64]."""
    reference = ParticipantStore(out / "captures" / "torch_fp64")
    store = ParticipantStore(out / "captures" / name.replace("[", "_").rstrip("]"))
    worst: dict[str, float] = {}
    for input_id in reference.finished_inputs():
        ref, got = reference.load_capture(input_id), store.load_capture(input_id)
        for key, value in ref.items():
            if key != PLAIN_KEY:
                exact = value.astype(np.float64)
                rel = np.linalg.norm(got[key].astype(np.float64) - exact) / np.linalg.norm(exact)
                worst[key] = max(worst.get(key, 0.0), float(rel))
    return worst


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bool, str, str]:
    out = tmp_path_factory.mktemp("mnn") / "run"
    offline = _unshare_works()
    before = _freeze()
    _run(out, "mobilenet_v3_large", LIBS, "--no-drill", offline=offline)
    return out, offline, before, _freeze()


def test_mnn_configurations_run_a_small_zoo_model(small_run: tuple) -> None:
    out, *_ = small_run
    summary = json.loads((out / "summary.json").read_text())
    by_name = {p["participant"]: p for p in summary["participants"]}
    for name in LIBS:
        assert by_name[name]["status"] == "ok", by_name[name]
    # Measured on mobilenet_v3_large (seeded weights, 1 image): mnn and mnn[low] 2.2e-6 at
    # the output (torch fp32: 2.4e-6), worst anchor 5.7e-6; mnn[fp16] (fp16 weights) 8.7e-2.
    for name in ("mnn", "mnn[low]"):
        assert max(_rel_l2_from_fp64(out, name).values()) < 1e-4
    fp16 = _rel_l2_from_fp64(out, "mnn[fp16]")["output"]
    assert 1e-3 < fp16 < 0.5  # fp16 weights really are fp16
    conversion = json.loads((out / "captures" / "mnn" / "conversion.json").read_text())
    anchored = conversion["models"]["anchored"]
    assert anchored["output_map"]["rule"] == "order" and conversion["converter"] == "MNNConvert"
    assert {o["layout"] for o in anchored["output_map"]["outputs"]} <= {"NCHW", "NC"}
    settings = by_name["mnn[low]"]["settings"]
    assert settings["precision"] == "low" and settings["converter_version"] == "3.6.1"
    assert len(list((out / "captures" / "mnn").glob("*.isolated.npz"))) == 1


def test_mnn_converts_and_runs_offline_and_installs_nothing(small_run: tuple) -> None:
    out, offline, before, after = small_run
    if not offline:
        pytest.skip("unshare -rn is not permitted here: the network could not be taken away")
    assert after == before  # nothing installed into the MNN environment
    for name in ("mnn", "mnn_low", "mnn_fp16"):
        status = json.loads((out / "captures" / name / "status.json").read_text())
        assert status["offline"] == {"guarded": True, "refused": 0, "blocked": []}
        assert "aliyun" not in (out / "captures" / name / "worker.log").read_text()


def test_a_failed_mnn_conversion_gives_the_converters_reason(tmp_path: Path) -> None:
    env = runtime_env("mnn")
    assert env is not None
    (tmp_path / "bad.onnx").write_bytes(b"not an onnx model")
    code = (
        "import sys; from pathlib import Path\n"
        "from anpred.backends.converted import ConversionError, ConversionSource\n"
        "from anpred.backends.deploy.mnn import MnnRunner\n"
        "src = ConversionSource(Path(sys.argv[1]), ('images',), ((1, 3, 8, 8),), ('y',),\n"
        "    ((1, 3, 8, 8),), 'anchored', None, {})\n"
        "try:\n"
        "    MnnRunner({}).convert_impl(src, Path(sys.argv[2]))\n"
        "except ConversionError as err:\n"
        "    print('REASON', err)\n"
        "print('TOOLS' if 'MNN.tools.mnnconvert' in sys.modules else 'NO-TOOLS')\n"
    )
    proc = subprocess.run(
        [str(env.python), "-c", code, str(tmp_path / "bad.onnx"), str(tmp_path)],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": worker_pythonpath()},
    )
    lines = proc.stdout.splitlines()
    reason = next(line for line in lines if line.startswith("REASON"))
    assert reason.startswith("REASON MNNConvert: ") and "onnx" in reason.lower(), proc.stdout
    assert "NO-TOOLS" in lines  # the telemetry-installing console script is never imported


@pytest.mark.slow
def test_mnn_on_yolov8n_every_configuration_aligned(tmp_path: Path) -> None:
    out = tmp_path / "run"
    libs = ["torch", "onnxruntime", *LIBS[1:], "mnn[nowinograd]"]
    # without the drill-down: ~5 GB of operator captures for 6 participants
    _run(out, "yolov8n", libs, "--no-drill", offline=False)
    summary = json.loads((out / "summary.json").read_text())
    by_name = {p["participant"]: p for p in summary["participants"]}
    # Measured (2 images, seeded weights): mnn and mnn[low] 8.7e-5 at the output, worst
    # anchor neck.p5 1.7e-3 (torch fp32 1.3e-5: MNN's own convolutions); mnn[fp16] 2.1e-3
    # at the output, worst 4.5e-2; mnn[nowinograd] 7.6e-7 / 1.5e-5, the fp32 floor (torch
    # 6.2e-7 / 1.3e-5): MNN's fp32 error is its Winograd convolutions. Bounds: ~5x.
    bounds = {
        "mnn": (5e-4, 1e-2),
        "mnn[low]": (5e-4, 1e-2),
        "mnn[fp16]": (1e-2, 0.25),
        "mnn[nowinograd]": (5e-6, 1e-4),
    }
    for name, (output, anchor) in bounds.items():
        assert by_name[name]["status"] == "ok", by_name[name]
        rel = _rel_l2_from_fp64(out, name)
        assert len(rel) == 9  # every anchor aligned
        assert rel["output"] < output and max(rel.values()) < anchor, (name, rel)
