"""Masking: anchor findings whose final output an output-level baseline judges clean.

For one (participant, input) the oracle gives a finding flag per anchor and every
output-level baseline gives a clean/not-clean verdict on the final output. The case is
*masked for a baseline* when some non-output anchor has a finding and that baseline
calls the output clean: the baseline cannot see the error anpred found inside the model.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from anpred.errors import UsageError


@dataclass(frozen=True)
class MaskingCase:
    """Anchor findings and output verdicts for one participant and one input.

    Attributes:
        participant: The participant.
        input_id: The input.
        finding_anchors: Non-output anchors with a finding, in anchor order.
        output_finding: Whether the oracle has a finding at an output anchor.
        output_clean: ``{baseline: True when it judges the final output clean}``.
    """

    participant: str
    input_id: str
    finding_anchors: tuple[str, ...]
    output_finding: bool
    output_clean: dict[str, bool]

    @property
    def masked_by(self) -> tuple[str, ...]:
        """Baselines that call the output clean although an inner anchor has a finding."""
        if not self.finding_anchors:
            return ()
        return tuple(b for b, clean in self.output_clean.items() if clean)

    @property
    def masked_in_model(self) -> bool:
        """Inner findings with no finding at the output: attenuated away inside the model."""
        return bool(self.finding_anchors) and not self.output_finding

    def to_dict(self) -> dict[str, Any]:
        """Return JSON-ready plain data."""
        return {
            "participant": self.participant,
            "input_id": str(self.input_id),
            "finding_anchors": list(self.finding_anchors),
            "output_finding": self.output_finding,
            "output_clean": dict(self.output_clean),
            "masked_by": list(self.masked_by),
            "masked_in_model": self.masked_in_model,
        }


def masking_case(
    participant: str,
    input_id: str,
    anchor_findings: Mapping[str, bool],
    output_clean: Mapping[str, bool],
    *,
    output_anchors: Collection[str] | None = None,
) -> MaskingCase:
    """Judge masking for one participant and one input.

    Args:
        participant: The participant.
        input_id: The input.
        anchor_findings: ``{anchor: oracle finding flag}`` in topological order.
        output_clean: ``{baseline name: True when it judges the final output clean}``.
        output_anchors: The anchors that are model outputs; default: the last anchor of
            ``anchor_findings``.

    Returns:
        The case, with its finding anchors and the baselines that miss them.

    Raises:
        UsageError: When there are no anchors or an output anchor is unknown.
    """
    anchors = list(anchor_findings)
    if not anchors:
        raise UsageError("masking needs at least one anchor")
    outputs = set(anchors[-1:] if output_anchors is None else output_anchors)
    unknown = outputs.difference(anchors)
    if unknown:
        raise UsageError(f"output anchors not among the anchors: {sorted(unknown)}")
    inner = tuple(a for a in anchors if a not in outputs and anchor_findings[a])
    return MaskingCase(
        participant=participant,
        input_id=input_id,
        finding_anchors=inner,
        output_finding=any(anchor_findings[a] for a in outputs),
        output_clean={str(b): bool(c) for b, c in output_clean.items()},
    )


@dataclass(frozen=True)
class MaskingSummary:
    """Masking counts per baseline over many (participant, input) cases.

    Attributes:
        baselines: Every baseline seen, in order of first appearance.
        n_cases: Cases summarised.
        n_cases_with_inner_finding: Cases with a finding at some non-output anchor.
        masked_cases: ``{baseline: cases it calls clean despite an inner finding}``.
        masked_findings: ``{baseline: inner anchor findings in those cases}``.
        n_masked_in_model: Cases with inner findings and no oracle finding at the output.
    """

    baselines: tuple[str, ...]
    n_cases: int
    n_cases_with_inner_finding: int
    masked_cases: dict[str, int]
    masked_findings: dict[str, int]
    n_masked_in_model: int

    def to_dict(self) -> dict[str, Any]:
        """Return JSON-ready plain data."""
        return {
            "baselines": list(self.baselines),
            "n_cases": self.n_cases,
            "n_cases_with_inner_finding": self.n_cases_with_inner_finding,
            "masked_cases": dict(self.masked_cases),
            "masked_findings": dict(self.masked_findings),
            "n_masked_in_model": self.n_masked_in_model,
        }


def summarize_masking(cases: Iterable[MaskingCase]) -> MaskingSummary:
    """Count masked cases and masked anchor findings per baseline.

    Args:
        cases: Cases from :func:`masking_case`.

    Returns:
        The per-baseline counts.
    """
    baselines: list[str] = []
    masked_cases: dict[str, int] = {}
    masked_findings: dict[str, int] = {}
    n_cases = n_inner = n_in_model = 0
    for case in cases:
        n_cases += 1
        n_inner += bool(case.finding_anchors)
        n_in_model += case.masked_in_model
        for baseline in case.output_clean:
            if baseline not in masked_cases:
                baselines.append(baseline)
                masked_cases[baseline] = 0
                masked_findings[baseline] = 0
        for baseline in case.masked_by:
            masked_cases[baseline] += 1
            masked_findings[baseline] += len(case.finding_anchors)
    return MaskingSummary(
        baselines=tuple(baselines),
        n_cases=n_cases,
        n_cases_with_inner_finding=n_inner,
        masked_cases=masked_cases,
        masked_findings=masked_findings,
        n_masked_in_model=n_in_model,
    )
