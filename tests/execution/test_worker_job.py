"""The worker job: typed on both sides of the job file, the file's keys as before."""

from __future__ import annotations

from pathlib import Path

from anpred.execution.job import OBSERVER_KEY, REFERENCE_RUNNING, WorkerJob
from anpred.interchange.transform import TRANSFORMS_KEY
from anpred.participants import parse_participant


def test_a_job_file_comes_back_as_the_job_it_was() -> None:
    shared = {
        "model": {"export": {"folder": "/x"}, "zoo_model": None},
        "inputs": "/run/inputs.npz",
        TRANSFORMS_KEY: {"onnxruntime": [{"kind": "k", "module": "m"}]},
        OBSERVER_KEY: ["a"],
    }
    p = parse_participant("onnxruntime")
    job = WorkerJob.of(shared, p, Path("/run/captures/onnxruntime"), ["a", "b"], Path("/ref"), True)
    data = job.to_dict()
    assert WorkerJob.from_dict(data) == job
    assert job.name == "onnxruntime" and job.library == "onnxruntime"
    # the keys the job files had when the pool assembled them as a dict
    assert set(data) == {
        "model", "inputs", TRANSFORMS_KEY, OBSERVER_KEY, REFERENCE_RUNNING, "participant",
        "out", "input_ids", "isolation_source",
    }  # fmt: skip
    assert data["isolation_source"] == "/ref" and data[REFERENCE_RUNNING] is True


def test_optional_fields_stay_out_of_the_file_when_unset() -> None:
    p = parse_participant("torch")
    job = WorkerJob.of({"model": {}, "inputs": "i.npz"}, p, Path("/o"), ["a"], None)
    data = job.to_dict()
    assert data["isolation_source"] is None
    assert not {TRANSFORMS_KEY, OBSERVER_KEY, REFERENCE_RUNNING} & set(data)
    back = WorkerJob.from_dict(data)
    assert back.observer_inputs is None and back.reference_running is False
