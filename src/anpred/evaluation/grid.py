"""The evaluation grid: which models, participants, stages, fault kinds and severities.

A grid is a JSON file (``anpred eval --config grid.json``); every key is optional and
falls back to :data:`DEFAULT_GRID`, which finishes in minutes on a laptop CPU::

    {"models": ["yolov8n"], "libs": "all", "faulty": ["onnxruntime"],
     "stages": "all", "images": 2,
     "faults": [{"kind": "bf16", "op": "*", "severities": [1]},
                {"kind": "mantissa", "op": "*", "severities": [7, 10, 14]}]}

``stages: "all"`` means every anchor but the final output. ``"faults": []`` injects
nothing. ``configurations`` (e.g. ``["torch[bf16]", "jax[nojit]"]``) adds the
real-configuration study: per model, one run of the clean participants plus these
configurations, no injection (:data:`STUDY_CONFIGURATIONS` lists the usual ones;
``configs/study.json`` runs the study on every zoo model). ``sizes`` (e.g. ``[320, 480,
640]``) adds an input-size sweep per model (``anpred sweep``) for dimension sensitivity.
A fault axis may also take ``"nodes": K`` (a fault in **one operator**: K nodes of each
stage drawn with a fixed seed among those the kind applies to, each its own fault run,
instead of every matching node of the stage) and ``"partial": "above:2"`` (only the
elements above twice the tensor's RMS are faulted, ``anpred inject --partial``). ``faulty``
may name reduced-precision configurations (``jax[bf16]``): their faults are judged against
their class's ideal reference (``docs/oracle.md``). ``configs/harder.json`` combines them
with ULP-level mantissa severities (19-22 bits kept).
``calibration`` (default 4) is the number of seeded synthetic images of the clean run per
model the oracle's per-anchor thresholds are learnt from (``docs/oracle.md``); ``0`` judges
with the fixed noise factor.
The full grid of the paper's evaluation (six models, every library, every kind) is the
same file with longer lists.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anpred.errors import UsageError
from anpred.participants import parse_participant


@dataclass(frozen=True)
class FaultAxis:
    """One fault kind on one op type, at several severities.

    Attributes:
        kind: Registered fault kind.
        op: ONNX op type, ``"*"`` for any the kind applies to.
        severities: Severities, one fault run each.
        nodes: 0: the fault hits every matching node of the stage; K > 0: K single-node
            faults per stage, the nodes drawn with a fixed seed (:func:`sample_nodes`).
        partial: ``None``, or which elements the fault hits (``"above:K"``: those above K
            times the tensor's RMS; :class:`~anpred.inject.spec.FaultSpec`).
    """

    kind: str
    op: str = "*"
    severities: tuple[float, ...] = (1,)
    nodes: int = 0
    partial: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``nodes`` and ``partial`` only when set)."""
        data: dict[str, Any] = {
            "kind": self.kind,
            "op": self.op,
            "severities": list(self.severities),
        }
        if self.nodes:
            data["nodes"] = self.nodes
        if self.partial is not None:
            data["partial"] = self.partial
        return data


@dataclass(frozen=True)
class EvalGrid:
    """What ``anpred eval`` sweeps."""

    models: tuple[str, ...] = ("yolov8n",)
    libs: str = "all"
    faulty: tuple[str, ...] = ("onnxruntime",)
    stages: tuple[str, ...] | str = "all"
    images: int = 2
    granularity: str = "stage"
    configurations: tuple[str, ...] = ()
    sizes: tuple[int, ...] = ()
    calibration: int = 4
    faults: tuple[FaultAxis, ...] = field(
        default_factory=lambda: (
            FaultAxis("bf16", "*", (1,)),
            FaultAxis("mantissa", "*", (7, 10, 14)),
        )
    )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (written next to the results)."""
        return {
            "models": list(self.models),
            "libs": self.libs,
            "faulty": list(self.faulty),
            "stages": self.stages if isinstance(self.stages, str) else list(self.stages),
            "images": self.images,
            "granularity": self.granularity,
            "configurations": list(self.configurations),
            "sizes": list(self.sizes),
            "calibration": self.calibration,
            "faults": [f.to_dict() for f in self.faults],
        }


DEFAULT_GRID = EvalGrid()

#: The precision configurations of the real-configuration study (``configs/study.json``).
STUDY_CONFIGURATIONS = (
    "torch[compile]",
    "torch[bf16]",
    "onnxruntime[O0]",
    "onnxruntime[O1]",
    "openvino[bf16]",
    "tensorflow[xla]",
    "tensorflow[onednn-off]",
    "tensorflow[bf16]",
    "jax[nojit]",
    "jax[bf16]",
    "paddle[static]",
)


def fp32_configurations(configurations: tuple[str, ...]) -> tuple[str, ...]:
    """The configurations that compute in fp32 (their declared precision,
    :mod:`anpred.library.precision`): legitimate implementations whose spread a
    calibration of the oracle's thresholds must include.
    """
    from anpred.participants import precision_of

    return tuple(c for c in configurations if not precision_of(c).reduced)


def _check_models(models: tuple[str, ...]) -> None:
    """Refuse unknown models before hours of work on the others.

    Raises:
        UsageError: A name that is neither a zoo model nor an existing ``.onnx`` file.
    """
    from anpred.zoo.registry import model_names

    known = model_names()
    for model in models:
        if model.endswith(".onnx"):
            if not Path(model).is_file():
                hint = (
                    " (scripts/fetch-trained-models.sh fetches models/)"
                    if model.startswith("models/")
                    else ""
                )
                raise UsageError(f"grid model {model!r}: no such ONNX file{hint}")
        elif model not in known:
            raise UsageError(f"grid model {model!r} is not in the zoo ({', '.join(known)})")


#: Largest grid file read (bytes); real grids are a few hundred bytes, configs/ < 2 KB.
MAX_GRID_BYTES = 1 << 20


def _strings(data: dict[str, Any], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    """A list of strings under ``key`` (default when absent).

    Raises:
        UsageError: Not a list of strings.
    """
    value = data.get(key, list(default))
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"grid key {key!r} takes a list of strings, got {value!r:.80}")
    return tuple(value)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _faults(data: dict[str, Any]) -> tuple[FaultAxis, ...]:
    """The fault axes, each kind known and each severity valid for it.

    Raises:
        UsageError: A malformed axis, an unknown kind or an invalid severity.
    """
    if "faults" not in data:
        return DEFAULT_GRID.faults
    from anpred.inject.spec import fault_kind

    raw = data["faults"]
    if not isinstance(raw, list):
        raise UsageError(f"grid key 'faults' takes a list of objects, got {raw!r:.80}")
    axes = []
    for entry in raw:
        if not isinstance(entry, dict) or set(entry) - set(_AXIS_KEYS):
            raise UsageError(
                f"each grid fault is an object with {', '.join(map(repr, _AXIS_KEYS))}, "
                f"got {entry!r:.80}"
            )
        kind, op = entry.get("kind"), entry.get("op", "*")
        severities = entry.get("severities", [1])
        if not isinstance(kind, str) or not isinstance(op, str):
            raise UsageError(f"grid fault 'kind' and 'op' are strings, got {entry!r:.80}")
        if not isinstance(severities, list) or not severities:
            raise UsageError(f"grid fault 'severities' is a non-empty list, got {entry!r:.80}")
        known = fault_kind(kind)
        for severity in severities:
            if not _number(severity):
                raise UsageError(f"grid fault {kind}: severity {severity!r:.40} is not a number")
            known.check_severity(severity)
        nodes, partial = entry.get("nodes", 0), entry.get("partial")
        if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 0:
            raise UsageError(f"grid fault 'nodes' is an integer >= 0, got {nodes!r:.40}")
        if partial is not None:
            from anpred.inject.spec import FaultSpec

            FaultSpec.from_dict(  # checks the partial string against the kind
                {"stage": "s", "op": op, "kind": kind, "severity": severities[0],
                 "partial": partial}
            )  # fmt: skip
        axes.append(FaultAxis(kind, op, tuple(severities), nodes, partial))
    return tuple(axes)


#: Keys of a grid fault axis.
_AXIS_KEYS = ("kind", "op", "severities", "nodes", "partial")


def sample_nodes(candidates: list[str], k: int, salt: str) -> list[str]:
    """``k`` of ``candidates`` (graph order kept), drawn with a seed made of ``salt`` (the
    model, stage, kind and op), so a campaign resumed elsewhere draws the same nodes.
    """
    import hashlib
    import random

    if k >= len(candidates):
        return list(candidates)
    seed = int.from_bytes(hashlib.sha256(salt.encode()).digest()[:8], "big")
    chosen = set(random.Random(seed).sample(range(len(candidates)), k))
    return [c for i, c in enumerate(candidates) if i in chosen]


def load_grid(path: str | Path | None) -> EvalGrid:
    """Read a grid file (JSON); missing keys take the defaults.

    Every value is checked here, before the first run: a typo must not surface hours into
    a campaign.

    Raises:
        UsageError: Unreadable or oversized file, unknown keys, or a value of the wrong type.
    """
    if path is None:
        return DEFAULT_GRID
    try:
        size = Path(path).stat().st_size
        if size > MAX_GRID_BYTES:
            raise UsageError(
                f"grid {str(path)!r} is {size} bytes; a grid file holds at most "
                f"{MAX_GRID_BYTES} (it lists axes, not runs)"
            )
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as err:  # JSONDecodeError, UnicodeDecodeError
        message = " ".join(str(err).split())[:200] or err.__class__.__name__
        raise UsageError(f"cannot read grid {str(path)!r}: {message}") from None
    if not isinstance(data, dict):
        raise UsageError(f"grid {str(path)!r} must hold a JSON object, not {type(data).__name__}")
    known = set(DEFAULT_GRID.to_dict())
    unknown = set(data) - known
    if unknown:
        raise UsageError(f"unknown grid key(s) {sorted(unknown)}; known: {sorted(known)}")
    models = _strings(data, "models", DEFAULT_GRID.models)
    _check_models(models)
    libs = data.get("libs", DEFAULT_GRID.libs)
    if not isinstance(libs, str):
        raise UsageError(f"grid key 'libs' takes a string like 'torch,jax', got {libs!r:.80}")
    faulty = _strings(data, "faulty", DEFAULT_GRID.faulty)
    configurations = _strings(data, "configurations", ())
    for name in (*faulty, *configurations):
        parse_participant(name)
    stages = data.get("stages", "all")
    if stages != "all":
        stages = _strings(data, "stages", ())
    images = data.get("images", DEFAULT_GRID.images)
    if not isinstance(images, int) or isinstance(images, bool) or images < 1:
        raise UsageError(f"grid key 'images' takes a whole number >= 1, got {images!r:.40}")
    granularity = data.get("granularity", DEFAULT_GRID.granularity)
    if granularity not in ("stage", "layer"):
        raise UsageError(f"grid key 'granularity' is 'stage' or 'layer', got {granularity!r:.40}")
    sizes = data.get("sizes", [])
    if not isinstance(sizes, list) or (
        sizes
        and (
            len(sizes) < 2
            or any(not isinstance(v, int) or isinstance(v, bool) or v <= 0 or v % 32 for v in sizes)
        )
    ):
        raise UsageError(f"grid sizes must be two or more multiples of 32, got {sizes!r:.80}")
    calibration = data.get("calibration", DEFAULT_GRID.calibration)
    if not isinstance(calibration, int) or isinstance(calibration, bool) or calibration < 0:
        raise UsageError(
            f"grid key 'calibration' takes a whole number >= 0, got {calibration!r:.40}"
        )
    if calibration == 1:
        raise UsageError("grid key 'calibration': one input is too few; use 0 (none) or >= 2")
    return EvalGrid(
        models=models,
        libs=libs,
        faulty=faulty,
        stages=stages,
        images=images,
        granularity=granularity,
        configurations=configurations,
        sizes=tuple(sizes),
        calibration=calibration,
        faults=_faults(data),
    )
