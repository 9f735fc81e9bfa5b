"""``anpred inject``: argument checks (fast) and the end-to-end run on yolov8n (slow).

The end-to-end run needs the pipeline to create the faulty participant from
``RunOptions.extra["faults"]`` (``anpred.inject.participants.apply_faults``, called in
``anpred.pipeline.run.run``) and ``inject`` registered in ``anpred.cli.commands``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from anpred.cli.inject_command import add_inject_parser, cmd_inject
from anpred.errors import UsageError


def _args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="anpred")
    add_inject_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["inject", *argv])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["yolov8n", "--lib", "onnxruntime", "--fault", "bf16"], "--stage required"),
        (["yolov8n", "--stage", "neck.p4", "--fault", "bf16"], "--lib required"),
        (
            [
                "yolov8n",
                "--lib",
                "onnxruntime",
                "--stage",
                "neck.p4",
                "--fault",
                "mantissa",
                "--severity",
                "30",
            ],
            "integer 0..22",
        ),
        (["yolov8n", "--lib", "torch", "--stage", "neck.p4", "--fault", "bf16"], "native module"),
        (
            ["yolov8n", "--lib", "torch[fp64]", "--stage", "neck.p4", "--fault", "bf16"],
            "fp64 reference",
        ),
        (
            ["yolov8n", "--lib", "tensorflow[int8]", "--stage", "neck.p4", "--fault", "bf16"],
            "unknown configuration",
        ),
        (
            [
                "yolov8n",
                "--lib",
                "paddle",
                "--stage",
                "neck.p4",
                "--op",
                "Conv",
                "--fault",
                "approx_act",
            ],
            "applies to Erf, Exp, Sigmoid, Tanh, not Conv",
        ),
        (
            ["yolov8n", "--lib", "onnxruntime", "--stage", "neck.p4", "--fault", "bf16"]
            + ["--partial", "half"],
            "write above:K",
        ),
        (
            ["yolov8n", "--lib", "onnxruntime", "--stage", "neck.p4", "--fault", "eps"]
            + ["--partial", "above:2"],
            "cannot be partial",
        ),
    ],
)
def test_invalid_requests_fail_before_anything_runs(
    tmp_path: Path, argv: list[str], message: str
) -> None:
    out = tmp_path / "run"
    with pytest.raises(UsageError, match=message):
        cmd_inject(_args([*argv, "--out", str(out)]))
    assert not out.exists()


def test_partial_is_parsed_and_documented(capsys: pytest.CaptureFixture[str]) -> None:
    args = _args(["m.onnx", "--lib", "onnxruntime", "--fault", "bf16", "--partial", "above:2"])
    assert args.partial == "above:2"
    with pytest.raises(SystemExit):
        _args(["--help"])
    assert "above:K" in capsys.readouterr().out


def test_unknown_fault_kind_is_refused_by_the_parser() -> None:
    with pytest.raises(SystemExit):
        _args(["yolov8n", "--lib", "onnxruntime", "--stage", "neck.p4", "--fault", "int4"])


@pytest.mark.slow
def test_inject_bf16_into_onnxruntime_is_recorded_and_flagged_at_its_stage(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "anpred",
            "inject",
            "yolov8n",
            "--lib",
            "onnxruntime",
            "--stage",
            "neck.p4",
            "--op",
            "Conv",
            "--fault",
            "bf16",
            "--libs",
            "torch,onnxruntime,jax",
            "--images",
            "2",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]  # 1 = findings
    truth = json.loads((out / "ground_truth.json").read_text())
    injected = truth["injected"]
    assert injected["participant"] == "onnxruntime!bf16@neck.p4"
    assert (injected["stage"], injected["op"], injected["kind"]) == ("neck.p4", "Conv", "bf16")
    assert injected["nodes"] and all(n.endswith("/Conv") for n in injected["nodes"])
    assert truth["worker"]["state"] == "ok" and truth["worker"]["applied_as_planned"]
    assert sorted(truth["clean_participants"]) == ["jax", "torch"]
    # Measured (2 images, seeded weights): the fault moves neck.p4 by 3.9e-3 relative, ~500x
    # the fp32 spread there (7e-6); the oracle flags it at neck.p4 (emergence on both
    # inputs), stage isolation puts the largest introduced error there, and the clean
    # participants have no finding.
    detected = truth["detected"]
    assert detected["flagged_at_stage"] and detected["first_flagged_anchor"] == "neck.p4"
    assert detected["emergence_at_stage"] == 1.0
    assert detected["top_introduced_stage"] == "neck.p4"
    assert detected["other_participants_flagged"] == {}
    status = json.loads((out / "captures" / "onnxruntime_bf16_neck.p4" / "status.json").read_text())
    # the fault reached the worker as a transform (rewritten graphs), not as a setting
    assert "fault" not in status["settings"]
    (transform,) = status["transforms"]
    assert transform["kind"] == "fault-graphs"
    assert transform["fault"]["nodes"] == injected["nodes"]
    assert "ground truth: onnxruntime!bf16@neck.p4 (applied as planned)" in proc.stdout


def test_inject_into_torch_on_an_onnx_file_runs_the_fault(tmp_path: Path) -> None:
    """torch runs an ONNX file through anpred's translators, which apply the fault (the
    native zoo module refuses one); the clean torch stays as the fp32 reference."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "pipeline"))
    from tiny_model import tiny_cnn

    model = tiny_cnn(tmp_path / "tiny.onnx")
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "anpred", "inject", str(model), "--lib", "torch",
         "--stage", "s2", "--fault", "bf16", "--libs", "torch,onnxruntime,openvino",
         "--images", "2", "--out", str(out)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]  # 1 = findings
    truth = json.loads((out / "ground_truth.json").read_text())
    assert truth["injected"]["participant"] == "torch!bf16@s2"
    assert truth["worker"]["applied_as_planned"] and truth["injected"]["nodes"]
    assert "torch" in truth["clean_participants"]
    # a bf16 round trip (~4e-3 relative) against fp32 noise (~1e-7) at a tiny stage
    assert truth["detected"]["flagged_at_stage"]
    assert truth["detected"]["other_participants_flagged"] == {}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("lib", "stage"), [("onnxruntime", "stage3.Relu"), ("openvino", "stage4.Concat")]
)
def test_inject_bf16_into_an_opset9_file_is_valid_and_localized(
    tmp_path: Path, lib: str, stage: str
) -> None:
    """The onnx package's light squeezenet (opset 9, as shipped): the rewrite used to insert
    a bfloat16 ``Cast`` (opset 13+), which onnxruntime refused to load.
    """
    onnx = pytest.importorskip("onnx")
    model = Path(onnx.__file__).parent / "backend/test/data/light/light_squeezenet.onnx"
    if not model.is_file():
        pytest.skip("this onnx package ships no light models")
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "anpred", "inject", str(model), "--lib", lib, "--stage", stage,
         "--fault", "bf16", "--libs", f"torch,jax,{lib}", "--preprocess", "imagenet",
         "--images", "1", "--no-drill", "--out", str(out)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]  # 1 = findings
    truth = json.loads((out / "ground_truth.json").read_text())
    assert truth["injected"]["participant"] == f"{lib}!bf16@{stage}"
    assert truth["worker"]["state"] == "ok" and truth["worker"]["applied_as_planned"]
    detected = truth["detected"]
    assert detected["flagged_at_stage"] and detected["first_flagged_anchor"] == stage
    assert detected["other_participants_flagged"] == {}
