"""The capture reader: arrays read past the zip CRC are np.load's, and damage is refused."""

from __future__ import annotations

import json
import mmap
import zipfile
from pathlib import Path

import numpy as np
import pytest

from anpred.errors import DamagedRunError
from anpred.store.files import ALIGN, CaptureFile, load_npz, read_array, write_arrays


def _capture(tmp_path: Path, arrays: dict[str, np.ndarray]) -> tuple[Path, Path]:
    npz, meta = tmp_path / "x.capture.npz", tmp_path / "x.capture.json"
    write_arrays(npz, arrays)
    meta.write_text(json.dumps({"layouts": {}}))
    return npz, meta


def test_members_hold_what_write_array_writes(tmp_path: Path) -> None:
    """Arrays written from their own buffer: each member's bytes are ``write_array``'s."""
    import io

    rng = np.random.default_rng(0)
    arrays = {
        "f32": rng.standard_normal((1, 4, 5, 5)).astype(np.float32),
        "f64": rng.standard_normal((3, 5)),
        "fortran": np.asfortranarray(rng.standard_normal((4, 6)).astype(np.float32)),
        "strided": rng.standard_normal((6, 6))[::2, 1:],
        "bool": np.array([True, False, True]),
        "scalar": np.array(2.5, dtype=np.float16),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    npz = tmp_path / "x.npz"
    write_arrays(npz, arrays)
    with zipfile.ZipFile(npz) as archive:
        for key, array in arrays.items():
            expected = io.BytesIO()
            np.lib.format.write_array(expected, array, allow_pickle=False)
            assert archive.read(f"{key}.npy") == expected.getvalue(), key


def test_reader_returns_what_np_load_returns(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    arrays = {
        "model.0": rng.standard_normal((1, 16, 20, 20)).astype(np.float32),
        "model/1.conv": rng.standard_normal((3, 5)),  # a '/' in the key, float64
        "fortran": np.asfortranarray(rng.standard_normal((4, 6)).astype(np.float32)),
        "ints": np.arange(7, dtype=np.int64),
        "scalar": np.array(2.5, dtype=np.float16),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    npz, meta = _capture(tmp_path, arrays)
    with CaptureFile(npz, meta) as capture, np.load(npz) as expected:
        for key in arrays:
            got = capture[key]
            assert got.dtype == expected[key].dtype and got.shape == expected[key].shape
            assert np.array_equal(got, expected[key])
            assert got.flags.writeable
        with pytest.raises(DamagedRunError, match="KeyError"):
            capture["missing"]


def test_compressed_members_are_read_too(tmp_path: Path) -> None:
    npz, meta = tmp_path / "x.capture.npz", tmp_path / "x.capture.json"
    np.savez_compressed(npz, a=np.arange(5.0))
    meta.write_text("{}")
    with CaptureFile(npz, meta) as capture:
        assert np.array_equal(capture["a"], np.arange(5.0))


@pytest.mark.parametrize("keep", [0.25, 0.5, 0.9, 0.999])
def test_a_cut_capture_is_refused(tmp_path: Path, keep: float) -> None:
    npz, meta = _capture(tmp_path, {"a": np.ones((64, 64), np.float32), "b": np.zeros(9)})
    data = npz.read_bytes()
    npz.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(DamagedRunError):
        with CaptureFile(npz, meta) as capture:
            capture["a"]


def test_a_member_cut_short_is_refused(tmp_path: Path) -> None:
    # an array whose .npy header promises more bytes than the member holds: reading on
    # would run into the next member ("b"), which the file has enough bytes for
    npz, meta = _capture(tmp_path, {"a": np.ones(1000, np.float32), "b": np.ones(9000)})
    data = npz.read_bytes()
    header = b"'shape': (1000,)"
    assert data.count(header) == 1
    npz.write_bytes(data.replace(header, b"'shape': (9000,)"))
    with CaptureFile(npz, meta) as capture, pytest.raises(DamagedRunError):
        capture["a"]
    with load_npz(npz) as opened, pytest.raises(DamagedRunError):  # the CRC path as well
        read_array(opened, "a", npz)


def test_every_array_is_a_view_of_the_mapped_file_aligned_for_simd(tmp_path: Path) -> None:
    # keys of every length modulo the alignment: the padding differs for each member
    arrays = {"k" * n: np.full((3, 5 + n), n, np.float32) for n in range(1, 2 * ALIGN)}
    npz, meta = _capture(tmp_path, arrays)
    with zipfile.ZipFile(npz) as archive:
        assert archive.testzip() is None  # every CRC as a zip reader checks it
    with CaptureFile(npz, meta) as capture:
        for key, expected in arrays.items():
            got = capture[key]
            assert got.ctypes.data % ALIGN == 0, key
            assert not got.flags.owndata and got.base is not None, "a copy, not a view"
            assert np.array_equal(got, expected)


def test_writing_into_a_read_array_never_reaches_the_file(tmp_path: Path) -> None:
    npz, meta = _capture(tmp_path, {"a": np.arange(6.0), "b": np.ones(4, np.float32)})
    before = npz.read_bytes()
    with CaptureFile(npz, meta) as capture:
        a = capture["a"]
        a[:] = -1.0
        assert np.array_equal(CaptureFile(npz, meta)["a"], np.arange(6.0))
    assert npz.read_bytes() == before


def test_arrays_outlive_their_file_closed_replaced_or_removed(tmp_path: Path) -> None:
    npz, meta = _capture(tmp_path, {"a": np.arange(1000.0)})
    with CaptureFile(npz, meta) as capture:
        a = capture["a"]
    write_arrays(npz, {"a": np.zeros(1000)})  # replaced, as pruning rewrites a capture
    assert np.array_equal(a, np.arange(1000.0))
    b = CaptureFile(npz, meta)["a"]
    npz.unlink()
    assert np.array_equal(b, np.zeros(1000))


def test_files_np_savez_wrote_are_read_too(tmp_path: Path) -> None:
    # run directories written before write_arrays aligned its members
    npz, meta = tmp_path / "x.capture.npz", tmp_path / "x.capture.json"
    arrays = {"ab": np.arange(7, dtype=np.float32), "c/d.e": np.arange(12.0).reshape(3, 4)}
    np.savez(npz, **arrays)
    meta.write_text("{}")
    with CaptureFile(npz, meta) as capture:
        for key, expected in arrays.items():
            got = capture[key]
            assert got.flags.aligned and got.flags.writeable
            assert got.dtype == expected.dtype and np.array_equal(got, expected)


def test_object_arrays_are_never_pickled(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_arrays(tmp_path / "x.npz", {"a": np.array([{}], dtype=object)})
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


def test_an_array_maps_its_own_bytes_not_the_whole_file(tmp_path: Path) -> None:
    # freed with the array, as a copy would be: the analysis holds one capture file open
    # per participant while it reads its anchors one by one
    arrays = {f"a{i}": np.full(100_000, i, np.float32) for i in range(8)}
    npz, meta = _capture(tmp_path, arrays)
    with CaptureFile(npz, meta) as capture:
        got = capture["a3"]
    owner = got
    while not isinstance(owner, mmap.mmap):  # array -> ... -> memoryview -> mmap
        owner = owner.obj if isinstance(owner, memoryview) else owner.base
    assert len(owner) < got.nbytes + 2 * mmap.ALLOCATIONGRANULARITY < npz.stat().st_size / 4
    assert np.all(got == 3)
