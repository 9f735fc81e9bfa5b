"""The memory budget: sizes, the estimate, and the one-line refusal."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from anpred.errors import UsageError
from anpred.execution.memory import rss_bytes
from anpred.pipeline.budget import (
    available_memory,
    check_budget,
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
