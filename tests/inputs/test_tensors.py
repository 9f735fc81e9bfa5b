"""Inputs of a user's ONNX file: npz arrays, seeded typed tensors, image preprocessings."""

from __future__ import annotations

import numpy as np
import pytest

from anpred.errors import UsageError
from anpred.inputs.preprocess import imagenet, letterbox
from anpred.inputs.tensors import (
    count_npz_inputs,
    image_side,
    image_tensor,
    npz_inputs,
    random_tensor,
)


def test_npz_leading_batch_gives_n_inputs(tmp_path) -> None:
    path = tmp_path / "in.npz"
    data = np.arange(3 * 2 * 5, dtype=np.float32).reshape(3, 2, 5)
    np.savez(path, tokens=data)
    arrays, sources = npz_inputs(path, "tokens", (1, 2, 5), "float32")
    assert list(arrays) == ["input0", "input1", "input2"]
    assert np.array_equal(arrays["input2"], data[2:3]) and arrays["input2"].shape == (1, 2, 5)
    assert sources["input1"].endswith("in.npz[1]")
    with pytest.raises(UsageError, match="no array named 'ids'"):
        npz_inputs(path, "ids", (1, 2, 5), "float32")
    with pytest.raises(UsageError, match="takes 1x4x5"):
        npz_inputs(path, "tokens", (1, 4, 5), "float32")
    with pytest.raises(UsageError, match="takes int64"):
        npz_inputs(path, "tokens", (1, 2, 5), "int64")  # floats are not token ids


def test_the_count_of_npz_inputs_is_read_from_headers_as_they_are_split(tmp_path) -> None:
    path = tmp_path / "in.npz"
    np.savez(path, tokens=np.zeros((7, 2, 5), np.float32), mask=np.zeros((7, 5), np.int64))
    for shape in [(1, 2, 5), (2, 5)]:  # a leading N where the batch is 1, and a stack
        split = npz_inputs(path, "tokens", shape, "float32")[0]
        assert count_npz_inputs(path, "tokens", shape) == len(split) == 7
    assert count_npz_inputs(path, "tokens", (7, 2, 5)) == 1  # the model's own shape: one
    assert count_npz_inputs(path, "tokens", (1, 4, 5)) is None  # does not fit: read later
    assert count_npz_inputs(path, "packed", (1, 999)) == 7  # several inputs: the first's N
    (tmp_path / "bad.npz").write_text("not a zip")
    assert count_npz_inputs(tmp_path / "bad.npz", "tokens", (1, 2, 5)) is None


def test_random_tensors_follow_dtype_shape_and_range() -> None:
    ids = random_tensor((1, 64), "int64", seed=0, index=1, input_range=(5, 9))
    assert ids.dtype == np.int64 and ids.shape == (1, 64)
    assert ids.min() >= 5 and ids.max() <= 9 and len(set(ids.ravel())) == 5
    raw = random_tensor((1, 4096), "uint8", seed=0, index=0)
    assert raw.dtype == np.uint8 and raw.max() > 250  # bytes span 0-255 by default
    floats = random_tensor((2, 3), "float32", 0, 0)
    # unchanged from before: standard normal floats seeded by (seed, index)
    expected = np.random.default_rng([0, 0]).standard_normal((2, 3)).astype(np.float32)
    assert np.array_equal(floats, expected)
    assert np.array_equal(random_tensor((8,), "int32", 3, 2), random_tensor((8,), "int32", 3, 2))


def test_square_rgb_preprocessings_match_the_zoo_ones() -> None:
    pixels = np.random.default_rng(0).integers(0, 256, (120, 90, 3), dtype=np.uint8)
    assert np.array_equal(image_tensor(pixels, (1, 3, 64, 64)), letterbox(pixels, 64))
    assert np.array_equal(image_tensor(pixels, (1, 3, 224, 224), "imagenet"), imagenet(pixels))
    assert image_side(None, None) == 640 and image_side("imagenet", None) == 224


def test_grayscale_bgr_mean_std_and_non_square() -> None:
    pixels = np.zeros((40, 60, 3), np.uint8)
    pixels[..., 0] = 200  # red
    grey = image_tensor(pixels, (1, 1, 64, 256), "scale", mean=(0.5,), std=(0.5,))
    assert grey.shape == (1, 1, 64, 256) and grey.dtype == np.float32
    luma = round(200 * 299 / 1000) / 255  # ITU-R 601 luma of pure red
    assert abs(float(grey[0, 0, 10, 10]) - (luma - 0.5) / 0.5) < 1e-2
    rgb = image_tensor(pixels, (1, 3, 48, 320), "letterbox")
    bgr = image_tensor(pixels, (1, 3, 48, 320), "letterbox", bgr=True)
    assert rgb.shape == (1, 3, 48, 320)
    assert np.array_equal(rgb[0, 0], bgr[0, 2]) and rgb[0, 0, 24, 160] == np.float32(200 / 255)
    assert float(rgb[0, 0, 24, 2]) == pytest.approx(114 / 255)  # letterbox padding on the side
    raw = image_tensor(pixels, (2, 3, 8, 8), "none", dtype="uint8")
    assert raw.dtype == np.uint8 and raw.shape == (2, 3, 8, 8) and raw.max() == 200
    with pytest.raises(UsageError, match="--mean takes 1 or 3 values"):
        image_tensor(pixels, (1, 3, 8, 8), "scale", mean=(0.1, 0.2))
