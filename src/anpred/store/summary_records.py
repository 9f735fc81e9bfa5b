"""The typed records of a run's summary (``summary.json``); see :mod:`anpred.store.summary`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from anpred.store.outcome import Status
from anpred.store.summary_fields import Fields, Json, Table, bad


@dataclass(frozen=True)
class ModelInfo:
    """The analysed model: name or path, anchor granularity, weights, input shape, opset."""

    name: str
    granularity: str
    weights: str
    input_shape: tuple[int, ...]
    opset: int
    #: The model's own inputs when several are packed into the one graph input
    #: (``{"name", "dtype", "shape"}`` each); empty for a model with one input.
    inputs: tuple[Json, ...] = ()

    def to_dict(self) -> Json:
        """JSON form (``inputs`` only when the model's inputs are packed)."""
        data: Json = {
            "name": self.name,
            "granularity": self.granularity,
            "weights": self.weights,
            "input_shape": list(self.input_shape),
            "opset": self.opset,
        }
        if self.inputs:
            data["inputs"] = [dict(i) for i in self.inputs]
        return data

    @classmethod
    def from_dict(cls, data: Any) -> ModelInfo:
        """Read from JSON (a mapping, or the reader of one)."""
        f = Fields.of(data)
        return cls(
            f.need("name", str),
            f.need("granularity", str),
            f.need("weights", str),
            tuple(f.need("input_shape", list)),
            f.need("opset", int),
            tuple(f.get("inputs", [], list)),
        )


@dataclass(frozen=True)
class InputRecord:
    """One input: its id and where it came from (image path, or empty)."""

    id: str
    source: str = ""


@dataclass(frozen=True)
class Anchor:
    """One anchor: key, ONNX name, module path, group, reference shape."""

    key: str
    anchor: str
    module: str | None
    group: str | None
    shape: tuple[int, ...] | None

    def to_dict(self) -> Json:
        """JSON form."""
        return {
            "key": self.key,
            "anchor": self.anchor,
            "module": self.module,
            "group": self.group,
            "shape": None if self.shape is None else list(self.shape),
        }

#: Keys the analysis adds to a participant's record (kept in :attr:`ParticipantRecord.extra`)
#: when it compares releases of one library bit for bit (:mod:`anpred.pipeline.identical`),
#: read by the report (:mod:`anpred.report.identical`).
#: The participants whose anchors equal this one's bit for bit.
KEY = "identical_anchors"
#: How the comparison was made (``captures`` or ``deviations``).
BY_KEY = "identical_by"
#: Other release → ``{"anchor": the first anchor that differs, "index": its place in the
#: anchor order (0: the first), "max_abs_diff": the largest difference there, "stage_ops":
#: {op type: count} of the stage that ends there, "operator": that node when the stage has
#: one operator}``.
DIFFERS_KEY = "release_differs_at"


@dataclass(frozen=True)
class ParticipantRecord:
    """What one participant's worker did (``participants.json``) plus the analysis' records.

    ``extra`` keeps worker fields this schema does not name, so that they survive a
    round trip.
    """

    participant: str
    library: str
    status: Status
    step: str = ""
    message: str = ""
    version: str = ""
    settings: Json = field(default_factory=dict)
    timings: Json = field(default_factory=dict)
    returncode: int | None = None
    inputs_done: int = 0
    usage_error: bool = False
    status_detail: Json = field(default_factory=dict)
    observer: Json = field(default_factory=dict)
    extra: Json = field(default_factory=dict)

    _KEYS = (
        "participant", "library", "status", "step", "message", "version", "settings",
        "timings", "returncode", "inputs_done", "usage_error", "status_detail", "observer",
    )  # fmt: skip

    @property
    def failed(self) -> bool:
        """Whether the worker crashed, timed out or raised."""
        return self.status.failed

    @property
    def judged(self) -> bool:
        """Whether the worker produced results the oracle judges (ok or non-finite)."""
        return self.status.finished

    def to_dict(self) -> Json:
        """JSON form."""
        data = {k: getattr(self, k) for k in self._KEYS}
        data["status"] = self.status.value
        return {**data, **self.extra}

    @classmethod
    def from_dict(cls, data: Any) -> ParticipantRecord:
        """Read from JSON (a mapping, or the reader of one)."""
        f = Fields.of(data)
        status = f.need("status", str)
        try:
            state = Status(status)
        except ValueError:
            raise bad(f.at("status"), f"is {status!r}, not a known status") from None
        name = f.need("participant", str)
        detail = f.get("status_detail", {}, dict) or {}
        # early version-1 summaries kept the worker's fields only in ``status_detail``
        known = {k: f.get(k, detail.get(k), str) for k in ("step", "version")}
        return cls(
            participant=name,
            library=f.get("library", name.partition("[")[0], str),
            status=state,
            step=known["step"] or "",
            message=f.get("message", "", str),
            version=known["version"] or "",
            settings=f.get("settings", detail.get("settings"), dict) or {},
            timings=f.get("timings", detail.get("timings"), dict) or {},
            returncode=f.get("returncode", None, int),
            inputs_done=f.get("inputs_done", 0, int),
            usage_error=f.get("usage_error", False, bool),
            status_detail=detail,
            observer=f.get("observer", {}, dict) or {},
            extra=f.rest(cls._KEYS),
        )


@dataclass(frozen=True)
class Finding:
    """A (participant, anchor, input) whose deviation is an outlier of its population.

    Attributes:
        participant: The deviating participant.
        anchor: The anchor key.
        input: The input id.
        metrics: The oracle's statistics (``metric``, ``value``, thresholds, ``exceeded``...).
        corroborating: Secondary metrics that also flag it.
    """

    participant: str
    anchor: str
    input: str
    metrics: Json
    corroborating: tuple[str, ...] = ()

    def to_dict(self) -> Json:
        """JSON form."""
        return {
            "participant": self.participant,
            "anchor": self.anchor,
            "input": self.input,
            "metrics": self.metrics,
            "corroborating": list(self.corroborating),
        }

    @classmethod
    def from_dict(cls, data: Any) -> Finding:
        """Read from JSON (a mapping, or the reader of one)."""
        f = Fields.of(data)
        return cls(
            f.need("participant", str),
            f.need("anchor", str),
            f.need("input", str),
            f.need("metrics", dict),
            tuple(f.need("corroborating", list)),
        )


@dataclass(frozen=True)
class OracleSettings:
    """The oracle's parameters the run was judged with.

    ``threshold_rule`` names the noise rule: ``fixed`` (``noise_factor`` times the floor at
    every anchor) or ``lognormal-tolerance`` (per-anchor factors calibrated on clean runs,
    listed in ``calibration``; ``docs/oracle.md``); ``None`` for summaries written before
    the key existed (they were judged with the fixed rule).
    """

    primary_metric: str
    outlier_k: float
    noise_factor: float
    mad_floor_rel: float
    threshold_rule: str | None = None
    calibration: Json | None = None

    def to_dict(self) -> Json:
        """JSON form (the optional keys only when known)."""
        return {k: v for k, v in vars(self).items() if v is not None}


@dataclass(frozen=True)
class NoiseFloor:
    """The fp32 reference's distance from fp64 at one anchor: median and per input."""

    median: float | None
    per_input: dict[str, float | None]


@dataclass(frozen=True)
class Deviation:
    """Median deviation per participant and anchor over the inputs (primary metric)."""

    vs_consensus: Table
    vs_fp64: Table


@dataclass(frozen=True)
class Blame:
    """Library blame by consensus: per input, who deviates first (see ``library_blame``)."""

    participants: tuple[str, ...]
    counts: dict[str, int]
    sole_counts: dict[str, int]
    anchor_counts: dict[str, dict[str, int]]
    n_inputs: int
    n_clean: int
    n_joint: int
    records: list[Json]

    def to_dict(self) -> Json:
        """JSON form."""
        return {
            "participants": list(self.participants),
            "counts": self.counts,
            "sole_counts": self.sole_counts,
            "anchor_counts": self.anchor_counts,
            "n_inputs": self.n_inputs,
            "n_clean": self.n_clean,
            "n_joint": self.n_joint,
            "records": self.records,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Blame:
        """Read from JSON (a mapping, or the reader of one)."""
        f = Fields.of(data)
        return cls(
            tuple(f.need("participants", list)),
            f.need("counts", dict),
            f.need("sole_counts", dict),
            f.need("anchor_counts", dict),
            f.need("n_inputs", int),
            f.need("n_clean", int),
            f.need("n_joint", int),
            f.need("records", list),
        )


@dataclass(frozen=True)
class ParticipantLocalization:
    """Where one participant's error appears and which stage introduces it.

    Attributes:
        emergence: Per input, the first anchor with a finding (``None``: clean).
        emergence_distribution: Emergence counts over the inputs (``most_common``...).
        introduced: Per stage, the error it adds by itself (stage isolation, median).
        top_stage: The stage introducing most of the error.
        concentration: ``ranking``, ``total``, ``top_shares``, ``gini`` (or ``None``).
    """

    emergence: dict[str, str | None]
    emergence_distribution: Json | None
    introduced: dict[str, float | None]
    top_stage: str | None
    concentration: Json | None

    @property
    def stage_ranking(self) -> list[str]:
        """Stages by introduced error, largest first (empty without stage isolation)."""
        return [r["stage"] for r in (self.concentration or {}).get("ranking", [])]

    @classmethod
    def from_dict(cls, data: Any) -> ParticipantLocalization:
        """Read from JSON (a mapping, or the reader of one)."""
        f = Fields.of(data)
        return cls(
            f.need("emergence", dict),
            f.need("emergence_distribution", dict),
            f.need("introduced", dict),
            f.need("top_stage", str),
            f.need("concentration", dict),
        )


@dataclass(frozen=True)
class Localization:
    """Library blame and per-participant localization."""

    blame: Blame
    participants: dict[str, ParticipantLocalization]

    def to_dict(self) -> Json:
        """JSON form."""
        return {
            "blame": self.blame.to_dict(),
            "participants": {p: vars(v).copy() for p, v in self.participants.items()},
        }


@dataclass(frozen=True)
class Propagation:
    """One participant's deviation along the anchors and at its worst anchor."""

    profiles: dict[str, Json]
    direction_changes: float | None
    worst_anchor: str
    dimension_at_worst: dict[str, float | None]


@dataclass(frozen=True)
class Characterization:
    """Propagation per participant, and masking (anchor findings with a clean output)."""

    propagation: dict[str, Propagation]
    masking: Json
    masking_cases: list[Json]

    def to_dict(self) -> Json:
        """JSON form."""
        return {
            "propagation": {p: vars(v).copy() for p, v in self.propagation.items()},
            "masking": self.masking,
            "masking_cases": self.masking_cases,
        }


@dataclass(frozen=True)
class BaselineVerdict:
    """An output-level baseline's verdict on one participant over all inputs."""

    passed: bool
    failed_inputs: tuple[str, ...] = ()
