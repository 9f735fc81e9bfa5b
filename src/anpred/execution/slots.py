"""How many workers run at once (``--parallel``): a number, or ``auto`` (the default).

``auto`` takes the CPUs this process may use -- its CPU affinity, and the CPU quota of its
control group (v2) where one is set (a container's ``--cpus``) -- divided by ``--threads``, and
lowers that until the run fits the memory budget: :data:`WORKER_MEMORY` per worker (its
library's runtime), plus, where the caller knows the model (``anpred run``), each worker's
arrays and the rest of the run's own estimate
(:func:`anpred.execution.resources.estimate_memory`, which counts the analysis processes,
also ``--parallel`` of them). On the 2-core
development machine that is 2, the fixed default it replaces; on a machine with more
cores the participants' workers (and the analysis's processes) spread over them. A run has
one worker per participant and the fp64 reference, so CPUs beyond those only analyse:
:func:`describe_auto` says so, with the ``--threads`` that would use them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from anpred.errors import UsageError
from anpred.execution.resources import MemoryEstimate, format_size
from anpred.settings import AUTO

Parallel = int | Literal["auto"]
"""A ``--parallel`` value: workers at once, or :data:`AUTO`."""

WORKER_MEMORY = 1 << 30
"""Resident memory counted per worker when ``auto`` fits the budget: a library's worker
peaks at 0.45-0.91 GB on yolov8n (8 inputs, stage anchors, ``/usr/bin/time``: onnxruntime
0.45, openvino 0.48, jax 0.61, paddle 0.79, torch 0.79, tensorflow 0.83, the fp64
reference 0.91 GB), its library's runtime more than the model's arrays."""

_CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def parse_parallel(text: str) -> Parallel:
    """``--parallel``: a number of workers >= 1, or ``auto``.

    Raises:
        UsageError: Neither.
    """
    if text.strip().lower() == AUTO:
        return AUTO
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise UsageError(f"--parallel takes a number of workers >= 1 or 'auto'; got {text!r}")
    return value


def cgroup_cpus(cpu_max: str | None = None) -> float | None:
    """CPUs the control group's quota allows (``cpu.max``: quota and period), ``None`` if
    unlimited or unknown.
    """
    if cpu_max is None:
        try:
            cpu_max = _CGROUP_CPU_MAX.read_text()
        except OSError:
            return None
    fields = cpu_max.split()
    if len(fields) != 2 or fields[0] == "max":
        return None
    try:
        quota, period = int(fields[0]), int(fields[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity, lowered to its control group's quota."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = cgroup_cpus()
    if quota is not None:
        cpus = min(cpus, max(1, math.floor(quota)))
    return max(1, cpus)


def auto_parallel(
    threads: int,
    budget: int | None,
    need: Callable[[int], int] | None = None,
    cpus: int | None = None,
) -> int:
    """Workers at once for ``auto``: ``cpus // threads`` (default :func:`usable_cpus`),
    lowered until what ``n`` workers need fits ``budget`` bytes (``None``: no budget):
    ``need(n)`` (default ``n`` x :data:`WORKER_MEMORY`); at least 1 (a run that does not
    fit with one is refused by its budget check).
    """
    n = max(1, (usable_cpus() if cpus is None else cpus) // max(1, threads))
    if budget is None:
        return n
    needed = need if need is not None else (lambda k: k * WORKER_MEMORY)
    while n > 1 and needed(n) > budget:
        n -= 1
    return n


def run_need(estimate: Callable[[int], MemoryEstimate]) -> Callable[[int], int]:
    """What ``n`` workers of a run need, from its estimate with ``n`` workers at once: the
    estimate's peak, and at least ``n`` x (:data:`WORKER_MEMORY` + one worker's arrays,
    the larger of the fp32 and fp64 workers': the estimate counts arrays, not runtimes).
    """
    arrays = estimate(1).workers
    return lambda n: max(estimate(n).peak, n * (WORKER_MEMORY + arrays))


def resolve(
    parallel: Parallel, threads: int, budget: int | None, need: Callable[[int], int] | None = None
) -> int:
    """``parallel`` as a number: itself, or :func:`auto_parallel` for ``auto``.

    Raises:
        UsageError: Neither a number >= 1 nor ``auto`` (from the Python API).
    """
    value = parse_parallel(str(parallel)) if not isinstance(parallel, int) else parallel
    if value == AUTO:
        return auto_parallel(threads, budget, need)
    if isinstance(value, bool) or value < 1:
        raise UsageError(f"parallel takes a number of workers >= 1 or 'auto'; got {parallel!r}")
    return value


def describe_auto(
    parallel: int, threads: int, budget: int | None, workers: int | None = None
) -> str:
    """The line a run or an evaluation says when ``auto`` chose ``parallel``.

    ``workers``: the run's workers (one per participant and the fp64 reference), where
    known. A run never has more of them at once than that, however many CPUs: beyond it
    the line says so, and which ``--threads`` would give the workers the idle CPUs (the
    analysis's processes still use ``parallel``). ``--threads`` is never raised by itself:
    a library's numbers may depend on its thread count, so it stays the user's choice.
    """
    cpus = usable_cpus()
    memory = f", memory budget {format_size(budget)}" if budget else ""
    made_of = f"({cpus} CPU{'s' * (cpus != 1)}, --threads {threads}{memory})"
    if workers is None or workers >= parallel:
        return f"--parallel auto: {parallel} worker{'s' * (parallel != 1)} at once {made_of}"
    line = (
        f"--parallel auto: {parallel} processes at once {made_of}, but at most {workers} "
        f"workers, one per participant and the fp64 reference; the others analyse"
    )
    wider = cpus // max(1, workers)
    if wider > threads:
        line += f" (--threads {wider} would give each worker {wider} CPUs)"
    return line
