"""The library-neutral Python Loop and Scan (anpred.translate.python_control), on numpy.

The libraries' own Loop/Scan node tests run through their translators
(``conformance.backend_suite``); here the iteration itself, with numpy as the library, so
that a mistake in the counter, the directions or the stacking axes shows without one.
Integer arithmetic only: results are exact.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from anpred.translate.python_control import (
    LoopOps,
    ScanOps,
    loop_node,
    run_loop,
    run_scan,
    run_scan_batched,
    scan_batched_node,
    scan_operands,
    split_inputs,
)
from anpred.translate.registry import NodeCall
from anpred.translate.subgraphs import Subgraph


def _stack(values: list[Any], axis: int) -> np.ndarray:
    return np.stack(values, axis=axis)


LOOP = LoopOps(
    index=lambda step: np.asarray(step, np.int64),
    flag=np.asarray,
    first=lambda value: np.asarray(value).reshape(-1)[0],
    stack=_stack,
    empty=lambda: np.zeros((0,), np.float32),
)
SCAN = ScanOps(rank=np.ndim, take=lambda x, p, axis: np.take(x, p, axis=axis), stack=_stack)


def _scan_call(**attrs: Any) -> NodeCall:
    return NodeCall("Scan", "scan", attrs, 16)


def _body(values: list[Any]) -> list[Any]:
    """A Loop body: stop after step 2; carry a running sum; scan out ``10 * step``."""
    step, _, total = values
    return [np.asarray(int(step) < 2), total + step, np.asarray([10 * int(step)])]


def test_loop_carries_counts_and_stacks_scan_outputs() -> None:
    total, scanned = run_loop(_body, None, True, [np.asarray(0)], 1, LOOP)
    assert int(total) == 0 + 1 + 2
    np.testing.assert_array_equal(scanned, [[0], [10], [20]])


def test_loop_trip_count_and_no_iteration() -> None:
    total, scanned = run_loop(_body, 2, True, [np.asarray(0)], 1, LOOP)
    assert int(total) == 1
    assert scanned.shape == (2, 1)
    total, scanned = run_loop(_body, 5, False, [np.asarray(7)], 1, LOOP)
    assert int(total) == 7
    assert scanned.shape == (0,) and scanned.dtype == np.float32


def _running_sum(values: list[Any]) -> list[Any]:
    state, row = values
    return [state + row, state + row]


def test_scan_directions_and_axes() -> None:
    x = np.arange(6).reshape(2, 3)  # scanned along axis 1: columns [0,3], [1,4], [2,5]
    call = _scan_call(scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[-1])
    (final,), (out,) = run_scan(call, _running_sum, [np.zeros(2, int)], [x], SCAN)
    np.testing.assert_array_equal(final, [3, 12])
    np.testing.assert_array_equal(out, [[2, 3, 3], [5, 9, 12]])  # columns 5, 4+5, 3+4+5
    call = _scan_call(scan_output_directions=[1])
    (_,), (out,) = run_scan(call, _running_sum, [np.zeros(3, int)], [x], SCAN)
    np.testing.assert_array_equal(out, [[3, 5, 7], [0, 1, 2]])


def test_scan8_directions_attribute_only_when_asked() -> None:
    x = np.arange(3).reshape(1, 3)
    call = _scan_call(directions=[1])
    (_, out) = run_scan_batched(call, _running_sum, [np.zeros((1,), int)], [x], SCAN)
    np.testing.assert_array_equal(out, [[2, 3, 3]])
    only = ("scan_input_directions",)
    (_, out) = run_scan_batched(call, _running_sum, [np.zeros((1,), int)], [x], SCAN, only)
    np.testing.assert_array_equal(out, [[0, 1, 3]])


def test_split_inputs_names_the_outer_values() -> None:
    body = Subgraph(program=None, outer=("r", "w"))
    call = NodeCall(
        "Loop", "loop", {}, 16, consts=(None, None), extra={"subgraphs": {"body": body}}
    )
    own, outer = split_inputs(call, [1, 2, 3, 4])
    assert own == [1, 2] and outer == {"r": 3, "w": 4}


def test_scan_operands_scans_the_last_values() -> None:
    states, inputs = scan_operands(_scan_call(num_scan_inputs=2), [1, 2, 3])
    assert states == [1] and inputs == [2, 3]


class _Program:
    """A stand-in for a body's GraphProgram: :func:`_body` plus an outer value ``w``."""

    outputs = ("cond", "total", "tens")

    def execute(self, step: Any, going: Any, total: Any, w: Any) -> list[Any]:
        return _body([step, going, total + w])


def test_loop_node_reads_trip_count_condition_and_outer_values() -> None:
    body = Subgraph(program=_Program(), outer=("w",))
    call = NodeCall("Loop", "loop", {}, 16, consts=(None,) * 3, extra={"subgraphs": {"body": body}})
    total, scanned = loop_node(call, [np.asarray([5]), None, np.asarray(0), 100], LOOP)
    assert int(total) == (100 + 0) + (100 + 1) + (100 + 2)  # each step adds w and its index
    assert scanned.shape == (3, 1)
    total, scanned = loop_node(call, [np.asarray([5]), np.asarray([False]), 7, 100], LOOP)
    assert total == 7 and scanned.shape == (0,)  # no iteration: one empty scan output


def test_scan8_node_refuses_short_sequences() -> None:
    body = Subgraph(program=None, outer=())
    call = NodeCall(
        "Scan", "scan", {"num_scan_inputs": 1}, 8, consts=(None,) * 3,
        extra={"subgraphs": {"body": body}},
    )  # fmt: skip
    x = np.arange(3).reshape(1, 3)
    with pytest.raises(NotImplementedError, match="sequence_lens"):
        scan_batched_node(call, [np.asarray([2]), np.zeros((1,), int), x], SCAN)
