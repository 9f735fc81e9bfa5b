"""A library added through its descriptor alone (tests/library/dummy_library.py) runs end to end.

Nothing in anpred names ``dummy``: ``ANPRED_PLUGINS`` loads the module in the main process and
in every worker, and the library then behaves as any builtin participant.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent


def _tiny_cnn(path: Path) -> Path:
    source = HERE.parent / "pipeline" / "tiny_model.py"
    spec = importlib.util.spec_from_file_location("tiny_model", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.tiny_cnn(path)


def _plugin_env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "ANPRED_PLUGINS": "dummy_library", "PYTHONPATH": path}


def _anpred(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "anpred", *args],
        capture_output=True,
        text=True,
        env=_plugin_env(),
        timeout=600,
    )


def test_anpred_libs_lists_the_plugin_library() -> None:
    table = _anpred("libs")
    assert table.returncode == 0, table.stderr[-2000:]
    row = next(line for line in table.stdout.splitlines() if line.startswith("dummy "))
    assert "available" in row
    entry = {e["library"]: e for e in json.loads(_anpred("libs", "--json").stdout)}["dummy"]
    assert entry["participants"] == {"dummy": {}}
    assert entry["loads"] == "onnx-file" and entry["runner"] == "dummy_library:DummyRunner"
    assert entry["version"] == importlib.metadata.version("onnx") and not entry["in_all"]


def test_dummy_participant_runs_end_to_end(tmp_path: Path) -> None:
    model = _tiny_cnn(tmp_path / "tiny.onnx")
    out = tmp_path / "run"
    libs = "torch,onnxruntime,dummy"
    proc = _anpred(  # every capture is kept: they are counted below
        "run", str(model), "--libs", libs, "--images", "2", "--keep-captures", "all",
        "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    by_name = {p["participant"]: p for p in summary["participants"]}
    assert set(by_name) >= {"torch", "onnxruntime", "dummy"}
    dummy = by_name["dummy"]
    assert dummy["status"] == "ok", dummy
    assert dummy["version"] == importlib.metadata.version("onnx")
    assert dummy["observer"]["identical"]  # same evaluator with and without anchors
    captures = out / "captures" / "dummy"
    assert len(list(captures.glob("*.capture.npz"))) == 2
    assert len(list(captures.glob("*.isolated.npz"))) == 2  # stage isolation ran too
    # Judged like every participant: a deviation row per input x anchor, with the
    # introduced error of stage isolation, within fp32 noise of the others (measured on this
    # model: rel_l2 <= 1.2e-7 for dummy, <= 5.9e-7 for onnxruntime; the bound of
    # tests/pipeline/test_run_onnx.py for the same graph in fp32).
    rows = pq.read_table(out / "deviations.parquet").to_pylist()
    mine = [r for r in rows if r["participant"] == "dummy"]
    assert len(mine) == 2 * 3  # inputs x anchors
    assert all(r["rel_l2"] < 1e-5 for r in mine)
    assert all(r["introduced"] is not None for r in mine)
    assert "dummy" in proc.stdout
