from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from anpred.report import terminal
from anpred.report.terminal import print_summary, render_summary

SHORT = ("allclose", "abs<1e-3", "abs<1e-4", "abs<1e-5", "D_MAD", "dynamo")


def _row(text: str, participant: str) -> list[str]:
    rows = [line for line in text.splitlines() if line.startswith(participant + " ")]
    assert len(rows) == 1, text
    return rows[0].split()


def test_sample_summary_lists_participants_and_baseline_columns(
        capsys: pytest.CaptureFixture[str], sample: dict[str, Any], tmp_path: Path) -> None:
    print_summary(sample, tmp_path)
    out = capsys.readouterr().out
    assert "\x1b[" not in out  # captured stdout is no terminal: plain text
    header = next(line for line in out.splitlines() if line.startswith("participant "))
    assert header.split()[:6] == ["participant", "status", "version", "emergence", "top",
                                  "stage"]
    assert all(name in header.split() for name in SHORT)
    assert header.split()[-1] == "observer"
    # torch (the fp32 reference) passes every baseline; onnxruntime fails all but dynamo.
    assert _row(out, "torch") == ["torch", "ok", "2.14.1+cu130", "-", "backbone.p5", "0",
                                  *["PASS"] * 6, "identical"]
    assert _row(out, "onnxruntime") == ["onnxruntime", "ok", "1.32.0", "-", "backbone.p5", "0",
                                        "FAIL", "1/2", "FAIL", "2/2", "FAIL", "2/2", "FAIL",
                                        "2/2", "FAIL", "1/2", "PASS", "identical"]
    assert _row(out, "openvino")[2] == "2026.4.1"  # build suffix dropped
    assert "verdict       clean: no findings (3 participants judged)" in out
    assert "inputs        2: bus, zidane" in out
    assert f"report: {tmp_path / 'report.html'}" in out
    assert "pairwise" not in out


def test_findings_show_in_header_and_rows(with_findings: dict[str, Any]) -> None:
    out = render_summary(with_findings, Path("runs/x"))
    assert "verdict       3 findings (openvino 3)" in out
    row = _row(out, "openvino")
    assert row[3] == "neck.p4" and row[5] == "3"
    assert "2 (participant, input) case(s) have anchor findings" in out
    assert "in 83.4s" in out


def test_failed_participant_and_partial_summary(partial: dict[str, Any]) -> None:
    out = render_summary(partial, Path("r"))
    assert ("failed        tensorflow crash at load: Segmentation fault (core dumped) while "
            "importing <tensorflow>") in out
    row = _row(out, "tensorflow")
    assert row[:3] == ["tensorflow", "crash", "(load)"] and row[-1] == "-"
    assert "2 item(s) could not be aligned" in out


def test_pairwise_note(sample: dict[str, Any]) -> None:
    sample["pairwise"] = True
    assert "pairwise comparison" in render_summary(sample, Path("r"))


def test_colour_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch,
                                   with_findings: dict[str, Any]) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    monkeypatch.setattr(terminal.sys, "stdout", tty)
    monkeypatch.delenv("NO_COLOR", raising=False)
    print_summary(with_findings, Path("r"))
    assert "\x1b[31m3 findings\x1b[0m" in tty.getvalue()
    plain = Tty()
    monkeypatch.setattr(terminal.sys, "stdout", plain)
    monkeypatch.setenv("NO_COLOR", "1")
    print_summary(with_findings, Path("r"))
    assert "\x1b[" not in plain.getvalue() and "3 findings" in plain.getvalue()


@pytest.mark.parametrize("summary", [{}, {"participants": None, "findings": 3},
                                     {"participants": [{"participant": "jax", "status": None}]}])
def test_empty_or_broken_summary_prints(summary: dict[str, Any]) -> None:
    out = render_summary(summary, Path("r"))
    assert out.startswith("=") and "report: r/report.html" in out
