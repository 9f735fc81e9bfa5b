"""Every runnable code block of README.md and docs/*.md runs as written (issue 42).

A *code block* is a fence labelled ``python``, ``sh``, ``bash``, ``shell`` or ``console``,
or an unlabelled fence with a command line in it (``anpred``, ``python``, ``make``, ...).
Output shown as ``text`` (or unlabelled, without a command line) is not code. A code block
runs unless the line before its fence is one of these markers:

- ``<!-- not run: REASON -->``: an illustration (files the reader has, hours of work, a
  cluster, ...); the reason is required.
- ``<!-- run by: tests/PATH.py -->``: that test runs it (the file must exist).
- ``<!-- slow -->``: it runs, with the slow tests only.

A shell block runs when every command in it is ``anpred ...``: one after the other, in a
scratch folder that holds ``model.onnx`` (the 3-block CNN of ``tests/pipeline/tiny_model.py``,
input ``images`` 1x3x32x32), each exiting 0 or 1 (1: findings). A ``python`` block runs
with ``exec`` in that folder. A code block that is neither runnable nor marked fails
:func:`test_every_code_block_runs_or_says_why`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CODE_LANGUAGES = {"python", "sh", "bash", "shell", "console"}
_FENCE = re.compile(r"^\s*```(\S*)\s*$")
_MARKER = re.compile(r"^<!--\s*(not run|run by|slow)\s*(?::\s*(.*?))?\s*-->\s*$")
_COMMAND = re.compile(r"^\s*(?:\S*\$\s+)?(?:anpred|python|make|nice|ray|\.venv/bin/)\b")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text, and the marker before it."""

    path: Path
    line: int
    language: str
    text: str
    marker: str
    reason: str

    @property
    def name(self) -> str:
        """``README.md:42``-style id."""
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def is_code(self) -> bool:
        """Whether it is code (see the module docstring), not output."""
        if self.language in CODE_LANGUAGES:
            return True
        return not self.language and any(_COMMAND.match(x) for x in self.text.splitlines())

    def commands(self) -> list[str]:
        """Its shell commands: continuation lines joined, comments and prompts dropped."""
        commands, current = [], ""
        for raw in self.text.splitlines():
            line = re.sub(r"^\s*\$\s+", "", raw)
            if not current and (not line.strip() or line.lstrip().startswith("#")):
                continue
            current += line.strip()
            if current.endswith("\\"):
                current = current[:-1].rstrip() + " "
                continue
            commands.append(current.strip())
            current = ""
        return commands

    @property
    def runnable(self) -> bool:
        """A python block, or a shell block of ``anpred`` commands only."""
        if self.language == "python":
            return True
        commands = self.commands()
        return bool(commands) and all(c.startswith("anpred ") for c in commands)


def doc_blocks(path: Path) -> list[Block]:
    """Every fenced block of one Markdown file."""
    lines = path.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i])
            i += 1
        marker = _MARKER.match(lines[start - 1].strip()) if start else None
        blocks.append(Block(
            path, start + 1, fence.group(1), "\n".join(body) + "\n",
            marker.group(1) if marker else "", (marker.group(2) or "") if marker else "",
        ))  # fmt: skip
        i += 1
    return blocks


BLOCKS = [b for path in DOCS for b in doc_blocks(path) if b.is_code]
TO_RUN = [
    pytest.param(b, id=b.name, marks=[pytest.mark.slow] if b.marker == "slow" else [])
    for b in BLOCKS
    if b.marker in ("", "slow") and b.runnable
]


def test_every_code_block_runs_or_says_why() -> None:
    assert any(b.path.name == "README.md" for b in BLOCKS), "README.md has no code block"
    unmarked = [b.name for b in BLOCKS if b.marker in ("", "slow") and not b.runnable]
    assert not unmarked, (
        f"code blocks that cannot run as written: {unmarked}; make every command `anpred ...`, "
        "or mark the block <!-- not run: reason -->"
    )
    for block in BLOCKS:
        if block.marker == "not run":
            assert block.reason, f"{block.name}: <!-- not run: ... --> needs its reason"
        if block.marker == "run by":
            assert (ROOT / block.reason).is_file(), f"{block.name}: no test {block.reason}"
    # the fast suite runs some of them: the README's first steps at least
    fast = [p.values[0] for p in TO_RUN if not p.marks]
    assert any(b.path.name == "README.md" for b in fast)  # type: ignore[union-attr]


def test_block_parsing_joins_continuations_and_reads_markers(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- not run: needs a cluster -->\n```sh\n$ anpred run a.onnx \\\n    --images 1\n```\n"
        "```text\nanpred: error\n```\n"
        "<!-- slow -->\n```\n# a comment\nanpred doctor\nmake demo\n```\n"
    )
    first, text, last = doc_blocks(page)
    assert (first.marker, first.reason, first.line) == ("not run", "needs a cluster", 2)
    assert first.commands() == ["anpred run a.onnx --images 1"] and first.runnable
    assert not text.is_code
    assert last.is_code and last.marker == "slow" and not last.runnable  # make is not anpred


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with ``model.onnx`` and an ``anpred`` command on PATH (this Python's)."""
    sys.path.insert(0, str(ROOT / "tests" / "pipeline"))
    try:
        from tiny_model import tiny_cnn
    finally:
        sys.path.remove(str(ROOT / "tests" / "pipeline"))
    tiny_cnn(tmp_path / "model.onnx")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "anpred"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m anpred "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("block", TO_RUN)
def test_doc_block_runs_as_written(block: Block, scratch: Path) -> None:
    if block.language == "python":
        exec(compile(block.text, block.name, "exec"), {"__name__": "__doc_block__"})
        return
    for command in block.commands():
        proc = subprocess.run(
            ["bash", "-c", command], cwd=scratch, capture_output=True, text=True, timeout=1800
        )
        assert proc.returncode in (0, 1), (
            f"{block.name}: `{command}` exited {proc.returncode}\n{proc.stdout[-2000:]}"
            f"\n{proc.stderr[-2000:]}"
        )
