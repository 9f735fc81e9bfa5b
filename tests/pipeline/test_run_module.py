"""``anpred run path/to/file.py:function``: a user's torch module from the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import anpred, summary

MODULES = Path(__file__).parents[1] / "interchange" / "user_modules.py"


def _one_line_error(proc, needle: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.strip().splitlines() if line.startswith("anpred: error")]
    assert len(lines) == 1 and needle in lines[0], proc.stderr[-2000:]


def test_a_module_that_cannot_be_exported_names_the_operation(tmp_path: Path) -> None:
    proc = anpred("run", f"{MODULES}:build_eigen", "--libs", "torch", "--out", str(tmp_path / "o"))
    _one_line_error(proc, "cannot be exported to ONNX: Exporting the operator 'aten::linalg_eigh'")


@pytest.mark.parametrize(
    ("source", "flags", "needle"),
    [
        ("missing.py:build", (), "'missing.py' does not exist"),
        (f"{MODULES}:nothing_here", (), "has no function 'nothing_here'"),
        (f"{MODULES}:build_bare", (), "give --input-shape"),
        (f"{MODULES}:build_cnn", ("--weights", "w.pt"), "--weights applies to zoo models"),
    ],
)
def test_bad_module_sources_are_one_line(
    tmp_path: Path, source: str, flags: tuple[str, ...], needle: str
) -> None:
    proc = anpred("run", source, "--libs", "torch", *flags, "--out", str(tmp_path / "o"))
    _one_line_error(proc, needle)


@pytest.mark.slow
def test_a_module_runs_from_its_build_function(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = anpred(
        "run", f"{MODULES}:build_cnn", "--libs", "torch,onnxruntime", "--images", "1",
        "--granularity", "layer", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = summary(out)
    keys = [a["key"] for a in result["anchors"]]
    # layer: the children of each stage anchor (stem.0 has none, so it stays)
    assert keys[0] == "stem.0" and keys[-1] == "output" and "pool" in keys
    assert {p["participant"]: p["status"] for p in result["participants"]} == {
        "torch": "ok", "onnxruntime": "ok",
    }  # fmt: skip
    assert "the module's own" in proc.stdout


def test_sweep_refuses_a_module(tmp_path: Path) -> None:
    proc = anpred("sweep", f"{MODULES}:build_cnn", "--libs", "torch", "--out", str(tmp_path / "o"))
    _one_line_error(proc, "sweep needs a zoo model")
