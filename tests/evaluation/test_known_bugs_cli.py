"""``anpred eval`` hands a known-bugs file (or ``--known-bugs``) to the benchmark: the hook in
``cli/commands.py`` (issue 36). Fast: the bug's model cannot be written, so no run starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest


def entry(**changes: Any) -> dict[str, Any]:
    """A valid bug entry, with ``changes``."""
    base = {
        "id": "onnxruntime-29629",
        "link": "https://github.com/microsoft/onnxruntime/pull/29629",
        "library": "onnxruntime",
        "buggy": "1.28.0",
        "fixed": "1.30.0",
        "script": "benchmarks/known_bugs/onnxruntime_29629.py",
        "model": "benchmarks/known_bugs/models.py:conv_avgpool_ceil",
        "where": {"operator": "AveragePool"},
    }
    return {**base, **changes}


def test_anpred_eval_dispatches_a_known_bugs_file_and_writes_its_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from anpred.cli.main import main

    config = tmp_path / "bugs.json"
    # a model that cannot be written: the bug's row says why, no run starts
    config.write_text(json.dumps({"known_bugs": [entry(model="onnx:no_such_model")]}))
    code = main(["eval", "--config", str(config), "--out", str(tmp_path / "runs"),
                 "--results", str(tmp_path / "results")])  # fmt: skip
    assert code == 0
    rows = json.loads((tmp_path / "results" / "known-bugs.json").read_text())
    assert rows[0]["id"] == "onnxruntime-29629" and "no_such_model" in rows[0]["error"]
    assert "not run: known bugs: onnxruntime-29629: writing model" in capsys.readouterr().out
