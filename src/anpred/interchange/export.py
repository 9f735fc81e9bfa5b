"""Export a torch model to ONNX with every anchor as an extra named graph output.

Two graphs are written per export: ``anchored.onnx`` (final output + anchors) and
``plain.onnx`` (final output only, for the observer-effect check). Exports are cached by
(model, weights, anchor plan, opset, input shape) under ``$ANPRED_CACHE/exports``.
The legacy TorchScript exporter (``dynamo=False``) is used because it keeps module scopes
in node names (``/model.2/cv1/conv/Conv``), which stage extraction and fault injection use.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from anpred.cache import cache_dir
from anpred.interchange.anchored import PlainOutput, anchored_module
from anpred.zoo.spec import OUTPUT_ANCHOR, Anchor

#: Default ONNX opset of exports.
DEFAULT_OPSET = 17
#: Bump when the export format changes, to invalidate caches.
EXPORT_VERSION = 2
INPUT_NAME = "images"


@dataclass(frozen=True)
class AnchorOutput:
    """Where one anchor tensor lives in the anchored ONNX graph."""

    key: str
    anchor: str
    module: str
    group: str
    onnx_name: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class AnchoredExport:
    """A cached anchored export: both graphs, the input and the anchor → output map."""

    folder: Path
    input_name: str
    input_shape: tuple[int, ...]
    opset: int
    anchors: tuple[AnchorOutput, ...]
    #: The weights the graphs were exported with (``seed0``, ``sha256:...``), for zoo models.
    weights_id: str | None = None
    #: NumPy dtype name of the input (a user's ONNX file may take integers or bytes).
    input_dtype: str = "float32"

    @property
    def anchored_path(self) -> Path:
        """The graph with every anchor exposed as an output."""
        return self.folder / "anchored.onnx"

    @property
    def plain_path(self) -> Path:
        """The graph with only the final output."""
        return self.folder / "plain.onnx"

    @property
    def keys(self) -> list[str]:
        """Anchor keys in topological order, final output last."""
        return [a.key for a in self.anchors]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "folder": str(self.folder),
            "input_name": self.input_name,
            "input_shape": list(self.input_shape),
            "opset": self.opset,
            "anchors": [asdict(a) for a in self.anchors],
            "weights_id": self.weights_id,
            # written only when not float32, so that records of float models stay as they were
            **({"input_dtype": self.input_dtype} if self.input_dtype != "float32" else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AnchoredExport:
        """Inverse of :meth:`to_dict`."""
        return cls(
            folder=Path(data["folder"]),
            input_name=data["input_name"],
            input_shape=tuple(data["input_shape"]),
            opset=int(data["opset"]),
            anchors=tuple(
                AnchorOutput(**{**a, "shape": tuple(a["shape"])}) for a in data["anchors"]
            ),
            weights_id=data.get("weights_id"),
            input_dtype=data.get("input_dtype", "float32"),
        )


def export_key(
    model_id: str,
    weights_id: str,
    anchors: Sequence[Anchor],
    opset: int,
    input_shape: Sequence[int],
) -> str:
    """Cache key of an export."""
    blob = json.dumps(
        [
            EXPORT_VERSION,
            model_id,
            weights_id,
            [a.to_dict() for a in anchors],
            opset,
            list(input_shape),
        ],
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _order_key(anchor_order: list[str], key: str) -> int:
    base = key.split(":")[0]
    return anchor_order.index(base) if base in anchor_order else len(anchor_order)


def export_anchored(
    model: Any,
    anchors: Sequence[Anchor],
    input_shape: Sequence[int],
    folder: Path,
    opset: int = DEFAULT_OPSET,
    example: Sequence[Any] = (),
    input_names: Sequence[str] = (INPUT_NAME,),
    keywords: Sequence[str] = (),
) -> AnchoredExport:
    """Export ``model`` (torch, eval mode) to ``folder`` with anchors as outputs.

    The anchors keep the plan's topological order; the final output is last. The graphs
    are traced on zeros of ``input_shape``, or on ``example`` (the input tensors of a
    user's module, named ``input_names``; ``keywords``: the module takes them by name).
    """
    import onnx
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    wrapper = anchored_module(model, anchors, keywords).eval()
    inputs = tuple(example) or (torch.zeros(*input_shape),)
    with torch.no_grad():
        outputs = wrapper(*inputs)
    keys = list(wrapper.keys)
    shapes = {k: tuple(int(d) for d in t.shape) for k, t in zip(keys, outputs, strict=True)}
    names = [f"anchor.{k}" for k in keys]
    tmp = folder / f"anchored.tmp{os.getpid()}.onnx"
    plain_tmp = folder / f"plain.tmp{os.getpid()}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            wrapper,
            inputs,
            str(tmp),
            dynamo=False,
            opset_version=opset,
            input_names=list(input_names),
            output_names=names,
            do_constant_folding=True,
        )
        torch.onnx.export(
            PlainOutput(model, keywords).eval(),
            inputs,
            str(plain_tmp),
            dynamo=False,
            opset_version=opset,
            input_names=list(input_names),
            output_names=[names[0]],
            do_constant_folding=True,
        )
    from anpred.interchange.static_shapes import annotate_static_shapes

    for path in (tmp, plain_tmp):
        onnx.checker.check_model(str(path))
        onnx.save(annotate_static_shapes(onnx.load(str(path))), str(path))
    os.replace(tmp, folder / "anchored.onnx")
    os.replace(plain_tmp, folder / "plain.onnx")
    by_name = {a.name: a for a in anchors}
    order = [a.name for a in anchors]
    records = []
    for key, onnx_name in sorted(
        zip(keys, names, strict=True), key=lambda kn: _order_key(order, kn[0])
    ):
        anchor = by_name.get(key.split(":")[0], Anchor(OUTPUT_ANCHOR, "", "head"))
        records.append(
            AnchorOutput(key, anchor.name, anchor.module, anchor.group, onnx_name, shapes[key])
        )
    export = AnchoredExport(folder, input_names[0], tuple(input_shape), opset, tuple(records))
    (folder / "export.json").write_text(json.dumps(export.to_dict(), indent=1))
    return export


def load_export(folder: Path) -> AnchoredExport | None:
    """Return the export cached in ``folder``, or ``None`` when incomplete."""
    meta = folder / "export.json"
    if not meta.exists():
        return None
    export = AnchoredExport.from_dict(json.loads(meta.read_text()))
    if not (export.anchored_path.exists() and export.plain_path.exists()):
        return None
    return export


def export_zoo_model(
    name: str,
    granularity: str = "stage",
    weights: str | None = None,
    seed: int = 0,
    anchor_modules: Sequence[str] = (),
    opset: int = DEFAULT_OPSET,
    input_size: int | None = None,
) -> AnchoredExport:
    """Export zoo model ``name`` with its anchor plan (cached)."""
    from anpred.zoo.registry import get_model
    from anpred.zoo.weights import load_model

    spec = get_model(name)
    model, weights_id = load_model(name, weights, seed)
    anchors = plan_anchors(model, spec.plan, granularity, anchor_modules)
    size = input_size or spec.input_size
    shape = (1, 3, size, size)
    folder = cache_dir("exports") / export_key(name, weights_id, anchors, opset, shape)
    cached = load_export(folder)
    if cached is not None:
        return replace(cached, weights_id=weights_id)
    try:
        return replace(export_anchored(model, anchors, shape, folder, opset), weights_id=weights_id)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def plan_anchors(
    model: Any, plan: Any, granularity: str, anchor_modules: Sequence[str]
) -> list[Anchor]:
    """The anchors of a run: the user's module paths, else the model's plan."""
    from anpred.errors import UsageError
    from anpred.zoo.spec import GRANULARITIES

    if anchor_modules:
        modules = dict(model.named_modules())
        unknown = [m for m in anchor_modules if m not in modules]
        if unknown:
            raise UsageError(f"unknown anchor module(s): {', '.join(unknown[:3])}")
        names = list(modules)
        ordered = sorted(anchor_modules, key=names.index)
        return [*(Anchor(m, m, "user") for m in ordered), Anchor(OUTPUT_ANCHOR, "", "head")]
    if granularity not in GRANULARITIES:
        raise UsageError(f"granularity must be one of {', '.join(GRANULARITIES)}")
    return plan(model, granularity)
