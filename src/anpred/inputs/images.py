"""Where input images come from: packaged photographs, user files, seeded synthetic images.

Nothing is downloaded: the photographs ship inside installed packages (ultralytics'
``assets/`` and scikit-image's bundled ``skimage.data`` images). scikit-image's are read
from its ``data/`` folder with Pillow, the reader ``skimage.data`` itself ends up in
(through imageio), without importing scikit-image: its ``skimage.io`` imports SciPy's
linear algebra and NumPy's f2py (a run's inputs step, 8 photographs: 0.39-0.47 CPU s with
``skimage.data``, 0.13-0.15 without). Same pixels, bit for bit (all 14 photographs,
scikit-image 0.26: tests/inputs/test_inputs.py); a file that is not there, or not plain
RGB or grey, is left to ``skimage.data``.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from anpred.errors import UsageError

#: Bundled photographs in the order they are used; (package, name).
SAMPLE_IMAGES: tuple[tuple[str, str], ...] = (
    ("ultralytics", "bus.jpg"),
    ("ultralytics", "zidane.jpg"),
    ("skimage", "astronaut"),
    ("skimage", "coffee"),
    ("skimage", "chelsea"),
    ("skimage", "rocket"),
    ("skimage", "stereo_motorcycle"),
    ("skimage", "immunohistochemistry"),
    ("skimage", "hubble_deep_field"),
    ("skimage", "retina"),
    ("skimage", "colorwheel"),
    ("skimage", "camera"),
    ("skimage", "coins"),
    ("skimage", "clock"),
    ("skimage", "brick"),
    ("skimage", "grass"),
)


SKIMAGE_FILES: dict[str, str] = {
    "astronaut": "astronaut.png",
    "coffee": "coffee.png",
    "chelsea": "chelsea.png",
    "rocket": "rocket.jpg",
    "stereo_motorcycle": "motorcycle_left.png",
    "immunohistochemistry": "ihc.png",
    "hubble_deep_field": "hubble_deep_field.jpg",
    "retina": "retina.jpg",
    "colorwheel": "color.png",
    "camera": "camera.png",
    "coins": "coins.png",
    "clock": "clock_motion.png",
    "brick": "brick.png",
    "grass": "grass.png",
}
"""The file in scikit-image's ``data/`` folder that each ``skimage.data`` function reads
(``stereo_motorcycle``: its left image, the one used)."""

_PLAIN_MODES = ("RGB", "L")
"""Pillow modes whose pixels ``skimage.data`` returns unconverted (others: ``skimage.data``)."""


@dataclass(frozen=True)
class InputImage:
    """One raw input image.

    Attributes:
        id: Stable identifier used in results (``bus``, ``astronaut``, ``synthetic3``).
        pixels: ``H x W x 3`` uint8 RGB array.
        source: Where it came from (package asset, file path, or ``synthetic(seed)``).
    """

    id: str
    pixels: np.ndarray
    source: str


def _to_rgb(pixels: np.ndarray) -> np.ndarray:
    pixels = np.asarray(pixels)
    if pixels.dtype != np.uint8:
        pixels = np.clip(pixels, 0, 255).astype(np.uint8)
    if pixels.ndim == 2:
        pixels = np.stack([pixels] * 3, axis=-1)
    return np.ascontiguousarray(pixels[..., :3])


def _sample(package: str, name: str) -> InputImage | None:
    if package == "ultralytics":
        spec = importlib.util.find_spec("ultralytics")
        if spec is None or spec.origin is None:
            return None
        path = Path(spec.origin).parent / "assets" / name
        return read_image(path, image_id=Path(name).stem) if path.exists() else None
    spec = importlib.util.find_spec("skimage")
    if spec is None:
        return None
    pixels = _skimage_file(spec.submodule_search_locations, name)
    if pixels is None:
        import skimage.data

        try:
            pixels = getattr(skimage.data, name)()
        except Exception:  # an image the installed version does not bundle
            return None
        if isinstance(pixels, tuple):
            pixels = pixels[0]
    return InputImage(name.replace("stereo_", ""), _to_rgb(pixels), f"skimage.data.{name}")


def _skimage_file(folders: Sequence[str] | None, name: str) -> np.ndarray | None:
    """The pixels ``skimage.data.<name>()`` returns, read from scikit-image's ``data/``
    folder (``folders``: the package's) with Pillow; ``None`` when that cannot be done.
    """
    if not folders or name not in SKIMAGE_FILES:
        return None
    path = Path(next(iter(folders))) / "data" / SKIMAGE_FILES[name]
    if not path.is_file():
        return None
    from PIL import Image

    try:
        with Image.open(path) as img:
            return np.array(img) if img.mode in _PLAIN_MODES else None
    except Exception:  # noqa: BLE001 - a damaged file: skimage.data says what it says
        return None


def sample_images(count: int) -> list[InputImage]:
    """Return the first ``count`` bundled photographs.

    Raises:
        UsageError: When fewer than ``count`` bundled photographs are available.
    """
    found: list[InputImage] = []
    for package, name in SAMPLE_IMAGES:
        if len(found) == count:
            break
        image = _sample(package, name)
        if image is not None:
            found.append(image)
    if len(found) < count:
        raise UsageError(
            f"only {len(found)} bundled images are available (asked for {count}); "
            "pass --image PATH for more, or install ultralytics and scikit-image"
        )
    return found


def read_image(path: str | os.PathLike[str], image_id: str | None = None) -> InputImage:
    """Read a user image file as RGB.

    Raises:
        UsageError: When the file is missing or is not a readable image.
    """
    from PIL import Image

    path = Path(path)
    if not path.is_file():
        raise UsageError(f"image {str(path)!r} does not exist")
    try:
        with Image.open(path) as img:
            pixels = np.asarray(img.convert("RGB"))
    except Exception as err:  # PIL raises several types; some packages patch Image.open
        raise UsageError(
            f"{str(path)!r} is not a readable image ({err.__class__.__name__})"
        ) from None
    return InputImage(image_id or path.stem, pixels, str(path))


def synthetic_images(
    count: int, seed: int, height: int = 480, width: int = 640
) -> list[InputImage]:
    """Return ``count`` seeded random RGB images (smooth noise, like a blurred scene)."""
    images = []
    for index in range(count):
        rng = np.random.default_rng([seed, index])
        coarse = rng.uniform(0, 255, size=(height // 16 + 1, width // 16 + 1, 3))
        pixels = np.kron(coarse, np.ones((16, 16, 1)))[:height, :width]
        pixels = pixels + rng.normal(0, 12, size=pixels.shape)
        images.append(InputImage(f"synthetic{index}", _to_rgb(pixels), f"synthetic(seed={seed})"))
    return images


def gather_images(
    count: int | None = None, paths: Sequence[str] = (), synthetic: int = 0, seed: int = 0
) -> list[InputImage]:
    """Collect the inputs of a run: user paths, else bundled photographs, plus synthetic ones.

    Raises:
        UsageError: On duplicate image ids or unreadable files.
    """
    images = [read_image(p) for p in paths]
    if not paths:
        images += sample_images(2 if count is None else count)
    elif count is not None and count != len(images):
        images = images[:count]
    images += synthetic_images(synthetic, seed)
    ids = [img.id for img in images]
    if len(set(ids)) != len(ids):
        raise UsageError(f"input image ids must be unique, got {ids}; rename the files")
    return images
