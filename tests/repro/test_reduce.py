"""The search: the operator alone first, then windows ending at it, then delta debugging."""

from __future__ import annotations

from pathlib import Path

from repro_models import tiny_drill_graph

from anpred.repro.reduce import Reducer, Tried
from anpred.repro.subgraph import Case, StageCases
from anpred.repro.symptom import Symptom, SymptomCheck
from anpred.repro.trial import TrialResult, TrialSettings

ADD = "/block2/Add"
SIGMOID = "/block2/act/Sigmoid"
CONV = "/block2/conv/Conv"
SYMPTOM = Symptom("onnxruntime", "s2", "op0003", ADD, "Add", "introduced", 1e-3)


class FakeReducer(Reducer):
    """A reducer whose oracle says: the symptom needs every node of ``needs``."""

    def __init__(self, needs: set[str]) -> None:
        super().__init__(StageCases(tiny_drill_graph(), "s2"), SYMPTOM, {}, {},
                         TrialSettings(population=()), Path("/nonexistent"))  # fmt: skip
        self.needs = needs
        self.rounds_seen: list[list[tuple[str, ...]]] = []

    def run_round(self, cases: list[Case]) -> list[tuple[SymptomCheck, int]]:  # type: ignore[override]
        self.rounds_seen.append([c.nodes for c in cases])
        self.trials.append(TrialResult(Path("/nonexistent"), {}, {}, []))
        found = []
        for i, case in enumerate(cases):
            shows = self.needs <= set(case.nodes)
            check = SymptomCheck(shows, "" if shows else "not flagged", 1e-3, 1.0, ())
            self.tried.append(Tried(case, check, len(self.trials)))
            found.append((check, i))
        return found


def test_the_operator_alone_is_enough_in_one_round() -> None:
    reducer = FakeReducer({ADD})
    found = reducer.reduce()
    assert found.case is not None and found.case.nodes == (ADD,)
    assert found.minimal and found.rounds == 1
    # the first round judges the operator alone and the stage cut together
    assert reducer.rounds_seen == [[(ADD,), (CONV, SIGMOID, ADD)]]
    assert found.stage_case is not None and found.stage_case.case.nodes == (CONV, SIGMOID, ADD)


def test_a_symptom_that_needs_a_neighbour_grows_a_window_and_stays_minimal() -> None:
    reducer = FakeReducer({SIGMOID, ADD})  # e.g. a fusion of the two
    found = reducer.reduce()
    assert found.case is not None and found.case.nodes == (SIGMOID, ADD)
    assert found.minimal and found.case.size == 2
    # round 2 tried the window of two; removing the Sigmoid gives the Add alone, judged in
    # round 1 already: no third round
    assert reducer.rounds_seen[1] == [(SIGMOID, ADD)]
    assert len(reducer.rounds_seen) == 2


def test_a_case_that_needs_every_operator_is_shown_minimal_by_removal() -> None:
    reducer = FakeReducer({CONV, SIGMOID, ADD})
    found = reducer.reduce()
    assert found.case is not None and found.case.nodes == (CONV, SIGMOID, ADD)
    assert found.minimal
    # round 2: the window of two fails; every case with one operator less (dropping the
    # Conv gives that window; dropping the Sigmoid leaves the Add alone, as the Conv cannot
    # reach it) was judged already, so no third round runs
    assert reducer.rounds_seen[1] == [(SIGMOID, ADD)]
    assert len(reducer.rounds_seen) == 2


def test_no_case_when_even_the_stage_does_not_show_it() -> None:
    reducer = FakeReducer({"/somewhere/else"})
    found = reducer.reduce()
    assert found.case is None and not found.minimal
    assert found.stage_case is not None and not found.stage_case.check.reproduces
