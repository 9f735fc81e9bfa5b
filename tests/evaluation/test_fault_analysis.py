"""A served fault run's analysis (:mod:`anpred.evaluation.fault_analysis`): the records of
the full pass, from a pass over the anchors from the faulty stage on that judges the
output-level baselines of the faulty participant only.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "pipeline"))
from tiny_model import tiny_cnn  # noqa: E402

from anpred.evaluation import fault_analysis, fault_runs  # noqa: E402
from anpred.evaluation.fault_runs import FRESH, SERVED, fault_executor, run_fault  # noqa: E402
from anpred.inject.spec import FaultSpec  # noqa: E402
from anpred.participants import REFERENCE32  # noqa: E402
from anpred.pipeline import evidence  # noqa: E402
from anpred.pipeline.evidence import RunEvidence  # noqa: E402
from anpred.pipeline.prune import KEEP_ALL  # noqa: E402
from anpred.pipeline.run import run  # noqa: E402
from anpred.settings import ExecutionSettings, RunOptions  # noqa: E402
from anpred.store import CAPTURE, ISOLATED, RunStore  # noqa: E402


def _statistics(run_dir: Path) -> bytes:
    return gzip.decompress((run_dir / "statistics.json.gz").read_bytes())


def test_a_fault_at_the_first_stage_is_analysed_as_the_full_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("onnxruntime")  # looked up only: the workers import the libraries
    model = str(tiny_cnn(tmp_path / "tiny.onnx"))
    base = tmp_path / "clean"
    options = RunOptions(model=model, libs=("torch,onnxruntime",), images=2)
    settings = ExecutionSettings(threads=1, parallel=1, keep_captures=KEEP_ALL, drill=False)
    clean = run(options, base, settings).summary
    stage = clean.anchor_keys[0]  # nothing before it: every anchor is passed over again
    spec = FaultSpec.from_dict({"stage": stage, "op": "*", "kind": "bf16", "severity": 1})
    reused: list[bool] = []
    spy = fault_runs.reuse_clean_records

    def traced(*args: object) -> bool:
        reused.append(spy(*args))  # type: ignore[arg-type]
        return reused[-1]

    judged: dict[str, list[list[str]]] = {SERVED: [], FRESH: []}
    profiled = {SERVED: 0, FRESH: 0}
    mode = SERVED
    judge, profile = evidence._judge_baselines, evidence._dimension_record

    def counted(outputs, fp32, fp64):  # type: ignore[no-untyped-def]
        judged[mode].append(list(outputs))
        return judge(outputs, fp32, fp64)

    def profiled_once(x, ref):  # type: ignore[no-untyped-def]
        profiled[mode] += 1
        return profile(x, ref)

    monkeypatch.setattr(fault_runs, "reuse_clean_records", traced)
    monkeypatch.setattr(evidence, "_judge_baselines", counted)
    monkeypatch.setattr(evidence, "_dimension_record", profiled_once)
    rows = {}
    for mode in (SERVED, FRESH):
        with fault_executor(None, mode) as executor:
            rows[mode] = run_fault(
                base, tmp_path / mode, model, "onnxruntime", spec, clean, lambda _m: None, 1,
                executor=executor, keep_fork_server=mode == SERVED, reuse_clean=mode == SERVED,
            )  # fmt: skip
    faulty = f"onnxruntime!bf16@{stage}"
    assert reused == [True]
    # served: the faulty participant's own records only (the others' are the clean run's)
    assert judged[SERVED] == [[faulty]] * 2
    assert judged[FRESH] == [["torch", faulty]] * 2
    assert profiled[SERVED] == profiled[FRESH] // 2 > 0
    assert rows[SERVED] == rows[FRESH] and rows[SERVED] is not None
    served = pq.read_table(tmp_path / SERVED / "deviations.parquet")
    assert served.equals(pq.read_table(tmp_path / FRESH / "deviations.parquet"))
    # every record the same, in the same order (byte for byte), the clean participants'
    # baselines too
    assert _statistics(tmp_path / SERVED) == _statistics(tmp_path / FRESH)
    baselines = json.loads(_statistics(tmp_path / SERVED))["baselines"]
    assert [list(b["cradle_dmad"]) for b in baselines.values()] == [["torch", faulty]] * 2


def _verdicts(**per_participant: float) -> dict[str, dict[str, float]]:
    return {p: {"passed": True, "value": v} for p, v in per_participant.items()}


def test_known_verdicts_take_their_place_in_the_order_of_one_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def judge(outputs, fp32, fp64):  # type: ignore[no-untyped-def]
        return {m: _verdicts(**{p: 9.0 for p in outputs}) for m in ("m1", "m2")}

    monkeypatch.setattr(evidence, "_judge_baselines", judge)
    known = RunEvidence(
        baselines={"a": {"m1": _verdicts(torch=1.0, jax=3.0), "m2": _verdicts(torch=4.0, jax=5.0)}}
    )
    outputs = dict.fromkeys(["torch", "bad", "jax"], np.zeros(2))
    verdicts = evidence._own_baselines(
        outputs, np.zeros(2), np.zeros(2), frozenset({"bad"}), known, "a"
    )
    assert list(verdicts) == ["m1", "m2"]
    assert list(verdicts["m1"].items()) == [
        ("torch", {"passed": True, "value": 1.0}),
        ("bad", {"passed": True, "value": 9.0}),
        ("jax", {"passed": True, "value": 3.0}),
    ]
    assert list(verdicts["m2"]) == ["torch", "bad", "jax"]
    del known.baselines["a"]["m2"]  # a method the clean run did not judge
    with pytest.raises(KeyError):
        evidence._own_baselines(outputs, np.zeros(2), np.zeros(2), frozenset({"bad"}), known, "a")


def test_every_participant_is_judged_unless_its_captures_are_the_clean_runs(
    tmp_path: Path,
) -> None:
    base, out = RunStore(tmp_path / "base"), RunStore(tmp_path / "out")
    names = ["torch", "jax", "ort!bf16@s1"]
    for p in ["torch_fp64", *names[:2]]:
        base.participant(p).folder.mkdir(parents=True)
        out.participant(p).folder.parent.mkdir(parents=True, exist_ok=True)
        out.participant(p).folder.symlink_to(base.participant(p).folder)
    out.participant(names[2]).folder.mkdir()
    prior = RunEvidence(baselines={"a": {}})

    def clean(name: str = "ort") -> bool:
        return fault_analysis._others_are_clean(base, out, prior, name, names[2], names, ["a"])

    assert clean()  # the others linked: the clean run's files
    assert not clean(REFERENCE32)  # a faulty fp32 reference changes every verdict
    prior.baselines.clear()
    assert not clean()  # the clean run judged no baselines on the input
    prior.baselines["a"] = {}
    jax = out.participant("jax").folder
    jax.unlink()
    jax.mkdir()  # a copy, not the clean run's folder
    assert not clean()


def test_early_captures_are_taken_as_copies_only_where_the_worker_says_so(
    tmp_path: Path,
) -> None:
    clean, faulty = (RunStore(tmp_path / r).participant("ort") for r in ("base", "out"))
    for store in (clean, faulty):
        store.folder.mkdir(parents=True)
        for input_id in ("a", "b"):
            for kind in (CAPTURE, ISOLATED):
                meta = {"layouts": {}, **({"resumed": True} if store is faulty else {})}
                store.write_capture(input_id, {"s1": np.zeros(2)}, meta, kind)
    resume = {"from": str(clean.folder), "recomputed": ["s2"], "isolated_recomputed": ["s2"]}
    faulty.write_status({"state": "ok", "resume": resume})

    def copied(anchors: tuple[str, ...] = ("s1",)) -> bool:
        return fault_analysis._copied(clean, faulty, list(anchors), ["a", "b"])

    assert copied()
    assert not copied(("s1", "s2"))  # an anchor the worker recomputed
    faulty.write_status({"state": "ok", "resume": {**resume, "isolated_recomputed": ["s1"]}})
    assert not copied()
    faulty.write_status({"state": "ok", "resume": {**resume, "unavailable": "no resume"}})
    assert not copied()
    faulty.write_status({"state": "ok", "resume": {**resume, "from": str(faulty.folder)}})
    assert not copied()  # resumed from another participant's captures
    faulty.write_status({"state": "ok"})
    assert not copied()  # not resumed at all
    faulty.write_status({"state": "ok", "resume": resume})
    faulty.write_capture("b", {"s1": np.zeros(2)}, {"layouts": {}}, ISOLATED)
    assert not copied()  # one capture computed by the whole model
    (clean.folder / f"b.{ISOLATED}.json").unlink()
    faulty.write_capture("b", {"s1": np.zeros(2)}, {"layouts": {}, "resumed": True}, ISOLATED)
    assert not copied()  # a capture the clean participant does not have
