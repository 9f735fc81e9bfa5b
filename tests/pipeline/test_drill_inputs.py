"""The drill-down's stage inputs: kept captures packed, pruned ones computed again, and
inputs the fp64 reference could not compute again named in one line."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from anpred.pipeline import drill


@dataclass
class _Input:
    anchor: str | None


class _Graph:
    inputs = (_Input("stage1"),)

    @staticmethod
    def pack(values):
        return np.asarray(values["stage1"]).reshape(-1)


class _Reference:
    """A participant folder: ``done`` inputs captured, ``pruned`` ones without stage1."""

    def __init__(self, done, pruned=()):
        self.done, self.pruned = list(done), set(pruned)

    def capture_done(self, input_id):
        return input_id in self.done

    def pruned_keys(self, input_id):
        return ["stage1"] if input_id in self.pruned else []

    def load_capture(self, input_id):
        return {"stage1": np.full(2, float(input_id[2:]))}


class _Run:
    def __init__(self, reference):
        self.reference = reference

    def participant(self, _name):
        return self.reference

    def load_inputs(self):
        return {}


def test_pruned_inputs_are_computed_again_and_the_lost_ones_named():
    ids = [f"in{k}" for k in range(6)]
    run = _Run(_Reference(ids, pruned=ids[1:]))
    asked, lines = [], []

    def regenerate(batch):
        asked.append(list(batch))
        return _Reference([i for i in batch if i not in ("in2", "in4")])  # two fail again

    packed = drill._packed_inputs(run, _Graph(), ids, regenerate, lines.append)
    assert asked == [ids[1:]]
    assert list(packed) == ["in0", "in1", "in3", "in5"]
    assert packed["in3"].tolist() == [3.0, 3.0]
    assert lines == [
        "drill-down: the fp64 reference did not compute the stage inputs of 2 of 5 pruned "
        "inputs again (in2, in4); the drill-down judges the other 4 inputs"
    ]


def test_nothing_is_said_when_every_pruned_input_comes_back():
    ids = ["in0", "in1"]
    lines = []
    packed = drill._packed_inputs(
        _Run(_Reference(ids, pruned=ids)), _Graph(), ids, lambda b: _Reference(b), lines.append
    )
    assert list(packed) == ids and lines == []
