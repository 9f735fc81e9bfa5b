"""The memory budget: sizes, the estimate, and the one-line refusal."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from anpred.errors import UsageError
from anpred.execution.memory import rss_bytes
from anpred.execution.resources import (
    available_memory,
    check_budget,
    check_disk,
    estimate_disk,
    estimate_memory,
    format_size,
    parse_size,
)


def test_sizes_parse_and_bad_ones_are_refused() -> None:
    assert parse_size("512M") == 512 * 2**20
    assert parse_size("8G") == parse_size("8GB") == parse_size("8gib") == 8 * 2**30
    assert parse_size("1.5G") == int(1.5 * 2**30)
    assert parse_size("4096") == 4096
    for bad in ("lots", "-1G", "0", "8X"):
        with pytest.raises(UsageError, match="--max-memory"):
            parse_size(bad)
    assert format_size(3 * 2**30) == "3.0 GB"


def test_a_huge_declared_input_is_refused_in_one_line() -> None:
    estimate = estimate_memory(
        (1, 3, 100000, 100000), [(1, 8, 100000, 100000), (1, 10)], 2, 3, 2, 10_000
    )
    assert estimate.peak > 100 * 2**30  # 3e10 float32 input elements alone are 112 GB
    with pytest.raises(UsageError) as err:
        check_budget(estimate, 8 * 2**30, "tiny.onnx")
    message = str(err.value)
    assert "\n" not in message and "8.0 GB" in message and "--max-memory" in message


def test_an_ordinary_run_fits_and_the_estimate_grows_with_inputs() -> None:
    small = estimate_memory((1, 3, 640, 640), [(1, 64, 160, 160), (1, 84, 8400)], 2, 6, 2, 13e6)
    check_budget(small, 8 * 2**30, "yolov8n")
    check_budget(small, None, "yolov8n")
    more = estimate_memory((1, 3, 640, 640), [(1, 64, 160, 160), (1, 84, 8400)], 64, 6, 2, 13e6)
    assert more.inputs > small.inputs


def test_memory_readings_of_this_machine() -> None:
    assert available_memory("MemTotal: 100 kB\nMemAvailable:  2048 kB\n") == 2048 * 1024
    assert available_memory("nothing") is None
    code = ("import numpy, sys; x = numpy.ones(256 * 2**20 // 8); print(1, flush=True); "
            "sys.stdin.read()")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "1"
        rss = rss_bytes(child.pid)
        assert rss is not None and rss > 200 * 2**20  # 256 MB of ones, touched
    finally:
        child.communicate("")
    assert rss_bytes(child.pid) is None  # gone
    assert rss_bytes(os.getpid()) is not None


def test_the_disk_floor_counts_captures_of_the_inputs_on_disk_at_once() -> None:
    # yolov8n stage anchors: 4.6 M values per input (the 9 anchors of a zoo export)
    shapes = [(1, 4_596_800)]
    one = estimate_disk((1, 3, 640, 640), shapes, 1, 1, 6, isolation=True)
    # six fp32 participants twice (anchored, isolated) in float32, the fp64 reference once
    assert one == 4_596_800 * (6 * 2 * 4 + 8) + 4 * 3 * 640 * 640
    # a floor near what a run writes: 2105 MB (2**20 bytes) of captures measured for 8
    # inputs (README), 263 MB each
    assert 0.9 * 263 * 2**20 < one < 263 * 2**20
    chunked = estimate_disk((1, 3, 640, 640), shapes, 128, 32, 6, isolation=True)
    whole = estimate_disk((1, 3, 640, 640), shapes, 128, 128, 6, isolation=True)
    assert whole > 3.5 * chunked  # chunks bound the captures (the inputs stay all along)
    bare = estimate_disk((1, 3, 640, 640), shapes, 1, 1, 6, isolation=False)
    assert bare == 4_596_800 * (6 * 4 + 8) + 4 * 3 * 640 * 640


def test_a_run_that_cannot_fit_on_the_disk_is_refused_in_one_line(tmp_path) -> None:
    check_disk(1000, tmp_path / "not" / "yet", "m")  # a folder to come: its parent's disk
    with pytest.raises(UsageError) as err:
        check_disk(2**60, tmp_path / "run", "yolov8n with input 1x3x640x640")
    message = str(err.value)
    assert "\n" not in message and "yolov8n" in message and "--chunk" in message
    assert str(tmp_path) in message and "free" in message


def test_anpred_run_checks_the_disk_before_it_prepares_inputs(
    tiny_onnx, tmp_path, monkeypatch
) -> None:
    import shutil

    import anpred

    real = shutil.disk_usage
    monkeypatch.setattr(
        shutil, "disk_usage", lambda p: real(p)._replace(free=1000)  # a full disk
    )
    out = tmp_path / "run"
    with pytest.raises(UsageError, match="to disk at its peak"):
        anpred.run(str(tiny_onnx), libs="onnxruntime", out=str(out), progress=None)
    assert not (out / "inputs.npz").exists()
    assert not (out / "captures").exists()


def test_the_estimates_count_an_inputs_files_inputs(tmp_path) -> None:
    from anpred.interchange.export import AnchoredExport
    from anpred.pipeline.run_inputs import count_inputs
    from anpred.settings import RunOptions

    export = AnchoredExport(tmp_path, "x", (1, 3, 8, 8), 17, ())
    path = tmp_path / "in.npz"
    np.savez(path, x=np.zeros((40, 3, 8, 8), np.float32))
    assert count_inputs(RunOptions("m.onnx", inputs_file=str(path)), export) == 40
    assert count_inputs(RunOptions("m.onnx", images=2, synthetic=3), export) == 5
    assert count_inputs(RunOptions("m.onnx", image_paths=("a", "b", "c")), export) == 3


def test_anpred_run_counts_an_inputs_file_before_it_reads_it(tiny_onnx, tmp_path) -> None:
    # 20000 inputs of 1x3x32x32: 234 MB as the run would hold them (a small file: zeros)
    path = tmp_path / "many.npz"
    np.savez_compressed(path, images=np.zeros((20000, 3, 32, 32), np.float32))
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "anpred", "run", str(tiny_onnx), "--libs", "onnxruntime",
         "--inputs", str(path), "--max-memory", "200M", "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    error = proc.stderr.strip().splitlines()[-1]
    assert "memory (inputs)" in error and "use fewer or smaller inputs" in error
    assert not (out / "inputs.npz").exists()
