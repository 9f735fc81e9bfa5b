"""A worker reads each input from the run's inputs.npz when it needs it, not all at once."""

from __future__ import annotations

import numpy as np
import pytest

from anpred.execution.worker import _Feeds


def test_feeds_are_read_one_at_a_time_and_the_last_is_kept(tmp_path, monkeypatch) -> None:
    rng = np.random.default_rng(0)
    arrays = {f"in{i}": rng.standard_normal((1, 3, 8, 8)).astype(np.float32) for i in range(3)}
    path = tmp_path / "inputs.npz"
    np.savez(path, **arrays)
    opened: list[str] = []
    load = np.load

    def counting_load(*args, **kwargs):
        opened.append(str(args[0]))
        return load(*args, **kwargs)

    monkeypatch.setattr(np, "load", counting_load)
    feeds = _Feeds(path)
    assert not opened  # nothing read up front
    for key in ("in1", "in1", "in1", "in0", "in2"):  # anchored, plain, isolated, then others
        np.testing.assert_array_equal(feeds[key], arrays[key])
    assert len(opened) == 3  # one read per input: the repeated input came from the cache
    with pytest.raises(KeyError):
        feeds["missing"]
