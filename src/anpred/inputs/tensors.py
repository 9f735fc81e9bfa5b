"""Inputs of a user's ONNX file: preprocessed images, arrays from a file, or seeded tensors.

* An **image input** (NCHW, 1 or 3 channels) gets the bundled or given photographs,
  preprocessed to its height and width: ``letterbox`` (keep aspect, pad grey 114, /255),
  ``imagenet`` (resize the short side by 256/224, centre crop, /255, ImageNet mean/std),
  ``scale`` (resize, /255) or ``none`` (resize, raw 0-255 values). ``--mean``/``--std``
  (per channel, in the order the model takes its channels) are applied after; ``--bgr``
  reverses the channel order first; a 1-channel model gets luma (ITU-R 601, Pillow's ``L``).
* ``--inputs FILE.npz``: arrays named by model input; an array whose leading axis is N where
  the model's batch is 1 gives N inputs.
* Any other input: seeded random tensors of its dtype and shape -- standard normal floats
  (uniform in ``--input-range LO,HI`` when given), integers uniform in ``[LO, HI]`` (default
  0-255 for uint8, -128-127 for int8, 0-1 for bool, 0-100 otherwise).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from anpred.errors import UsageError
from anpred.inputs.preprocess import IMAGENET_MEAN, IMAGENET_STD, _resize, letterbox

#: Image preprocessings of a user's ONNX file, with the side a dynamic image input gets.
PREPROCESS_SIDES = {"letterbox": 640, "imagenet": 224, "scale": 640, "none": 640}
#: Default preprocessing of an image input.
DEFAULT_PREPROCESS = "letterbox"


def image_side(preprocess: str | None, input_size: int | None) -> int:
    """The side of a dynamic image input: ``--input-size``, else the preprocessing's own."""
    return input_size or PREPROCESS_SIDES[preprocess or DEFAULT_PREPROCESS]


def is_image_shape(shape: Sequence[int]) -> bool:
    """NCHW with 1 or 3 channels."""
    return len(shape) == 4 and shape[1] in (1, 3)


def _letterbox_hw(pixels: np.ndarray, height: int, width: int) -> np.ndarray:
    if height == width and pixels.ndim == 3:  # the zoo's letterbox, bit for bit
        return letterbox(pixels, height)[0].transpose(1, 2, 0)
    h, w = pixels.shape[:2]
    ratio = min(height / h, width / w)
    new_w, new_h = max(1, round(w * ratio)), max(1, round(h * ratio))
    resized = _resize(pixels, new_w, new_h) if (new_w, new_h) != (w, h) else pixels
    channels = pixels.shape[2] if pixels.ndim == 3 else 1
    canvas = np.full((height, width, channels), 114, dtype=np.uint8)
    top, left = (height - new_h) // 2, (width - new_w) // 2
    canvas[top : top + new_h, left : left + new_w] = resized.reshape(new_h, new_w, -1)
    return canvas.astype(np.float32) / 255.0


def _centre_crop(pixels: np.ndarray, height: int, width: int) -> np.ndarray:
    resize = round(min(height, width) * 256 / 224)
    h, w = pixels.shape[:2]
    scale = resize / min(h, w)
    new_w, new_h = max(width, round(w * scale)), max(height, round(h * scale))
    resized = _resize(pixels, new_w, new_h).reshape(new_h, new_w, -1)
    top, left = (new_h - height) // 2, (new_w - width) // 2
    return resized[top : top + height, left : left + width].astype(np.float32) / 255.0


def image_tensor(
    pixels: np.ndarray,
    shape: Sequence[int],
    kind: str | None = None,
    mean: Sequence[float] = (),
    std: Sequence[float] = (),
    bgr: bool = False,
    dtype: str = "float32",
) -> np.ndarray:
    """One RGB photograph (``H x W x 3`` uint8) as an NCHW input of ``shape``.

    Raises:
        UsageError: ``mean``/``std`` with a length other than 1 or the channel count.
    """
    from PIL import Image

    kind = kind or DEFAULT_PREPROCESS
    batch, channels, height, width = (int(d) for d in shape)
    if channels == 1:  # 2-D: Pillow resizes it as a grey image
        pixels = np.asarray(Image.fromarray(pixels).convert("L"))
    elif bgr:
        pixels = np.ascontiguousarray(pixels[:, :, ::-1])
    if kind == "letterbox":
        hwc = _letterbox_hw(pixels, height, width)
    elif kind == "imagenet":
        hwc = _centre_crop(pixels, height, width)
        mean = mean or (IMAGENET_MEAN.tolist()[:channels] if channels == 3 else ())
        std = std or (IMAGENET_STD.tolist()[:channels] if channels == 3 else ())
    else:
        resized = _resize(pixels, width, height).reshape(height, width, channels)
        hwc = resized.astype(np.float32) / (255.0 if kind == "scale" else 1.0)
    for flag, values in (("--mean", mean), ("--std", std)):
        if len(values) not in (0, 1, channels):
            raise UsageError(f"{flag} takes 1 or {channels} values for this model, "
                             f"got {len(values)}")
    if mean:
        hwc = hwc - np.asarray(mean, np.float32)
    if std:
        hwc = hwc / np.asarray(std, np.float32)
    chw = hwc.transpose(2, 0, 1)[None].astype(np.float32)
    return np.repeat(chw, batch, axis=0).astype(dtype)


def _default_range(dtype: np.dtype) -> tuple[float, float]:
    if dtype == np.bool_:
        return 0, 1
    if dtype == np.uint8:
        return 0, 255
    if dtype == np.int8:
        return -128, 127
    return 0, 100


def parse_input_ranges(values: Sequence[str]) -> dict[str | None, tuple[float, float]]:
    """Parse repeated ``--input-range [NAME=]LO,HI`` values; key ``None`` for a bare range.

    Raises:
        UsageError: Not two finite numbers with LO <= HI, an empty name, or one given twice.
    """
    import math

    ranges: dict[str | None, tuple[float, float]] = {}
    for value in values:
        name, sep, bounds = value.rpartition("=")
        key = name.strip() if sep else None
        try:
            numbers = tuple(float(v) for v in bounds.split(","))
        except ValueError:
            numbers = ()
        if (sep and not key) or len(numbers) != 2 or not all(map(math.isfinite, numbers)) or (
            numbers[0] > numbers[1]
        ):
            raise UsageError(f"--input-range takes [NAME=]LO,HI with LO <= HI, got {value!r}")
        if key in ranges:
            raise UsageError(f"--input-range given twice for {key or 'every input'}")
        ranges[key] = (numbers[0], numbers[1])
    return ranges


def input_range_of(
    name: str, names: Sequence[str], bare: Sequence[float], named: Sequence[str]
) -> tuple[float, ...]:
    """The range of model input ``name``'s seeded values: its own ``NAME=LO,HI``, else the
    bare ``--input-range``, else none (the dtype's default).

    Raises:
        UsageError: A named range for a name that is not a model input.
    """
    ranges = parse_input_ranges(named)
    unknown = [k for k in ranges if k not in names]
    if unknown:
        raise UsageError(f"--input-range names {unknown[0]!r}, which is not an input of the "
                         f"model (inputs: {', '.join(names)})")
    return ranges.get(name, tuple(bare))


def random_tensor(
    shape: Sequence[int],
    dtype: str,
    seed: int,
    index: int,
    input_range: Sequence[float] = (),
) -> np.ndarray:
    """A seeded random input of ``shape`` and ``dtype`` (see the module docstring)."""
    rng = np.random.default_rng([seed, index])
    kind = np.dtype(dtype)
    if np.issubdtype(kind, np.floating):
        if input_range:
            return rng.uniform(input_range[0], input_range[1], tuple(shape)).astype(kind)
        return rng.standard_normal(tuple(shape)).astype(kind)
    lo, hi = input_range or _default_range(kind)
    return rng.integers(int(lo), int(hi), tuple(shape), endpoint=True).astype(kind)


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of ``--inputs FILE.npz``.

    Raises:
        UsageError: Unreadable file.
    """
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except (OSError, ValueError) as err:
        raise UsageError(f"--inputs {str(path)!r} is not a readable .npz file ({err})") from None


def npz_shapes(path: Path) -> dict[str, tuple[int, ...]] | None:
    """The shape of every array of ``path`` from its headers alone (no data read), or
    ``None`` where the file cannot be read so (:func:`read_npz` then names the problem).
    """
    import zipfile

    from numpy.lib import format as npy

    shapes: dict[str, tuple[int, ...]] = {}
    try:
        with zipfile.ZipFile(path) as archive:
            for member in archive.namelist():
                if not member.endswith(".npy"):
                    continue
                with archive.open(member) as stream:
                    version = npy.read_magic(stream)
                    if version == (1, 0):
                        shape, _, _ = npy.read_array_header_1_0(stream)
                    else:
                        shape, _, _ = npy.read_array_header_2_0(stream)
                shapes[member[: -len(".npy")]] = tuple(shape)
    except (OSError, ValueError, zipfile.BadZipFile):
        return None
    return shapes


def count_npz_inputs(path: Path, name: str, shape: Sequence[int]) -> int | None:
    """How many inputs ``--inputs`` holds, read from its headers: as
    :func:`split_batches` splits the array ``name`` for a model input of ``shape``, else
    (a model of several inputs, packed) the leading axis of its first array. ``None``
    where the file does not tell (it is checked, with a clear error, when it is read).
    """
    shapes = npz_shapes(path)
    if not shapes:
        return None
    given = shapes.get(name)
    if given is None:
        first = next(iter(shapes.values()))
        return first[0] if first else 1
    split = _split(given, tuple(shape))
    return None if split is None else 1 if split == _WHOLE else given[0]


_WHOLE, _SLICES, _ROWS = "whole", "slices", "rows"


def _split(given: tuple[int, ...], shape: tuple[int, ...]) -> str | None:
    """How an array of shape ``given`` holds inputs of ``shape``: one input (``whole``), a
    leading N where the model's batch is 1 (``slices``), a stack of them (``rows``), or
    ``None`` (it does not fit).
    """
    if given == shape:
        return _WHOLE
    if shape and shape[0] == 1 and len(given) == len(shape) and given[1:] == shape[1:]:
        return _SLICES
    if given[1:] == shape:
        return _ROWS
    return None


def split_batches(
    path: Path, arrays: dict[str, np.ndarray], name: str, shape: Sequence[int], dtype: str
) -> list[np.ndarray]:
    """The inputs array ``name`` of ``--inputs`` holds for a model input of ``shape``.

    Raises:
        UsageError: No array named ``name``, or a shape/dtype that does not fit the input.
    """
    if name not in arrays:
        raise UsageError(f"--inputs {path.name} has no array named {name!r} (the model's "
                         f"input); it holds {', '.join(arrays) or 'nothing'}")
    array, shape = arrays[name], tuple(shape)
    split = _split(array.shape, shape)
    if split == _WHOLE:
        batches = [array]
    elif split == _SLICES:
        batches = [array[i : i + 1] for i in range(array.shape[0])]
    elif split == _ROWS:
        batches = list(array)
    else:
        raise UsageError(f"--inputs {path.name}: array {name!r} has shape "
                         f"{'x'.join(map(str, array.shape))}; the model takes "
                         f"{'x'.join(map(str, shape))} (a leading N gives N inputs)")
    if not batches:
        raise UsageError(f"--inputs {path.name}: array {name!r} holds no input")
    if not np.can_cast(array.dtype, dtype, "same_kind"):
        raise UsageError(f"--inputs {path.name}: array {name!r} is {array.dtype}; the model "
                         f"takes {dtype}")
    return [np.ascontiguousarray(b, dtype=dtype) for b in batches]


def npz_inputs(
    path: Path, name: str, shape: Sequence[int], dtype: str
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The inputs in ``path`` (``--inputs FILE.npz``) for the model input ``name``.

    Returns:
        Arrays by input id (``input0``, ...) and where each came from.

    Raises:
        UsageError: Unreadable file, no array named ``name``, or a shape/dtype that does
            not fit the input.
    """
    batches = split_batches(path, read_npz(path), name, shape, dtype)
    ids = [f"input{i}" for i in range(len(batches))]
    return (
        dict(zip(ids, batches, strict=True)),
        {i: f"{path}[{n}]" for n, i in enumerate(ids)},
    )
