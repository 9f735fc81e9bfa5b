"""Behaviour unchanged: analysing a stored run gives the numbers the pre-refactor code gave.

``data/golden_run`` is a run directory written by anpred before the run store and the typed
summary existed (commit 4efddff): the tiny CNN (16x16 input) in torch, onnxruntime with a
bf16 fault at ``s2``, openvino and jax, on 5 inputs, with its ``summary.json`` and
``deviations.parquet``. The captures are re-analysed by today's code and every value must
match. Floats are compared to 1e-9 relative: the analysis is NumPy-only and deterministic on
one machine (measured: bit-identical), but NumPy's SIMD reductions may round the last bits
differently on another CPU.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from anpred.analysis.oracle import OracleParams
from anpred.pipeline.analyse import analyse
from anpred.store.summary import SCHEMA_VERSION

GOLDEN = Path(__file__).parent / "data" / "golden_run"

#: Keys that depend on the machine or the moment, not on the analysis.
VOLATILE = {"wall_seconds"}


def _assert_same(got: Any, expected: Any, where: str = "") -> None:
    if isinstance(expected, dict):
        assert isinstance(got, dict), where
        assert set(got) - VOLATILE == set(expected) - VOLATILE, where
        for key in set(expected) - VOLATILE:
            _assert_same(got[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), where
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            _assert_same(g, e, f"{where}[{i}]")
    elif isinstance(expected, float) and not isinstance(got, bool):
        assert isinstance(got, int | float), where
        assert math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-300), (where, got, expected)
    else:
        assert got == expected, (where, got, expected)


#: The metrics that corroborate (issue 41): computed where the oracle has a candidate by
#: default, everywhere with ``metrics_scope="all"``; the rest of a row decides.
CORROBORATING = ("max_abs", "max_ulp", "cosine", "wasserstein", "channel_moments")


@pytest.mark.parametrize("scope", ["all", "candidates"])
def test_reanalysing_the_golden_run_gives_the_same_summary(tmp_path: Path, scope: str) -> None:
    """Every number with every metric computed everywhere; by default (corroborating
    metrics where the oracle has a candidate) the same summary, verdicts and primary
    numbers, and each corroborating value either the same or not computed (empty).
    """
    run_dir = tmp_path / "run"
    shutil.copytree(GOLDEN, run_dir)
    (run_dir / "summary.json").unlink()
    (run_dir / "deviations.parquet").unlink()
    summary = analyse(run_dir, params=OracleParams(metrics_scope=scope)).to_dict()
    assert summary.pop("schema_version") == SCHEMA_VERSION  # the one key the typed summary adds
    # issue 14 adds the noise rule; a run recorded without a calibration keeps the fixed one
    assert summary["oracle"].pop("threshold_rule") == "fixed"
    import json

    # issue 35 adds the precision classes: every participant of the golden run is fp32
    precision = summary.pop("precision")
    assert set(precision["classes"]) == {"fp32"}
    assert {p["class"] for p in precision["participants"].values()} == {"fp32"}
    assert {f["metrics"].pop("precision") for f in summary["findings"]} == {"fp32"}
    expected = json.loads((GOLDEN / "summary.json").read_text())
    # the one intended change since: an ONNX file's weights are its own, not seeded (issue 12)
    assert expected["model"]["weights"] == "seeded (seed 0)"
    expected["model"]["weights"] = "from the ONNX file"
    assert expected["findings"], "the golden run must have findings to compare"
    _assert_same(summary, expected)
    got_rows = pq.read_table(run_dir / "deviations.parquet").to_pylist()
    for row in got_rows:  # issue 35's columns: the class, the introduced error's floor
        assert row.pop("precision") == "fp32"
        floor = row.pop("introduced_floor")
        assert floor is None or floor > 0
    expected_rows = pq.read_table(GOLDEN / "deviations.parquet").to_pylist()
    if scope == "candidates":
        columns = [c for m in CORROBORATING for c in (m, f"{m}_vs_fp64")]
        assert len(got_rows) == len(expected_rows)
        computed = 0
        for got, expected in zip(got_rows, expected_rows, strict=True):
            if got["finding"]:  # a finding's cell is a candidate's
                assert all(got[c] is not None for c in columns)
            computed += got["max_abs"] is not None
            for c in columns:
                if got[c] is None:
                    expected[c] = None  # not computed: empty, never a number
        assert 0 < computed < len(got_rows)
    _assert_same(got_rows, expected_rows)
