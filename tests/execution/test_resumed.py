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

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "pipeline"))
from tiny_model import tiny_cnn  # noqa: E402

from anpred.evaluation.fault_runs import FRESH, SERVED, fault_executor, run_fault  # noqa: E402
from anpred.execution.resumed import graph_layout  # noqa: E402
from anpred.inject.spec import FaultSpec  # noqa: E402
from anpred.pipeline.prune import KEEP_ALL  # noqa: E402
from anpred.pipeline.run import run  # noqa: E402
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


def _same_captures_as_whole_model(tmp_path: Path, libs: str, library: str) -> None:
    model, base, clean = _clean(tmp_path, libs)
    stages = clean.anchor_keys[:-1]
    stage = stages[1]  # a stage with one before it
    spec = FaultSpec.from_dict({"stage": stage, "op": "*", "kind": "bf16", "severity": 1})
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
    compared = 0
    for input_id in RunStore(base).read_input_ids():
        for kind in (CAPTURE, ISOLATED):
            with resumed.open_capture(input_id, kind) as a, whole.open_capture(input_id, kind) as b:
                assert a.meta.get("resumed") is True
                keys = [k for k in b.keys() if k != PLAIN_KEY]
                assert [k for k in a.keys() if k != PLAIN_KEY] == keys
                for key in keys:
                    assert a.layout(key) == b.layout(key)
                    assert a[key].dtype == b[key].dtype
                    np.testing.assert_array_equal(a[key], b[key])
                    compared += 1
                assert PLAIN_KEY not in a.keys()  # no observer check on resumed inputs
    assert compared == 2 * 2 * len(clean.anchor_keys)


def test_onnxruntime_resumed_captures_equal_the_whole_faulty_models(tmp_path: Path) -> None:
    _same_captures_as_whole_model(tmp_path, "torch,onnxruntime", "onnxruntime")


@pytest.mark.slow
@pytest.mark.parametrize("library", ["tensorflow", "paddle", "jax", "openvino"])
def test_translated_and_openvino_resumed_captures_equal_the_whole_faulty_models(
    tmp_path: Path, library: str
) -> None:
    if importlib.util.find_spec(library) is None:  # looked up, not imported (tf + paddle)
        pytest.skip(f"{library} is not installed")
    _same_captures_as_whole_model(tmp_path, f"torch,onnxruntime,{library}", library)
