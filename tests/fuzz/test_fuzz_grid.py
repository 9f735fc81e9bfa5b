"""Fuzz: grid files for ``anpred eval --config GRID.json``.

Wrong types under every key, unknown keys, files that are not JSON objects, deep nesting,
oversized grids. A grid that loads would start a campaign (hours), so the CLI is run only
on grids :func:`~anpred.evaluation.grid.load_grid` refuses; every grid, accepted or not,
goes through ``load_grid`` in process, where an accepted one must have the types the
campaign relies on.
"""

from __future__ import annotations

import json
from pathlib import Path

from fuzz_support import Cases, case_dir, fixed_case, fuzz, run_cli
from hypothesis import given
from hypothesis import strategies as st

from anpred.errors import UsageError

KEYS = ("models", "libs", "faulty", "stages", "images", "granularity", "configurations",
        "sizes", "faults")
JSON_LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**64), 2**64), st.floats(allow_nan=False),
    st.sampled_from(["", "all", "yolov8n", "resnet50", "onnxruntime", "jax[bf16]", "torch[nope]",
                     "bf16", "mantissa", "stage", "layer", "*", "Conv", "x.onnx", "<script>"]),
)
JSON = st.recursive(JSON_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS + ("kind", "op",
             "severities", "bogus")), inner, max_size=4)), max_leaves=12)
FAULT = st.fixed_dictionaries(
    {"kind": st.one_of(st.sampled_from(["bf16", "mantissa", "nope"]), JSON_LEAF)},
    optional={"op": st.one_of(st.sampled_from(["*", "Conv"]), JSON_LEAF),
              "severities": st.one_of(st.lists(st.one_of(st.integers(-3, 30),
                                                         st.floats(-1, 30), JSON_LEAF),
                                               max_size=4), JSON)},
)
PLAUSIBLE = {
    "models": st.lists(st.sampled_from(["yolov8n", "resnet50", "nope", "m.onnx"]), max_size=3),
    "libs": st.sampled_from(["all", "torch,onnxruntime", "torch,mxnet", ""]),
    "faulty": st.lists(st.sampled_from(["onnxruntime", "jax[bf16]", "torch[nope]"]), max_size=2),
    "stages": st.one_of(st.just("all"), st.lists(st.sampled_from(["r1", "s2", "neck.p4"]))),
    "images": st.integers(-2, 5),
    "granularity": st.sampled_from(["stage", "layer", "operator"]),
    "configurations": st.lists(st.sampled_from(["jax[nojit]", "torch[bf16]", "jax[fast]"]),
                               max_size=2),
    "sizes": st.lists(st.sampled_from([0, 31, 32, 320, 640, -64]), max_size=3),
    "faults": st.lists(FAULT, max_size=3),
}


def grid_dicts() -> st.SearchStrategy[dict[str, object]]:
    """Grids with plausible or arbitrary values under known and unknown keys."""
    value_for = {k: st.one_of(PLAUSIBLE[k], JSON) for k in KEYS}
    known = st.fixed_dictionaries({}, optional=value_for)
    return st.one_of(known, st.dictionaries(st.sampled_from(KEYS + ("modles", "")), JSON,
                                            max_size=4))


def grid_texts() -> st.SearchStrategy[bytes]:
    """Grid files as bytes: JSON of any shape, broken JSON, deep nesting, huge files."""
    return st.one_of(
        grid_dicts().map(lambda d: json.dumps(d).encode()),
        JSON.map(lambda v: json.dumps(v).encode()),
        st.binary(max_size=64),
        st.integers(10, 100_000).map(lambda n: b"[" * n + b"]" * n),
        st.sampled_from([b"", b"{", b'{"images": NaN}', b"\xef\xbb\xbf{}", b"\xff\xfe{}",
                         b'{"images": 1e999}', b'{"models": ["yolov8n"], "models": 3}']),
        st.just(b'{"faults": [' + b'{"kind": "bf16", "severities": [1]},' * 40000 + b"{}]}"),
    )


def _check_types(grid: object) -> list[str]:
    """What an accepted grid must hold for the campaign to run."""
    from anpred.evaluation.grid import EvalGrid

    problems = []
    if not isinstance(grid, EvalGrid):
        return [f"load_grid returned {type(grid).__name__}"]
    if not all(isinstance(m, str) for m in grid.models):
        problems.append(f"models {grid.models!r:.80}")
    if not isinstance(grid.libs, str):
        problems.append(f"libs {grid.libs!r:.80}")
    if not (grid.stages == "all" or all(isinstance(s, str) for s in grid.stages)):
        problems.append(f"stages {grid.stages!r:.80}")
    if not isinstance(grid.images, int) or isinstance(grid.images, bool) or grid.images < 1:
        problems.append(f"images {grid.images!r:.40}")
    if grid.granularity not in ("stage", "layer"):
        problems.append(f"granularity {grid.granularity!r:.40}")
    for axis in grid.faults:
        if not isinstance(axis.kind, str) or not isinstance(axis.op, str) or not all(
            isinstance(s, int | float) and not isinstance(s, bool) and s > 0
            for s in axis.severities
        ):
            problems.append(f"fault axis {axis!r:.120}")
    json.dumps(grid.to_dict())  # written next to the results
    return problems


def test_fuzz_load_grid_in_process() -> None:
    from anpred.evaluation.grid import load_grid

    cases = Cases("eval --config (load_grid, in process)")

    @fuzz(short_examples=150, cheap=True)
    @given(text=grid_texts())
    def case(text: bytes) -> None:
        with case_dir() as tmp:
            path = tmp / "grid.json"
            path.write_bytes(text)
            try:
                problems = _check_types(load_grid(path))
            except UsageError as err:
                problems = ["multi-line error"] if "\n" in str(err) else []
            except Exception as err:  # noqa: BLE001 - any other exception is the finding
                problems = [f"{err.__class__.__name__}: {str(err)[:200]}"]
        cases.add(text[:300], problems)

    case()
    cases.finish()


def test_fuzz_eval_cli_refuses_bad_grids_in_one_line() -> None:
    from anpred.evaluation.grid import load_grid

    cases = Cases("eval --config")

    @fuzz(short_examples=3)
    @given(text=grid_texts())
    def case(text: bytes) -> None:
        with case_dir() as tmp:
            path = tmp / "grid.json"
            path.write_bytes(text)
            try:
                load_grid(path)
            except Exception:  # noqa: BLE001 - refused (or broken): the CLI must say so
                result = run_cli(["eval", "--config", str(path), "--out", str(tmp / "e")],
                                 cwd=tmp, timeout=120)
                cases.check(text[:300], result, expect="refused", quick=True)
            else:  # a grid that loads starts a campaign: not a case for the short budget
                cases.add(text[:300], [])

    case()
    cases.finish()


@fixed_case
def test_eval_cli_refuses_a_grid_that_is_not_an_object(tmp_path: Path) -> None:
    cases = Cases("eval --config")
    for text in (b"[]", b'"models"', b"[" * 50000 + b"]" * 50000, b'{"images": "two"}',
                 b'{"faults": [1]}'):
        path = tmp_path / "grid.json"
        path.write_bytes(text)
        result = run_cli(["eval", "--config", str(path), "--out", str(tmp_path / "e")],
                         cwd=tmp_path, timeout=120)
        cases.check(text[:60], result, expect="refused", quick=True)
    cases.finish()
