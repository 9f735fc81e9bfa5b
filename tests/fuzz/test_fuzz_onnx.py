"""Fuzz: ONNX files for ``anpred run FILE.onnx`` and ``anpred inject FILE.onnx --list-targets``.

Mutations of the tiny CNN (:mod:`onnx_mutations`): truncated and corrupted bytes, wrong
dtypes and shapes, cycles, dangling inputs, absurd attributes, huge declared dims, external
data outside the model's folder, nested ``If``/``Loop`` subgraphs, odd names and opsets.
"""

from __future__ import annotations

from fuzz_support import CHEAP_RUN, Cases, case_dir, fixed_case, fuzz, run_cli, tiny_model
from hypothesis import given
from onnx_mutations import (
    EXTERNAL_TARGETS,
    SECRET,
    ExternalData,
    HugeInput,
    Nested,
    onnx_mutations,
)


def _run_case(cases: Cases, mutation: object) -> None:
    with case_dir() as tmp:
        path = mutation.write(tmp)  # type: ignore[attr-defined]
        out = tmp / "out"
        result = run_cli(["run", str(path), *CHEAP_RUN, "--out", str(out)], cwd=tmp)
        expect = mutation.expect  # type: ignore[attr-defined]
        leaked = [
            f"secret bytes copied into {p.name}"
            for p in (out.rglob("*") if out.exists() else ())
            if p.is_file() and SECRET[:19] in p.read_bytes()
        ]
        cases.check(mutation, result, expect=expect, quick=expect == "refused", extra=leaked[:1])


def test_fuzz_run_onnx() -> None:
    cases = Cases("run FILE.onnx")

    @fuzz(short_examples=4)
    @given(mutation=onnx_mutations())
    def case(mutation: object) -> None:
        _run_case(cases, mutation)

    case()
    cases.finish()


def test_fuzz_inject_list_targets() -> None:
    cases = Cases("inject --list-targets")

    @fuzz(short_examples=3)
    @given(mutation=onnx_mutations())
    def case(mutation: object) -> None:
        with case_dir() as tmp:
            path = mutation.write(tmp)  # type: ignore[attr-defined]
            result = run_cli(["inject", str(path), "--list-targets", "--libs", "onnxruntime"],
                             cwd=tmp)
            # listing stages allocates no tensor: a huge declared input is fine there
            expect = "any" if isinstance(mutation, HugeInput) else mutation.expect  # type: ignore[attr-defined]
            cases.check(mutation, result, expect=expect)

    case()
    cases.finish()


@fixed_case
def test_external_data_outside_the_folder_is_refused_never_read() -> None:
    cases = Cases("run FILE.onnx")
    for target in EXTERNAL_TARGETS:
        _run_case(cases, ExternalData(target))
    cases.finish()


@fixed_case
def test_memory_bomb_is_refused_quickly() -> None:
    """The issue's file: ``1x3x100000x100000`` (120 GB of float32) refused in seconds.

    Issue 17 asks for under 5 s and under 1 GB. The case allows 10 s: the refusal comes
    after the prepare worker (onnx, onnxruntime imports: 1.2 s idle, measured) and
    ``make test`` shares two cores with other test processes.
    """
    cases = Cases("run FILE.onnx")
    bomb = HugeInput((1, 3, 100000, 100000))
    with case_dir() as tmp:
        args = ["run", str(bomb.write(tmp)), *CHEAP_RUN, "--out", str(tmp / "out")]
        result = run_cli(args, cwd=tmp)
    slow = result.returncode == 2 and result.seconds > 10
    heavy = result.returncode == 2 and result.peak_rss > 2**30
    cases.check(bomb, result, expect="refused", extra=[
        *([f"refused after {result.seconds:.1f} s (want < 10 s)"] if slow else []),
        *([f"{result.peak_rss / 2**30:.1f} GB used (want < 1 GB)"] if heavy else []),
    ])
    cases.finish()


@fixed_case
def test_nested_subgraphs_end_cleanly() -> None:
    """A ``Loop`` inside an ``If`` around the head (one case: each costs a run)."""
    cases = Cases("run FILE.onnx")
    _run_case(cases, Nested("mixed", depth=2))
    cases.finish()


@fixed_case
def test_inject_lists_the_targets_of_a_valid_model() -> None:
    """Found by the fuzz cases: the export was read after its temporary folder was gone."""
    result = run_cli(["inject", str(tiny_model()), "--list-targets", "--libs", "onnxruntime"])
    assert result.returncode == 0, result.last_line
    assert "r1" in result.stdout and "Conv" in result.stdout
