"""``--parallel N|auto``: parsing, the CPUs this process may use, and the automatic count."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from anpred.errors import UsageError
from anpred.execution.resources import estimate_memory
from anpred.execution.slots import (
    AUTO,
    WORKER_MEMORY,
    auto_parallel,
    cgroup_cpus,
    describe_auto,
    parse_parallel,
    resolve,
    run_need,
    usable_cpus,
)

GB = 2**30


def test_parallel_is_a_positive_number_or_auto() -> None:
    assert parse_parallel("auto") == parse_parallel(" AUTO ") == AUTO
    assert parse_parallel("3") == 3
    for bad in ("0", "-2", "two", "", "1.5"):
        with pytest.raises(UsageError, match="--parallel"):
            parse_parallel(bad)
    assert resolve(4, threads=1, budget=None) == 4
    assert resolve("4", threads=1, budget=None) == 4  # the Python API may pass text
    for bad in (0, True, "many"):
        with pytest.raises(UsageError, match="parallel"):
            resolve(bad, threads=1, budget=None)  # type: ignore[arg-type]


def test_the_control_group_quota_in_cpus() -> None:
    assert cgroup_cpus("max 100000\n") is None  # no quota
    assert cgroup_cpus("200000 100000\n") == 2.0
    assert cgroup_cpus("150000 100000") == 1.5
    for bad in ("", "garbage", "1 2 3", "-1 100000", "100 0"):
        assert cgroup_cpus(bad) is None


def test_usable_cpus_is_within_this_machine() -> None:
    cpus = usable_cpus()
    assert 1 <= cpus <= (os.cpu_count() or 1)
    assert cpus <= len(os.sched_getaffinity(0))


def test_usable_cpus_follows_the_affinity() -> None:
    code = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
            "from anpred.execution.slots import usable_cpus; print(usable_cpus())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "1"


def test_auto_takes_the_cpus_over_threads_within_the_budget() -> None:
    assert auto_parallel(threads=1, budget=None, cpus=16) == 16
    assert auto_parallel(threads=4, budget=None, cpus=16) == 4
    assert auto_parallel(threads=8, budget=None, cpus=2) == 1
    assert auto_parallel(threads=1, budget=int(3.5 * WORKER_MEMORY), cpus=16) == 3
    assert auto_parallel(threads=1, budget=WORKER_MEMORY // 2, cpus=16) == 1  # never 0
    # the run's own need replaces the default: 2 GB per worker in a 5 GB budget
    assert auto_parallel(threads=1, budget=5 * GB, need=lambda n: n * 2 * GB, cpus=16) == 2
    assert auto_parallel(threads=1, budget=5 * GB, need=lambda n: GB, cpus=16) == 16
    assert resolve(AUTO, threads=1, budget=None) == usable_cpus()


def test_auto_fits_a_large_model_s_estimate_instead_of_refusing_it() -> None:
    # yolov8n-like anchors at 2560x2560, 32 inputs, 6 participants: the analysis holds
    # ~2.5 GB per process, so 64 processes would be refused by a 16 GB budget; auto
    # takes as many as fit instead
    def need(n: int) -> int:
        return estimate_memory(
            (1, 3, 2560, 2560), [(1, 16, 1280, 1280), (1, 84, 134400)], 32, 6, n, 13e6
        ).peak

    n = auto_parallel(threads=1, budget=16 * GB, need=need, cpus=64)
    assert need(64) > 16 * GB
    assert 1 < n < 16 and need(n) <= 16 * GB < need(n + 1)


def test_the_workers_estimate_counts_no_more_workers_than_participants() -> None:
    shapes = [(1, 64, 160, 160), (1, 84, 8400)]
    one, two, seven, many = (
        estimate_memory((1, 3, 640, 640), shapes, 8, 6, n, 13e6).workers for n in (1, 2, 7, 64)
    )
    assert two > one  # the fp64 reference and a participant's worker beside it
    assert many == seven  # six participants and the fp64 reference: seven workers at most


def test_the_analysis_estimate_counts_no_more_processes_than_inputs() -> None:
    shapes = [(1, 64, 160, 160), (1, 84, 8400)]
    two = estimate_memory((1, 3, 640, 640), shapes, 2, 6, 2, 13e6)
    many = estimate_memory((1, 3, 640, 640), shapes, 2, 6, 32, 13e6)
    assert many.analysis == two.analysis  # 2 inputs: 2 analysis processes at most


def test_the_auto_line_says_what_it_was_made_of() -> None:
    line = describe_auto(1, threads=2, budget=3 * GB)
    assert line.startswith("--parallel auto: 1 worker at once (")
    assert line.endswith(", --threads 2, memory budget 3.0 GB)")
    assert f"({usable_cpus()} CPU" in line
    assert "memory budget" not in describe_auto(4, threads=1, budget=None)
    assert "4 workers at once" in describe_auto(4, threads=1, budget=None)
    assert "4 workers at once" in describe_auto(4, threads=1, budget=None, workers=7)


def test_the_auto_line_says_when_cpus_outnumber_the_workers(monkeypatch) -> None:
    from anpred.execution import slots

    monkeypatch.setattr(slots, "usable_cpus", lambda: 16)
    line = describe_auto(16, threads=1, budget=None, workers=7)  # 6 participants + fp64
    assert line.startswith("--parallel auto: 16 processes at once (16 CPUs, --threads 1)")
    assert "at most 7 workers" in line and "--threads 2 would give each worker 2 CPUs" in line
    assert "--threads" not in describe_auto(16, threads=2, budget=None, workers=7).split(")")[1]


def test_a_run_counts_each_worker_s_runtime_and_arrays() -> None:
    # vit_b_16-sized weights (330 MB): a worker holds them twice besides its runtime; the
    # estimate alone counts the arrays only
    def estimate(n: int):
        return estimate_memory((1, 3, 224, 224), [(1, 197, 768)] * 12, 8, 6, n, 330e6)

    need = run_need(estimate)
    assert need(4) >= 4 * (WORKER_MEMORY + 2 * 330e6)
    assert need(4) >= estimate(4).peak
    assert auto_parallel(threads=1, budget=8 * GB, need=need, cpus=16) < 8
