"""The settings of one ``anpred run``; a run directory remembers them for resuming."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class RunOptions:
    """Everything that determines a run's results (``run.json`` in the run directory).

    Attributes:
        model: Zoo model name or path of an ``.onnx`` file.
        libs: Participant specs (``torch``, ``onnxruntime[O1]``) or ``("all",)``.
        images: Number of bundled photographs (ignored when ``image_paths`` is set).
        image_paths: User image files.
        granularity: ``stage`` or ``layer``.
        anchors: Module paths (zoo) or tensor names (ONNX) to use as anchors.
        weights: Checkpoint path, or ``None`` for seeded weights.
        seed: Seed of generated weights and synthetic inputs.
        synthetic: Number of seeded synthetic images added to the inputs.
        isolation: Whether to run stage isolation.
        input_size: Input side for zoo models (default: the model's own, e.g. 640 for YOLO).
        extra: Settings of later features (e.g. injected faults), kept in ``run.json``.
    """

    model: str
    libs: tuple[str, ...] = ("all",)
    images: int = 2
    image_paths: tuple[str, ...] = ()
    granularity: str = "stage"
    anchors: tuple[str, ...] = ()
    weights: str | None = None
    seed: int = 0
    synthetic: int = 0
    isolation: bool = True
    input_size: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (lists for tuples)."""
        data = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}
