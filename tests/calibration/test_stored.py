"""A run directory's calibration (issue 14, item 2): stored, used by its analysis, inherited
by derived runs, and never learnt on the inputs it judges."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from anpred.calibration.rule import RULE, AnchorThreshold, Calibration
from anpred.calibration.stored import attach, calibrate_run
from anpred.errors import UsageError
from anpred.pipeline.analyse import analyse
from anpred.store import RunStore

GOLDEN = Path(__file__).parents[1] / "pipeline" / "data" / "golden_run"


def _copy(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(GOLDEN, run_dir)
    return run_dir


def _everywhere(run_dir: Path, factor: float) -> Calibration:
    anchors = [a["key"] for a in RunStore.open(run_dir).read_export()["anchors"]]
    return Calibration(
        anchors={a: AnchorThreshold(factor, 24) for a in anchors}, inputs=("elsewhere",)
    )


def test_the_analysis_uses_the_stored_calibration(tmp_path):
    run_dir = _copy(tmp_path)
    fixed = analyse(run_dir)
    assert fixed.oracle.threshold_rule == "fixed" and fixed.oracle.calibration is None
    attach(_everywhere(run_dir, 1e6), run_dir)
    strict = analyse(run_dir)
    assert strict.oracle.threshold_rule == RULE
    assert set(strict.oracle.calibration["factor"].values()) == {1e6}
    # a finding that only passed the noise criterion is gone; the others (stage isolation,
    # judged with the fixed factor here) stay
    key = lambda s: {(f.participant, f.anchor, f.input) for f in s.findings}  # noqa: E731
    assert key(strict) < key(fixed)
    assert all("above_noise" not in f.metrics["exceeded"] for f in strict.findings)
    attach(_everywhere(run_dir, 1.0), run_dir)
    assert key(analyse(run_dir)) >= key(fixed)


def test_a_calibration_on_the_judged_inputs_is_refused(tmp_path):
    run_dir = _copy(tmp_path)
    analyse(run_dir)
    learnt = calibrate_run(run_dir)  # mechanics only: the golden run has a faulty participant
    assert set(learnt.inputs) == set(RunStore.open(run_dir).read_input_ids())
    with pytest.raises(UsageError, match="calibrate on other inputs"):
        attach(learnt, run_dir)


def test_derived_runs_inherit_the_calibration(tmp_path):
    run_dir = _copy(tmp_path)
    attach(_everywhere(run_dir, 3.0), run_dir)
    base = RunStore.open(run_dir)
    derived = RunStore.derive(tmp_path / "derived", base, [], base.read_settings())
    assert derived.read_calibration() == base.read_calibration()
    # a later calibration of the base reaches the derived run (a link, not a copy)
    attach(_everywhere(run_dir, 4.0), run_dir)
    assert derived.read_calibration()["anchors"] == base.read_calibration()["anchors"]
