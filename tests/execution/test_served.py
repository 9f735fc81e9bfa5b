"""Served workers: one process runs several fault runs of one participant; a crash costs
only the job in flight, and a served job captures what a fresh worker captures.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from anpred.backends.base import ModelJob
from anpred.execution.executor import Executor, LocalExecutor
from anpred.execution.pool import WorkerResult, run_workers, served_workers
from anpred.execution.served import ServedExecutor
from anpred.inject.spec import FaultSpec
from anpred.inject.transforms import fault_transform
from anpred.interchange.transform import TRANSFORMS_KEY
from anpred.participants import parse_participant
from anpred.settings import ExecutionSettings
from anpred.store import RunStore, Status

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "inject"))
sys.path.insert(0, str(HERE.parent / "pipeline"))
from fault_chain import build_export, feed  # noqa: E402
from symptoms import Symptom  # noqa: E402

pytest.importorskip("onnxruntime")  # only looked up: the workers import it

INPUTS = ("a", "b")


@pytest.fixture
def chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ModelJob, Path]:
    """The fault chain's export and its inputs; the test transform importable by workers."""
    path = os.pathsep.join(
        p for p in (str(HERE.parent / "pipeline"), os.environ.get("PYTHONPATH")) if p
    )
    monkeypatch.setenv("PYTHONPATH", path)
    export = build_export(tmp_path / "export")
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, **{i: feed(n) for n, i in enumerate(INPUTS, 1)})
    return ModelJob(export, None, None, 0), inputs


def _fault(model: ModelJob, stage: str, kind: str, folder: Path) -> dict[str, object]:
    spec = FaultSpec.from_dict({"stage": stage, "op": "*", "kind": kind, "severity": 1})
    return fault_transform("onnxruntime", spec, model.export, folder).record()


def _run(
    run_dir: Path, model: ModelJob, inputs: Path, record: dict[str, object], executor: Executor
) -> WorkerResult:
    p = parse_participant("onnxruntime")
    job = {
        "model": model.to_dict(),
        "inputs": str(inputs),
        TRANSFORMS_KEY: {p.name: [record]},
    }
    settings = ExecutionSettings(threads=1, parallel=1, timeout=120, executor=executor)
    return run_workers(run_dir, [p], job, INPUTS, settings.quiet())[p.name]


def _captures(run_dir: Path) -> dict[str, np.ndarray]:
    folder = RunStore(run_dir).participant("onnxruntime")
    out = {}
    for input_id in INPUTS:
        capture = folder.open_capture(input_id)
        assert capture is not None
        with capture:
            out.update({f"{input_id}/{k}": capture[k] for k in capture.keys()})
    return out


def test_a_served_process_runs_several_faults_and_a_crash_costs_only_its_own(
    tmp_path: Path, chain: tuple[ModelJob, Path]
) -> None:
    model, inputs = chain
    faults = {
        "bf16-s2": _fault(model, "s2", "bf16", tmp_path / "graphs-s2"),
        "crash": Symptom("crash").record(),
        "fp16-s3": _fault(model, "s3", "fp16", tmp_path / "graphs-s3"),
        "bf16-s1": _fault(model, "s1", "bf16", tmp_path / "graphs-s1"),
    }
    with ServedExecutor() as served:
        results = {
            name: _run(tmp_path / "served" / name, model, inputs, record, served)
            for name, record in faults.items()
        }
        assert served.started == 2  # the crash took one process; the rest went on in one
    assert results["crash"].status == Status.CRASH
    assert RunStore(tmp_path / "served" / "crash").participant("onnxruntime").read_status()[
        "state"
    ] == str(Status.CRASH)
    for name in ("bf16-s2", "fp16-s3", "bf16-s1"):
        assert results[name].status == Status.OK, results[name].message
        assert results[name].inputs_done == len(INPUTS)
    # what a fresh worker per fault captures, bit for bit
    for name in ("bf16-s2", "bf16-s1"):
        fresh = _run(tmp_path / "fresh" / name, model, inputs, faults[name], LocalExecutor())
        assert fresh.status == Status.OK
        mine, theirs = _captures(tmp_path / "served" / name), _captures(tmp_path / "fresh" / name)
        assert mine.keys() == theirs.keys()
        for key in mine:
            np.testing.assert_array_equal(mine[key], theirs[key], err_msg=f"{name} {key}")
    # and the faults did change the captures (the comparison is not vacuous)
    s2, s1 = _captures(tmp_path / "served" / "bf16-s2"), _captures(tmp_path / "served" / "bf16-s1")
    assert not np.array_equal(s2["a/s1"], s1["a/s1"])


def test_a_next_chunk_runs_on_the_runner_its_process_kept(
    tmp_path: Path, chain: tuple[ModelJob, Path]
) -> None:
    """The jobs of a chunked run: the same participant and model, other inputs. The second
    job reuses the first one's runner and captures what a fresh worker captures.
    """
    model, inputs = chain
    p = parse_participant("onnxruntime")
    job = {"model": model.to_dict(), "inputs": str(inputs)}
    # the CLI's settings name local processes explicitly: they are served all the same
    settings = ExecutionSettings(threads=1, parallel=1, timeout=120, executor=LocalExecutor())
    settings = settings.quiet()
    run = tmp_path / "chunked"
    with served_workers() as served:
        for ids in (["a"], ["b"]):
            assert run_workers(run, [p], job, ids, settings)[p.name].status == Status.OK
        assert served.started == 1
    status = RunStore(run).participant(p.name).read_status()
    assert "kept from the process's previous job" in status["runner"]
    fresh = tmp_path / "fresh"
    assert run_workers(fresh, [p], job, INPUTS, settings)[p.name].status == Status.OK
    mine, theirs = _captures(run), _captures(fresh)
    assert mine.keys() == theirs.keys() and "b/output" in mine
    for key in mine:
        np.testing.assert_array_equal(mine[key], theirs[key], err_msg=key)


def test_a_worker_counts_its_capture_and_observer_cpu_and_profiles_on_request(
    tmp_path: Path, chain: tuple[ModelJob, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The status's CPU timings of capture writing and the observer check (where a worker's
    CPU goes beyond its inferences, benchmarks/bench_run.py), and ``ANPRED_PROFILE``'s
    per-job CPU profile of a served worker.
    """
    import pstats

    model, inputs = chain
    profiles = tmp_path / "profiles"
    monkeypatch.setenv("ANPRED_PROFILE", str(profiles))
    p = parse_participant("onnxruntime")
    job = {"model": model.to_dict(), "inputs": str(inputs)}
    settings = ExecutionSettings(threads=1, parallel=1, timeout=120, executor=LocalExecutor())
    with served_workers():
        result = run_workers(tmp_path / "run", [p], job, INPUTS, settings.quiet())[p.name]
    assert result.status == Status.OK
    timings = RunStore(tmp_path / "run").participant(p.name).read_status()["timings"]
    assert 0 < timings["capture_cpu"] <= timings["cpu"]
    assert 0 <= timings["observer_cpu"] <= timings["cpu"]
    (profile,) = profiles.glob("onnxruntime-*.prof")
    functions = {name for _file, _line, name in pstats.Stats(str(profile)).stats}
    assert "write_capture" in functions and "infer_plain" in functions
