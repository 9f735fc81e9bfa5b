"""One real bug end to end (slow, opt-in; skipped unless its release environments are built):
onnxruntime PR #29629 (AveragePool ceil_mode + count_include_pad, buggy 1.28.0, fixed 1.30.0).

Build the two environments first, once: ``.venv/bin/python benchmarks/known_bugs/verify.py
--only onnxruntime-29629`` (or any ``anpred run --libs onnxruntime@1.28.0,...``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from anpred.evaluation.known_bugs import load_known_bugs
from anpred.evaluation.known_bugs_runs import evaluate_known_bugs
from anpred.library.environments import release_env

ROOT = Path(__file__).parents[2]
BUG = "onnxruntime-29629"

pytestmark = pytest.mark.slow


def built(library: str, version: str) -> bool:
    """Whether ``library@version``'s environment is built (nothing is built here)."""
    from anpred.library.versions import env_name

    return release_env(env_name(library, version)) is not None


@pytest.fixture
def bug():  # noqa: ANN201 - the entry
    entry = load_known_bugs(ROOT / "configs" / "known-bugs.json").get(BUG)
    missing = [v for v in (entry.buggy, entry.fixed) if not built(entry.library, v)]
    if missing:
        pytest.skip(f"onnxruntime {', '.join(missing)} not built (see this file's docstring)")
    return entry


def test_the_standalone_script_shows_the_bug_only_in_the_buggy_release(bug) -> None:  # noqa: ANN001
    sys.path.insert(0, str(ROOT / "benchmarks" / "known_bugs"))
    try:
        import verify
    finally:
        sys.path.pop(0)
    row = verify.verify(bug, ROOT)
    assert row["verified"], row
    # measured here: 0.145 on 1.28.0 (every border window too small), 5.5e-8 on 1.30.0
    assert row["buggy"]["result"] > 1e-2 > 1e-6 > row["fixed"]["result"]


def test_anpred_finds_it_in_the_pool_stage_and_not_in_the_fixed_release(
    bug,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    (row,) = evaluate_known_bugs(
        load_known_bugs(ROOT / "configs" / "known-bugs.json"),
        tmp_path,
        say=print,
        only=[BUG],
        root=ROOT,
    )
    assert "error" not in row, row
    assert row["detected"] and row["first_anchor"] == "pool"
    assert row["false_findings_fixed"] == 0
    # the buggy release's output error against fp64 is far above the fixed one's
    assert row["output_rel_l2_buggy"] > 100 * row["output_rel_l2_fixed"]
