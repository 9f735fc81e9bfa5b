"""The clean run's calibration in a campaign: a resumed campaign judges its clean run once.

``anpred eval`` judges the model's clean run again whenever anything of the model runs
(its ``run``), then re-learns the calibration and judges it with that. When the calibration
is the one the clean run was just judged with (a resumed campaign), the second judgement is
the first one's summary (:func:`~anpred.evaluation.campaign.calibrate_clean_run`): the same
summary, bit for bit, as judging it again.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "pipeline"))
from tiny_model import tiny_cnn  # noqa: E402

from anpred.evaluation import campaign  # noqa: E402
from anpred.evaluation.grid import load_grid  # noqa: E402
from anpred.pipeline.prune import KEEP_ALL  # noqa: E402
from anpred.pipeline.run import run  # noqa: E402
from anpred.settings import ExecutionSettings, RunOptions  # noqa: E402
from anpred.store import EvalStore, RunStore  # noqa: E402

pytest.importorskip("onnxruntime")  # looked up only: the workers import the libraries


def test_a_resumed_campaign_judges_its_clean_run_once_and_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = str(tiny_cnn(tmp_path / "tiny.onnx"))
    config = tmp_path / "grid.json"
    config.write_text(json.dumps({
        "models": [model], "libs": "torch,onnxruntime,jax", "images": 2, "calibration": 3,
        "faults": [],
    }))  # fmt: skip
    grid = load_grid(config)
    folders = EvalStore(tmp_path / "eval")
    base = folders.clean_run(model)
    settings = ExecutionSettings(threads=1, parallel=1, keep_captures=KEEP_ALL)
    options = RunOptions(model=model, libs=(grid.libs,), images=grid.images)
    analysed: list[Path] = []
    spy = campaign.analyse_run

    def traced(run_dir: Path, *args: object) -> object:
        analysed.append(Path(run_dir))
        return spy(run_dir, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(campaign, "analyse_run", traced)

    def judged(remove_calibration: bool) -> tuple[str, bytes]:
        """The clean run as ``_run_model`` judges it: its ``run``, then the calibration."""
        if remove_calibration:
            RunStore.open(base).remove_calibration()
        run(options, base, settings)
        summary = campaign.calibrate_clean_run(
            grid, model, folders, base, lambda _m: None, 1, 1, None
        )
        return json.dumps(summary.to_dict()), (base / "summary.json").read_bytes()

    first = judged(False)  # a new campaign: no calibration yet, the clean run judged again
    assert analysed == [base]
    assert json.loads(first[1])["oracle"]["threshold_rule"] == "lognormal-tolerance"
    resumed = judged(False)  # the same calibration learnt again: judged once, by its run
    assert analysed == [base]
    assert resumed == first
    again = judged(True)  # judged with no calibration first: judged again with it
    assert analysed == [base, base]
    assert again == first
