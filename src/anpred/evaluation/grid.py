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
    """One fault kind on one op type, at several severities."""

    kind: str
    op: str = "*"
    severities: tuple[float, ...] = (1,)


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
            "faults": [
                {"kind": f.kind, "op": f.op, "severities": list(f.severities)} for f in self.faults
            ],
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
                raise UsageError(f"grid model {model!r}: no such ONNX file")
        elif model not in known:
            raise UsageError(f"grid model {model!r} is not in the zoo ({', '.join(known)})")


def load_grid(path: str | Path | None) -> EvalGrid:
    """Read a grid file (JSON); missing keys take the defaults.

    Raises:
        UsageError: Unreadable file or unknown keys.
    """
    if path is None:
        return DEFAULT_GRID
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise UsageError(f"cannot read grid {str(path)!r}: {err}") from None
    known = set(DEFAULT_GRID.to_dict())
    unknown = set(data) - known
    if unknown:
        raise UsageError(f"unknown grid key(s) {sorted(unknown)}; known: {sorted(known)}")
    faults = (
        tuple(
            FaultAxis(f["kind"], f.get("op", "*"), tuple(f.get("severities", [1])))
            for f in data["faults"]
        )
        if "faults" in data
        else DEFAULT_GRID.faults
    )
    stages = data.get("stages", "all")
    models = tuple(data.get("models", DEFAULT_GRID.models))
    _check_models(models)
    configurations = tuple(data.get("configurations", ()))
    for name in configurations:
        parse_participant(name)
    sizes = tuple(data.get("sizes", ()))
    if sizes and (len(sizes) < 2 or any(not isinstance(v, int) or v % 32 for v in sizes)):
        raise UsageError(f"grid sizes must be two or more multiples of 32, got {list(sizes)}")
    return EvalGrid(
        models=models,
        libs=data.get("libs", DEFAULT_GRID.libs),
        faulty=tuple(data.get("faulty", DEFAULT_GRID.faulty)),
        stages=stages if isinstance(stages, str) else tuple(stages),
        images=int(data.get("images", DEFAULT_GRID.images)),
        granularity=data.get("granularity", DEFAULT_GRID.granularity),
        configurations=configurations,
        sizes=sizes,
        faults=faults,
    )
