"""Phase 1 of the oracle: one anchor and one input assessed (:func:`assess`): the
consensus of each precision class, every participant's deviations from it and from the
fp64 reference, the noise floors (:class:`AnchorEvidence`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from anpred.analysis.alignment import AlignmentError
from anpred.analysis.metrics import Metric, float32_or_float64, get_metric
from anpred.analysis.onepass import AnchorMetrics, measure_anchor
from anpred.analysis.oracle.params import INTRODUCED_METRIC, METRICS_ALL, OracleParams
from anpred.analysis.oracle.rules import _above_noise
from anpred.errors import UsageError
from anpred.library.precision import FP32, ideal_class, ideal_reference


@dataclass(frozen=True)
class Deviation:
    """One participant's deviation at one anchor for one input (phase 1 record).

    Attributes:
        participant: Participant name.
        anchor: Anchor name.
        input_id: Input identifier.
        metrics: ``{metric: value}`` against the consensus.
        vs_fp64: ``{metric: value}`` against the fp64 reference.
        non_finite: Elements that are NaN/inf in the capture but finite in fp64.
        precision: The participant's precision class; in a reduced class ``metrics`` are
            its distances from the fp64 reference (see the module docstring).
    """

    participant: str
    anchor: str
    input_id: str
    metrics: Mapping[str, float]
    vs_fp64: Mapping[str, float]
    non_finite: int = 0
    precision: str = FP32


@dataclass(frozen=True)
class AnchorEvidence:
    """Everything phase 2 needs from one anchor and one input.

    Attributes:
        anchor: Anchor name.
        input_id: Input identifier.
        deviations: One record per participant.
        noise_floor: ``{metric: fp32 reference vs fp64 reference}``.
        participants: Number of participants in the consensus.
        consensus_vs_fp64: ``{metric: consensus vs fp64 reference}``; when a finding's
            own distance from fp64 is far smaller, the majority shares an error and the
            flagged participant is the accurate one (see ``Verdict.closer_to_fp64``).
        class_floors: ``{reduced class: {metric: its ideal reference vs fp64}}``.
    """

    anchor: str
    input_id: str
    deviations: tuple[Deviation, ...]
    noise_floor: Mapping[str, float]
    participants: int
    consensus_vs_fp64: Mapping[str, float] = field(default_factory=dict)
    class_floors: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    @property
    def pairwise(self) -> bool:
        """Whether the consensus degenerated to a pairwise comparison."""
        return self.participants == 2


def _as_float64(array: np.ndarray, shape: tuple[int, ...], what: str) -> np.ndarray:
    array = np.asarray(array, dtype=np.float64)
    return _checked_shape(array, shape, what)


def _as_float(array: np.ndarray, shape: tuple[int, ...], what: str) -> np.ndarray:
    """``array`` as float64, or as it is when float32 (the phase 1 kernel reads float32
    captures as they are and computes in float64: the same numbers, no copy).
    """
    return _checked_shape(float32_or_float64(array), shape, what)


def _checked_shape(array: np.ndarray, shape: tuple[int, ...], what: str) -> np.ndarray:
    if array.shape != shape:
        raise AlignmentError(
            f"{what} has shape {array.shape}, the fp64 reference {shape}; align captures "
            "with anpred.analysis.align before assessing them"
        )
    return array


def _against(
    metrics: list[Metric], tx: Mapping[str, Any], tc: Mapping[str, Any]
) -> dict[str, float]:
    """Every metric of one transformed array against another (see ``Metric.transform``)."""
    return {m.name: m.compare(tx[m.name], tc[m.name]) for m in metrics}


def _transformed(metrics: list[Metric], x: np.ndarray) -> dict[str, Any]:
    return {m.name: m.transform(x) for m in metrics}


def _new_non_finite(x: np.ndarray, fp64: np.ndarray) -> int:
    if x.size and x.flags.c_contiguous and x.dtype in (np.float32, np.float64):
        from anpred.analysis import onepass

        if onepass.kernels() is not None:  # no boolean array for the common answer
            from anpred.analysis import compiled_reads

            if compiled_reads.all_finite(x.reshape(-1)):
                return 0
    finite = np.isfinite(x)
    if finite.all():
        return 0
    return int(np.count_nonzero(~finite & np.isfinite(fp64)))


def assess(
    anchor: str,
    input_id: str,
    captures: Mapping[str, np.ndarray],
    fp32_reference: np.ndarray,
    fp64_reference: np.ndarray,
    *,
    params: OracleParams | None = None,
    classes: Mapping[str, str] | None = None,
    introduced: Mapping[str, float] | None = None,
    sort_keys: Mapping[str | None, Hashable] | None = None,
) -> AnchorEvidence:
    """Phase 1: deviations of every participant at one anchor for one input.

    Args:
        anchor: Anchor name.
        input_id: Input identifier.
        captures: ``{participant: aligned capture}``, all of the fp64 reference's shape;
            the fp32 reference participant is one of them, and so are the ideal
            references (``torch[ideal-bf16]``) of the reduced-precision classes judged.
        fp32_reference: The reference model's fp32 capture (usually the same array as
            one of ``captures``; then its distances are not computed twice).
        fp64_reference: The reference model's fp64 capture.
        params: Oracle parameters (which metrics to compute, and where).
        classes: ``{participant: precision class}``; a participant not in it is fp32.
        introduced: Stage isolation's ``{participant: introduced error}`` at this anchor
            and input (the references' included), when it ran: an introduced error above
            its noise threshold makes a candidate too (see the module docstring).
        sort_keys: Per participant (``None``: the fp64 reference), the key under which
            its sorted values may be kept across calls
            (:func:`~anpred.analysis.onepass.measure_anchor`); the same numbers.

    Returns:
        The deviation records, the noise floor and the reduced classes' floors.

    Raises:
        UsageError: With fewer than two fp32 participants and no reduced-precision one.
        AlignmentError: When a capture does not have the reference shape.
    """
    params = params or OracleParams()
    classes = classes or {}
    member = {p: classes.get(p, FP32) for p in captures if ideal_class(p) is None}
    fp32_names = [p for p, c in member.items() if c == FP32]
    if len(fp32_names) < 2 and len(fp32_names) == len(member):
        raise UsageError(
            f"anchor {anchor}: the oracle needs at least two participants, got {list(captures)}"
        )
    metrics = [get_metric(n) for n in params.metric_names()]
    fp64 = np.asarray(fp64_reference, dtype=np.float64)
    reference_name = next((p for p, x in captures.items() if x is fp32_reference), None)
    arrays = {
        p: _as_float(x, fp64.shape, f"capture of {p} at {anchor}") for p, x in captures.items()
    }
    non_finite = {p: _new_non_finite(arrays[p], fp64) for p in member}
    cell = _Cell(params, anchor, metrics, fp64, non_finite, introduced or {}, sort_keys)

    def floor_of(chosen: list[Metric]) -> dict[str, float]:
        """The fp32 reference against fp64 when it is not among the fp32 participants."""
        fp32 = _as_float64(fp32_reference, fp64.shape, f"fp32 reference at {anchor}")
        return _against(chosen, _transformed(chosen, fp32), _transformed(chosen, fp64))

    deviations: list[Deviation] = []
    noise_floor: Mapping[str, float] | None = None
    consensus_vs_fp64: Mapping[str, float] = {}
    if len(fp32_names) >= 2:
        fp32_deviations, noise_floor, consensus_vs_fp64 = _fp32_deviations(
            cell, input_id, {p: arrays[p] for p in fp32_names}, reference_name, floor_of
        )
        deviations += fp32_deviations
    if noise_floor is None:  # no fp32 population: the floor as the scope computes metrics
        noise_floor = floor_of(cell.metrics if cell.everywhere else cell.verdict)
    class_deviations, class_floors = _class_deviations(cell, input_id, arrays, member)
    deviations += class_deviations
    return AnchorEvidence(
        anchor,
        input_id,
        tuple(deviations),
        dict(noise_floor),
        len(fp32_names),
        consensus_vs_fp64,
        class_floors,
    )


def _fp32_deviations(
    cell: _Cell,
    input_id: str,
    group: Mapping[str, np.ndarray],
    reference_name: str | None,
    floor_of: Callable[[list[Metric]], dict[str, float]],
) -> tuple[list[Deviation], Mapping[str, float], Mapping[str, float]]:
    """The fp32 participants (``group``, two or more) measured against their consensus and
    fp64; with the noise floor and the consensus's distance from fp64.
    """
    fp32_names = list(group)
    own_floor = reference_name in fp32_names

    def fp32_candidate(first: AnchorMetrics) -> bool:
        floor = first.vs_fp64[reference_name] if own_floor else floor_of(cell.verdict)
        return cell.candidate(
            FP32, {p: first.vs_consensus[p] for p in fp32_names}, floor, reference_name
        )

    # the primary metric, and the others where a member is a candidate: one blocked pass
    measured = cell.measure(group, fp32_candidate)
    deviations = [
        Deviation(
            p,
            cell.anchor,
            input_id,
            measured.vs_consensus[p],
            measured.vs_fp64[p],
            cell.non_finite[p],
        )
        for p in fp32_names
    ]
    consensus_vs_fp64 = measured.consensus_vs_fp64
    if own_floor:
        noise_floor = measured.vs_fp64[reference_name]
    else:  # the floor's metrics are the measured ones
        noise_floor = floor_of([get_metric(n) for n in consensus_vs_fp64])
    return deviations, noise_floor, consensus_vs_fp64


def _class_deviations(
    cell: _Cell,
    input_id: str,
    arrays: Mapping[str, np.ndarray],
    member: Mapping[str, str],
) -> tuple[list[Deviation], dict[str, Mapping[str, float]]]:
    """The members of each reduced-precision class measured against fp64, with the class's
    floor (its ideal reference against fp64); a class without its ideal reference's
    capture is not judged.
    """
    deviations: list[Deviation] = []
    class_floors: dict[str, Mapping[str, float]] = {}
    for judged in dict.fromkeys(c for c in member.values() if c != FP32):
        ideal = ideal_reference(judged)
        if ideal not in arrays:  # no ideal reference: the class is not judged
            continue
        names = [p for p, c in member.items() if c == judged]
        group = {**{p: arrays[p] for p in names}, ideal: arrays[ideal]}

        def class_candidate(
            first: AnchorMetrics, judged: str = judged, names: list[str] = names, ideal: str = ideal
        ) -> bool:
            distances = {p: first.vs_fp64[p] for p in names}
            return cell.candidate(judged, distances, first.vs_fp64[ideal], ideal)

        vs_fp64 = cell.measure(group, class_candidate).vs_fp64
        class_floors[judged] = vs_fp64[ideal]
        deviations += [
            Deviation(p, cell.anchor, input_id, vs_fp64[p], vs_fp64[p], cell.non_finite[p], judged)
            for p in names
        ]
    return deviations, class_floors


@dataclass(frozen=True)
class _Cell:
    """One (anchor, input) of :func:`assess`: which metrics to compute for a group of
    participants there, and whether one of them is a candidate.
    """

    params: OracleParams
    anchor: str
    metrics: list[Metric]
    fp64: np.ndarray
    non_finite: Mapping[str, int]
    introduced: Mapping[str, float]
    sort_keys: Mapping[str | None, Hashable] | None = None

    @property
    def everywhere(self) -> bool:
        """Whether every metric is computed at every cell."""
        return self.params.metrics_scope == METRICS_ALL or len(self.metrics) == 1

    @property
    def verdict(self) -> list[Metric]:
        """The verdict path's metrics: the primary alone."""
        return [get_metric(self.params.primary_metric)]

    def measure(
        self, group: Mapping[str, np.ndarray], candidate: Callable[[AnchorMetrics], bool]
    ) -> AnchorMetrics:
        """The group's verdict path, then, in the same pass, the other metrics when
        ``candidate`` says so of it (at once when every metric is computed everywhere):
        the numbers of one pass with every metric either way.
        """
        if self.everywhere:
            return measure_anchor(self.metrics, group, self.fp64, sort_keys=self.sort_keys)
        others = self.metrics[1:]  # the primary is first (OracleParams.metric_names)

        def more(first: AnchorMetrics) -> list[Metric]:
            return others if candidate(first) else []

        return measure_anchor(self.verdict, group, self.fp64, more, self.sort_keys)

    def candidate(
        self,
        judged: str,
        deviations: Mapping[str, Mapping[str, float]],
        floor: Mapping[str, float],
        reference: str | None,
    ) -> bool:
        """Whether a member of class ``judged`` may be a finding here (the per-input test of
        :func:`noise_candidates`): ``deviations`` are the members' primary numbers, ``floor``
        the class's noise floor, ``reference`` the participant whose introduced error is
        the floor of the introduced errors.
        """
        params, primary = self.params, self.params.primary_metric
        factor = params.factor_of(judged, self.anchor)
        introduced_floor = self.introduced.get(reference or "", math.nan)
        introduced_factor = params.factor_of(judged, self.anchor, introduced=True)
        for p, values in deviations.items():
            if self.non_finite.get(p) or _above_noise(
                params, primary, values[primary], floor[primary], factor
            ):
                return True
            stage = self.introduced.get(p, math.nan)
            if not math.isnan(stage) and _above_noise(
                params, INTRODUCED_METRIC, stage, introduced_floor, introduced_factor
            ):
                return True
        return False
