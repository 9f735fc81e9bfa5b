"""The Python API: ``anpred.run`` / ``anpred.load`` and the README's example, run as written."""

from __future__ import annotations

import argparse
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import anpred
from anpred.errors import UsageError
from anpred.settings import ExecutionSettings, RunOptions
from anpred.store.outcome import Status

ROOT = Path(__file__).parents[1]
#: A real run (tiny CNN; torch, onnxruntime with a bf16 fault at s2, openvino, jax; 5 inputs).
GOLDEN = ROOT / "tests" / "pipeline" / "data" / "golden_run"


def readme_example() -> str:
    """The first ``python`` code block of the README's "From Python" part."""
    text = (ROOT / "README.md").read_text()
    section = text.split("**From Python**", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README.md's From Python part has no python code block"
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

    calls: list[ExecutionSettings] = []

    def fake_run(options: object, directory: Path, settings: ExecutionSettings) -> object:
        calls.append(settings)
        golden = anpred.load(GOLDEN)
        return pipeline.RunOutcome(golden.dir, golden.summary, 1)

    monkeypatch.setattr(pipeline, "run", fake_run)
    run = anpred.run("tiny.onnx", out=tmp_path / "run", progress=None)
    assert run.exit_code == 1 and run.dir == GOLDEN
    # the defaults of `anpred run`: a cached calibration if one fits, drill-down on findings
    assert calls[-1].calibration == "auto" and calls[-1].drill is True
    anpred.run("tiny.onnx", out=tmp_path / "run", calibration="off", drill=False, threads=2)
    assert calls[-1].calibration == "off" and calls[-1].drill is False
    assert calls[-1].threads == 2
    path = tmp_path / "calibration.json"
    path.write_text("{}")  # checked for fit by the pipeline, once the model is exported
    anpred.run("tiny.onnx", out=tmp_path / "run", calibration=path)
    assert calls[-1].calibration == str(path.resolve())


def test_the_readme_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "pipeline"))
    from tiny_model import tiny_cnn

    tiny_cnn(tmp_path / "model.onnx")  # the README's example names model.onnx
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    exec(compile(readme_example(), "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert re.search(r"exit code [01] - \d+ findings", out)
    assert "onnxruntime ok" in out and "torch ok" in out
    assert (tmp_path / "runs" / "tiny" / "deviations.parquet").exists()


def _run_subparser() -> argparse.ArgumentParser:
    """The ``run`` subcommand's parser, as ``anpred`` builds it."""
    from anpred.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


def test_every_run_flag_is_an_api_keyword_of_the_same_name_and_default() -> None:
    from anpred.api import API_ONLY, NEGATED

    flags: dict[str, object] = {}
    for action in _run_subparser()._actions:
        if action.dest in ("help", "debug", "model"):  # help/--debug: the CLI's own
            continue
        if action.dest in NEGATED:  # --no-drill (default False) is drill=True
            flags[NEGATED[action.dest]] = not action.default
        else:
            flags[action.dest] = action.default
    parameters = inspect.signature(anpred.run).parameters
    keywords = {
        name: p.default
        for name, p in parameters.items()
        if p.kind is not inspect.Parameter.VAR_KEYWORD and name not in ("model", *API_ONLY)
    }
    assert sorted(set(flags) - set(keywords)) == [], "flags without a keyword"
    assert sorted(set(keywords) - set(flags)) == [], "keywords without a flag"
    differ = {n: (flags[n], keywords[n]) for n in flags if flags[n] != keywords[n]}
    assert differ == {}, "defaults differ (flag, keyword)"


def test_run_flags_reach_the_pipeline_from_the_api_as_from_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from anpred.pipeline import run as pipeline

    calls: list[tuple[RunOptions, ExecutionSettings]] = []

    def fake_run(options: RunOptions, directory: Path, settings: ExecutionSettings) -> object:
        calls.append((options, settings))
        golden = anpred.load(GOLDEN)
        return pipeline.RunOutcome(golden.dir, golden.summary, 0)

    monkeypatch.setattr(pipeline, "run", fake_run)
    anpred.run(
        "tiny.onnx",
        out=tmp_path / "run",
        progress=None,
        max_memory="2G",
        export_timeout=60,
        parallel=2,
        isolation=False,
        mean=[0.5, 0.5, 0.5],
        std="0.25",
        input_shape="1x3x32x32",
        image=["a.jpg"],
        keep_captures="all",
    )
    options, settings = calls[-1]
    assert settings.max_memory == 2 * 2**30 and settings.export_timeout == 60.0
    assert settings.parallel == 2 and settings.keep_captures == "all"
    assert options.isolation is False and options.mean == (0.5, 0.5, 0.5)
    assert options.std == (0.25,) and options.input_shapes == ("1x3x32x32",)
    assert options.image_paths == ("a.jpg",)
    anpred.run("tiny.onnx", out=tmp_path / "run", progress=None, max_memory="none")
    assert calls[-1][1].max_memory is None
    anpred.run("tiny.onnx", out=tmp_path / "run", progress=None)
    assert calls[-1][1].max_memory == "default"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"threads": "2"}, "threads must be an integer"),
        ({"granularity": "block"}, "granularity must be one of stage, layer"),
        ({"max_memory": "lots"}, "'lots' is not a size"),
        ({"isolation": "yes"}, "isolation must be True or False"),
        ({"example_inputs": 3}, "example_inputs goes with a torch.nn.Module"),
        ({"mean": ["a"]}, "mean takes numbers"),
    ],
)
def test_keywords_are_checked_as_the_flags_are(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(UsageError, match=message) as err:
        anpred.run("tiny.onnx", out=tmp_path / "run", **kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(err.value)


def test_a_module_class_defined_in_main_is_refused_in_one_line(tmp_path: Path) -> None:
    code = (
        "import torch, anpred\n"
        "from anpred.errors import UsageError\n"
        "class Net(torch.nn.Linear):\n"
        "    pass\n"
        "try:\n"
        "    anpred.run(Net(4, 2), example_inputs=torch.zeros(1, 4), out='run', libs='torch')\n"
        "except UsageError as err:\n"
        "    print('refused:', err)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    assert "refused: the module's class Net is defined in __main__" in proc.stdout
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_torch_module_runs_from_python_with_its_example_inputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    monkeypatch.syspath_prepend(str(ROOT / "tests" / "interchange"))
    from user_modules import SmallCnn, Tokens

    torch.manual_seed(0)
    run = anpred.run(
        SmallCnn(),
        example_inputs=torch.zeros(1, 3, 32, 32),
        libs="torch,onnxruntime",
        images=1,
        out=tmp_path / "cnn",
        progress=None,
        drill=False,
    )
    assert [a.key for a in run.anchors] == [
        "stem.0", "stem.1", "body.0", "body.1", "body.2", "pool", "output",
    ]  # fmt: skip
    assert {p.participant: p.status for p in run.participants} == {
        "torch": Status.OK, "onnxruntime": Status.OK,
    }  # fmt: skip
    assert run.exit_code == 0 and not run.findings
    # named inputs of two dtypes, layer anchors; seeded token ids within the example's span
    example = {"ids": torch.randint(0, 50, (1, 8)), "scale": torch.rand(1, 8, 1)}
    run = anpred.run(
        Tokens(), example_inputs=example,
        libs="torch,onnxruntime", images=1, out=tmp_path / "tokens", progress=None,
        granularity="layer",
    )  # fmt: skip
    assert run.anchors[0].key == "emb" and run.anchors[-1].key == "output"
    assert all(p.status is Status.OK for p in run.participants)
