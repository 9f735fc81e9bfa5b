"""Runs that go a chunk of inputs at a time (``--chunk``): the same statistics, findings and
drill-down as a run in one go, captures pruned as the run goes, failures and resume."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
from pathlib import Path

import pytest

from anpred.analysis.oracle import AnchorEvidence, Deviation
from anpred.errors import UsageError
from anpred.pipeline.chunks import check_chunk, chunked, plan
from anpred.pipeline.evidence import RunEvidence
from anpred.pipeline.statistics import merge
from conftest import anpred, failing, summary

LIBS = "torch,onnxruntime,openvino"


def _judged(data: dict) -> dict:
    """What the analysis decides (timings and wall times left out)."""
    keys = ("findings", "localization", "characterization", "baselines", "deviation")
    return {k: data[k] for k in (*keys, "noise_floor", "oracle", "anchors", "inputs")}


def _statistics(run: Path) -> dict:
    with gzip.open(run / "statistics.json.gz", "rt") as data:
        return json.load(data)


def test_plan_chunks_and_when_a_run_goes_in_chunks() -> None:
    ids = ["a", "b", "c", "d", "e"]
    assert plan(ids, 2) == [["a", "b"], ["c", "d"], ["e"]]
    assert plan(ids, 2, covered=["a", "b"]) == [["c", "d"], ["e"]]
    assert plan(ids, 10) == [ids]
    assert chunked(2, 5, "needed") and not chunked(5, 5, "needed")
    assert not chunked(2, 5, "all") and not chunked(0, 5, "needed")
    assert check_chunk(0) == 0
    with pytest.raises(UsageError, match="--chunk"):
        check_chunk(-1)


def _record(anchor: str, input_id: str) -> AnchorEvidence:
    deviation = Deviation("p", anchor, input_id, {"rel_l2": 1e-7}, {"rel_l2": 2e-7}, 0)
    return AnchorEvidence(anchor, input_id, (deviation,), {"rel_l2": 1e-7}, 2, {"rel_l2": 0.0})


def _part(inputs: list[str], steps: str) -> RunEvidence:
    return RunEvidence(
        evidence={a: [_record(a, i) for i in inputs] for a in ("s1", "out")},
        baselines={i: {"m": {"p": {"passed": True}}} for i in inputs},
        introduced={("p", i): {"s1": 1e-7} for i in inputs},
        dimension={("p", "s1", i): {"top_channel_share": 0.1} for i in inputs},
        alignment={"p": {"s1": [steps]}},
        unaligned=[{"input": i, "reason": "x"} for i in inputs],
        observer={"p": {i: {"identical": True} for i in inputs[:1]}},
    )


def test_merge_gives_the_records_of_one_pass_in_input_order() -> None:
    ids = ["a", "b", "c"]
    whole = _part(ids, "first")
    whole.observer = {"p": {"a": {"identical": True}, "c": {"identical": True}}}
    merged = merge([_part(["c"], "later"), _part(["a", "b"], "first")], ids)
    whole.observer["p"].pop("c")
    merged.observer["p"].pop("c")
    assert merged == whole  # the first input's alignment record is kept, as one pass keeps it
    assert [e.input_id for e in merged.evidence["s1"]] == ids


def _run(model: Path, out: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return anpred("run", str(model), "--libs", LIBS, "--images", "3", "--out", str(out), *flags)


def test_chunks_give_the_statistics_and_verdicts_of_one_go(tiny_onnx, tmp_path) -> None:
    whole, chunks = tmp_path / "whole", tmp_path / "chunks"
    assert _run(tiny_onnx, whole, "--chunk", "0").returncode == 0
    proc = _run(tiny_onnx, chunks, "--chunk", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    # from the second chunk on, the time left at the pace of the chunks so far
    assert "chunk 1/3: inputs 1-1 of 3\n" in proc.stderr
    # no --parallel: auto, said with what it was made of (execution/slots.py)
    auto = r"--parallel auto: \d+ (workers?|processes) at once \(\d+ CPUs?, --threads 1"
    assert re.search(auto, proc.stderr)
    assert re.search(r"chunk 3/3: inputs 3-3 of 3 \(about \d+ (s|min)[^)]* left\)", proc.stderr)
    # progress counts the chunk's inputs, not the earlier chunks' captures in the folder
    assert "[onnxruntime] 1/1 inputs" in proc.stderr
    assert "2/1 inputs" not in proc.stderr and "3/1 inputs" not in proc.stderr
    # the second and third chunks pruned the captures of inputs 2 and 3 as the run went
    pruning = [ln for ln in proc.stderr.splitlines() if "analysed; " in ln]
    assert len(pruning) == 3 and all(" 0.0 MB of" not in ln for ln in pruning[1:])
    # same records (bit for bit: JSON keeps every float), same verdicts
    assert _statistics(chunks) == _statistics(whole)
    assert _judged(summary(chunks)) == _judged(summary(whole))
    record = json.loads((chunks / "pruned.json").read_text())
    assert record["chunked"] and record["first_input"] == "bus"
    assert record["bytes_before"] == json.loads((whole / "pruned.json").read_text())["bytes_before"]
    assert not (chunks / "chunks").exists()  # merged into statistics.json.gz
    again = _run(tiny_onnx, chunks, "--chunk", "1")  # resumed: nothing to do
    assert again.returncode == 0 and "already done (resumed)" in again.stderr
    assert _judged(summary(chunks)) == _judged(summary(whole))
    bad = _run(tiny_onnx, tmp_path / "bad", "--chunk", "-2")
    assert bad.returncode == 2 and "--chunk" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.slow
def test_a_fault_found_in_chunks_as_in_one_go(tiny_onnx, tmp_path) -> None:
    runs = {}
    for chunk in ("0", "1"):
        runs[chunk] = tmp_path / f"chunk{chunk}"
        proc = anpred(
            "inject", str(tiny_onnx), "--lib", "onnxruntime", "--stage", "s2", "--fault",
            "bf16", "--libs", LIBS, "--images", "3", "--chunk", chunk, "--out", str(runs[chunk]),
        )  # fmt: skip
        assert proc.returncode == 1, proc.stderr[-3000:]  # findings
        # chunks pruned the fp64 reference's stage inputs of inputs 2 and 3 as they went:
        # the drill-down computed them again (in one go it reads them)
        again = "drill-down: fp64 stage inputs of 2 pruned inputs computed again"
        assert (again in proc.stderr) == (chunk == "1"), proc.stderr[-3000:]
    whole, chunks = summary(runs["0"]), summary(runs["1"])
    assert whole["findings"] and _judged(chunks) == _judged(whole)
    assert _statistics(runs["1"]) == _statistics(runs["0"])
    # the drill-down's packed stage inputs are the ones a run in one go reads: the same
    assert chunks["drill"]["targets"] and not chunks["drill"].get("reason")
    assert not (runs["1"] / "drill" / "reference").exists()  # removed once packed
    assert {k: v for k, v in chunks["drill"].items() if k != "wall_seconds"} == {
        k: v for k, v in whole["drill"].items() if k != "wall_seconds"
    }
    kept = json.loads((runs["1"] / "pruned.json").read_text())["kept_anchors"]
    assert kept == json.loads((runs["0"] / "pruned.json").read_text())["kept_anchors"]
    ground = json.loads((runs["1"] / "ground_truth.json").read_text())
    assert ground == json.loads((runs["0"] / "ground_truth.json").read_text())


@pytest.mark.slow
def test_a_failure_in_a_chunk_keeps_the_others_and_a_resume_retries_it(tiny_onnx, tmp_path):
    out, once = tmp_path / "run", tmp_path / "failed-once"
    args = (str(tiny_onnx), "--libs", LIBS, "--images", "3", "--chunk", "1", "--out", str(out))
    first = failing(f"onnxruntime:error:{once}", *args)
    assert first.returncode == 3, first.stderr[-3000:]
    assert "onnxruntime failed; later chunks run without it" in first.stderr
    data = summary(out)
    status = {p["participant"]: p["status"] for p in data["participants"]}
    assert status["onnxruntime"] == "error" and status["openvino"] == "ok"
    # the others were judged on every input, and nothing was pruned: a resume needs it all
    assert sorted(data["noise_floor"]["output"]["per_input"]) == ["astronaut", "bus", "zidane"]
    assert not list(out.glob("chunks/*"))
    assert len(list((out / "captures" / "openvino").glob("*.capture.npz"))) == 3
    resumed = failing(f"onnxruntime:error:{once}", *args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    again = summary(out)
    assert {p["participant"]: p["status"] for p in again["participants"]}["onnxruntime"] == "ok"
    assert [p["inputs_done"] for p in again["participants"]] == [3, 3, 3]
