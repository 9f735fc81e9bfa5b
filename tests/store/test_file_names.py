"""Run-directory file names are spelled only in the run store (``anpred.store``).

The scan is a grep over string literals: every string constant in the code (f-string parts
included) of ``src/anpred`` outside ``store/`` and of ``benchmarks/``. Docstrings may name
files for the reader; code must ask the store for paths.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "src" / "anpred" / "store"

#: Every file and folder name of a run directory, an eval folder and a sweep folder
#: (docs/run-directory.md).
NAMES = re.compile(
    r"(^|[/\\])("
    r"(store|run|model|inputs|job|status|participants|summary|ground_truth|grid|sweep|machine|folding|calibration|conversion)\.json"
    r"|inputs\.npz|worker\.log|deviations\.parquet|report\.html|eval\.md|faults\.csv"
    r")$"
    r"|\.(capture|isolated)\.(npz|json)$|^\.(capture|isolated)\.|(^|/)(captures|plots)/"
)
#: Folder names, found when a literal is exactly the name (``run_dir / "captures"``).
FOLDERS = {"captures", "plots"}
#: Literals that look like run-directory names but name a converter's own output in the
#: conversion cache (not a run directory): (source file, literal); ``None``: every literal
#: of that file (a file that writes another kind of folder).
NOT_RUN_FILES = {
    # x2paddle writes its inference model as inference_model/model.json + model.pdiparams.
    ("src/anpred/backends/deploy/paddle_inference.py", "model.json"),
    # labels, not files: how two releases were compared ("captures" or "deviations")
    ("src/anpred/pipeline/analyse.py", "captures"),
    ("src/anpred/report/identical.py", "captures"),
    # a reproducer folder's own files (docs/reproducers.md), not a run directory's
    ("src/anpred/repro/folder.py", "inputs.npz"),
    ("src/anpred/repro/readme.py", None),
    ("src/anpred/repro/scripts.py", None),
    ("src/anpred/repro/make.py", None),
    # the committed results folder of a campaign (evaluation/results.py) and its findings;
    # to do: ask anpred.store for these names as the eval folder does
    ("src/anpred/evaluation/results.py", "sweep.json"),
    ("src/anpred/evaluation/findings.py", "plots"),
    ("src/anpred/cli/commands.py", None),
    # benchmarks that read a finished run's or campaign's files; to do: through the store
    ("benchmarks/bench_campaign.py", None),
    ("benchmarks/bench_repro.py", None),
}


def _docstrings(tree: ast.AST) -> set[int]:
    """Ids of the constant nodes that are docstrings."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def literals_naming_run_files(path: Path) -> list[str]:
    """``path:line: literal`` for every string literal that names a run-directory file."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _docstrings(tree)
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            words = [w.strip(",;:()'\"`") for w in node.value.split()]
            source = str(path.relative_to(ROOT))
            if (source, node.value) in NOT_RUN_FILES or (source, None) in NOT_RUN_FILES:
                continue
            if node.value.strip("/") in FOLDERS or any(NAMES.search(w) for w in words):
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                hits.append((node.lineno, f"{where}: {node.value!r}"))
    return [text for _, text in sorted(hits)]


def _sources() -> list[Path]:
    files = sorted((ROOT / "src" / "anpred").rglob("*.py")) + sorted(
        (ROOT / "benchmarks").rglob("*.py")
    )
    return [f for f in files if STORE not in f.parents]


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""Docstrings may say run.json."""\n'
        'a = run_dir / "status.json"\n'
        'b = f"{input_id}.capture.npz"\n'
        'c = run_dir / "captures" / name\n'
        'd = "see plots/ and eval.md"\n'
        'e = "a model.json-free string: run.jsonl, status"\n'
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        hits = literals_naming_run_files(sample)
    finally:
        ROOT = saved
    assert [h.split(":")[1] for h in hits] == ["2", "3", "4", "5"], hits


def test_no_run_directory_file_name_outside_the_store() -> None:
    hits = [hit for path in _sources() for hit in literals_naming_run_files(path)]
    assert not hits, "run-directory file names outside anpred.store:\n" + "\n".join(hits)
