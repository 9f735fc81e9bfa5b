"""Helpers of the tests of the analysis's processes: copies of the golden run, what a
pass wrote, and the processes left behind."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

GOLDEN = Path(__file__).parent / "data" / "golden_run"


def statistics_of(run: Path) -> dict:
    with gzip.open(run / "statistics.json.gz", "rt") as data:
        return json.load(data)


def golden_copy(tmp_path: Path, name: str) -> Path:
    run = tmp_path / name
    shutil.copytree(GOLDEN, run)
    return run


def judged(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k != "wall_seconds"}


def children() -> set[int]:
    """Live child processes of this one (Linux /proc; empty elsewhere), but
    multiprocessing's resource tracker (one per interpreter, started once, idle)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        mine = fields[0] != "Z" and int(fields[1]) == os.getpid()
        if mine and b"resource_tracker" not in command:
            found.add(int(stat.parent.name))
    return found
