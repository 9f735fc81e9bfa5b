"""``--metrics all``: recorded in the run's settings, read back by the analysis (issue 41)."""

from __future__ import annotations

from pathlib import Path

import pytest

from anpred.analysis.oracle import METRICS_ALL, METRICS_CANDIDATES, OracleParams
from anpred.api import run_parser
from anpred.calibration.stored import with_stored_calibration
from anpred.cli.flags import run_options
from anpred.store import RunStore


@pytest.mark.parametrize(
    ("flags", "scope"), [([], METRICS_CANDIDATES), (["--metrics", "all"], METRICS_ALL)]
)
def test_the_metrics_scope_goes_through_the_run_settings(
    tmp_path: Path, flags: list[str], scope: str
) -> None:
    options = run_options(run_parser().parse_args(["yolov8n", *flags]))
    # the default leaves run.json as it was (runs recorded before the flag still resume)
    assert options.extra == ({"metrics": "all"} if flags else {})
    store = RunStore(tmp_path)
    tmp_path.mkdir(exist_ok=True)
    store.write_settings(options.to_dict())
    assert with_stored_calibration(store, OracleParams()).metrics_scope == scope


def test_an_unknown_scope_is_refused_by_the_parser() -> None:
    with pytest.raises(SystemExit):
        run_parser().parse_args(["yolov8n", "--metrics", "some"])
