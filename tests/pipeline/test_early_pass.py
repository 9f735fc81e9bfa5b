"""Inputs collected while the last workers run: the records of one pass, byte for byte."""

from __future__ import annotations

import json
import stat
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from pool_helpers import children, golden_copy, judged, statistics_of

from anpred import fork_server
from anpred.analysis.oracle import OracleParams
from anpred.calibration.stored import with_stored_calibration
from anpred.execution.executor import JobSpec, LocalExecutor, RunningJob
from anpred.participants import REFERENCE32 as REF32
from anpred.participants import REFERENCE64 as REF
from anpred.pipeline import collect_pool
from anpred.pipeline.analyse import analyse
from anpred.pipeline.early_pass import EarlyPass
from anpred.pipeline.evidence import Collection
from anpred.store import RunStore


def _early(run: Path, **changes) -> EarlyPass:
    """An early pass set as the run sets it (``changes``: what to set otherwise)."""
    store = RunStore(run)
    fields = {
        "participants": [p for p in store.read_participants() if p != REF],
        "anchors": [a["key"] for a in store.read_export()["anchors"]],
        "params": with_stored_calibration(store, OracleParams()),
        "input_ids": store.read_input_ids(),
    }
    fields.update(changes)
    collection = Collection(Path(run).resolve(), tuple(fields["participants"]),
                            tuple(fields["anchors"]), fields["params"], REF, REF32)  # fmt: skip
    return EarlyPass(collection, fields["input_ids"], processes=2, isolation=True)


def _tail(early: EarlyPass, free: int = 1) -> None:
    """Tick as the pool does until nothing more is submitted and all of it is done."""
    for _ in range(200):
        submitted = len(early.futures)
        early.tick(free)
        if len(early.futures) == submitted and all(f.done() for f in early.futures.values()):
            return
        time.sleep(0.05)
    raise AssertionError("the early pass did not settle")


def _hide(run: Path, folder: str, input_id: str, kind: str = "capture") -> Path:
    """Make a capture look not written yet (its record is what marks it done)."""
    record = run / "captures" / folder / f"{input_id}.{kind}.json"
    hidden = record.with_name(f".{record.name}.hidden")
    record.rename(hidden)
    return hidden


def _set_state(run: Path, folder: str, **fields) -> None:
    path = run / "captures" / folder / "status.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


def _hand_overs(monkeypatch) -> list[object]:
    """The tasks early passes are asked to hand over from now on; the tiny runs made worth
    processes (so that early passes run)."""
    handed: list[object] = []
    hand_over = EarlyPass.hand_over
    monkeypatch.setattr(
        EarlyPass, "hand_over", lambda self, task: handed.append(task) or hand_over(self, task)
    )
    monkeypatch.setattr(collect_pool, "MIN_BYTES", 0)
    return handed


@pytest.fixture
def pooled(monkeypatch) -> None:
    monkeypatch.setattr(collect_pool, "MIN_BYTES", 0)  # the tiny run is worth processes


def test_inputs_collected_early_give_the_records_of_one_pass(tmp_path, monkeypatch, pooled) -> None:
    one, two = golden_copy(tmp_path, "one"), golden_copy(tmp_path, "two")
    serial = analyse(one, processes=1).to_dict()
    before = children()
    early = _early(two)
    _tail(early)  # one free slot: one process collected every (finished) input
    assert len(early.futures) == 5 and all(f.result() for f in early.futures.values())

    def no_new_pool(*_a, **_k):
        raise AssertionError("the pass started a pool of its own")

    monkeypatch.setattr(collect_pool, "new_pool", no_new_pool)
    said: list[str] = []
    try:
        got = analyse(two, say=said.append, processes=2, early=early).to_dict()
    finally:
        fork_server.stop()  # the run stops it after its report
    assert len([s for s in said if s.startswith("  analysed input ")]) == 5
    assert statistics_of(two) == statistics_of(one)
    assert judged(got) == judged(serial) and serial["findings"]
    assert children() <= before  # the handed-over processes ended with the pass


def test_an_input_waits_for_every_participant(tmp_path, pooled) -> None:
    run = golden_copy(tmp_path, "run")
    ids = RunStore(run).read_input_ids()
    early = _early(run)
    try:
        first = _hide(run, "jax", ids[0])
        _set_state(run, "jax", state="running")
        _tail(early, free=2)
        assert not early.futures  # the loops are decided on the first input: nothing yet
        first.rename(first.with_name(f"{ids[0]}.capture.json"))
        _hide(run, "openvino", ids[2], "isolated")  # written, not isolated yet
        _set_state(run, "openvino", state="running")
        _hide(run, "torch_fp64", ids[3])  # the fp64 reference has not got to it
        _set_state(run, "torch_fp64", state="running")
        _tail(early, free=2)
        assert not early.futures  # nothing beside the fp64 reference's worker (memory)
        _set_state(run, "torch_fp64", state="crash")  # it ended without ids[3]
        _tail(early, free=2)
        assert set(early.futures) == {ids[0], ids[1], ids[3], ids[4]}
        _set_state(run, "openvino", isolation="isolation unavailable: no")  # it never will
        _tail(early, free=2)
        assert set(early.futures) == set(ids)
    finally:
        early.close()
        fork_server.stop()


def test_no_more_than_the_free_slots_are_busy(tmp_path, pooled) -> None:
    run = golden_copy(tmp_path, "run")
    early = _early(run)
    try:
        early.tick(0)
        assert not early.futures  # no slot free: nothing starts
        early.tick(1)
        early.tick(1)  # the first one may still run
        assert 1 <= len(early.futures) <= 2
        busy = sum(not f.done() for f in early.futures.values())
        assert busy <= 1
    finally:
        early.close()
        fork_server.stop()


def test_a_pass_that_collects_otherwise_stops_the_early_one(tmp_path, pooled) -> None:
    one, two = golden_copy(tmp_path, "one"), golden_copy(tmp_path, "two")
    serial = analyse(one, processes=1).to_dict()
    before = children()
    early = _early(two, params=OracleParams(noise_factor=OracleParams().noise_factor * 2))
    _tail(early)
    assert early.futures
    try:
        got = analyse(two, processes=2, early=early).to_dict()
    finally:
        fork_server.stop()
    assert early.closed and early.pool is None  # not handed over: its records were other
    assert statistics_of(two) == statistics_of(one)
    assert judged(got) == judged(serial)
    assert children() <= before


def test_small_runs_are_not_collected_early(tmp_path) -> None:
    run = golden_copy(tmp_path, "run")
    early = _early(run)
    _tail(early, free=2)  # far below MIN_BYTES: the pass would not use processes
    assert early.closed and not early.futures


def test_a_run_ticks_its_early_pass_and_hands_it_to_the_analysis(
    tmp_path, monkeypatch, tiny_onnx
) -> None:
    import anpred

    free: list[int] = []
    tick = EarlyPass.tick
    monkeypatch.setattr(EarlyPass, "tick", lambda self, n: free.append(n) or tick(self, n))
    handed = _hand_overs(monkeypatch)
    before = children()
    run = anpred.run(
        str(tiny_onnx), "onnxruntime,openvino", images=3, out=tmp_path / "run",
        progress=None, drill=False, calibration="off", parallel=2,
    )  # fmt: skip
    assert run.summary.participants  # analysed
    assert free and set(free) <= {0, 1}  # told the free slots in the tail
    assert len(handed) == 1  # the analysis asked it for what the tail began
    assert children() <= before  # nothing outlives the run


def test_chunks_hand_their_early_passes_to_their_analyses(tmp_path, monkeypatch, tiny_onnx) -> None:
    import anpred

    def chunked(out: Path) -> dict:
        said: list[str] = []
        run = anpred.run(
            str(tiny_onnx), "onnxruntime,openvino", images=4, out=out, progress=said.append,
            drill=False, calibration="off", parallel=2, chunk=2,
        )  # fmt: skip
        assert any(line.startswith("chunk 2/2: inputs 3-4 of 4") for line in said), said
        summary = judged(run.summary.to_dict())
        del summary["participants"]  # their timings, process ids
        return summary

    alone = chunked(tmp_path / "alone")  # the tiny run is below MIN_BYTES: no early pass
    handed = _hand_overs(monkeypatch)
    before = children()
    assert chunked(tmp_path / "early") == alone
    assert len(handed) == 2  # each chunk's analysis asked its own early pass
    assert children() <= before


def test_a_fault_run_of_an_evaluation_begins_its_analysis_early(
    tmp_path, monkeypatch, tiny_onnx
) -> None:
    import anpred
    from anpred.evaluation.campaign import run_fault
    from anpred.inject.spec import FaultSpec

    clean = anpred.run(
        str(tiny_onnx), "onnxruntime,openvino", images=3, out=tmp_path / "clean", progress=None,
        drill=False, calibration="off", parallel=2, keep_captures="all",
    )  # fmt: skip
    spec = FaultSpec(stage="r1", op="*", kind="bf16", severity=1)

    def fault(folder: str) -> dict:
        return run_fault(
            tmp_path / "clean", tmp_path / folder, str(tiny_onnx), "onnxruntime", spec,
            clean.summary, lambda _m: None, 1, parallel=2,
        )  # fmt: skip

    alone = fault("alone")  # the tiny run is below MIN_BYTES: analysed in this process
    handed = _hand_overs(monkeypatch)
    before = children()
    assert fault("early") == alone and alone["anpred_detected"]
    assert len(handed) == 1  # the fault run's analysis asked its early pass
    assert children() <= before  # its fork server stopped with it


class _SlowStart(LocalExecutor):
    """Local workers, openvino's slow to start (its Python waits ``seconds`` first), as the
    last-started worker of a loaded machine is while it imports its library."""

    def __init__(self, folder: Path, seconds: float) -> None:
        super().__init__()
        self.python = folder / "slow-python"
        self.python.write_text(f'#!/bin/sh\nsleep {seconds}\nexec "{sys.executable}" "$@"\n')
        self.python.chmod(self.python.stat().st_mode | stat.S_IXUSR)

    def start(self, spec: JobSpec) -> RunningJob:
        if spec.participant is not None and spec.participant.name == "openvino":
            spec = replace(spec, python=str(self.python))
        return super().start(spec)


@pytest.mark.slow
def test_a_chunks_slow_starting_worker_is_waited_for(tmp_path, monkeypatch, tiny_onnx) -> None:
    """A chunk's workers start in the folders of the last chunk's: until openvino's new
    worker wrote its status, the last chunk's said it ended. The early pass took that for
    the chunk's end and collected inputs without openvino's captures (36 rows against 30,
    measured before the fix)."""
    import pyarrow.parquet as pq

    from anpred.pipeline.run import run
    from anpred.settings import ExecutionSettings, RunOptions

    def rows(executor: LocalExecutor | None, name: str) -> list[dict]:
        options = RunOptions(model=str(tiny_onnx), libs=("onnxruntime", "openvino"), images=4)
        out = tmp_path / name
        settings = ExecutionSettings(parallel=2, executor=executor, drill=False,
                                     calibration="off", chunk=2, say=lambda _m: None)
        run(options, out, settings)  # fmt: skip
        table = pq.read_table(out / "deviations.parquet").to_pylist()
        return sorted(table, key=lambda r: (r["participant"], r["input"], r["anchor"]))

    alone = rows(None, "alone")  # the tiny run is below MIN_BYTES: no early pass
    handed = _hand_overs(monkeypatch)
    assert rows(_SlowStart(tmp_path, 6), "early") == alone
    assert len(handed) == 2  # each chunk's analysis asked its early pass
