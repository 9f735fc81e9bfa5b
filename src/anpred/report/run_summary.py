"""A read-only, crash-proof view of a run's ``summary.json`` for the report renderers.

A summary may be partial: an interrupted run, a participant that crashed before its
first capture, an analysis that stopped early, or an older layout. Every accessor here
returns an empty value (``None``, ``[]``, ``{}``) for a missing, ``null`` or ill-typed
entry instead of raising, so the terminal and HTML renderers never need to guard.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from anpred.store.outcome import FAILED_STATES
from anpred.store.summary import Summary

BASELINE_SHORT_NAMES = {
    "polygraphy_allclose": "allclose",
    "max_abs_1e-3": "abs<1e-3",
    "max_abs_1e-4": "abs<1e-4",
    "max_abs_1e-5": "abs<1e-5",
    "cradle_dmad": "D_MAD",
    "dynamo_same": "dynamo",
}
"""Column titles for the registered output-level baselines; others keep their name."""


def as_dict(value: Any) -> dict[str, Any]:
    """Return ``value`` if it is a mapping (as a dict with string keys), else ``{}``."""
    return {str(k): v for k, v in value.items()} if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    """Return ``value`` if it is a list or tuple, else ``[]``."""
    return list(value) if isinstance(value, list | tuple) else []


def as_float(value: Any) -> float | None:
    """Return ``value`` as a finite float, or ``None`` (missing, NaN, inf, not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def as_text(value: Any, default: str = "") -> str:
    """Return ``value`` as a string; ``None`` becomes ``default``."""
    return default if value is None else str(value)


def input_list(model: Any) -> str:
    """``ids int64 1x12, mask float32 1x12`` for a model whose several inputs are packed;
    empty for a model with one input (the summary's ``model.inputs``).
    """
    parts = []
    for item in as_list(as_dict(model).get("inputs")):
        item = as_dict(item)
        shape = "x".join(str(d) for d in as_list(item.get("shape")))
        parts.append(f"{as_text(item.get('name'))} {as_text(item.get('dtype'))} {shape}".strip())
    return ", ".join(parts)


def short_baseline_name(name: str) -> str:
    """Short column title of a baseline (``polygraphy_allclose`` → ``allclose``)."""
    return BASELINE_SHORT_NAMES.get(name, name)


@dataclass(frozen=True)
class ParticipantView:
    """What the summary says about one participant's worker, as the renderers show it.

    Not :class:`anpred.store.summary_records.ParticipantRecord` (the typed record): a view
    of JSON that may be partial or foreign, so its ``status`` is any text (``unknown`` for
    a participant known only from the analysis), which the store's ``Status`` cannot hold.

    Attributes:
        name: Participant name (``library[config]``).
        library: Library name.
        status: Worker state (``ok``, ``non-finite``, ``crash``, ``timeout``, ``error``...).
        step: The step the worker reached (``done``, or where it failed).
        message: The worker's error message, if any.
        version: Library version string.
        settings: Library settings the worker ran with.
        timings: Seconds per phase (import, load, inference...).
        observer: Observer-effect record: ``inputs``, ``identical``, ``max_abs_diff``.
    """

    name: str
    library: str
    status: str
    step: str = ""
    message: str = ""
    version: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)
    observer: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """Whether the worker crashed, timed out or raised."""
        return self.status in FAILED_STATES

    @property
    def short_version(self) -> str:
        """The version without build suffixes (``2026.4.1-22982-e21...`` → ``2026.4.1``)."""
        return self.version.split("-")[0] if len(self.version) > 16 else self.version

    @classmethod
    def from_summary(cls, record: Mapping[str, Any]) -> ParticipantView:
        """Build from one entry of ``summary["participants"]`` (top level, then status_detail)."""
        detail = as_dict(record.get("status_detail"))

        def pick(key: str, detail_key: str | None = None) -> Any:
            value = record.get(key)
            return value if value not in (None, "", {}) else detail.get(detail_key or key)

        name = as_text(record.get("participant") or detail.get("participant"), "?")
        return cls(
            name=name,
            library=as_text(pick("library"), name.partition("[")[0]),
            status=as_text(pick("status", "state"), "unknown"),
            step=as_text(pick("step")),
            message=as_text(pick("message")),
            version=as_text(pick("version")),
            settings=as_dict(pick("settings")),
            timings=as_dict(pick("timings")),
            observer=as_dict(record.get("observer")),
        )


class RunSummary:
    """Tolerant accessors over a run's summary, for the renderers.

    The pipeline hands the renderers the typed :class:`~anpred.store.summary.Summary`
    (``typed``); ``anpred report`` and tests may also hand them raw ``summary.json`` content
    that is partial or foreign (an interrupted run, an older layout), which must still
    render -- so the accessors read its JSON form and never raise.

    Args:
        summary: A :class:`~anpred.store.summary.Summary`, or ``summary.json`` content,
            possibly partial; anything else is treated as empty.
    """

    def __init__(self, summary: Summary | Any) -> None:
        self.typed = summary if isinstance(summary, Summary) else None
        self.raw = summary.to_dict() if isinstance(summary, Summary) else as_dict(summary)
        #: Finding (``participant@stage``) → its reproducer's record (``repro/index.json``,
        #: ``anpred repro``), with ``path``: its README relative to the run directory.
        self.reproducers: dict[str, dict[str, Any]] = {}

    def section(self, key: str) -> dict[str, Any]:
        """Return a top-level mapping entry (``{}`` when missing or not a mapping)."""
        return as_dict(self.raw.get(key))

    @property
    def model(self) -> dict[str, Any]:
        """The ``model`` record."""
        return self.section("model")

    @property
    def model_name(self) -> str:
        """The model's name or path."""
        return as_text(self.model.get("name") or self.section("options").get("model"), "?")

    @property
    def inputs(self) -> list[dict[str, str]]:
        """Inputs as ``{"id", "source"}`` records, in run order."""
        result = []
        for entry in as_list(self.raw.get("inputs")):
            if isinstance(entry, Mapping):
                result.append({"id": as_text(entry.get("id"), "?"),
                               "source": as_text(entry.get("source"))})
            elif entry is not None:
                result.append({"id": str(entry), "source": ""})
        return result

    @property
    def input_ids(self) -> list[str]:
        """Input ids in run order."""
        return [i["id"] for i in self.inputs]

    @property
    def anchor_records(self) -> list[dict[str, Any]]:
        """Anchor records (``key``, ``anchor``, ``module``, ``group``, ``shape``)."""
        return [as_dict(a) for a in as_list(self.raw.get("anchors")) if isinstance(a, Mapping)]

    @property
    def anchors(self) -> list[str]:
        """Anchor keys in topological order (from ``anchors``, else the deviation tables)."""
        keys = [as_text(a.get("key") or a.get("anchor")) for a in self.anchor_records]
        keys = [k for k in keys if k]
        if keys:
            return keys
        seen: dict[str, None] = {}
        for table in (self.deviation("vs_consensus"), self.deviation("vs_fp64")):
            for row in table.values():
                seen.update(dict.fromkeys(row))
        seen.update(dict.fromkeys(self.noise_floor()))
        return list(seen)

    def anchor_shape(self, anchor: str) -> list[int]:
        """Return the reference shape of ``anchor`` (``[]`` when unknown)."""
        for record in self.anchor_records:
            if record.get("key") == anchor or record.get("anchor") == anchor:
                return [int(d) for d in as_list(record.get("shape")) if isinstance(d, int)]
        return []

    @property
    def participants(self) -> list[ParticipantView]:
        """Participant records, plus participants known only from the analysis."""
        records = [ParticipantView.from_summary(as_dict(r))
                   for r in as_list(self.raw.get("participants")) if isinstance(r, Mapping)]
        known = {r.name for r in records}
        for name in self.judged:
            if name not in known:
                records.append(ParticipantView(name, name.partition("[")[0], "unknown"))
                known.add(name)
        return records

    @property
    def judged(self) -> list[str]:
        """Participants the oracle judged (those with a deviation row)."""
        names: dict[str, None] = {}
        for kind in ("vs_consensus", "vs_fp64"):
            names.update(dict.fromkeys(self.deviation(kind)))
        names.update(dict.fromkeys(self.localization_participants()))
        return list(names)

    @property
    def failed(self) -> list[ParticipantView]:
        """Participants whose worker crashed, timed out or raised."""
        return [p for p in self.participants if p.failed]

    @property
    def pairwise(self) -> bool:
        """Whether the consensus degenerated to a pairwise comparison."""
        return self.raw.get("pairwise") is True

    @property
    def reference(self) -> dict[str, str]:
        """Reference participant names: ``{"fp64": ..., "fp32": ...}``."""
        return {k: as_text(v) for k, v in self.section("reference").items()}

    @property
    def wall_seconds(self) -> float | None:
        """Wall-clock seconds of the whole run, when recorded."""
        return as_float(self.raw.get("wall_seconds"))

    @property
    def findings(self) -> list[dict[str, Any]]:
        """Findings (``participant``, ``anchor``, ``input``, ``metrics``, ``corroborating``)."""
        return [as_dict(f) for f in as_list(self.raw.get("findings")) if isinstance(f, Mapping)]

    @property
    def findings_per_participant(self) -> Counter[str]:
        """Number of findings per participant."""
        return Counter(as_text(f.get("participant"), "?") for f in self.findings)

    def finding_cells(self) -> set[tuple[str, str]]:
        """(participant, anchor) pairs with at least one finding."""
        return {(as_text(f.get("participant")), as_text(f.get("anchor"))) for f in self.findings}

    def deviation(self, kind: str) -> dict[str, dict[str, float | None]]:
        """Median deviation per participant and anchor; ``kind`` is vs_consensus or vs_fp64."""
        table = as_dict(self.section("deviation").get(kind))
        return {p: {a: as_float(v) for a, v in as_dict(row).items()} for p, row in table.items()}

    def noise_floor(self) -> dict[str, float | None]:
        """Median fp32-vs-fp64 noise floor per anchor."""
        return {a: as_float(as_dict(v).get("median")) if isinstance(v, Mapping) else as_float(v)
                for a, v in self.section("noise_floor").items()}

    def localization_participants(self) -> dict[str, dict[str, Any]]:
        """``localization.participants`` (per participant: emergence, introduced, ...)."""
        return {p: as_dict(v)
                for p, v in as_dict(self.section("localization").get("participants")).items()}

    def localization_of(self, participant: str) -> dict[str, Any]:
        """Return the localization record of one participant."""
        return self.localization_participants().get(participant, {})

    def emergence(self, participant: str) -> str | None:
        """Return the most common emergence anchor (``None``: no finding or no data)."""
        dist = as_dict(self.localization_of(participant).get("emergence_distribution"))
        value = dist.get("most_common")
        return str(value) if value else None

    def top_stage(self, participant: str) -> str | None:
        """Return the stage that introduces most of the participant's error (isolation)."""
        value = self.localization_of(participant).get("top_stage")
        return str(value) if value else None

    def introduced(self, participant: str) -> dict[str, float | None]:
        """Introduced error per stage (median over inputs) from stage isolation."""
        raw = as_dict(self.localization_of(participant).get("introduced"))
        return {a: as_float(v) for a, v in raw.items()}

    def concentration(self, participant: str) -> dict[str, Any]:
        """Stage concentration (``ranking``, ``top_shares``, ``gini``) of one participant."""
        return as_dict(self.localization_of(participant).get("concentration"))

    def propagation(self) -> dict[str, dict[str, Any]]:
        """``characterization.propagation`` per participant."""
        section = as_dict(self.section("characterization").get("propagation"))
        return {p: as_dict(v) for p, v in section.items()}

    @property
    def masking(self) -> dict[str, Any]:
        """``characterization.masking`` (counts of anchor findings with a clean output)."""
        return as_dict(self.section("characterization").get("masking"))

    @property
    def masking_cases(self) -> list[dict[str, Any]]:
        """Masked (participant, input) cases."""
        cases = as_list(self.section("characterization").get("masking_cases"))
        return [as_dict(c) for c in cases if isinstance(c, Mapping)]

    @property
    def baseline_names(self) -> list[str]:
        """Output-level baselines present in the summary, in order."""
        return list(self.section("baselines"))

    def baseline_verdict(self, baseline: str, participant: str) -> tuple[bool | None, list[str]]:
        """Return a baseline's verdict for a participant: (passed or ``None``, failed inputs)."""
        entry = as_dict(as_dict(self.section("baselines").get(baseline)).get(participant))
        passed = entry.get("passed")
        failed = [str(i) for i in as_list(entry.get("failed_inputs"))]
        return (passed if isinstance(passed, bool) else None), failed

    @property
    def alignment(self) -> dict[str, dict[str, list[str]]]:
        """Alignment steps per participant and anchor."""
        return {p: {a: [str(s) for s in as_list(steps)] for a, steps in as_dict(row).items()}
                for p, row in self.section("alignment").items()}

    @property
    def unaligned(self) -> list[dict[str, Any]]:
        """Items that could not be aligned or compared, with their reason."""
        return [as_dict(u) for u in as_list(self.raw.get("unaligned")) if isinstance(u, Mapping)]


def noise_rule_line(oracle: Mapping[str, Any]) -> str | None:
    """One line naming the noise rule that judged the run and where its calibration came
    from (``None`` for summaries written before the rule was recorded).
    """
    rule = oracle.get("threshold_rule")
    if not isinstance(rule, str):
        return None
    calibration = as_dict(oracle.get("calibration"))
    if not calibration:
        factor = as_float(oracle.get("noise_factor"))
        return f"{rule}: {factor or 10:g}x the noise floor (fp32 vs fp64) at every anchor"
    factors = [f for f in map(as_float, as_dict(calibration.get("factor")).values()) if f]
    spread = f"{min(factors):.2g}-{max(factors):.2g}" if factors else "none"
    source = as_text(calibration.get("source")) or "attached to the run directory"
    alpha = as_float(calibration.get("false_alarm_per_cell"))
    target = f", false-alarm target {alpha:g} per cell" if alpha is not None else ""
    return f"{rule}: per-anchor factors {spread}{target}; from {source}"


def precision_lines(precision: Mapping[str, Any]) -> list[str]:
    """One line per precision class when a run mixes classes (none for an all-fp32 run):
    its members, what it is judged against and its median floor at the last anchor.
    """
    classes = as_dict(precision.get("classes"))
    if set(classes) <= {"fp32"}:
        return []
    lines = []
    for name, record in classes.items():
        record = as_dict(record)
        members = [str(m) for m in record.get("members") or []]
        floors = [as_float(v) for v in as_dict(record.get("floor")).values()]
        last = next((f for f in reversed(floors) if f is not None), None)
        at = f", floor at the output {last:.1e}" if last is not None else ""
        factor = as_float(record.get("factor")) or 0
        against = (
            f"vs each other, {factor:g}x the fp32 reference's error"
            if name == "fp32"
            else f"vs {as_text(record.get('reference'))} (ideal {name} arithmetic), "
            f"{factor:g}x its error"
        )
        lines.append(f"{name}: {len(members)} ({', '.join(members)}); {against}{at}")
    return lines


def precision_class(precision: Mapping[str, Any], participant: str) -> str:
    """The class ``participant`` was judged in (``ideal bf16`` for an ideal reference,
    ``""`` when the summary does not say).
    """
    record = as_dict(as_dict(precision.get("participants")).get(participant))
    if record:
        return as_text(record.get("class")) or ""
    for name, entry in as_dict(precision.get("classes")).items():
        if as_dict(entry).get("reference") == participant and name != "fp32":
            return f"ideal {name}"
    return ""
