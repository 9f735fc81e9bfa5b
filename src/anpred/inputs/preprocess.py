"""Each model family's own preprocessing, deterministic, in NumPy + Pillow."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from anpred.inputs.images import InputImage

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def _resize(pixels: np.ndarray, width: int, height: int) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.fromarray(pixels).resize((width, height), Image.Resampling.BILINEAR))


def letterbox(pixels: np.ndarray, size: int = 640, fill: int = 114) -> np.ndarray:
    """YOLO letterbox: keep aspect ratio, fit into ``size x size``, pad with grey (114).

    Returns:
        ``1 x 3 x size x size`` float32 array in [0, 1].
    """
    height, width = pixels.shape[:2]
    ratio = min(size / height, size / width)
    # at least one pixel: a 997x3 strip would otherwise round to height 0
    new_w, new_h = max(1, round(width * ratio)), max(1, round(height * ratio))
    resized = _resize(pixels, new_w, new_h) if (new_w, new_h) != (width, height) else pixels
    canvas = np.full((size, size, 3), fill, dtype=np.uint8)
    top, left = (size - new_h) // 2, (size - new_w) // 2
    canvas[top : top + new_h, left : left + new_w] = resized
    return (canvas.astype(np.float32) / 255.0).transpose(2, 0, 1)[None].copy()


def imagenet(pixels: np.ndarray, size: int = 224, resize: int | None = None) -> np.ndarray:
    """Torchvision classification preset: resize short side, centre-crop, normalise.

    Returns:
        ``1 x 3 x size x size`` float32 array normalised with ImageNet mean/std.
    """
    resize = resize or round(size * 256 / 224)
    height, width = pixels.shape[:2]
    scale = resize / min(height, width)
    new_w, new_h = max(resize, round(width * scale)), max(resize, round(height * scale))
    resized = _resize(pixels, new_w, new_h)
    top, left = (new_h - size) // 2, (new_w - size) // 2
    crop = resized[top : top + size, left : left + size].astype(np.float32) / 255.0
    return ((crop - IMAGENET_MEAN) / IMAGENET_STD).transpose(2, 0, 1)[None].astype(np.float32)


PREPROCESSORS: dict[str, Callable[..., np.ndarray]] = {"letterbox": letterbox, "imagenet": imagenet}


def preprocess(image: InputImage, kind: str, size: int) -> np.ndarray:
    """Apply preprocessing ``kind`` at input side ``size`` to one image (batch of 1)."""
    return PREPROCESSORS[kind](image.pixels, size)
