"""The typed summary's codec: round trip, migration of version 1, refusal of the unknown."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from anpred.errors import UsageError
from anpred.store.outcome import Status
from anpred.store.summary import SCHEMA_VERSION, Finding, Summary

#: A real summary written before ``schema_version`` existed (version 1); never modified.
GOLDEN = Path(__file__).parents[1] / "pipeline" / "data" / "golden_run" / "summary.json"


@pytest.fixture
def version1() -> dict[str, Any]:
    data = json.loads(GOLDEN.read_text())
    assert "schema_version" not in data
    return data


def test_round_trip_write_load_equal(tmp_path: Path, version1: dict[str, Any]) -> None:
    summary = Summary.from_dict(version1)
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(summary.to_dict()))
    loaded = Summary.from_dict(json.loads(path.read_text()))
    assert loaded == summary
    written = json.loads(path.read_text())
    assert written.pop("schema_version") == SCHEMA_VERSION == 2
    assert written == version1  # migrating version 1 changes nothing but the version key


def test_typed_fields_of_the_real_summary(version1: dict[str, Any]) -> None:
    summary = Summary.from_dict(version1)
    faulty = "onnxruntime!bf16@s2"
    assert summary.anchor_keys == ["r1", "s2", "output"]
    assert all(p.status is Status.OK for p in summary.participants)
    assert {f.participant for f in summary.findings} == {faulty}
    assert isinstance(summary.findings[0], Finding) and summary.findings[0].anchor == "s2"
    assert summary.localization.participants[faulty].stage_ranking[0] == "s2"
    assert summary.localization.blame.sole_counts[faulty] == 5
    assert summary.failed_inputs("polygraphy_allclose", faulty) == set(summary.input_ids)
    assert summary.deviation.vs_fp64[faulty]["s2"] > 1e-4


def test_a_newer_schema_version_is_refused(version1: dict[str, Any]) -> None:
    version1["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(UsageError, match="schema version 3") as err:
        Summary.from_dict(version1)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("edit", "where"),
    [
        (lambda s: s["findings"][0].pop("anchor"), "findings[0].anchor is missing"),
        (
            lambda s: s["localization"].update(
                per_participant=s["localization"].pop("participants")
            ),
            "localization.participants is missing",
        ),
        (
            lambda s: s["localization"]["participants"]["jax"].pop("top_stage"),
            "localization.participants.jax.top_stage is missing",
        ),
        (lambda s: s["baselines"]["cradle_dmad"]["jax"].pop("failed_inputs"), "failed_inputs"),
        (lambda s: s.update(findings={}), "findings is dict"),
        (lambda s: s["participants"][0].update(status="exploded"), "not a known status"),
    ],
)
def test_a_renamed_or_missing_key_fails_loudly(
    version1: dict[str, Any], edit: Any, where: str
) -> None:
    broken = copy.deepcopy(version1)
    edit(broken)
    with pytest.raises(UsageError, match=where.replace("[", r"\[").replace("]", r"\]")) as err:
        Summary.from_dict(broken)
    assert "\n" not in str(err.value)


def test_an_early_version1_summary_is_migrated() -> None:
    # a real yolov8n summary from before participants.json kept the worker's fields at the
    # top level of each participant record: they are read from its status_detail
    early = Path(__file__).parents[1] / "report" / "data" / "summary.json"
    raw = json.loads(early.read_text())
    assert "library" not in raw["participants"][0]
    summary = Summary.from_dict(raw)
    torch = summary.participant("torch")
    assert torch is not None and torch.library == "torch" and torch.step == "done"
    assert torch.version == raw["participants"][0]["status_detail"]["version"]
    assert Summary.from_dict(summary.to_dict()) == summary
