"""The concrete shape of each input of a user's ONNX file (``--input-shape``).

Real exports leave dimensions dynamic (``batch``, ``height``, ``p2o.DynamicDimension.0``,
``-1``). anpred runs one concrete shape per input, chosen in this order:

1. ``--input-shape NAME=1x3x640x640`` (or a bare ``1x3x640x640`` when the model has one
   input); a fixed dimension of the file must be given its own value;
2. the file's own shape, when every dimension is fixed;
3. for an image input (rank 4, 1 or 3 channels fixed at axis 1): batch 1 and the
   preprocessing's side (``image_size``) for dynamic height/width;
4. otherwise a one-line error naming the dynamic dimensions and the flag.

Pure ``onnx`` protobuf work (no runtime), so the CLI can validate flags early.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

import onnx

from anpred.errors import UsageError

_SHAPE = re.compile(r"^\d+(x\d+)*$")


def parse_shape(text: str, flag: str = "--input-shape") -> tuple[int, ...]:
    """``1x3x640x640`` → ``(1, 3, 640, 640)``.

    Raises:
        UsageError: Not ``x``-separated positive integers.
    """
    cleaned = text.strip().lower()
    if not _SHAPE.match(cleaned) or any(int(d) < 1 for d in cleaned.split("x")):
        raise UsageError(f"{flag} takes [NAME=]DIMS with positive integers like 1x3x640x640, "
                         f"got {text!r}")
    return tuple(int(d) for d in cleaned.split("x"))


def parse_input_shapes(values: Iterable[str]) -> dict[str | None, tuple[int, ...]]:
    """Parse repeated ``--input-shape`` values; key ``None`` for a bare shape.

    Raises:
        UsageError: A malformed value, a name given twice, or a bare shape next to others.
    """
    shapes: dict[str | None, tuple[int, ...]] = {}
    for value in values:
        name, sep, dims = value.rpartition("=")
        key = name.strip() if sep else None
        if sep and not key:
            raise UsageError(f"--input-shape {value!r}: the input name before '=' is empty")
        if key in shapes:
            raise UsageError(f"--input-shape given twice for {key or 'the input'}")
        shapes[key] = parse_shape(dims)
    if None in shapes and len(shapes) > 1:
        raise UsageError("--input-shape: a bare shape applies to a model's only input; "
                         "name each input (NAME=DIMS) when giving several")
    return shapes


def format_shape(shape: Sequence[int]) -> str:
    """``(1, 3, 640, 640)`` → ``1x3x640x640``."""
    return "x".join(str(d) for d in shape)


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The graph's real inputs (initializers listed as inputs left out)."""
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def declared_dims(vi: onnx.ValueInfoProto) -> list[int | str]:
    """Each dimension of an input: its value when fixed, else its label (``batch``, ``?``)."""
    dims: list[int | str] = []
    for d in vi.type.tensor_type.shape.dim:
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(int(d.dim_value))
        else:
            dims.append(d.dim_param or (str(d.dim_value) if d.HasField("dim_value") else "?"))
    return dims


def is_image_input(dims: Sequence[int | str]) -> bool:
    """Rank 4 with 1 or 3 channels fixed at axis 1 (NCHW), as image models take."""
    return len(dims) == 4 and dims[1] in (1, 3)


def resolve_input_shapes(
    inputs: Sequence[onnx.ValueInfoProto],
    given: Mapping[str | None, tuple[int, ...]],
    image_size: int | None,
    label: str,
) -> dict[str, tuple[int, ...]]:
    """The concrete shape of every input (see the module docstring for the order).

    Args:
        inputs: The graph's real inputs.
        given: Parsed ``--input-shape`` values (:func:`parse_input_shapes`).
        image_size: The preprocessing's side for dynamic image height/width, if any.
        label: The model, as messages name it (its file name).

    Raises:
        UsageError: An unknown input name, a rank or fixed-dimension mismatch, or a dynamic
            dimension nothing gives a value.
    """
    names = [vi.name for vi in inputs]
    if None in given and len(inputs) != 1:
        raise UsageError(f"{label} has {len(inputs)} inputs ({', '.join(names)}); "
                         "name the input: --input-shape NAME=DIMS")
    unknown = [k for k in given if k is not None and k not in names]
    if unknown:
        raise UsageError(f"--input-shape names {unknown[0]!r}, which is not an input of "
                         f"{label} (inputs: {', '.join(names)})")
    shapes: dict[str, tuple[int, ...]] = {}
    for vi in inputs:
        dims = declared_dims(vi)
        shape = given.get(vi.name, given.get(None) if len(inputs) == 1 else None)
        if shape is not None:
            if len(shape) != len(dims):
                raise UsageError(f"--input-shape {vi.name}={format_shape(shape)} has rank "
                                 f"{len(shape)}; {label} declares rank {len(dims)} "
                                 f"([{', '.join(map(str, dims))}])")
            clash = [(i, d, s) for i, (d, s) in enumerate(zip(dims, shape, strict=True))
                     if isinstance(d, int) and d != s]
            if clash:
                i, d, s = clash[0]
                raise UsageError(f"--input-shape {vi.name}: dimension {i} is fixed to {d} in "
                                 f"{label}, not {s}")
            shapes[vi.name] = tuple(shape)
            continue
        dynamic = [d for d in dims if not isinstance(d, int)]
        if not dynamic:
            shapes[vi.name] = tuple(int(d) for d in dims)
        elif is_image_input(dims) and image_size is not None:
            shapes[vi.name] = tuple(
                d if isinstance(d, int) else 1 if i == 0 else image_size
                for i, d in enumerate(dims)
            )
        else:
            example = "x".join(str(d) if isinstance(d, int) else "N" for d in dims)
            raise UsageError(
                f"input {vi.name} of {label} has dynamic dimensions "
                f"{', '.join(map(str, dynamic))} (shape [{', '.join(map(str, dims))}]); "
                f"give them with --input-shape {vi.name}={example}"
            )
    return shapes


def fix_input_shapes(model: onnx.ModelProto, shapes: Mapping[str, Sequence[int]]) -> None:
    """Write concrete input shapes into ``model`` (in place); drop stale inferred shapes."""
    for vi in model.graph.input:
        if vi.name in shapes:
            dims = vi.type.tensor_type.shape.dim
            del dims[:]
            for size in shapes[vi.name]:
                dims.add().dim_value = int(size)
    del model.graph.value_info[:]
    for out in model.graph.output:  # outputs keep their dtype; their shapes are re-inferred
        out.type.tensor_type.ClearField("shape")
