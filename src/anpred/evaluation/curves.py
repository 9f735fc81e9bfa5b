"""Severity curves: detection rate against fault severity, and false alarms on clean runs.

For every model, fault kind and method (anpred and each output-level baseline) a curve
runs from the mildest to the most severe fault of the grid; its first point is the
method's **false-alarm rate** on the clean fp32 run. The **half-detection severity** is the
mildest severity at which the method detects at least half of the faults injected at that
severity, the number a reader compares methods by (a method that never gets there has
none).

Severity numbers do not all grow with the fault: ``mantissa`` counts the fraction bits
kept, so 22 is the mildest and 7 (about bfloat16) the most severe
(:data:`MILDER_WHEN_HIGHER`); the error-scale kinds (``bf16``, ``fp16``, ...) grow with
their number.

False alarms are counted per (participant, input) for every method, so that the numbers
compare: anpred raises one when any anchor of a clean participant is a finding on that
input (its per-cell rate is in the false-positive table), a baseline when it fails a clean
participant (the fp32 reference, which baselines compare against, is not judged by them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anpred.evaluation.results import ModelResult
from anpred.evaluation.scoring import fault_label
from anpred.participants import REFERENCE32

MILDER_WHEN_HIGHER = frozenset({"mantissa"})
"""Fault kinds whose severity number shrinks as the fault grows (bits kept)."""

ANPRED = "anpred"
"""The method name of anpred's anchor-level detection in curves and tables."""

HALF = 0.5
"""The detection rate whose severity the table reports."""


@dataclass(frozen=True)
class Curve:
    """One method's detection rate against severity for one model and fault kind.

    Attributes:
        model: Model name.
        kind: Fault kind.
        method: ``anpred`` or a baseline's name.
        severities: From the mildest to the most severe.
        detected: Faults detected at each severity.
        faults: Faults injected at each severity.
        false_alarm: Share of clean (participant, input) pairs the method flags
            (``None`` without a clean run to count on).
    """

    model: str
    kind: str
    method: str
    severities: tuple[float, ...]
    detected: tuple[int, ...]
    faults: tuple[int, ...]
    false_alarm: float | None

    @property
    def rates(self) -> tuple[float, ...]:
        """Detection rate at each severity."""
        return tuple(d / f if f else 0.0 for d, f in zip(self.detected, self.faults, strict=True))

    @property
    def half_detection(self) -> float | None:
        """The mildest severity detecting at least :data:`HALF` of its faults."""
        return next(
            (s for s, r in zip(self.severities, self.rates, strict=True) if r >= HALF), None
        )


def mild_to_severe(kind: str, severities: Sequence[float]) -> list[float]:
    """``severities`` ordered from the mildest fault to the most severe."""
    return sorted(set(severities), reverse=kind in MILDER_WHEN_HIGHER)


def false_alarms(result: ModelResult) -> dict[str, float]:
    """Per method, the share of clean (participant, input) pairs it flags."""
    s = result.clean
    judged = [p.participant for p in s.participants if p.judged]
    inputs = s.input_ids
    flagged = {(f.participant, f.input) for f in s.findings}
    rates = {ANPRED: len(flagged) / max(1, len(judged) * len(inputs))}
    others = [p for p in judged if p != REFERENCE32]
    for name in s.baselines:
        failed = sum(len(s.failed_inputs(name, p)) for p in others)
        rates[name] = failed / max(1, len(others) * len(inputs))
    return rates


def _method_key(method: str) -> str:
    return "anpred_detected" if method == ANPRED else f"baseline:{method}"


def severity_curves(
    rows: Sequence[dict[str, Any]], results: Sequence[ModelResult] = ()
) -> list[Curve]:
    """Every (model, kind, method) curve of the campaign's fault rows.

    Args:
        rows: The fault table's rows (:func:`anpred.evaluation.scoring.fault_row`).
        results: The models' results, for the false alarms of their clean runs.
    """
    alarms = {res.model: false_alarms(res) for res in results}
    methods = [ANPRED] + sorted(
        {k.split(":", 1)[1] for r in rows for k in r if k.startswith("baseline:")}
    )
    curves = []
    for model, kind in dict.fromkeys((r["model"], fault_label(r)) for r in rows):
        sub = [r for r in rows if r["model"] == model and fault_label(r) == kind]
        order = mild_to_severe(sub[0]["kind"], [r["severity"] for r in sub])
        for method in methods:
            key = _method_key(method)
            at = [[r for r in sub if r["severity"] == s] for s in order]
            curves.append(
                Curve(
                    model=model,
                    kind=kind,
                    method=method,
                    severities=tuple(order),
                    detected=tuple(sum(bool(r.get(key)) for r in group) for group in at),
                    faults=tuple(len(group) for group in at),
                    false_alarm=alarms.get(model, {}).get(method),
                )
            )
    return curves


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f} %"


def half_detection_table(curves: Sequence[Curve]) -> str:
    """Per model, kind and method: the half-detection severity and the false-alarm rate."""
    head = [
        "model",
        "kind",
        "severities (mild → severe)",
        "method",
        "detects half from",
        "detection per severity",
        "false alarms (clean)",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in curves:
        half = c.half_detection
        lines.append(
            f"| {c.model} | {c.kind} | {', '.join(f'{s:g}' for s in c.severities)} | "
            f"{'**anpred**' if c.method == ANPRED else c.method} | "
            f"{'never' if half is None else f'{half:g}'} | "
            f"{' '.join(f'{d}/{f}' for d, f in zip(c.detected, c.faults, strict=True))} | "
            f"{_percent(c.false_alarm)} |"
        )
    return "\n".join(lines)


def severity_plot(curves: Sequence[Curve], path: Path) -> Path | None:
    """One panel per (model, kind): detection rate from mild to severe faults, each curve
    starting at its false-alarm rate on the clean run (x = "clean").
    """
    if not curves:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = list(dict.fromkeys((c.model, c.kind) for c in curves))
    cols = min(3, len(panels))
    rows_n = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(5.2 * cols, 3.8 * rows_n), squeeze=False)
    for ax, (model, kind) in zip(axes.flat, panels, strict=False):
        for c in (c for c in curves if (c.model, c.kind) == (model, kind)):
            mine = c.method == ANPRED
            (line,) = ax.plot(
                range(1, len(c.severities) + 1),
                c.rates,
                marker="o",
                markersize=3.5 if mine else 2.5,
                linewidth=2.6 if mine else 1.0,
                label=c.method,
                zorder=3 if mine else 2,
            )
            if c.false_alarm is not None:  # a separate point: clean runs are not a severity
                ax.plot([0], [c.false_alarm], marker="x", color=line.get_color(), zorder=3)
        first = next(c for c in curves if (c.model, c.kind) == (model, kind))
        ax.set_xticks(
            range(len(first.severities) + 1),
            ["clean", *(f"{s:g}" for s in first.severities)],
            fontsize=7,
        )
        ax.axhline(HALF, color="0.6", linestyle=":", linewidth=1)
        ax.axvline(0.5, color="0.8", linewidth=0.8)
        direction = "bits kept" if kind in MILDER_WHEN_HIGHER else "error scale"
        ax.set_xlabel(f"{kind} severity ({direction}), mild → severe")
        ax.set_ylabel("detection / false-alarm rate")
        ax.set_ylim(-0.05, 1.05)
        ax.set_title(f"{Path(model).stem}: {kind}", fontsize=9)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=6, loc="best")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
