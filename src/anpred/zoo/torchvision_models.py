"""Classification models built from torchvision's architecture code (``weights=None``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anpred.zoo.plans import children_anchors, last_per_level, output_sizes, with_output
from anpred.zoo.registry import register_model
from anpred.zoo.spec import Anchor, ModelSpec


def _builder(name: str) -> Callable[[], Any]:
    def build() -> Any:
        import torchvision

        return getattr(torchvision.models, name)(weights=None).eval()

    return build


def resnet_plan(model: Any, granularity: str) -> list[Anchor]:
    """ResNet: stem, layer1..layer4, pool, output; layer: every residual block."""
    if granularity == "layer":
        anchors = [Anchor("stem", "maxpool", "stem")]
        for stage in ("layer1", "layer2", "layer3", "layer4"):
            anchors += children_anchors(model, stage, stage)
        return with_output([*anchors, Anchor("pool", "avgpool", "head")])
    anchors = [Anchor("stem", "maxpool", "stem")]
    anchors += [Anchor(s, s, s) for s in ("layer1", "layer2", "layer3", "layer4")]
    return with_output([*anchors, Anchor("pool", "avgpool", "head")])


def _features_plan(model: Any, granularity: str, input_size: int = 224) -> list[Anchor]:
    """``features.i`` models (MobileNetV3, ConvNeXt): stage = last block per stride level."""
    blocks = children_anchors(model, "features", "features")
    if granularity == "layer":
        return with_output([*blocks, Anchor("pool", "avgpool", "head")])
    paths = [a.module for a in blocks]
    levels = last_per_level(paths, output_sizes(model, paths, input_size), input_size)
    anchors = [Anchor(f"features.s{k}", path, "features") for k, path in sorted(levels.items())]
    return with_output([*anchors, Anchor("pool", "avgpool", "head")])


def vit_plan(model: Any, granularity: str) -> list[Anchor]:
    """ViT: patch embedding, encoder blocks (every one, or grouped by three), final norm."""
    blocks = children_anchors(model, "encoder.layers", "encoder")
    if granularity == "stage":
        blocks = [Anchor(f"encoder.block{i}", a.module, "encoder") for i, a in enumerate(blocks)]
        blocks = blocks[2::3]
    anchors = [Anchor("patch_embed", "conv_proj", "embed"), *blocks]
    return with_output([*anchors, Anchor("encoder.norm", "encoder.ln", "encoder")])


for _name, _plan in (
    ("resnet50", resnet_plan),
    ("mobilenet_v3_large", _features_plan),
    ("vit_b_16", vit_plan),
    ("convnext_tiny", _features_plan),
):
    register_model(
        ModelSpec(
            name=_name,
            family="classification",
            source="torchvision",
            input_size=224,
            preprocessing="imagenet",
            build=_builder(_name),
            plan=_plan,
            resizable=_name != "vit_b_16",
        )
    )
