"""Bad input: one line on stderr, exit code 2, no traceback."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from tiny_model import tiny_cnn

from conftest import anpred


def _one_line_error(proc, needle: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.strip().splitlines() if line.startswith("anpred: error")]
    assert len(lines) == 1 and needle in lines[0], proc.stderr[-2000:]


def test_unknown_model(tmp_path) -> None:
    _one_line_error(anpred("run", "yolov99", "--out", str(tmp_path / "o")), "unknown model")


def test_unknown_library(tiny_onnx, tmp_path) -> None:
    _one_line_error(
        anpred("run", str(tiny_onnx), "--libs", "torch,mxnet", "--out", str(tmp_path / "o")),
        "unknown library 'mxnet'",
    )


def test_missing_library(tiny_onnx, tmp_path, monkeypatch, capsys) -> None:
    from anpred import participants
    from anpred.cli.main import main

    monkeypatch.setattr(participants, "is_available", lambda lib: lib != "paddle")
    code = main(["run", str(tiny_onnx), "--libs", "torch,paddle", "--out", str(tmp_path / "o")])
    assert code == 2
    assert "pip install 'anpred[paddle]'" in capsys.readouterr().err


def test_unreadable_and_malformed_onnx(tmp_path) -> None:
    _one_line_error(
        anpred("run", str(tmp_path / "missing.onnx"), "--out", str(tmp_path / "o")),
        "does not exist",
    )
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not protobuf")
    _one_line_error(anpred("run", str(bad), "--out", str(tmp_path / "o2")), "not a valid ONNX")


def _with_roi_align(path: Path) -> Path:
    """The tiny CNN with a 1x1 RoiAlign over the whole map in place of its global pool."""
    model = onnx.load(str(tiny_cnn(path)))
    pool = next(n for n in model.graph.node if n.op_type == "GlobalAveragePool")
    pool.CopyFrom(helper.make_node(
        "RoiAlign", ["s2", "rois", "roi_batch"], ["p3"], name="/head/RoiAlign",
        output_height=1, output_width=1, sampling_ratio=2,
    ))  # fmt: skip
    model.graph.initializer.extend([
        numpy_helper.from_array(np.array([[0, 0, 15, 15]], np.float32), "rois"),
        numpy_helper.from_array(np.array([0], np.int64), "roi_batch"),
    ])  # fmt: skip
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def test_op_without_translator(tmp_path) -> None:
    # RoiAlign: torch translates it (the fp32 reference runs), jax has none (its expectations
    # say "no translator"; pick another such op when jax gains it)
    model = _with_roi_align(tmp_path / "roialign.onnx")
    proc = anpred(
        "run", str(model), "--libs", "torch,jax", "--images", "1", "--out", str(tmp_path / "o")
    )
    _one_line_error(proc, "op RoiAlign (opset 17, node /head/RoiAlign) has no jax translator")


def test_image_that_is_not_an_image(tiny_onnx, tmp_path) -> None:
    fake = tmp_path / "cat.jpg"
    fake.write_text("meow")
    _one_line_error(
        anpred("run", str(tiny_onnx), "--image", str(fake), "--out", str(tmp_path / "o")),
        "not a readable image",
    )


@pytest.mark.slow
def test_wrong_weights_file(tmp_path) -> None:
    junk = tmp_path / "w.pt"
    junk.write_bytes(b"\x00junk")
    _one_line_error(
        anpred(
            "run",
            "resnet50",
            "--weights",
            str(junk),
            "--libs",
            "torch",
            "--out",
            str(tmp_path / "o"),
        ),
        "w.pt",
    )


def test_output_dir_not_writable(tiny_onnx, tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    _one_line_error(anpred("run", str(tiny_onnx), "--out", str(blocker / "sub")), "not writable")


def test_report_on_non_run_dir(tmp_path) -> None:
    _one_line_error(anpred("report", str(tmp_path)), "not an anpred run directory")
