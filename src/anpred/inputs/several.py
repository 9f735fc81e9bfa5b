"""Inputs of a user's ONNX file with several inputs, packed into its one graph input.

The export packs the model's inputs into one float32 vector
(:mod:`anpred.interchange.packing`); the run store's packing record says how. Each of the
run's inputs is then one packed vector, built from one value per model input:

* ``--inputs FILE.npz``: one array per model input, named by it; a leading N gives N inputs,
  and every array must give the same N.
* otherwise, per bundled or given photograph (which gives the input its id): an image input
  (float NCHW, 1 or 3 channels) gets the photograph, preprocessed as a single image input
  is (:func:`~anpred.inputs.tensors.image_tensor`); every other input a seeded random tensor
  of its dtype and shape (:func:`~anpred.inputs.tensors.random_tensor`; its range is its
  own ``--input-range NAME=LO,HI``, else the bare ``--input-range LO,HI``), seeded by
  (seed, input number x inputs + model input number).

Values float32 cannot hold exactly (integers beyond 2**24) are refused in one line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anpred.errors import UsageError
from anpred.interchange.packing import PackedTensor, pack
from anpred.settings import RunOptions


def packing_tensors(record: Mapping[str, Any]) -> list[PackedTensor]:
    """The packed tensors of a packing record, in order."""
    return [PackedTensor.from_dict(t) for t in record["tensors"]]


def describe_packing(record: Mapping[str, Any]) -> str:
    """``ids int64 1x16, mask float32 1x16 packed into one float32 input of 32``."""
    parts = [
        f"{t.name} {t.dtype} {'x'.join(map(str, t.shape))}" for t in packing_tensors(record)
    ]
    return f"{', '.join(parts)} packed into one float32 input of {record['size']}"


def _is_image(item: PackedTensor) -> bool:
    from anpred.inputs.tensors import is_image_shape

    return is_image_shape(item.shape) and np.issubdtype(np.dtype(item.dtype), np.floating)


def _from_npz(path: Path, tensors: Sequence[PackedTensor]) -> list[dict[str, np.ndarray]]:
    from anpred.inputs.tensors import read_npz, split_batches

    arrays = read_npz(path)
    batches = {t.name: split_batches(path, arrays, t.name, t.shape, t.dtype) for t in tensors}
    counts = {name: len(b) for name, b in batches.items()}
    if len(set(counts.values())) > 1:
        given = ", ".join(f"{name} {n}" for name, n in counts.items())
        raise UsageError(f"--inputs {path.name}: the arrays give different numbers of inputs "
                         f"({given}); give every model input the same leading N")
    count = next(iter(counts.values()))
    return [{name: b[n] for name, b in batches.items()} for n in range(count)]


def _seeded(
    options: RunOptions, tensors: Sequence[PackedTensor]
) -> tuple[list[str], list[dict[str, np.ndarray]], list[str]]:
    from anpred.inputs.images import gather_images
    from anpred.inputs.tensors import image_tensor, random_tensor

    images = gather_images(
        None if options.image_paths else options.images,
        options.image_paths,
        options.synthetic,
        options.seed,
    )
    from anpred.inputs.tensors import input_range_of

    names = [t.name for t in tensors]
    spans = {
        n: input_range_of(n, names, options.input_range, options.input_ranges) for n in names
    }
    ids, values, sources = [], [], []
    for number, image in enumerate(images):
        value, parts = {}, []
        for index, item in enumerate(tensors):
            if _is_image(item):
                value[item.name] = image_tensor(image.pixels, item.shape, options.preprocess,
                                                options.mean, options.std, options.bgr,
                                                item.dtype)
                parts.append(f"{item.name}: {image.source}")
                continue
            span = spans[item.name]
            value[item.name] = random_tensor(item.shape, item.dtype, options.seed,
                                             number * len(tensors) + index, span)
            kind = (f"in [{span[0]:g}, {span[1]:g}]" if span else
                    "N(0,1)" if np.issubdtype(np.dtype(item.dtype), np.floating) else
                    "default range")
            parts.append(f"{item.name}: seeded {item.dtype} {kind}")
        ids.append(image.id)
        values.append(value)
        sources.append("; ".join(parts))
    return ids, values, sources


def several_inputs(
    options: RunOptions, record: Mapping[str, Any]
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The run's inputs, each one packed vector (see the module docstring).

    Args:
        options: The run's settings (``--inputs``, images, seed, preprocessing, range).
        record: The run store's packing record.

    Returns:
        Packed float32 arrays by input id, and where each came from.

    Raises:
        UsageError: A bad ``--inputs`` file, or a value float32 cannot hold exactly.
    """
    tensors = packing_tensors(record)
    names = [t.name for t in tensors]
    if options.inputs_file:
        path = Path(options.inputs_file)
        values = _from_npz(path, tensors)
        ids = [f"input{n}" for n in range(len(values))]
        sources = [f"{path}[{n}]" for n in range(len(values))]
    else:
        ids, values, sources = _seeded(options, tensors)
    arrays = {i: pack(tensors, v, names) for i, v in zip(ids, values, strict=True)}
    return arrays, dict(zip(ids, sources, strict=True))
