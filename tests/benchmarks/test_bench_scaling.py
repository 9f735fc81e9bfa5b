"""``benchmarks/bench_scaling.py``: its fit, samplers and plot (fast), and a ``--quick``
smoke run (slow). No timing is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_scaling  # noqa: E402
from bench_scaling import Curve, Point, fit, folder_bytes, process_tree_rss, slopes  # noqa: E402


def test_fit_recovers_a_line() -> None:
    assert fit([1, 8, 32, 128], [3 + 0.5 * n for n in (1, 8, 32, 128)]) == pytest.approx((3, 0.5))
    assert fit([8], [4.0]) == (4.0, 0.0)  # one point: no slope
    curve = Curve("c", "m", "stage", points=[Point(n, 2.0 * n, 100 + n, 10 * n, n) for n in (1, 4)])
    assert slopes(curve) == pytest.approx(
        {"wall_s": 2.0, "peak_mb": 1.0, "peak_disk_mb": 10.0, "final_disk_mb": 1.0}
    )


def test_process_tree_rss_counts_descendants() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; x = bytearray(200 * 2**20); x[::4096] = b'1' * "
         "len(x[::4096]); print('ok', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ok"
        assert process_tree_rss(os.getpid()) > 200 * 2**20  # the child's buffer, counted
        assert process_tree_rss(child.pid) < 10 * 2**20  # the child has no children
    finally:
        child.kill()
        child.wait()


def test_folder_bytes_skips_links(tmp_path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 1000)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b").write_bytes(b"y" * 24)
    os.symlink(tmp_path / "a", tmp_path / "sub" / "link")
    assert folder_bytes(tmp_path) == 1024
    assert folder_bytes(tmp_path / "missing") == 0


def test_plot_writes_a_png(tmp_path) -> None:
    curves = [
        Curve("anpred m stage", "m", "stage", points=[Point(n, 5.0 * n, 900, 280 * n, 9 * n)
                                                      for n in (1, 8, 32)]),
        Curve("bare m", "m", "", bare=True, points=[Point(n, 2.0 * n, 400) for n in (1, 8, 32)]),
    ]  # fmt: skip
    path = tmp_path / "scaling.png"
    bench_scaling.plot(curves, path, "title: load 1.0")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_bench_scaling_quick(tmp_path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pipeline"))
    from tiny_model import tiny_cnn

    model = tiny_cnn(tmp_path / "tiny.onnx")
    start = time.time()
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_scaling.py"), "--quick", "--model", str(model),
         "--work", str(tmp_path / "work"), "--plot", str(tmp_path / "s.png"),
         "--json", str(tmp_path / "r.json")],
        capture_output=True, text=True, env={**os.environ, "JAX_PLATFORMS": "cpu"}, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "r.json").read_text())
    labels = [c["label"] for c in result["curves"]]
    assert labels == ["anpred tiny stage", "bare tiny"]
    for curve in result["curves"]:
        assert [p["n"] for p in curve["points"]] == [1, 2]
        assert all(p["wall_s"] > 0 and p["peak_mb"] > 0 for p in curve["points"])
    anpred = result["curves"][0]["points"]
    assert all(p["peak_disk_mb"] >= p["final_disk_mb"] > 0 for p in anpred)
    assert (tmp_path / "s.png").stat().st_mtime >= start
    assert not list((tmp_path / "work").glob("run-*/summary.json"))  # run folders removed


def test_report_from_json_prints_slopes_and_plots(tmp_path, capsys) -> None:
    curves = [
        Curve("anpred m stage", "m", "stage", points=[Point(n, 5.0 * n, 900, 280 * n, 9 * n)
                                                      for n in (1, 8, 32)]),
        Curve("bare m", "m", "", bare=True, points=[Point(n, 2.0 * n, 400) for n in (1, 8, 32)]),
    ]  # fmt: skip
    results = {
        "libs": "torch", "sizes": [1, 8, 32], "keep_captures": "needed", "parallel": 2,
        "measured": "now", "cpus": 2, "machine": "m", "full": False,
        "curves": [{**asdict(c), "slopes": slopes(c)} for c in curves],
    }  # fmt: skip
    bench_scaling.report(json.loads(json.dumps(results)), tmp_path / "s.png")
    out = capsys.readouterr().out
    assert "| anpred m stage | 5.00 | 2.50 | 0.0 | 280.0 | 9.0 |" in out  # 2.5x bare's slope
    assert (tmp_path / "s.png").stat().st_size > 1000
