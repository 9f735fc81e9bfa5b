"""The benchmark scripts: their helpers (fast) and a ``--quick`` smoke run of each (slow).

No timing is asserted (machines are noisy): the smoke runs check that every script
finishes, measures every library it was asked for and reports positive ratios.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_memory  # noqa: E402
from workload import markdown_table  # noqa: E402


def _fake_run(folder: Path) -> Path:
    """A two-input run directory with one participant plus the fp64 reference."""
    (folder / "captures").mkdir(parents=True)
    for name, data in {"run.json": {"model": "m", "images": 2}, "model.json": {"anchors": []},
                       "participants.json": {}, "inputs.json": {"ids": ["a", "b"],
                                                                "sources": {"a": "x", "b": "y"}}
                       }.items():
        (folder / name).write_text(json.dumps(data))
    for participant, dtype in (("torch_fp64", np.float64), ("onnxruntime", np.float32)):
        sub = folder / "captures" / participant
        sub.mkdir()
        (sub / "status.json").write_text(json.dumps({"state": "ok"}))
        for input_id in ("a", "b"):
            np.savez_compressed(sub / f"{input_id}.capture.npz", x=np.zeros((10, 10), dtype),
                                __plain__=np.zeros(1000, dtype))
            (sub / f"{input_id}.capture.json").write_text(json.dumps({"input": input_id}))
    return folder


def test_synthetic_run_reuses_captures_under_new_ids(tmp_path) -> None:
    source = _fake_run(tmp_path / "source")
    ids = bench_memory.synthesize_run(source, tmp_path / "synthetic", 5)
    assert ids == ["a-00", "b-00", "a-01", "b-01", "a-02"]
    dest = tmp_path / "synthetic"
    assert json.loads((dest / "inputs.json").read_text())["ids"] == ids
    link = dest / "captures" / "onnxruntime" / "b-01.capture.npz"
    assert link.is_symlink() and link.resolve() == (source / "captures" / "onnxruntime"
                                                    / "b.capture.npz").resolve()
    assert json.loads((dest / "captures" / "onnxruntime" / "a-02.capture.json").read_text()) \
        == {"input": "a"}
    assert not (dest / "captures" / "onnxruntime" / "a-02.isolated.npz").exists()
    # 5 inputs x (float32 + float64 100-element anchor + .npy headers); __plain__ not counted
    counted = bench_memory.analysed_bytes(dest)
    assert 5 * (400 + 800) < counted < 5 * (400 + 800 + 2 * 200)


def test_run_phases_follow_the_fp64_reference_alone_or_with_the_others() -> None:
    import bench_run

    start = [(1.0, "2 inputs, 3 anchors"), (1.1, "  [torch[fp64]] started")]
    end = [(9.0, "analyse: align, consensus"), (9.5, "  analyse input 1/1: x")]
    alone = [*start, (4.0, "  [torch[fp64]] ok"), (4.1, "  [torch] started"), *end]
    phases = bench_run._phases(alone, 9.8, 10.0)
    assert [name for name, _ in phases] == [
        "start, export (cached), inputs", "fp64 reference worker (alone)",
        "participant workers", "analysis", "report, summary print, exit",
    ]  # fmt: skip
    assert [s for _, s in phases] == pytest.approx([1.0, 3.0, 5.0, 0.8, 0.2])
    overlapped = [*start, (1.2, "  [torch] started"), (4.0, "  [torch[fp64]] ok"), *end]
    phases = dict(bench_run._phases(overlapped, 9.8, 10.0))
    assert phases["participant workers (fp64 reference with them)"] == pytest.approx(8.0)
    assert "fp64 reference worker (alone)" not in phases


def test_markdown_table_right_aligns_numeric_columns() -> None:
    table = markdown_table(["library", "ms", "ratio"], [["torch", "1.5", "1.02"],
                                                        ["jax", "20", "0.98"]])
    lines = table.splitlines()
    assert lines[0] == "| library | ms | ratio |"
    assert lines[1] == "| --- | ---: | ---: |"
    assert lines[3] == "| jax | 20 | 0.98 |"


def _tiny_onnx(path: Path) -> Path:
    """Two conv blocks and a head, with module scopes in node names (anchors r1, s2)."""
    rng = np.random.default_rng(0)

    def init(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32),
                                       name)

    nodes = [
        helper.make_node("Conv", ["images", "w1", "b1"], ["c1"], name="/block1/conv/Conv",
                         pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="/block1/act/Relu"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="/block2/conv/Conv",
                         pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c2"], ["s2"], name="/block2/act/Sigmoid"),
        helper.make_node("GlobalAveragePool", ["s2"], ["p3"], name="/head/pool/Pool"),
        helper.make_node("Flatten", ["p3"], ["logits"], name="/head/Flatten"),
    ]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 8])],
        initializer=[init("w1", (8, 3, 3, 3)), init("b1", (8,)), init("w2", (8, 8, 3, 3)),
                     init("b2", (8,))])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _bench(script: str, *args: str, timeout: float = 900) -> str:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, str(BENCHMARKS / script), *args],
                          capture_output=True, text=True, env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _rows(stdout: str) -> list[list[str]]:
    """Cells of the first Markdown table in ``stdout`` (header and rule removed)."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith("|")]
    end = next((i for i in range(2, len(lines)) if set(lines[i]) <= {"|", "-", " ", ":"}), None)
    table = lines[2:end - 1] if end else lines[2:]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in table]


@pytest.mark.slow
def test_bench_capture_quick(tmp_path) -> None:
    model = _tiny_onnx(tmp_path / "tiny.onnx")
    out = _bench("bench_capture.py", "--quick", "--model", str(model), "--libs",
                 "torch,onnxruntime", "--work", str(tmp_path / "work"),
                 "--json", str(tmp_path / "r.json"))
    rows = _rows(out)
    assert [r[0] for r in rows] == ["torch", "onnxruntime"]
    assert all(float(r[4]) > 0 and float(r[7]) > 0 for r in rows)  # the two ratios
    results = json.loads((tmp_path / "r.json").read_text())["results"]
    assert all(len(r["seconds"]["isolate"]) == 3 for r in results)


@pytest.mark.slow
def test_bench_run_quick(tmp_path) -> None:
    model = _tiny_onnx(tmp_path / "tiny.onnx")
    out = _bench("bench_run.py", "--quick", "--model", str(model), "--work",
                 str(tmp_path / "work"), "--json", str(tmp_path / "r.json"))
    [case] = json.loads((tmp_path / "r.json").read_text())
    assert [b["library"] for b in case["bare"]] == ["torch", "onnxruntime"]
    assert [n["participant"] for n in case["needed"]] == ["torch[fp64]", "torch", "onnxruntime"]
    assert all(n["cpu_s"] > 0 and n["infer_s"] > 0 for n in case["needed"])
    assert all(n["isolate_s"] > 0 for n in case["needed"][1:])  # the participants isolate
    assert case["ratio"] > 0 and f"anpred / needed inferences = {case['ratio']:.2f}" in out
    assert case["no_isolation_ratio"] > 0 and case["bare_cpu_s"] > 0
    assert case["anpred"]["cpu_s"] > 0  # every child was counted
    assert {w["status"] for w in case["anpred"]["workers"].values()} == {"ok"}
    assert (tmp_path / "work" / "tiny-2" / "run" / "summary.json").exists()


@pytest.mark.slow
def test_bench_memory_quick(tmp_path) -> None:
    model = _tiny_onnx(tmp_path / "tiny.onnx")
    out = _bench("bench_memory.py", "--quick", "--model", str(model), "--libs", "onnxruntime",
                 "--tracemalloc", "--work", str(tmp_path / "work"),
                 "--json", str(tmp_path / "r.json"))
    results = json.loads((tmp_path / "r.json").read_text())["results"]
    assert [r["n"] for r in results] == [2, 8]
    assert [r["inputs"] for r in results] == [2, 8]  # every synthetic input was analysed
    assert all(r["rss_peak_mb"] >= r["rss_after_imports_mb"] > 0 for r in results)
    assert all(r["tracemalloc_peak_mb"] > 0 for r in results)
    assert [r[0] for r in _rows(out)] == ["2", "8"]


def test_bench_campaign_slices_a_grid_and_compares_decisions() -> None:
    import bench_campaign

    grid = json.loads(bench_campaign.GRIDS["resnet50"].read_text())
    axes = bench_campaign.slice_faults(grid)
    assert [(a["kind"], a["severities"]) for a in axes] == [("bf16", [1]), ("mantissa", [18])]
    row = {"anpred_detected": "True", "stage_rel_l2_vs_fp64": "1e-3", "output_rel_l2_vs_fp64": ""}
    assert bench_campaign.same_decisions([row], [dict(row)]) == []
    close = {**row, "stage_rel_l2_vs_fp64": str(1e-3 * (1 + 1e-12))}  # a distance's last bits
    assert bench_campaign.same_decisions([row], [close]) == []
    flipped = {**row, "anpred_detected": "False"}
    assert bench_campaign.same_decisions([row], [flipped]) == [
        "row 0 anpred_detected: True vs False"
    ]
    assert bench_campaign.same_decisions([row], []) == ["1 rows against 0"]


def test_bench_pages_measures_three_writes_and_leaves_nothing(tmp_path) -> None:
    import bench_pages

    result = bench_pages.measure(tmp_path, 32)
    assert result["megabytes"] == 32
    assert all(result[k] > 0 for k in ("fresh", "fresh_again", "recycled"))
    assert not any(tmp_path.iterdir())  # every folder it wrote is gone
    out = _bench("bench_pages.py", "--mb", "16", "--work", str(tmp_path))
    assert "fresh / recycled = " in out and not any(tmp_path.iterdir())
