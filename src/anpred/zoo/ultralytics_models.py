"""YOLO detection models built from ultralytics' own architecture definitions.

``yolov5n.yaml`` in ultralytics 8.x is the anchor-free "u" variant of YOLOv5 (C3 backbone,
YOLOv8 Detect head); anpred says so in ``anpred models``.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from anpred.zoo.plans import last_per_level, output_sizes, with_output
from anpred.zoo.registry import register_model
from anpred.zoo.spec import Anchor, ModelSpec


def _offline_env() -> None:
    os.environ.setdefault("YOLO_OFFLINE", "1")
    os.environ.setdefault("YOLO_VERBOSE", "False")
    os.environ.setdefault("YOLO_CONFIG_DIR", os.path.join(tempfile.gettempdir(), "anpred-yolo"))


def build_yolo(yaml_name: str) -> Any:
    """Build an ultralytics ``DetectionModel`` from its packaged yaml, in eval mode."""
    _offline_env()
    from ultralytics.nn.tasks import DetectionModel

    model = DetectionModel(yaml_name, ch=3, nc=80, verbose=False)
    return model.eval()


def yolo_plan(model: Any, granularity: str, input_size: int = 640) -> list[Anchor]:
    """Anchor plan of a YOLO ``DetectionModel``.

    ``layer``: every top-level layer ``model.i`` except the Detect head (whose decoded
    output is the ``output`` anchor). ``stage``: the backbone's last layer at each
    stride level (``backbone.p1`` .. ``backbone.p5``, derived by a dummy forward), the
    neck outputs that feed Detect (``neck.p3`` .. ``neck.p5``, from Detect's ``f``) and
    the output.
    """
    layers = list(model.model)
    n_backbone = len(model.yaml["backbone"])
    if granularity == "layer":
        anchors = [
            Anchor(f"model.{i}", f"model.{i}", "backbone" if i < n_backbone else "neck")
            for i in range(len(layers) - 1)
        ]
        return with_output(anchors)
    backbone = [f"model.{i}" for i in range(n_backbone)]
    sizes = output_sizes(model, backbone, input_size)
    levels = last_per_level(backbone, sizes, input_size)
    anchors = [Anchor(f"backbone.p{k}", path, "backbone") for k, path in sorted(levels.items())]
    head_inputs = sorted(layers[-1].f)
    neck_sizes = output_sizes(model, [f"model.{i}" for i in head_inputs], input_size)
    for i in head_inputs:
        level = {v: k for k, v in last_per_level([f"model.{i}"], neck_sizes, input_size).items()}
        anchors.append(Anchor(f"neck.p{level[f'model.{i}']}", f"model.{i}", "neck"))
    return with_output(anchors)


def _register(name: str, yaml_name: str, notes: str) -> None:
    register_model(
        ModelSpec(
            name=name,
            family="detection",
            source="ultralytics",
            input_size=640,
            preprocessing="letterbox",
            build=lambda: build_yolo(yaml_name),
            plan=yolo_plan,
            notes=notes,
        )
    )


_register("yolov5n", "yolov5n.yaml", "anchor-free YOLOv5u (ultralytics yolov5n.yaml)")
_register("yolov5s", "yolov5s.yaml", "anchor-free YOLOv5u (ultralytics yolov5s.yaml)")
_register("yolov8n", "yolov8n.yaml", "")
_register("yolov8s", "yolov8s.yaml", "")
