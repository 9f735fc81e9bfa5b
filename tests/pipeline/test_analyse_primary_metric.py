"""Characterization measures propagation with the oracle's primary metric, not always rel_l2."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pyarrow.parquet as pq

from anpred.analysis.oracle import OracleParams
from anpred.pipeline.analyse import analyse

#: A stored run (see test_golden_analysis.py); copied, never modified.
GOLDEN = Path(__file__).parent / "data" / "golden_run"


def test_propagation_profiles_use_the_primary_metric(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(GOLDEN, run_dir)
    summary = analyse(run_dir, params=OracleParams(primary_metric="max_abs"))
    assert summary.oracle.primary_metric == "max_abs"
    rows = pq.read_table(run_dir / "deviations.parquet").to_pylist()
    max_abs = {(r["participant"], r["input"], r["anchor"]): r["max_abs_vs_fp64"] for r in rows}
    rel_l2 = {(r["participant"], r["input"], r["anchor"]): r["rel_l2_vs_fp64"] for r in rows}
    checked = 0
    for participant, propagation in summary.characterization.propagation.items():
        for input_id, profile in propagation.profiles.items():
            keys = [(participant, input_id, a) for a in summary.anchor_keys]
            expected = [max_abs[k] for k in keys]
            assert all(
                math.isclose(got, want, rel_tol=1e-12)
                for got, want in zip(profile["deviations"], expected, strict=True)
            )
            assert profile["deviations"] != [rel_l2[k] for k in keys]
            checked += 1
    assert checked == 20  # 4 participants x 5 inputs
