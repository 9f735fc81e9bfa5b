"""``--parallel`` on the command line: ``auto`` by default, bad values in one line."""

from __future__ import annotations

from conftest import anpred


def test_bad_parallel_values_are_one_line_errors(tiny_onnx, tmp_path) -> None:
    for bad in ("0", "many"):
        proc = anpred("run", str(tiny_onnx), "--parallel", bad, "--out", str(tmp_path / "r"))
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert "--parallel takes a number of workers >= 1 or 'auto'" in proc.stderr
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "r").exists()  # refused before anything ran
