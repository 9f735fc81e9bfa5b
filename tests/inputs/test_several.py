"""Inputs of a model with several inputs, packed (:mod:`anpred.inputs.several`)."""

from __future__ import annotations

import numpy as np
import pytest

from anpred.errors import UsageError
from anpred.inputs.several import describe_packing, several_inputs
from anpred.inputs.tensors import image_tensor
from anpred.interchange.packing import layout, packed_size
from anpred.settings import RunOptions

_TENSORS = layout([("image", (1, 3, 8, 8), "float32"), ("ids", (1, 5), "int64")])
RECORD = {"size": packed_size(_TENSORS), "tensors": [t.to_dict() for t in _TENSORS]}


def test_seeded_inputs_give_the_image_input_the_photograph() -> None:
    options = RunOptions(model="m.onnx", images=2, input_range=(3.0, 9.0), seed=1)
    arrays, sources = several_inputs(options, RECORD)
    assert list(arrays) == ["bus", "zidane"]
    from anpred.inputs.images import gather_images

    bus = gather_images(1, (), 0, 1)[0]
    packed = arrays["bus"]
    assert packed.dtype == np.float32 and packed.shape == (3 * 64 + 5,)
    assert np.array_equal(packed[:192], image_tensor(bus.pixels, (1, 3, 8, 8)).ravel())
    ids = packed[192:]
    assert ids.min() >= 3 and ids.max() <= 9 and np.array_equal(ids, np.round(ids))
    assert not np.array_equal(ids, arrays["zidane"][192:])  # seeded per input
    assert sources["bus"].startswith("image: ") and "ids: seeded int64 in [3, 9]" in (
        sources["bus"]
    )
    assert describe_packing(RECORD) == (
        "image float32 1x3x8x8, ids int64 1x5 packed into one float32 input of 197"
    )


def test_npz_arrays_must_agree_on_the_number_of_inputs(tmp_path) -> None:
    image = np.random.default_rng(0).standard_normal((4, 3, 8, 8)).astype(np.float32)
    ids = np.arange(20).reshape(4, 5)
    np.savez(tmp_path / "ok.npz", image=image, ids=ids)
    arrays, sources = several_inputs(
        RunOptions(model="m.onnx", inputs_file=str(tmp_path / "ok.npz")), RECORD
    )
    assert list(arrays) == ["input0", "input1", "input2", "input3"]
    assert np.array_equal(arrays["input2"][192:], ids[2]) and sources["input3"].endswith("[3]")
    np.savez(tmp_path / "bad.npz", image=image[:3], ids=ids)
    with pytest.raises(UsageError, match=r"different numbers of inputs \(image 3, ids 4\)"):
        several_inputs(RunOptions(model="m.onnx", inputs_file=str(tmp_path / "bad.npz")), RECORD)


def test_named_ranges_override_the_bare_one_per_input() -> None:
    from anpred.inputs.tensors import input_range_of, parse_input_ranges

    assert parse_input_ranges(["0,9", "ids=1,5"]) == {None: (0.0, 9.0), "ids": (1.0, 5.0)}
    for bad in ("5,1", "=0,1", "ids=0", "ids=a,b", "0,inf"):
        with pytest.raises(UsageError, match=r"takes \[NAME=\]LO,HI"):
            parse_input_ranges([bad])
    with pytest.raises(UsageError, match="given twice for ids"):
        parse_input_ranges(["ids=0,1", "ids=0,2"])
    assert input_range_of("mask", ["ids", "mask"], (0.0, 9.0), ["ids=1,5"]) == (0.0, 9.0)
    with pytest.raises(UsageError, match="'idz', which is not an input"):
        input_range_of("ids", ["ids", "mask"], (), ["idz=1,5"])
    options = RunOptions(model="m.onnx", images=1, input_range=(0.0, 1.0),
                         input_ranges=("ids=20,30",))
    arrays, sources = several_inputs(options, RECORD)
    ids = arrays["bus"][192:]
    assert ids.min() >= 20 and ids.max() <= 30 and "ids: seeded int64 in [20, 30]" in (
        sources["bus"]
    )
