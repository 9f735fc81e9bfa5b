"""The reduction: the smallest case of a drilled stage that still shows the finding's symptom.

It starts from the drill-down's named operator alone, fed with the fp64 reference's exact
values of its inputs (:mod:`anpred.repro.subgraph`), and, in the same first round, the
stage cut alone (the baseline a user gets by cutting the stage out by hand). When the
operator alone does not show the symptom (:mod:`anpred.repro.symptom`; e.g. the error needs
a fusion with the operators before it), a second round tries the windows of the stage's
operators that end at it, and the smallest that shows the symptom is shrunk by delta
debugging: every case with one operator less is tried in one round, the smallest that
still shows the symptom is kept, until no operator can be removed (1-minimal). Each round
is one trial (:mod:`anpred.repro.trial`): one worker job per participant, whatever the
number of cases in it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from anpred.repro.subgraph import Case, StageCases, batch_graph, prefix
from anpred.repro.symptom import Symptom, SymptomCheck, check
from anpred.repro.trial import TrialResult, TrialSettings, run_trial

#: At most this many windows (operators before the target) in the second round; the
#: stage cut itself is always tried in the first.
MAX_WINDOWS = 8
#: At most this many shrinking rounds (each removes at least one operator).
MAX_SHRINK_ROUNDS = 6


@dataclass(frozen=True)
class Tried:
    """One case tried and the oracle's word on it."""

    case: Case
    check: SymptomCheck
    round: int


@dataclass
class Reduction:
    """What the reduction of one finding found.

    Attributes:
        symptom: The finding's symptom.
        case: The smallest case that shows it (``None``: none did).
        check: Its check.
        trial: The trial that judged it (its captures give expected values and the floor).
        index: Its index in that trial's batch.
        stage_case: The stage cut alone (the baseline), and its check.
        minimal: Whether no operator of ``case`` can be removed (every case with one less
            was tried and rejected, or it has one operator).
        tried: Every case tried, in order.
        stage_ops: Operators of the stage.
        stage_trial: The first round's trial, which judged the stage cut at ``stage_index``.
    """

    symptom: Symptom
    case: Case | None
    check: SymptomCheck | None
    trial: TrialResult | None
    index: int
    stage_case: Tried | None
    minimal: bool
    tried: list[Tried] = field(default_factory=list)
    stage_ops: int = 0
    stage_trial: TrialResult | None = None
    stage_index: int = 0

    @property
    def rounds(self) -> int:
        """Trials run."""
        return max((t.round for t in self.tried), default=0)


def _unique(cases: Sequence[Case]) -> list[Case]:
    seen, kept = set(), []
    for c in cases:
        if c.nodes not in seen:
            seen.add(c.nodes)
            kept.append(c)
    return kept


class Reducer:
    """Runs the rounds of one finding's reduction.

    Args:
        stage: The drilled stage's cases.
        symptom: The finding's symptom.
        packed: Input id → the drill-down's packed stage inputs.
        fp64: Input id → the fp64 reference's operator anchors (drill-graph keys).
        settings: How trials run.
        work: Folder for the trials.
    """

    def __init__(
        self,
        stage: StageCases,
        symptom: Symptom,
        packed: Mapping[str, np.ndarray],
        fp64: Mapping[str, Mapping[str, np.ndarray]],
        settings: TrialSettings,
        work: Path,
    ) -> None:
        self.stage = stage
        self.symptom = symptom
        self.packed = packed
        self.fp64 = fp64
        self.settings = settings
        self.work = work
        self.tried: list[Tried] = []
        self.trials: list[TrialResult] = []

    def run_round(self, cases: Sequence[Case]) -> list[tuple[SymptomCheck, int]]:
        """Judge ``cases`` in one trial; each case's check and index in it."""
        cases = list(cases)
        batch = batch_graph(cases, self.stage)
        packed = {
            i: batch.pack([self.stage.fed_values(c, self.packed[i], self.fp64[i]) for c in cases])
            for i in self.packed
        }
        number = len(self.trials) + 1
        self.settings.say(
            f"repro {self.symptom.label}: round {number}, {len(cases)} case(s) of "
            f"{', '.join(str(c.size) for c in cases)} operator(s)"
        )
        trial = run_trial(self.work / f"round{number}", batch, packed, self.settings)
        self.trials.append(trial)
        checks = []
        for i, case in enumerate(cases):
            found = check(self.symptom, prefix(i) + case.target, trial.verdicts, trial.input_ids)
            if self.symptom.participant in trial.failed:
                why = trial.failed[self.symptom.participant]
                found = SymptomCheck(False, f"its job failed: {why}"[:300], None, None, ())
            elif not trial.verdicts and trial.failed:
                failed = "; ".join(f"{n}: {m}" for n, m in trial.failed.items())
                found = SymptomCheck(False, f"the trial failed ({failed})"[:300], None, None, ())
            self.tried.append(Tried(case, found, number))
            checks.append((found, i))
        return checks

    def reduce(self) -> Reduction:
        """Search (module doc)."""
        target = self.symptom.op
        node = self.stage.op(target).node
        domain = self.stage.domain
        upto = domain[: domain.index(node) + 1] if node in domain else [node]
        single = self.stage.case([node], target)
        whole = self.stage.case(upto, target)
        first = _unique([single, whole])
        checks = self.run_round(first)
        stage_tried = self.tried[-1] if len(first) == 2 else self.tried[0]
        best: tuple[Case, SymptomCheck, TrialResult, int] | None = None
        if checks[0][0].reproduces:
            best = (single, checks[0][0], self.trials[-1], 0)
        elif stage_tried.check.reproduces:
            windows = _unique(
                [
                    self.stage.case(upto[len(upto) - w :], target)
                    for w in range(2, min(len(upto), MAX_WINDOWS + 1))
                ]
            )
            windows = [c for c in windows if c.nodes not in {single.nodes, whole.nodes}]
            best = (whole, stage_tried.check, self.trials[-1], len(first) - 1)
            if windows:
                for found, i in self.run_round(windows):
                    if found.reproduces and windows[i].size < best[0].size:
                        best = (windows[i], found, self.trials[-1], i)
                        break  # windows grow: the first that shows it is the smallest
        if best is None:
            return Reduction(self.symptom, None, None, None, -1, stage_tried, False,
                             self.tried, len(domain), self.trials[0], len(first) - 1)  # fmt: skip
        minimal = best[0].size <= 1
        for _ in range(MAX_SHRINK_ROUNDS):
            if minimal:
                break
            case = best[0]
            smaller = _unique(
                [
                    self.stage.case([n for n in case.nodes if n != drop], target)
                    for drop in case.nodes
                    if drop != node
                ]
            )
            judged = {t.case.nodes for t in self.tried}  # a case judged before is not run again
            smaller = [c for c in smaller if c.size < case.size and c.nodes not in judged]
            if not smaller:
                minimal = True
                break
            shown = [(c, f, i) for (f, i), c in zip(self.run_round(smaller), smaller, strict=True)
                     if f.reproduces]  # fmt: skip
            if not shown:
                minimal = True
                break
            c, f, i = min(shown, key=lambda t: t[0].size)
            best = (c, f, self.trials[-1], i)
            minimal = c.size <= 1
        case, found, trial, index = best
        return Reduction(self.symptom, case, found, trial, index, stage_tried, minimal,
                         self.tried, len(domain), self.trials[0], len(first) - 1)  # fmt: skip
