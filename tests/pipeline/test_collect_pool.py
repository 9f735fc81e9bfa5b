"""The streaming pass in several processes: the records of one pass, byte for byte."""

from __future__ import annotations

import json

import pytest
from pool_helpers import children, golden_copy, judged, statistics_of

from anpred import fork_server
from anpred.errors import DamagedRunError
from anpred.participants import REFERENCE64 as REF
from anpred.pipeline import collect_pool
from anpred.pipeline.analyse import analyse


def test_processes_give_the_records_and_verdicts_of_one_pass(tmp_path, monkeypatch) -> None:
    one, two = golden_copy(tmp_path, "one"), golden_copy(tmp_path, "two")
    serial = analyse(one, processes=1).to_dict()
    monkeypatch.setattr(collect_pool, "MIN_BYTES", 0)  # the tiny run is worth processes
    said: list[str] = []
    before = children()
    pooled = analyse(two, say=said.append, processes=2).to_dict()
    assert "  analyse 5 inputs in 2 processes" in said  # it did go to the processes
    assert len([s for s in said if s.startswith("  analysed input ")]) == 5
    # nothing outlives the pass (a fork server left running would also keep the CPU time
    # of the processes it reaped from this process's accounting)
    assert children() <= before
    assert serial["findings"]  # the golden run's fault: something to compare
    assert statistics_of(two) == statistics_of(one)
    assert judged(pooled) == judged(serial)


def test_small_runs_stay_in_this_process(tmp_path, monkeypatch) -> None:
    def no_pool(*args, **kwargs):
        raise AssertionError("a process pool for a tiny run")

    monkeypatch.setattr(collect_pool, "ProcessPoolExecutor", no_pool)
    run = golden_copy(tmp_path, "run")
    assert analyse(run, processes=2).findings  # the tiny run is far below MIN_BYTES


def test_a_damaged_capture_raises_as_the_one_pass_does(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(collect_pool, "MIN_BYTES", 0)
    run = golden_copy(tmp_path, "run")
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
    numpy_path, serial, pooled = (golden_copy(tmp_path, n) for n in ("numpy", "serial", "pooled"))
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
    assert statistics_of(pooled) == statistics_of(serial)
    assert judged(two) == judged(one)

    def found(summary: dict) -> list[tuple[str, str, str]]:
        return [(f["participant"], f["anchor"], f["input"]) for f in summary["findings"]]

    assert found(one) == found(expected) and found(one)
    assert onepass._compiled_wanted  # restored after each pass


def test_the_fork_server_warmed_in_the_workers_tail_serves_the_pass(tmp_path, monkeypatch) -> None:
    run = golden_copy(tmp_path, "run")
    ids = json.loads((run / "inputs.json").read_text())["ids"]
    participants = [p for p in json.loads((run / "participants.json").read_text()) if p != REF]
    before = children()
    collect_pool.warm_fork_server(run, participants, REF, ids, processes=2)
    assert children() <= before  # the tiny run is far below MIN_BYTES: nothing to warm
    collect_pool.warm_fork_server(run, participants, REF, ids, processes=1)
    monkeypatch.setattr(collect_pool, "MIN_BYTES", 0)
    collect_pool.warm_fork_server(run, participants, REF, ids, processes=1)
    assert children() <= before  # one process: no pool, no server
    collect_pool.warm_fork_server(run, participants, REF, ids, processes=2)
    server = children() - before
    assert len(server) == 1  # started ahead of the pass
    said: list[str] = []
    try:
        analyse(run, say=said.append, processes=2)
        assert "  analyse 5 inputs in 2 processes" in said
        assert children() - before == server  # the pass used it; the run keeps it
    finally:
        fork_server.stop()  # as the run does once its report is written
    assert children() <= before
