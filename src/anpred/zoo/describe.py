"""``python -m anpred.zoo.describe``: describe every zoo model as JSON (runs in a torch worker)."""

from __future__ import annotations

import json
import sys
from typing import Any

from anpred.zoo.registry import get_model, model_names
from anpred.zoo.spec import GRANULARITIES, ModelSpec


def describe(name: str, seed: int = 0) -> dict[str, Any]:
    """Return name, family, parameter count, input size and anchor counts of one model."""
    from anpred.zoo.weights import CALIBRATION_IMAGES, has_batchnorm

    spec = get_model(name)
    model = spec.build()
    weights = f"seeded (seed {seed})"
    if has_batchnorm(model):
        weights += f", BatchNorm recalibrated on {CALIBRATION_IMAGES} bundled photographs"
    return {
        "name": name,
        "family": spec.family,
        "source": spec.source,
        "parameters": sum(p.numel() for p in model.parameters()),
        "input_size": spec.input_size,
        "input": _input(spec),
        "anchors": {g: len(spec.plan(model, g)) for g in GRANULARITIES},
        "weights": weights,
        "notes": spec.notes,
    }


def _input(spec: ModelSpec) -> str:
    """The model's input in words: ``640x640`` for an image, the example inputs' shapes
    for a module (``input_ids 1x16 int64, ...``).
    """
    if spec.module_source is None:
        return f"{spec.input_size}x{spec.input_size}"
    from anpred.interchange.user_module import build_user_module

    _, pairs, _ = build_user_module(spec.module_source, 0, {})
    return ", ".join(
        f"{name} {'x'.join(map(str, t.shape))} {str(t.dtype).replace('torch.', '')}"
        for name, t in pairs
    )


def main() -> int:
    """Print a JSON list describing the zoo."""
    import os

    os.environ.setdefault("YOLO_OFFLINE", "1")
    json.dump([describe(name) for name in model_names()], sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
