"""Running the known-bugs benchmark: two ``anpred run``s per bug, scored, written as tables.

Per bug (:mod:`anpred.evaluation.known_bugs`): one run of its model with the installed
libraries plus ``LIB@BUGGY`` and one with ``LIB@FIXED`` instead, each an ordinary ``anpred
run`` in a child process (the release's environment is built on first use by
``anpred.library.versions``), resumable (a finished run directory is read back). The rows
go to ``known-bugs.csv`` / ``known-bugs.json`` and the Markdown table ``known-bugs.md`` of
the results folder. Nothing here imports a DL library.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from anpred.errors import UsageError
from anpred.evaluation.known_bugs import KnownBug, KnownBugs, bug_outcome, score_bug
from anpred.progress import Say
from anpred.store import RunStore
from anpred.store.summary import Summary

#: Where the ``onnx:NAME`` models' builders live (written by its ``__main__``: no torch).
ONNX_MODELS = Path("benchmarks/known_bugs/onnx_models.py")
#: Seconds one ``anpred run`` of a bug's model may take (a release's first environment
#: build included: torch's CUDA wheels take minutes).
RUN_TIMEOUT_S = 3600


def model_argument(bug: KnownBug, folder: Path, root: Path) -> str:
    """What ``anpred run`` gets as the model: the ``FILE.py:FUNCTION`` spec, or the ONNX
    file an ``onnx:NAME`` model is written to (in ``folder``, by ``onnx_models.py`` in a
    child process).
    """
    if not bug.model.startswith("onnx:"):
        return str(root / bug.model)
    name = bug.model.removeprefix("onnx:")
    path = folder / f"{name}.onnx"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [sys.executable, str(root / ONNX_MODELS), name, str(folder)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0 or not path.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise UsageError(f"known bugs: {bug.id}: writing model {name} failed: {tail[0]}")
    return str(path)


def run_command(bug: KnownBug, participant: str, model: str, out: Path, threads: int,
                parallel: int) -> list[str]:  # fmt: skip
    """The ``anpred run`` command of one of the bug's two runs."""
    return [
        sys.executable, "-m", "anpred", "run", model,
        "--libs", f"{bug.libs},{participant}",
        "--out", str(out), "--threads", str(threads), "--parallel", str(parallel),
        *bug.run_options,
    ]  # fmt: skip


def run_one(command: Sequence[str], out: Path, say: Say) -> tuple[Summary | None, str]:
    """Run ``command`` unless ``out`` already holds a finished run; its summary, or
    ``None`` and why not.
    """
    if not RunStore(out).has_summary():
        log = out.with_suffix(".log")
        out.parent.mkdir(parents=True, exist_ok=True)
        say("   $ anpred " + " ".join(command[3:]))
        with open(log, "w") as handle:
            try:
                done = subprocess.run(
                    command, stdout=handle, stderr=subprocess.STDOUT,
                    timeout=RUN_TIMEOUT_S, check=False,
                )  # fmt: skip
            except subprocess.TimeoutExpired:
                return None, f"timed out after {RUN_TIMEOUT_S} s (log: {log})"
        if not RunStore(out).has_summary():
            lines = log.read_text(errors="replace").strip().splitlines()
            return None, f"exit {done.returncode}: {lines[-1] if lines else ''} (log: {log})"
    return Summary.from_dict(RunStore.open(out).read_summary()), ""


def evaluate_known_bugs(
    bugs: KnownBugs,
    out: Path,
    say: Say,
    only: Sequence[str] = (),
    threads: int = 1,
    parallel: int = 1,
    root: Path | None = None,
    on_row: Callable[[dict[str, Any]], object] | None = None,
) -> list[dict[str, Any]]:
    """Both runs of every bug (or of ``only``), scored; one row per bug, in file order
    (each also handed to ``on_row`` as soon as it is scored).

    A bug whose runs could not finish gets a row with ``error`` and nothing scored.
    """
    root = Path.cwd() if root is None else root
    chosen = [bugs.get(i) for i in only] if only else list(bugs.bugs)
    rows = []
    for index, bug in enumerate(chosen, 1):
        say(f"== known bug {index}/{len(chosen)}: {bug.id} ({bug.library} {bug.buggy} -> "
            f"{bug.fixed}) on {bug.model}")  # fmt: skip
        started = time.monotonic()
        folder = out / bug.id
        try:
            model = model_argument(bug, folder, root)
        except UsageError as err:
            rows.append({"id": bug.id, "library": bug.library, "error": str(err)})
            say(f"   {err}")
            if on_row is not None:
                on_row(rows[-1])
            continue
        summaries = {}
        errors = []
        for side, participant in (("buggy", bug.buggy_participant),
                                  ("fixed", bug.fixed_participant)):  # fmt: skip
            command = run_command(bug, participant, model, folder / side, threads, parallel)
            summary, why = run_one(command, folder / side, say)
            summaries[side] = summary
            if summary is None:
                errors.append(f"{side} run: {why}")
        if errors:
            rows.append({"id": bug.id, "library": bug.library, "error": "; ".join(errors)})
            say("   " + "; ".join(errors))
            if on_row is not None:
                on_row(rows[-1])
            continue
        row = score_bug(bug, summaries["buggy"], summaries["fixed"])
        row["seconds"] = round(time.monotonic() - started, 1)
        rows.append(row)
        say(f"   {bug.id}: {bug_outcome(row)} ({row['seconds']:.0f} s)")
        if on_row is not None:
            on_row(row)
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, list):
        return " ".join(map(str, value)) or "–"
    return str(value)


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """The scoring table: anpred's columns, then one column per output-level baseline
    (``buggy flagged / fixed flagged``).
    """
    baselines = sorted({k.split(":", 1)[1] for r in rows for k in r if k.startswith("baseline:")})
    head = ["bug", "buggy → fixed", "detected", "library blamed alone", "first flagged anchor",
            "operator named (known)", "false findings on fixed",
            "output rel L2 buggy / fixed", *baselines]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if "error" in r:
            cells = [r["id"], "", f"not run: {r['error']}"] + [""] * (len(head) - 3)
        elif r.get("judged") is False:
            why = "; ".join(r.get("failed_participants", [])[:1])
            cells = [r["id"], f"{r['buggy']} → {r['fixed'].split('@', 1)[1]}",
                     f"no verdict: {why}"] + [""] * (len(head) - 3)  # fmt: skip
        else:
            named = r["operator"] or "none"
            cells = [
                r["id"],
                f"{r['buggy']} → {r['fixed'].split('@', 1)[1]}",
                _cell(r["detected"]),
                _cell(r["library_blamed"])
                + ("" if r["library_blamed"] or not r.get("blamed_jointly") else " (jointly)"),
                _cell(r["first_anchor"]),
                f"{named} ({r['operator_known']})",
                _cell(r["false_findings_fixed"]),
                f"{_cell(r['output_rel_l2_buggy'])} / {_cell(r['output_rel_l2_fixed'])}",
                *(
                    f"{_cell(r.get(f'baseline:{b}'))} / {_cell(r.get(f'baseline_fp:{b}'))}"
                    for b in baselines
                ),  # fmt: skip
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_results(rows: Sequence[dict[str, Any]], folder: Path) -> Path:
    """``known-bugs.json``, ``known-bugs.csv`` and ``known-bugs.md`` in ``folder``; the
    Markdown file's path. Rows of bugs not in ``rows`` that an earlier call wrote are kept.
    """
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "known-bugs.json"
    merged: dict[str, dict[str, Any]] = {}
    if path.exists():
        merged = {r["id"]: r for r in json.loads(path.read_text())}
    merged.update({r["id"]: r for r in rows})
    ordered = list(merged.values())
    path.write_text(json.dumps(ordered, indent=1) + "\n")
    keys = list(dict.fromkeys(k for r in ordered for k in r))
    with open(folder / "known-bugs.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, keys)
        writer.writeheader()
        writer.writerows({k: _cell(r.get(k)) if isinstance(r.get(k), list) else r.get(k)
                          for k in keys} for r in ordered)  # fmt: skip
    md = folder / "known-bugs.md"
    md.write_text(markdown_table(ordered))
    return md


def run_known_bugs(
    config: str | Path,
    out: Path,
    results: Path | None,
    say: Say,
    only: Sequence[str] = (),
    threads: int = 1,
    parallel: int = 1,
) -> Path:
    """``anpred eval --config configs/known-bugs.json``: every bug's two runs into ``out``,
    the tables into ``results`` (default: ``out``); the Markdown table's path.
    """
    from anpred.evaluation.known_bugs import load_known_bugs

    bugs = load_known_bugs(config)
    folder = results or out
    rows = evaluate_known_bugs(
        bugs, out, say, only, threads, parallel, on_row=lambda row: write_results([row], folder)
    )
    return write_results(rows, folder)
