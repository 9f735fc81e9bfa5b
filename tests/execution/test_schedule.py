"""The order workers start in: the slower libraries first, results in the user's order."""

from __future__ import annotations

from anpred.execution.executor import Executor, LocalExecutor
from anpred.execution.schedule import heavier_first, worker_groups
from anpred.participants import parse_participants
from anpred.settings import ExecutionSettings


def test_translated_and_converted_libraries_start_before_onnx_loaders() -> None:
    given = parse_participants("onnxruntime,torch,jax,openvino,paddle,tensorflow[xla]")
    order = [p.name for p in heavier_first(given)]
    # translated graphs first, then the native module, then the ONNX loaders; the user's
    # order among equals
    assert order == ["jax", "paddle", "tensorflow[xla]", "torch", "onnxruntime", "openvino"]
    assert [p.name for p in given][0] == "onnxruntime"  # the caller's list is left alone


def test_the_fp64_reference_runs_in_line_with_the_others_unless_they_need_it_first(
    tmp_path,
) -> None:
    reference, *others = parse_participants("torch[fp64],jax,onnxruntime")

    class Remote(Executor):  # shares no file system with this process (as Ray)
        def start(self, spec):  # pragma: no cover - never started here
            raise AssertionError

        def slots(self, parallel: int) -> int:
            return parallel

    def on(executor: Executor | None) -> ExecutionSettings:
        return ExecutionSettings(executor=executor)

    source = tmp_path / "torch_fp64"
    for executor in (None, LocalExecutor(), Remote()):
        # without isolation nobody reads its captures: one group, the reference first
        assert worker_groups(reference, others, None, on(executor)) == [
            ([reference, *others], None, None)
        ]
    for executor in (None, LocalExecutor()):  # the others wait for its captures, input by input
        assert worker_groups(reference, others, source, on(executor)) == [
            (others, source, reference)
        ]
    # a remote job ships the reference's captures when it starts: the reference first, alone
    assert worker_groups(reference, others, source, on(Remote())) == [
        ([reference], None, None),
        (others, source, None),
    ]
