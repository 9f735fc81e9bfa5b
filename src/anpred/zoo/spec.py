"""What a zoo model is: its builder, preprocessing, input size and anchor plans."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: The granularities an anchor plan is available at.
GRANULARITIES = ("stage", "layer")

#: Name of the anchor that stands for the model's final output.
OUTPUT_ANCHOR = "output"


@dataclass(frozen=True)
class Anchor:
    """A named module whose output is captured, in topological order within its plan.

    Attributes:
        name: Anchor name shown to users (``backbone.p3``, ``model.4``, ``output``).
        module: Dotted module path in the torch model; ``""`` for the model output.
        group: Coarse part of the network (``backbone``, ``neck``, ``head``, ...).
    """

    name: str
    module: str
    group: str = ""

    def to_dict(self) -> dict[str, str]:
        """Return a JSON-ready dict."""
        return {"name": self.name, "module": self.module, "group": self.group}


@dataclass(frozen=True)
class ModelSpec:
    """A model of the zoo.

    Attributes:
        name: Zoo name (``yolov8n``).
        family: ``detection`` or ``classification``.
        source: Library that defines the architecture (``ultralytics``, ``torchvision``).
        input_size: Square input side in pixels.
        preprocessing: Preprocessing name (see :mod:`anpred.inputs.preprocess`).
        build: Builds the architecture with framework-default (seeded) initialisation.
        plan: Returns the anchor plan of a built model at a granularity.
        notes: One line shown by ``anpred models``.
        module_source: For a model whose inputs are not an image (token ids, a waveform):
            the ``file.py:function`` source it runs from as a user's torch module does
            (:mod:`anpred.interchange.user_module`; its example inputs and module-tree
            anchor plan come with it); ``None`` for an image model.
        resizable: Whether the architecture runs at other input sizes (``anpred sweep``);
            ViT's learned position embeddings fix its size.
    """

    name: str
    family: str
    source: str
    input_size: int
    preprocessing: str
    build: Callable[[], Any] = field(repr=False)
    plan: Callable[[Any, str], list[Anchor]] = field(repr=False)
    notes: str = ""
    module_source: str | None = None
    resizable: bool = True
