"""Fuzz: run directories for ``anpred report DIR`` and for resume (``anpred run ... --out DIR``).

A run directory is user input too: copied between machines, half-synced, edited, mixed
with another run's files. Tampering: truncated or garbage bytes, emptied or deleted files,
JSON values replaced (wrong types, hostile strings, huge numbers), a file replaced by a
folder, and files taken from another run. ``report`` works on the stored golden run
(``tests/pipeline/data/golden_run``); resume on a fresh run of the tiny CNN.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fuzz_support import (
    CHEAP_RUN,
    GOLDEN_RUN,
    REPO,
    Cases,
    case_dir,
    fixed_case,
    fuzz,
    run_cli,
    session_dir,
    tiny_model,
)
from hypothesis import given
from hypothesis import strategies as st

OPS = ("truncate", "garbage", "empty", "delete", "json_value", "folder", "swap", "foreign")
JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.sampled_from(["", "<script>alert(1)</script>", "../../x", "nan", "x" * 2000]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.sampled_from(["a", "state", "ids"]), st.integers(), max_size=2),
)


def _files(run_dir: Path) -> list[str]:
    return sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file())


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON value (keys and indices), the root included."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:20]):
            found += _paths(item, (*prefix, index))
    return found


@dataclass(frozen=True)
class Tamper:
    """One change to one file of a run directory (``file`` indexes its sorted file list)."""

    op: str
    file: int
    amount: float = 0.5
    value: Any = None

    def apply(self, run_dir: Path, other_run: Path) -> str:
        files = _files(run_dir)
        if not files:
            return "no files left"
        name = files[self.file % len(files)]
        path = run_dir / name
        data = path.read_bytes()
        if self.op == "truncate":
            path.write_bytes(data[: int(len(data) * self.amount)])
        elif self.op == "garbage":
            cut = int(len(data) * self.amount)
            path.write_bytes(data[:cut] + bytes(range(256)) + data[cut + 256 :])
        elif self.op == "empty":
            path.write_bytes(b"")
        elif self.op == "delete":
            path.unlink()
        elif self.op == "folder":
            path.unlink()
            path.mkdir()
        elif self.op == "json_value":
            try:
                doc = json.loads(data)
            except ValueError:
                return f"{name}: not JSON, left alone"
            paths = _paths(doc)
            where = paths[int(self.amount * (len(paths) - 1))]
            if not where:
                doc = self.value
            else:
                parent = doc
                for key in where[:-1]:
                    parent = parent[key]
                parent[where[-1]] = self.value
            path.write_text(json.dumps(doc))
            return f"{name}{list(where)} = {self.value!r}"
        elif self.op == "swap":  # another file of the same run in its place
            other = run_dir / files[(self.file + 1 + int(self.amount * 7)) % len(files)]
            if other != path:
                shutil.copyfile(other, path)
            return f"{name} <- {other.relative_to(run_dir)}"
        elif self.op == "foreign":  # the file of the same name from another run
            source = other_run / name
            if not source.is_file():
                candidates = [other_run / f for f in _files(other_run)
                              if Path(f).suffix == path.suffix]
                source = candidates[int(self.amount * (len(candidates) - 1))] if candidates \
                    else REPO / "tests" / "report" / "data" / "summary.json"
            shutil.copyfile(source, path)
            return f"{name} <- other run's {source.name}"
        return f"{self.op} {name}"


def tampers() -> st.SearchStrategy[list[Tamper]]:
    """One to three changes."""
    one = st.builds(Tamper, st.sampled_from(OPS), st.integers(0, 200), st.floats(0.0, 1.0),
                    JSON_VALUES)
    return st.lists(one, min_size=1, max_size=3)


def base_run() -> Path:
    """A finished run of the tiny CNN (made once per process, with the cheap flags)."""
    run_dir = session_dir() / "base-run"
    if not (run_dir / "summary.json").exists():
        shutil.rmtree(run_dir, ignore_errors=True)
        result = run_cli(["run", str(tiny_model()), *CHEAP_RUN, "--out", str(run_dir)])
        if result.returncode not in (0, 1):
            pytest.fail(f"the base run failed (exit {result.returncode}): {result.last_line}")
    return run_dir


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, symlinks=True)
    return target


def test_fuzz_report_on_tampered_run_dirs() -> None:
    cases = Cases("report DIR")
    other = base_run()

    @fuzz(short_examples=6)
    @given(changes=tampers())
    def case(changes: list[Tamper]) -> None:
        with case_dir() as tmp:
            run_dir = _copy(GOLDEN_RUN, tmp / "run")
            done = [change.apply(run_dir, other) for change in changes]
            result = run_cli(["report", str(run_dir)], cwd=tmp)
            cases.check(f"{changes} -> {done}", result)

    case()
    cases.finish()


def test_fuzz_resume_on_tampered_run_dirs() -> None:
    cases = Cases("run --out EXISTING")
    base = base_run()

    @fuzz(short_examples=3)
    @given(changes=tampers())
    def case(changes: list[Tamper]) -> None:
        with case_dir() as tmp:
            run_dir = _copy(base, tmp / "run")
            done = [change.apply(run_dir, GOLDEN_RUN) for change in changes]
            result = run_cli(
                ["run", str(tiny_model()), *CHEAP_RUN, "--out", str(run_dir)], cwd=tmp
            )
            cases.check(f"{changes} -> {done}", result)

    case()
    cases.finish()


@fixed_case
@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("run.json", b'{"model": "tiny.onnx", "li'),
        ("summary.json", b"[1, 2"),
        ("inputs.json", b"[1]"),
        ("participants.json", b'"x"'),
        ("captures/openvino/bus.capture.npz", b"PK\x03\x04 truncated"),
    ],
)
def test_report_refuses_a_corrupt_run_file_in_one_line(name: str, content: bytes) -> None:
    with case_dir() as tmp:
        run_dir = _copy(GOLDEN_RUN, tmp / "run")
        (run_dir / name).write_bytes(content)
        result = run_cli(["report", str(run_dir)], cwd=tmp)
    assert result.returncode == 2 and "internal error" not in result.stderr, result.last_line
