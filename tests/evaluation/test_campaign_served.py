"""The served path of fault runs against the fresh one: same rows, same records.

A served fault run (one process per faulty library, ``anpred eval`` by default) reads only
what its fault changed: its records before the faulty stage are the clean run's, once its
captures there are checked to be the clean participant's, bit for bit. The fresh path (one
worker per fault run, every capture read) must give the same rows and deviations.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "pipeline"))
from tiny_model import tiny_cnn  # noqa: E402

from anpred.evaluation import fault_runs  # noqa: E402
from anpred.evaluation.fault_runs import FRESH, SERVED, fault_executor, run_fault  # noqa: E402
from anpred.inject.spec import FaultSpec  # noqa: E402
from anpred.pipeline.prune import KEEP_ALL  # noqa: E402
from anpred.pipeline.run import run  # noqa: E402
from anpred.settings import ExecutionSettings, RunOptions  # noqa: E402
from anpred.store import CAPTURE, ISOLATED, RunStore  # noqa: E402

pytest.importorskip("onnxruntime")  # looked up only: the workers import the libraries


def test_a_served_fault_run_reuses_the_clean_records_and_judges_as_the_fresh_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = str(tiny_cnn(tmp_path / "tiny.onnx"))
    base = tmp_path / "clean"
    options = RunOptions(model=model, libs=("torch,onnxruntime",), images=2)
    settings = ExecutionSettings(threads=1, parallel=1, keep_captures=KEEP_ALL, drill=False)
    clean = run(options, base, settings).summary
    stages = clean.anchor_keys[:-1]
    assert len(stages) >= 2
    stage = stages[1]  # a stage with one before it
    spec = FaultSpec.from_dict({"stage": stage, "op": "*", "kind": "bf16", "severity": 1})
    reused: list[bool] = []
    spy = fault_runs.reuse_clean_records

    def traced(*args: object) -> bool:
        reused.append(spy(*args))  # type: ignore[arg-type]
        return reused[-1]

    monkeypatch.setattr(fault_runs, "reuse_clean_records", traced)
    rows = {}
    for mode in (SERVED, FRESH):
        with fault_executor(None, mode) as executor:
            rows[mode] = run_fault(
                base, tmp_path / mode, model, "onnxruntime", spec, clean, lambda _m: None, 1,
                executor=executor, keep_fork_server=mode == SERVED, reuse_clean=mode == SERVED,
            )  # fmt: skip
    assert reused == [True]  # the served run took the clean run's records before the stage
    assert rows[SERVED] == rows[FRESH] and rows[SERVED] is not None
    assert rows[SERVED]["anpred_detected"] is True
    served = pq.read_table(tmp_path / SERVED / "deviations.parquet")
    fresh = pq.read_table(tmp_path / FRESH / "deviations.parquet")
    assert served.equals(fresh) and served.num_rows > 0
    # the faulty participant's anchors before its stage are the clean run's, bit for bit;
    # from its stage on they differ (the fault took effect)
    faulty = RunStore(tmp_path / SERVED).participant(f"onnxruntime!bf16@{stage}")
    original = RunStore(base).participant("onnxruntime")
    before = clean.anchor_keys[: clean.anchor_keys.index(stage)]
    for input_id in RunStore(base).read_input_ids():
        for kind in (CAPTURE, ISOLATED):
            with (
                faulty.open_capture(input_id, kind) as a,
                original.open_capture(input_id, kind) as b,
            ):
                for anchor in before:
                    assert a[anchor].dtype == b[anchor].dtype
                    np.testing.assert_array_equal(a[anchor], b[anchor])
                assert not np.array_equal(a[stage], b[stage])
