"""``python -m anpred.zoo.describe``: describe every zoo model as JSON (runs in a torch worker)."""

from __future__ import annotations

import json
import sys
from typing import Any

from anpred.zoo.registry import get_model, model_names
from anpred.zoo.spec import GRANULARITIES


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
        "anchors": {g: len(spec.plan(model, g)) for g in GRANULARITIES},
        "weights": weights,
        "notes": spec.notes,
    }


def main() -> int:
    """Print a JSON list describing the zoo."""
    import os

    os.environ.setdefault("YOLO_OFFLINE", "1")
    json.dump([describe(name) for name in model_names()], sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
