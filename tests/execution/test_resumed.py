"""A resumed faulty worker writes the captures the whole faulty model gives, bit for bit.

The served fault run (``anpred eval``'s default) recomputes only the anchors its fault
reaches, fed the clean participant's captures of the others
(:mod:`anpred.execution.resumed`); the fresh one runs the whole faulty model. Every array of
every capture, anchored and stage-isolated, must be equal, in each library that resumes.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "pipeline"))
from tiny_model import tiny_cnn  # noqa: E402

from anpred.evaluation import fault_analysis  # noqa: E402
from anpred.evaluation.fault_runs import FRESH, SERVED, fault_executor, run_fault  # noqa: E402
from anpred.execution.resumed import Float32Anchors, graph_layout  # noqa: E402
from anpred.inject.spec import FaultSpec  # noqa: E402
from anpred.pipeline.prune import KEEP_ALL  # noqa: E402
from anpred.pipeline.run import run  # noqa: E402
from anpred.pipeline.transforms import MODEL_FOLDER  # noqa: E402
from anpred.settings import ExecutionSettings, RunOptions  # noqa: E402
from anpred.store import CAPTURE, ISOLATED, PLAIN_KEY, RunStore  # noqa: E402

pytest.importorskip("onnxruntime")  # looked up only: the workers import the libraries


def test_graph_layout_undoes_a_recorded_channels_last_layout() -> None:
    nchw = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    nhwc = np.transpose(nchw, (0, 2, 3, 1))
    np.testing.assert_array_equal(graph_layout(nhwc, "NHWC"), nchw)
    assert graph_layout(nchw, "NCHW") is nchw
    assert graph_layout(nchw, None) is nchw


def _clean(tmp_path: Path, libs: str) -> tuple[str, Path, object]:
    model = str(tiny_cnn(tmp_path / "tiny.onnx"))
    base = tmp_path / "clean"
    options = RunOptions(model=model, libs=(libs,), images=2)
    settings = ExecutionSettings(threads=1, parallel=1, keep_captures=KEEP_ALL, drill=False)
    return model, base, run(options, base, settings).summary


def _same_captures_as_whole_model(
    tmp_path: Path, libs: str, library: str, monkeypatch: pytest.MonkeyPatch, hidden: int = -1
) -> None:
    """Served (resumed) and fresh fault runs give the same captures; ``hidden``: the index of
    an input whose clean capture the resumed worker does not find (it runs the whole model
    on it, from the faulty graphs it then writes).
    """
    model, base, clean = _clean(tmp_path, libs)
    input_ids = RunStore(base).read_input_ids()
    source = RunStore(base).participant(library)
    if hidden >= 0:
        meta = source.folder / f"{input_ids[hidden]}.{CAPTURE}.json"
        meta.rename(meta.with_name("hidden.json"))
    stages = clean.anchor_keys[:-1]
    stage = stages[1]  # a stage with one before it
    spec = FaultSpec.from_dict({"stage": stage, "op": "*", "kind": "bf16", "severity": 1})
    compared_arrays: list[int] = []  # the analysis's check that early anchors are the clean's
    spy = fault_analysis._same_captures

    def counted(*args: Any) -> bool:
        compared_arrays.append(1)
        return spy(*args)

    monkeypatch.setattr(fault_analysis, "_same_captures", counted)
    rows = {}
    for mode in (SERVED, FRESH):
        with fault_executor(None, mode) as executor:
            rows[mode] = run_fault(
                base, tmp_path / mode, model, library, spec, clean, lambda _m: None, 1,
                executor=executor, keep_fork_server=mode == SERVED, reuse_clean=mode == SERVED,
                resume=mode == SERVED,
            )  # fmt: skip
    assert rows[SERVED] == rows[FRESH] and rows[SERVED] is not None
    name = f"{library}!bf16@{stage}"
    resumed = RunStore(tmp_path / SERVED).participant(name)
    whole = RunStore(tmp_path / FRESH).participant(name)
    status = json.loads((resumed.folder / "status.json").read_text())
    later = clean.anchor_keys[clean.anchor_keys.index(stage) :]
    assert status["resume"]["recomputed"] == later, status.get("resume")
    assert status["resume"]["isolated_recomputed"] == [stage]
    assert "unavailable" not in status["resume"]
    # the faulty graphs' files: written by the worker only when it ran the whole model
    graphs = resumed.folder / MODEL_FOLDER
    for graph in ("anchored.onnx", "plain.onnx"):
        assert (graphs / graph).is_file() == (hidden >= 0)
        if hidden >= 0:  # the graphs the fresh run's driver wrote, byte for byte
            written = (whole.folder / MODEL_FOLDER / graph).read_bytes()
            assert (graphs / graph).read_bytes() == written
    # early anchors copied from the clean captures are not compared again (else they are)
    assert compared_arrays == ([1] if hidden >= 0 else [])
    compared = 0
    for index, input_id in enumerate(input_ids):
        for kind in (CAPTURE, ISOLATED):
            with resumed.open_capture(input_id, kind) as a, whole.open_capture(input_id, kind) as b:
                whole_model = index == hidden and kind == CAPTURE
                assert a.meta.get("resumed") is (None if whole_model else True)
                keys = [k for k in b.keys() if whole_model or k != PLAIN_KEY]
                assert [k for k in a.keys() if whole_model or k != PLAIN_KEY] == keys
                for key in keys:
                    assert a.layout(key) == b.layout(key)
                    assert a[key].dtype == b[key].dtype
                    np.testing.assert_array_equal(a[key], b[key])
                    compared += key != PLAIN_KEY
                if whole_model:  # the observer check ran the faulty plain graph
                    assert a.meta["observer"] == b.meta["observer"]
                else:
                    assert PLAIN_KEY not in a.keys()  # no observer check on resumed inputs
    assert compared == 2 * 2 * len(clean.anchor_keys)


def test_onnxruntime_resumed_captures_equal_the_whole_faulty_models(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _same_captures_as_whole_model(tmp_path, "torch,onnxruntime", "onnxruntime", monkeypatch)


def test_a_worker_that_cannot_resume_an_input_writes_the_faulty_graphs_and_runs_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _same_captures_as_whole_model(
        tmp_path, "torch,onnxruntime", "onnxruntime", monkeypatch, hidden=0
    )


def test_float32_anchors_round_each_anchor_when_read() -> None:
    reference = {"a": np.linspace(0, 1, 7), "b": np.arange(3, dtype=np.float64) / 3}
    rounded = Float32Anchors(reference)
    assert list(rounded) == ["a", "b"] and len(rounded) == 2
    assert rounded._rounded == {}  # nothing rounded before it is read
    first = rounded["a"]
    assert first.dtype == np.float32 and rounded["a"] is first
    np.testing.assert_array_equal(first, reference["a"].astype(np.float32))
    assert list(rounded._rounded) == ["a"]


@pytest.mark.slow
@pytest.mark.parametrize("library", ["tensorflow", "paddle", "jax", "openvino"])
def test_translated_and_openvino_resumed_captures_equal_the_whole_faulty_models(
    tmp_path: Path, library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if importlib.util.find_spec(library) is None:  # looked up, not imported (tf + paddle)
        pytest.skip(f"{library} is not installed")
    _same_captures_as_whole_model(tmp_path, f"torch,onnxruntime,{library}", library, monkeypatch)
