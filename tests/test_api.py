"""The Python API: ``anpred.run`` / ``anpred.load`` and the README's example, run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import anpred
from anpred.errors import UsageError
from anpred.store.outcome import Status

ROOT = Path(__file__).parents[1]
#: A real run (tiny CNN; torch, onnxruntime with a bf16 fault at s2, openvino, jax; 5 inputs).
GOLDEN = ROOT / "tests" / "pipeline" / "data" / "golden_run"


def readme_example() -> str:
    """The first ``python`` code block of the README's "Python API" section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("### Python API", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README.md's Python API section has no python code block"
    return match.group(1)


def test_import_anpred_stays_light_and_the_api_is_lazy() -> None:
    code = (
        "import sys, anpred\n"
        "heavy = ('pandas', 'pyarrow', 'torch', 'anpred.api')\n"
        "assert not [m for m in heavy if m in sys.modules], sys.modules.keys()\n"
        "assert callable(anpred.run) and callable(anpred.load) and 'anpred.api' in sys.modules\n"
        "assert not [m for m in ('pandas', 'pyarrow', 'torch') if m in sys.modules]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_load_exposes_the_typed_summary_and_the_deviations_table() -> None:
    run = anpred.load(GOLDEN)
    faulty = "onnxruntime!bf16@s2"
    assert run.dir == GOLDEN and run.exit_code is None
    assert [a.key for a in run.anchors] == ["r1", "s2", "output"]
    assert [p.participant for p in run.participants] == ["torch", faulty, "openvino", "jax"]
    assert all(p.status is Status.OK for p in run.participants)
    assert {(f.participant, f.anchor) for f in run.findings} == {(faulty, "s2"), (faulty, "output")}
    assert run.localization.participants[faulty].top_stage == "s2"
    table = run.deviations
    # one row per participant x input x anchor: 4 x 5 x 3
    assert len(table) == 60
    assert len(table.groupby(["participant", "input", "anchor"])) == 60
    for column in ("finding", "rel_l2", "cosine", "wasserstein", "rel_l2_vs_fp64", "introduced"):
        assert column in table.columns
    assert int(table["finding"].sum()) == len(run.findings)


def test_load_refuses_a_directory_that_is_not_an_analysed_run(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not an anpred run directory"):
        anpred.load(tmp_path)
    (tmp_path / "run.json").write_text("{}")
    with pytest.raises(UsageError, match="no analysis yet"):
        anpred.load(tmp_path)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"images": 0}, "images must be at least 1"),
        ({"granularty": "layer"}, "unknown option.*granularty"),
        ({"libs": ""}, "libs must name participants"),
        ({"calibration": "missing.json"}, "--calibration takes auto, off or a calibration file"),
        ({"drill": "no"}, "drill must be True or False"),
    ],
)
def test_bad_arguments_raise_one_line_errors(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(UsageError, match=message) as err:
        anpred.run("tiny.onnx", out=tmp_path / "run", **kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(err.value)
    assert not (tmp_path / "run").exists()


def test_calibration_and_drill_reach_the_pipeline_as_on_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from anpred.pipeline import run as pipeline

    calls: list[dict[str, object]] = []

    def fake_run(settings: object, directory: Path, **kwargs: object) -> object:
        calls.append(kwargs)
        golden = anpred.load(GOLDEN)
        return pipeline.RunOutcome(golden.dir, golden.summary, 1)

    monkeypatch.setattr(pipeline, "run", fake_run)
    run = anpred.run("tiny.onnx", out=tmp_path / "run", progress=None)
    assert run.exit_code == 1 and run.dir == GOLDEN
    # the defaults of `anpred run`: a cached calibration if one fits, drill-down on findings
    assert calls[-1]["calibration"] == "auto" and calls[-1]["drill"] is True
    anpred.run("tiny.onnx", out=tmp_path / "run", calibration="off", drill=False, threads=2)
    assert calls[-1]["calibration"] == "off" and calls[-1]["drill"] is False
    assert calls[-1]["threads"] == 2
    path = tmp_path / "calibration.json"
    path.write_text("{}")  # checked for fit by the pipeline, once the model is exported
    anpred.run("tiny.onnx", out=tmp_path / "run", calibration=path)
    assert calls[-1]["calibration"] == str(path.resolve())


def test_the_readme_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "pipeline"))
    from tiny_model import tiny_cnn

    tiny_cnn(tmp_path / "tiny.onnx")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    exec(compile(readme_example(), "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert re.search(r"exit code [01] - \d+ findings", out)
    assert "onnxruntime ok" in out and "torch ok" in out
    assert (tmp_path / "runs" / "tiny" / "deviations.parquet").exists()
