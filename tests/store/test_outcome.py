"""The outcome enums: their values are the strings already on disk."""

from __future__ import annotations

import json

from anpred.backends.base import Step as RunnerStep
from anpred.store import FAILED_STATES, FINISHED_STATES, Status, Step


def test_status_values_are_the_strings_on_disk() -> None:
    assert [s.value for s in Status] == [
        "running",
        "ok",
        "error",
        "non-finite",
        "crash",
        "timeout",
    ]
    assert Status.NON_FINITE == "non-finite" and f"{Status.CRASH}" == "crash"
    # written to JSON as the bare string: files stay byte-compatible
    assert json.dumps({"state": Status.NON_FINITE}) == '{"state": "non-finite"}'


def test_failed_and_finished() -> None:
    assert {s for s in Status if s.failed} == {Status.CRASH, Status.TIMEOUT, Status.ERROR}
    assert {s for s in Status if s.finished} == {Status.OK, Status.NON_FINITE}
    assert not Status.RUNNING.failed and not Status.RUNNING.finished
    assert "timeout" in FAILED_STATES and "ok" in FINISHED_STATES and "ok" not in FAILED_STATES


def test_parse_tolerates_unknown_states() -> None:
    assert Status.parse("non-finite") is Status.NON_FINITE
    assert Status.parse(None) is Status.ERROR
    assert Status.parse("exploded", default=Status.CRASH) is Status.CRASH


def test_steps_include_the_pipeline_steps_and_backends_reexport_them() -> None:
    assert RunnerStep is Step
    assert {"load", "translate", "convert", "compile", "execute", "capture", "export", "done"} == {
        s.value for s in Step
    }
