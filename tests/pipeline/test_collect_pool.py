"""The streaming pass in several processes: the records of one pass, byte for byte."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

from anpred import fork_server
from anpred.errors import DamagedRunError
from anpred.participants import REFERENCE64 as REF
from anpred.pipeline import collect_pool
from anpred.pipeline.analyse import analyse

GOLDEN = Path(__file__).parent / "data" / "golden_run"


def _statistics(run: Path) -> dict:
    with gzip.open(run / "statistics.json.gz", "rt") as data:
        return json.load(data)


def _copy(tmp_path: Path, name: str) -> Path:
    run = tmp_path / name
    shutil.copytree(GOLDEN, run)
    return run


def _judged(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k != "wall_seconds"}


def _children() -> set[int]:
    """Live child processes of this one (Linux /proc; empty elsewhere), but
    multiprocessing's resource tracker (one per interpreter, started once, idle)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        mine = fields[0] != "Z" and int(fields[1]) == os.getpid()
        if mine and b"resource_tracker" not in command:
            found.add(int(stat.parent.name))
    return found


def test_processes_give_the_records_and_verdicts_of_one_pass(tmp_path, monkeypatch) -> None:
    one, two = _copy(tmp_path, "one"), _copy(tmp_path, "two")
    serial = analyse(one, processes=1).to_dict()
    monkeypatch.setattr(collect_pool, "MIN_BYTES", 0)  # the tiny run is worth processes
    said: list[str] = []
    before = _children()
    pooled = analyse(two, say=said.append, processes=2).to_dict()
    assert "  analyse 5 inputs in 2 processes" in said  # it did go to the processes
    assert len([s for s in said if s.startswith("  analysed input ")]) == 5
    # nothing outlives the pass (a fork server left running would also keep the CPU time
    # of the processes it reaped from this process's accounting)
    assert _children() <= before
    assert serial["findings"]  # the golden run's fault: something to compare
    assert _statistics(two) == _statistics(one)
    assert _judged(pooled) == _judged(serial)


def test_small_runs_stay_in_this_process(tmp_path, monkeypatch) -> None:
    def no_pool(*args, **kwargs):
        raise AssertionError("a process pool for a tiny run")

    monkeypatch.setattr(collect_pool, "ProcessPoolExecutor", no_pool)
    run = _copy(tmp_path, "run")
    assert analyse(run, processes=2).findings  # the tiny run is far below MIN_BYTES


def test_a_damaged_capture_raises_as_the_one_pass_does(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(collect_pool, "MIN_BYTES", 0)
    run = _copy(tmp_path, "run")
    damaged = next((run / "captures" / "jax").glob("*.capture.npz"))
    damaged.write_bytes(damaged.read_bytes()[:100])  # truncated
    with pytest.raises(DamagedRunError):
        analyse(run, processes=2)


def test_large_runs_use_the_compiled_loops_with_the_findings_of_the_numpy_path(
    tmp_path, monkeypatch
) -> None:
    from anpred.analysis import onepass

    if onepass.kernels() is None:
        pytest.skip("numba is not installed")
    numpy_path, serial, pooled = (_copy(tmp_path, n) for n in ("numpy", "serial", "pooled"))
    calls: list[int] = []
    compiled = onepass._compiled
    monkeypatch.setattr(onepass, "_compiled", lambda *a: calls.append(1) or compiled(*a))
    expected = analyse(numpy_path, processes=1).to_dict()  # a tiny run: the NumPy path
    assert not calls
    monkeypatch.setattr(collect_pool, "COMPILED_MIN_BYTES", 0)  # as if it were large
    one = analyse(serial, processes=1).to_dict()
    assert calls  # this process used the compiled loops
    monkeypatch.setattr(collect_pool, "MIN_BYTES", 0)
    two = analyse(pooled, processes=2).to_dict()  # its processes are told to use them
    assert _statistics(pooled) == _statistics(serial)
    assert _judged(two) == _judged(one)

    def found(summary: dict) -> list[tuple[str, str, str]]:
        return [(f["participant"], f["anchor"], f["input"]) for f in summary["findings"]]

    assert found(one) == found(expected) and found(one)
    assert onepass._compiled_wanted  # restored after each pass


def test_the_fork_server_warmed_in_the_workers_tail_serves_the_pass(tmp_path, monkeypatch) -> None:
    run = _copy(tmp_path, "run")
    ids = json.loads((run / "inputs.json").read_text())["ids"]
    participants = [p for p in json.loads((run / "participants.json").read_text()) if p != REF]
    before = _children()
    collect_pool.warm_fork_server(run, participants, REF, ids, processes=2)
    assert _children() <= before  # the tiny run is far below MIN_BYTES: nothing to warm
    collect_pool.warm_fork_server(run, participants, REF, ids, processes=1)
    monkeypatch.setattr(collect_pool, "MIN_BYTES", 0)
    collect_pool.warm_fork_server(run, participants, REF, ids, processes=1)
    assert _children() <= before  # one process: no pool, no server
    collect_pool.warm_fork_server(run, participants, REF, ids, processes=2)
    server = _children() - before
    assert len(server) == 1  # started ahead of the pass
    said: list[str] = []
    try:
        analyse(run, say=said.append, processes=2)
        assert "  analyse 5 inputs in 2 processes" in said
        assert _children() - before == server  # the pass used it; the run keeps it
    finally:
        fork_server.stop()  # as the run does once its report is written
    assert _children() <= before
