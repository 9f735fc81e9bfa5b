"""End to end: ``anpred inject --node`` faults one operator; the drill-down names it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from anpred.store import RunStore
from anpred.store.drill import DrillStore

ENV = {"JAX_PLATFORMS": "cpu"}


def anpred(
    *args: str, env: dict[str, str] | None = None, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """Run the anpred CLI in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "anpred", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def summary(run_dir: Path) -> dict:
    """The run's summary.json content."""
    return RunStore(run_dir).read_summary()


def _named(run_dir: Path) -> tuple[dict, dict | None]:
    data = summary(run_dir)
    truth = RunStore(run_dir).read_ground_truth()["injected"]
    target = next(
        t
        for t in data["drill"]["targets"]
        if t["participant"] == truth["participant"] and t["stage"] == truth["stage"]
    )
    named = next((o for o in target["ops"] if o["key"] == target["named"]), None)
    return target, named


@pytest.mark.slow
def test_drill_down_names_the_faulted_node_of_an_onnx_file(tiny_onnx, tmp_path) -> None:
    out = tmp_path / "run"
    done = anpred(
        "inject", str(tiny_onnx), "--lib", "onnxruntime", "--node", "/block2/act/Sigmoid",
        "--fault", "bf16", "--libs", "torch,onnxruntime,openvino,jax", "--images", "2",
        "--out", str(out), env=ENV,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    truth = RunStore(out).read_ground_truth()["injected"]
    assert truth["node"] == "/block2/act/Sigmoid" and truth["nodes"] == ["/block2/act/Sigmoid"]
    target, named = _named(out)
    assert named is not None and named["node"] == "/block2/act/Sigmoid", target
    assert target["basis"] == "introduced"
    # the Conv before it introduces nothing that stands out
    assert [o["stands_out"] for o in target["ops"]] == [False, True]
    assert DrillStore(out).has_record()
    # judged once, the per-operator arrays are deleted; the record keeps what is shown
    assert not list(DrillStore(out).root.rglob("captures/*/*.npz"))
    assert "drill-down (flagged stages → operators)" in done.stdout
    assert "Drill-down: operators of the flagged stages" in RunStore(out).report_path.read_text()


@pytest.mark.slow
def test_no_drill_skips_it_and_a_clean_run_has_none(tiny_onnx, tmp_path) -> None:
    out = tmp_path / "nodrill"
    done = anpred(
        "inject", str(tiny_onnx), "--lib", "onnxruntime", "--stage", "s2", "--fault", "bf16",
        "--libs", "torch,onnxruntime,openvino", "--images", "1", "--out", str(out),
        "--no-drill", env=ENV,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    assert "drill" not in summary(out) and not DrillStore(out).has_record()
    clean = tmp_path / "clean"
    done = anpred(
        "run", str(tiny_onnx), "--libs", "torch,onnxruntime", "--images", "1",
        "--out", str(clean), env=ENV,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "drill" not in summary(clean) and not DrillStore(clean).root.exists()


@pytest.mark.slow
def test_drill_down_on_a_small_zoo_model_names_the_faulted_conv(tmp_path) -> None:
    """mobilenet_v3_large, bf16 on one Conv of features.s3 in onnxruntime (measured: named,
    benchmarks/bench_drilldown.py)."""
    node = "/model/features/features.4/block/block.0/block.0.0/Conv"
    out = tmp_path / "zoo"
    done = anpred(
        "inject", "mobilenet_v3_large", "--lib", "onnxruntime", "--node", node,
        "--fault", "bf16", "--libs", "torch,onnxruntime,openvino,jax", "--images", "2",
        "--out", str(out), env=ENV, timeout=1800,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    target, named = _named(out)
    assert named is not None and named["node"] == node, json.dumps(target)[:2000]
    assert named["module"] == "features.4.block.0.0"
    # the layer level: the named operator's layer (a torch module of the stage), shown
    # in the terminal with the stage's other layers (no job of its own)
    from anpred.localization.drilldown import named_layer
    from anpred.store.summary_drill import DrillTarget

    layer, basis = named_layer(DrillTarget.from_dict(target))
    assert layer is not None and basis == "introduced" and named["key"] in layer.ops
    assert named["module"].startswith(layer.module + ".")
    assert f"»{layer.module} " in done.stdout and f"layer {layer.module} (" in done.stdout
