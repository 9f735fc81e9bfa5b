"""Derive anchor plans from a built torch model (stride levels, top-level layers)."""

from __future__ import annotations

import math
from typing import Any

from anpred.zoo.spec import OUTPUT_ANCHOR, Anchor


def output_sizes(model: Any, module_paths: list[str], input_size: int) -> dict[str, int]:
    """Run a dummy forward and return the last spatial size of each module's output."""
    import torch

    sizes: dict[str, int] = {}
    handles = []
    modules = dict(model.named_modules())
    for path in module_paths:

        def hook(_mod: Any, _inp: Any, out: Any, path: str = path) -> None:
            tensor = out[0] if isinstance(out, list | tuple) else out
            if isinstance(tensor, torch.Tensor) and tensor.dim() >= 3:
                sizes[path] = int(tensor.shape[-1])

        handles.append(modules[path].register_forward_hook(hook))
    try:
        with torch.no_grad():
            model(torch.zeros(1, 3, input_size, input_size))
    finally:
        for handle in handles:
            handle.remove()
    return sizes


def last_per_level(paths: list[str], sizes: dict[str, int], input_size: int) -> dict[int, str]:
    """Return, for each stride level k (stride 2**k), the last path at that level."""
    levels: dict[int, str] = {}
    for path in paths:
        if path in sizes:
            levels[round(math.log2(input_size / sizes[path]))] = path
    return levels


def children_anchors(model: Any, container: str, group: str) -> list[Anchor]:
    """Return one anchor per direct child of ``container`` (layer granularity)."""
    modules = dict(model.named_modules())
    parent = modules[container] if container else model
    prefix = f"{container}." if container else ""
    return [
        Anchor(f"{prefix}{name}", f"{prefix}{name}", group) for name, _ in parent.named_children()
    ]


def with_output(anchors: list[Anchor], group: str = "head") -> list[Anchor]:
    """Append the final-output anchor."""
    return [*anchors, Anchor(OUTPUT_ANCHOR, "", group)]
