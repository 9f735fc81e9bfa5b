"""Fuzz: image files for ``anpred run ... --image PATH``.

Every Pillow mode a user's file may hold (1, L, P, RGBA, I;16, I, F, CMYK, LA, YCbCr...)
in the formats that store it, extreme sizes and aspect ratios, truncated files,
decompression bombs (beyond Pillow's limit, real and header-only), and files that are not
images at all (text named ``.jpg``, empty files, folders, named pipes).

The CLI cases are few (each good image is a whole run); the in-process cases check the same
inputs against :func:`~anpred.inputs.images.read_image` and the preprocessing, many times.
"""

from __future__ import annotations

import io
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from fuzz_support import CHEAP_RUN, Cases, case_dir, fixed_case, fuzz, run_cli, tiny_model
from hypothesis import given
from hypothesis import strategies as st

from anpred.errors import UsageError

#: (mode, formats Pillow 13 can store it in), measured with Image.new(mode).save(fmt).
MODES = {
    "1": ("PNG", "BMP", "TIFF", "GIF", "PPM"),
    "L": ("PNG", "JPEG", "BMP", "TIFF", "GIF", "WEBP"),
    "P": ("PNG", "GIF", "BMP", "TIFF"),
    "RGB": ("PNG", "JPEG", "BMP", "TIFF", "WEBP", "PPM", "TGA"),
    "RGBA": ("PNG", "TIFF", "WEBP", "TGA"),
    "I;16": ("PNG", "TIFF"),
    "I": ("TIFF", "PPM"),
    "F": ("TIFF",),
    "CMYK": ("JPEG", "TIFF"),
    "LA": ("PNG", "TIFF"),
    "YCbCr": ("JPEG", "TIFF"),
}
SUFFIX = {"PNG": ".png", "JPEG": ".jpg", "BMP": ".bmp", "TIFF": ".tif", "GIF": ".gif",
          "WEBP": ".webp", "PPM": ".ppm", "TGA": ".tga"}


@dataclass(frozen=True)
class Picture:
    """A real image in ``mode`` and ``fmt``, ``width x height``, content from ``seed``."""

    mode: str
    fmt: str
    width: int
    height: int
    seed: int
    keep: float = 1.0  # < 1: the file is truncated to this share of its bytes
    expect: str = "any"

    def data(self) -> bytes:
        from PIL import Image

        rng = np.random.default_rng(self.seed)
        rgb = rng.integers(0, 256, (self.height, self.width, 3), dtype=np.uint8)
        image = Image.fromarray(rgb).convert(self.mode if self.mode != "I;16" else "L")
        if self.mode == "I;16":
            wide = rng.integers(0, 65536, (self.height, self.width), dtype=np.uint16)
            image = Image.fromarray(wide)
        buffer = io.BytesIO()
        image.save(buffer, self.fmt)
        raw = buffer.getvalue()
        return raw if self.keep >= 1 else raw[: int(len(raw) * self.keep)]

    def write(self, folder: Path) -> Path:
        path = folder / f"picture{SUFFIX[self.fmt]}"
        path.write_bytes(self.data())
        return path


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


@dataclass(frozen=True)
class Bomb:
    """A PNG declaring ``width x height`` 1-bit pixels; ``real``: its data is all there."""

    width: int
    height: int
    real: bool
    expect: str = "refused"

    def write(self, folder: Path) -> Path:
        header = struct.pack(">IIBBBBB", self.width, self.height, 1, 0, 0, 0, 0)
        row = b"\x00" * (1 + (self.width + 7) // 8)
        packer = zlib.compressobj(9)
        rows = self.height if self.real else 4
        body = b"".join(packer.compress(row) for _ in range(rows)) + packer.flush()
        path = folder / "bomb.png"
        path.write_bytes(b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header)
                         + _png_chunk(b"IDAT", body) + _png_chunk(b"IEND", b""))
        return path


@dataclass(frozen=True)
class NotAnImage:
    """Something named like an image that is not one."""

    kind: str
    name: str = "photo.jpg"
    expect: str = "refused"

    def write(self, folder: Path) -> Path:
        path = folder / self.name
        if self.kind == "text":
            path.write_text("meow, this is a text file\n" * 20)
        elif self.kind == "empty":
            path.write_bytes(b"")
        elif self.kind == "random":
            path.write_bytes(np.random.default_rng(len(self.name)).bytes(4096))
        elif self.kind == "folder":
            path.mkdir()
        elif self.kind == "fifo":
            os.mkfifo(path)
        elif self.kind == "missing":
            pass
        elif self.kind == "onnx":
            path.write_bytes(tiny_model().read_bytes())
        elif self.kind == "png_magic_only":
            path.write_bytes(b"\x89PNG\r\n\x1a\n")
        return path


def pictures() -> st.SearchStrategy[Picture]:
    """Real images in every mode, including extreme sizes and truncated files."""
    sides = st.one_of(st.integers(1, 48), st.sampled_from([1, 2, 3, 997, 3000]))
    return st.sampled_from(sorted(MODES)).flatmap(
        lambda mode: st.builds(
            Picture,
            st.just(mode),
            st.sampled_from(MODES[mode]),
            sides,
            sides,
            st.integers(0, 2**16),
            st.one_of(st.just(1.0), st.floats(0.0, 0.95)),
        )
    ).filter(lambda p: p.width * p.height <= 3_000_000)


def image_inputs() -> st.SearchStrategy[object]:
    """Everything ``--image`` may be given."""
    return st.one_of(
        pictures(),
        st.builds(Bomb, st.sampled_from([15000, 100000]), st.sampled_from([12000, 100000]),
                  st.booleans()),
        st.builds(NotAnImage, st.sampled_from(["text", "empty", "random", "folder", "fifo",
                                               "missing", "onnx", "png_magic_only"]),
                  st.sampled_from(["photo.jpg", "photo.png", "photo", ".jpg", "x.tif"])),
    )


def test_fuzz_image_flag() -> None:
    cases = Cases("run --image")
    model = tiny_model()

    @fuzz(short_examples=3)
    @given(image=image_inputs())
    def case(image: object) -> None:
        with case_dir() as tmp:
            path = image.write(tmp)  # type: ignore[attr-defined]
            result = run_cli(
                ["run", str(model), *CHEAP_RUN, "--image", str(path), "--out", str(tmp / "o")],
                cwd=tmp,
            )
            cases.check(image, result, expect=image.expect)  # type: ignore[attr-defined]

    case()
    cases.finish()


@fixed_case
@pytest.mark.parametrize(
    "image",
    [NotAnImage("text"), NotAnImage("fifo"), Bomb(15000, 12000, real=True),
     Bomb(100000, 100000, real=False), Picture("CMYK", "JPEG", 20, 10, 1, keep=0.5)],
    ids=repr,
)
def test_hostile_images_are_refused_in_one_line(image: object) -> None:
    cases = Cases("run --image")
    with case_dir() as tmp:
        path = image.write(tmp)  # type: ignore[attr-defined]
        result = run_cli(
            ["run", str(tiny_model()), *CHEAP_RUN, "--image", str(path), "--out", str(tmp / "o")],
            cwd=tmp,
        )
        cases.check(image, result, expect="refused", quick=True)
    cases.finish()


def test_fuzz_read_image_and_preprocessing_in_process() -> None:
    """The same inputs, many more of them, straight into the reader and the preprocessing."""
    from anpred.inputs.images import read_image
    from anpred.inputs.preprocess import imagenet, letterbox

    cases = Cases("read_image + preprocess (in process)")

    @fuzz(short_examples=30, cheap=True)
    @given(image=image_inputs().filter(lambda i: not isinstance(i, NotAnImage) or i.kind != "fifo"),
           size=st.sampled_from([16, 32, 224]))
    def case(image: object, size: int) -> None:
        problems: list[str] = []
        with case_dir() as tmp:
            path = image.write(tmp)  # type: ignore[attr-defined]
            try:
                pixels = read_image(path).pixels
            except UsageError as err:
                if "\n" in str(err):
                    problems.append("multi-line error")
                if isinstance(image, Picture) and image.keep >= 1:
                    problems.append(f"a good image refused: {err}")
            except Exception as err:  # noqa: BLE001 - any other exception is the finding
                problems.append(f"{err.__class__.__name__}: {err}")
            else:
                if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] != 3:
                    problems.append(f"pixels {pixels.dtype} {pixels.shape}, want HxWx3 uint8")
                for name, prep in (("letterbox", letterbox), ("imagenet", imagenet)):
                    try:
                        x = prep(pixels, size)
                    except Exception as err:  # noqa: BLE001
                        problems.append(f"{name}: {err.__class__.__name__}: {err}")
                        continue
                    if x.shape != (1, 3, size, size) or x.dtype != np.float32:
                        problems.append(f"{name}: {x.dtype} {x.shape}")
                    elif not np.isfinite(x).all():
                        problems.append(f"{name}: non-finite values")
                if image.expect == "refused":  # type: ignore[attr-defined]
                    problems.append("bad input accepted")
        cases.add(image, problems)

    case()
    cases.finish()
