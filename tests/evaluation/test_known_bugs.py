"""The known-bugs benchmark: its file is checked when read, and a pair of runs is scored
like an injected fault (detected, blamed, stage, operator, baselines, fixed-release
findings). Fast: no release environment is needed (the opt-in end-to-end test is in
``test_known_bugs_e2e.py``).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from anpred.errors import UsageError
from anpred.evaluation import known_bugs as kb
from anpred.evaluation.known_bugs import (
    KnownBug,
    bug_outcome,
    is_known_bugs_file,
    load_known_bugs,
    parse_known_bugs,
    score_bug,
)
from anpred.evaluation.known_bugs_runs import markdown_table, run_command, write_results
from anpred.store.summary import Summary

ROOT = Path(__file__).parents[2]
CONFIG = ROOT / "configs" / "known-bugs.json"
#: A real ``anpred inject`` run: onnxruntime with a bf16 fault at stage s2, flagged at s2
#: and the output on all 5 inputs, blamed alone on all 5.
GOLDEN = ROOT / "tests" / "pipeline" / "data" / "golden_run" / "summary.json"
FAULTY = "onnxruntime!bf16@s2"
BUGGY, FIXED = "onnxruntime@1.28.0", "onnxruntime@1.30.0"


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
        "where": {"operator": "Conv", "stage": "s2"},
        "libs": "torch,openvino,jax",
    }
    return {**base, **changes}


def summary_as(participant: str, findings: bool = True) -> Summary:
    """The golden run with its faulty participant renamed ``participant`` (and, without
    ``findings``, judged clean: no findings, no blame, every baseline passed).
    """
    raw = json.loads(GOLDEN.read_text().replace(FAULTY, participant))
    if not findings:
        raw["findings"] = []
        raw["localization"]["blame"]["sole_counts"][participant] = 0
        raw["localization"]["blame"]["counts"][participant] = 0
        for per in raw["baselines"].values():
            per[participant] = {"passed": True, "failed_inputs": []}
    return Summary.from_dict(raw)


def test_the_repository_file_loads_and_every_script_and_model_exists() -> None:
    bugs = load_known_bugs(CONFIG)
    assert len(bugs.bugs) >= 8 and len(set(bugs.ids)) == len(bugs.ids)
    models = (ROOT / "benchmarks" / "known_bugs" / "models.py").read_text()
    onnx_models = (ROOT / "benchmarks" / "known_bugs" / "onnx_models.py").read_text()
    for bug in bugs.bugs:
        assert (ROOT / bug.script).is_file(), bug.script
        assert bug.link.startswith("https://github.com/")
        if bug.model.startswith("onnx:"):
            assert f'"{bug.model.removeprefix("onnx:")}"' in onnx_models
        else:
            function = bug.model.split(":", 1)[1]
            assert f"def {function}(" in models, bug.model
    assert bugs.not_reproduced and bugs.out_of_reach
    assert is_known_bugs_file(CONFIG)
    assert not is_known_bugs_file(ROOT / "configs" / "paper.json")  # a grid


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"link": ""}, "lacks link"),
        ({"where": {"stage": "s2"}}, "needs an 'operator'"),
        ({"fixed": "1.28.0"}, "the same release"),
        ({"direction": "sideways"}, "direction must be one of"),
        ({"model": "resnet18"}, "FILE.py:FUNCTION or onnx:NAME"),
        ({"link": "github.com/x/y/issues/1"}, "is not a URL"),
        ({"buggy": 1.28}, "'buggy' must be a string"),
    ],
)
def test_a_bad_entry_is_one_line_naming_it(change: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_known_bugs({"known_bugs": [entry(**change)]})


def test_a_repeated_id_or_a_file_without_bugs_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="appears twice"):
        parse_known_bugs({"known_bugs": [entry(), entry()]})
    with pytest.raises(UsageError, match="non-empty 'known_bugs' list"):
        parse_known_bugs({"models": ["yolov8n"]})
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(UsageError, match="is not JSON"):
        load_known_bugs(tmp_path / "bad.json")
    with pytest.raises(UsageError, match="cannot read"):
        load_known_bugs(tmp_path / "missing.json")
    with pytest.raises(UsageError, match="no bug 'nope'"):
        parse_known_bugs({"known_bugs": [entry()]}).get("nope")


def test_participants_are_releases_but_the_installed_one_is_the_library_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kb, "installed_version", lambda lib: "2.14.1")
    bug = KnownBug.from_dict(
        entry(library="torch", buggy="2.14.1", fixed="2.1.0", configuration="bf16")
    )
    assert bug.buggy_participant == "torch[bf16]"  # no copy of the main environment
    assert bug.fixed_participant == "torch@2.1.0[bf16]"
    command = run_command(bug, bug.fixed_participant, "m.py:f", Path("out"), 1, 2)
    assert command[command.index("--libs") + 1] == "torch,openvino,jax,torch@2.1.0[bf16]"
    assert command[command.index("--parallel") + 1] == "2"


def test_a_detected_bug_scores_like_an_injected_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kb, "installed_version", lambda lib: None)
    bug = KnownBug.from_dict(entry())
    row = score_bug(bug, summary_as(BUGGY), summary_as(FIXED, findings=False))
    assert row["detected"] and row["library_blamed"] and row["blamed_jointly"]
    assert row["first_anchor"] == "s2" and row["stage_ok"] is True
    assert row["flagged_anchors"] == ["s2", "output"]
    assert row["operator"] is None and row["operator_ok"] is False  # the golden run has no drill
    assert row["false_findings_fixed"] == 0 and row["others_flagged"] == []
    # the golden run's allclose failed the faulty participant; the fixed one passes it
    assert row["baseline:polygraphy_allclose"] and not row["baseline_fp:polygraphy_allclose"]
    assert not row["baseline:max_abs_1e-3"]  # it passed the faulty participant there too
    golden = json.loads(GOLDEN.read_text())
    assert row["output_rel_l2_buggy"] == golden["deviation"]["vs_fp64"][FAULTY]["output"]
    flagging = sum(bool(v) for k, v in row.items() if k.startswith("baseline:"))
    assert bug_outcome(row) == (
        f"detected at s2 (library blamed yes, operator not named); {flagging}/6 baselines "
        "flag it; 0 false finding(s) on the fixed release"
    )


def test_a_missed_bug_and_findings_on_the_fixed_release(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kb, "installed_version", lambda lib: None)
    bug = KnownBug.from_dict(entry(where={"operator": "AveragePool"}))
    # the "buggy" run clean, the "fixed" one flagged: a miss plus false findings
    row = score_bug(bug, summary_as(BUGGY, findings=False), summary_as(FIXED))
    assert not row["detected"] and not row["library_blamed"] and row["stage_ok"] is None
    assert not row["blamed_jointly"]
    assert row["false_findings_fixed"] == 2  # s2 and the output
    assert row["baseline_fp:polygraphy_allclose"] and not row["baseline:polygraphy_allclose"]
    assert bug_outcome(row).startswith("missed by anpred; 0/6 baselines flag it; 2 false")


def test_the_drill_downs_operator_is_the_named_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kb, "installed_version", lambda lib: None)
    raw = json.loads(GOLDEN.read_text().replace(FAULTY, BUGGY))
    op = {"key": "op0003", "node": "/s2/conv/Conv", "op_type": "Conv", "module": "s2.conv",
          "introduced": 0.01, "threshold": 1e-4, "stands_out": True, "chain": 0.01,
          "finding": True}  # fmt: skip
    raw["drill"] = {
        "targets": [
            {
                "participant": BUGGY,
                "stage": "s2",
                "ops": [op],
                "named": "op0003",
                "basis": "introduced",
                "reason": "",
            }
        ],  # fmt: skip
        "population": [],
    }
    bug = KnownBug.from_dict(entry())
    row = score_bug(bug, Summary.from_dict(raw), summary_as(FIXED, findings=False))
    assert (row["operator"], row["node"], row["operator_ok"]) == ("Conv", "/s2/conv/Conv", True)


def test_tables_are_written_and_merged_with_earlier_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kb, "installed_version", lambda lib: None)
    bug = KnownBug.from_dict(entry())
    row = score_bug(bug, summary_as(BUGGY), summary_as(FIXED, findings=False))
    write_results([row], tmp_path)
    failed = {"id": "ncnn-4578", "library": "ncnn", "error": "buggy run: exit 2"}
    md = write_results([failed], tmp_path)
    rows = json.loads((tmp_path / "known-bugs.json").read_text())
    assert [r["id"] for r in rows] == ["onnxruntime-29629", "ncnn-4578"]
    text = md.read_text()
    assert "| onnxruntime-29629 | onnxruntime@1.28.0 → 1.30.0 | yes | yes | s2 |" in text
    assert "not run: buggy run: exit 2" in text
    assert (tmp_path / "known-bugs.csv").read_text().startswith("id,")
    assert markdown_table([copy.deepcopy(row)]).count("\n") == 3  # header, rule, one row


def test_a_run_whose_reference_failed_is_no_verdict_not_a_miss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kb, "installed_version", lambda lib: None)
    raw = json.loads(GOLDEN.read_text().replace(FAULTY, BUGGY))
    raw["findings"] = []
    raw["deviation"]["vs_fp64"][BUGGY] = {a: None for a in raw["deviation"]["vs_fp64"][BUGGY]}
    torch = next(p for p in raw["participants"] if p["participant"] == "torch")
    torch.update(status="error", message="MissingTranslatorError: op QuantizeLinear")
    bug = KnownBug.from_dict(entry())
    row = score_bug(bug, Summary.from_dict(raw), summary_as(FIXED, findings=False))
    assert row["judged"] is False and not row["detected"]
    assert row["failed_participants"] == ["torch: MissingTranslatorError: op QuantizeLinear"]
    assert bug_outcome(row).startswith("no verdict (not judged: torch: MissingTranslator")
    assert "no verdict: torch: MissingTranslatorError" in markdown_table([row])


# `anpred eval` hands a known-bugs file to the benchmark (the hook in cli/commands.py).
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
