"""The settings of one ``anpred run``; a run directory remembers them for resuming."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class RunOptions:
    """Everything that determines a run's results (``run.json`` in the run directory).

    Attributes:
        model: Zoo model name, path of an ``.onnx`` file, or a torch module's source
            (``file.py:function``, ``file.pt``; :mod:`anpred.interchange.user_module`).
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
        input_shapes: ``--input-shape`` values (``NAME=1x3x640x640`` or a bare shape).
        inputs_file: ``--inputs FILE.npz``: the inputs themselves, by model input name.
        preprocess: Image preprocessing of a user's ONNX file (``letterbox``, ``imagenet``,
            ``scale``, ``none``); ``None``: letterbox for image inputs.
        mean: Per-channel mean subtracted after preprocessing (``--mean``).
        std: Per-channel std divided by after preprocessing (``--std``).
        bgr: Feed channels in BGR order.
        input_range: ``(LO, HI)`` of seeded random non-image inputs (``--input-range``).
        input_ranges: ``NAME=LO,HI`` ranges of single inputs (``--input-range NAME=LO,HI``),
            which take precedence over ``input_range`` for their input.
        stages: Number of automatic stages of a graph without module scopes (``--stages``).
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
    input_shapes: tuple[str, ...] = ()
    inputs_file: str | None = None
    preprocess: str | None = None
    mean: tuple[float, ...] = ()
    std: tuple[float, ...] = ()
    bgr: bool = False
    input_range: tuple[float, ...] = ()
    stages: int | None = None
    input_ranges: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (lists for tuples).

        Settings added for users' ONNX files (issue 12) are left out while at their
        defaults, so ``run.json`` of an earlier run still equals its settings (resume).
        """
        data = asdict(self)
        for key, default in _LATER_DEFAULTS.items():
            if data[key] == default:
                del data[key]
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}


#: Fields added after ``run.json`` files existed, with their defaults (see ``to_dict``).
_LATER_DEFAULTS: dict[str, Any] = {
    "input_shapes": (),
    "inputs_file": None,
    "preprocess": None,
    "mean": (),
    "std": (),
    "bgr": False,
    "input_range": (),
    "stages": None,
    "input_ranges": (),
}
