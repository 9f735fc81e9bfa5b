from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from anpred.errors import UsageError
from anpred.inputs.images import (
    SAMPLE_IMAGES,
    SKIMAGE_FILES,
    _to_rgb,
    gather_images,
    read_image,
    sample_images,
    synthetic_images,
)
from anpred.inputs.preprocess import imagenet, letterbox


def test_sample_images_are_real_and_deterministic() -> None:
    first, second = sample_images(3), sample_images(3)
    assert [i.id for i in first] == ["bus", "zidane", "astronaut"]
    for a, b in zip(first, second, strict=True):
        assert a.pixels.dtype == np.uint8 and a.pixels.shape[2] == 3
        assert np.array_equal(a.pixels, b.pixels)
        assert a.pixels.std() > 20  # a photograph, not a flat image


def test_skimage_photographs_are_the_pixels_skimage_data_returns() -> None:
    skimage_data = pytest.importorskip("skimage.data")
    names = [name for package, name in SAMPLE_IMAGES if package == "skimage"]
    assert sorted(names) == sorted(SKIMAGE_FILES)  # every photograph has its file
    images = {i.source: i for i in sample_images(len(SAMPLE_IMAGES))}
    for name in names:
        expected = getattr(skimage_data, name)()
        expected = _to_rgb(expected[0] if isinstance(expected, tuple) else expected)
        image = images[f"skimage.data.{name}"]
        assert image.pixels.dtype == expected.dtype and image.pixels.shape == expected.shape
        assert np.array_equal(image.pixels, expected), name


def test_sample_images_do_not_import_skimage() -> None:
    pytest.importorskip("skimage")
    code = (
        "import sys; from anpred.inputs.images import sample_images; "
        "sample_images(6); print('skimage' in sys.modules, 'scipy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_letterbox_keeps_aspect_and_pads_grey() -> None:
    pixels = np.full((100, 200, 3), 255, np.uint8)
    out = letterbox(pixels, 64)
    assert out.shape == (1, 3, 64, 64) and out.dtype == np.float32
    assert np.allclose(out[0, :, 0, :], 114 / 255)  # top rows are padding
    assert np.allclose(out[0, :, 32, :], 1.0)  # centre row is image


def test_imagenet_normalises() -> None:
    pixels = np.full((300, 400, 3), 124, np.uint8)
    out = imagenet(pixels)
    assert out.shape == (1, 3, 224, 224)
    assert abs(float(out[0, 0].mean()) - (124 / 255 - 0.485) / 0.229) < 1e-5


def test_synthetic_images_are_seeded() -> None:
    a, b = synthetic_images(2, seed=3), synthetic_images(2, seed=3)
    assert np.array_equal(a[1].pixels, b[1].pixels)
    assert not np.array_equal(a[0].pixels, synthetic_images(1, seed=4)[0].pixels)


def test_bad_image_file_is_a_usage_error(tmp_path) -> None:
    bad = tmp_path / "notes.png"
    bad.write_text("not an image")
    with pytest.raises(UsageError, match="not a readable image"):
        read_image(bad)
    with pytest.raises(UsageError, match="does not exist"):
        gather_images(paths=[str(tmp_path / "missing.jpg")])
