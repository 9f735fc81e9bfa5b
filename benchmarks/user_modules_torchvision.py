"""Torchvision architectures that are not in the zoo, run from a module through ``anpred.run``.

Each model is built by torchvision with ``weights=None`` under ``torch.manual_seed(0)``
(nothing is downloaded); its BatchNorm statistics are then set from 8 bundled photographs,
as the zoo does for its own models (:func:`anpred.zoo.weights.recalibrate_batchnorm`), so
that activations have realistic scales. The module object goes to
``anpred.run(module, example_inputs=..., preprocess="imagenet")`` with the default
participants (every installed library); the script prints, per model, its anchors, each
participant's status, the findings and the wall time, and writes them as JSON. Run::

    nice -n 5 python benchmarks/user_modules_torchvision.py --images 1 --out runs/tv
    nice -n 5 python benchmarks/user_modules_torchvision.py --models swin_t --libs torch,jax
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

#: Architectures not in the zoo (``anpred models``): a compound-scaled CNN with squeeze and
#: excitation, a RegNet with group convolutions, and a shifted-window transformer.
MODELS = ("efficientnet_b0", "regnet_y_400mf", "swin_t")


def build(name: str) -> Any:
    """Torchvision's ``name`` with seeded weights and BatchNorm set from photographs."""
    import numpy as np
    import torch
    import torchvision

    from anpred.inputs.images import sample_images
    from anpred.inputs.preprocess import preprocess
    from anpred.zoo.weights import CALIBRATION_IMAGES, has_batchnorm, recalibrate_batchnorm

    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    if has_batchnorm(model):
        images = sample_images(CALIBRATION_IMAGES)
        batch = np.concatenate([preprocess(image, "imagenet", 224) for image in images])
        recalibrate_batchnorm(model, torch.from_numpy(batch))
    return model.eval()


def measure(name: str, out: Path, images: int, libs: str) -> dict[str, Any]:
    """Run ``name`` through ``anpred.run``; return what it found and how long it took."""
    import torch

    import anpred

    model = build(name)
    start = time.perf_counter()
    error = None
    try:
        run = anpred.run(
            model,
            example_inputs=torch.zeros(1, 3, 224, 224),
            libs=libs,
            images=images,
            out=out / name,
            preprocess="imagenet",
            progress=None,
        )
    except anpred.AnpredError as err:  # every failure a usage error (e.g. a missing
        error = str(err)  # translator): the others' results are in the run directory
        run = anpred.load(out / name)
    wall = time.perf_counter() - start
    return {
        "error": error,
        "model": name,
        "parameters": sum(p.numel() for p in model.parameters()),
        "anchors": [a.key for a in run.anchors],
        "participants": {p.participant: p.status.value for p in run.participants},
        "findings": sorted({(f.participant, f.anchor) for f in run.findings}),
        "exit_code": run.exit_code,
        "wall_seconds": round(wall, 1),
        "run_dir": str(run.dir),
    }


def main() -> None:
    """Measure every model and print one block each."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--libs", default="all")
    parser.add_argument("--images", type=int, default=1)
    parser.add_argument("--out", default="runs/torchvision-modules")
    args = parser.parse_args()
    out = Path(args.out)
    results = []
    for name in args.models.split(","):
        result = measure(name, out, args.images, args.libs)
        results.append(result)
        print(
            f"== {name}: {result['parameters'] / 1e6:.1f}M parameters, "
            f"{len(result['anchors'])} anchors, {result['wall_seconds']} s, "
            f"exit {result['exit_code']}"
        )
        print("   anchors: " + ", ".join(result["anchors"]))
        print("   " + ", ".join(f"{p} {s}" for p, s in result["participants"].items()))
        print(
            f"   findings ({len(result['findings'])}): "
            + (", ".join(f"{p}@{a}" for p, a in result["findings"]) or "none"),
            flush=True,
        )
        if result["error"]:
            print(f"   anpred: {result['error']}", flush=True)
        (out / "results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
