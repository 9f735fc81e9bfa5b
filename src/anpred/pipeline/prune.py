"""Captures by need (``--keep-captures needed``, the default): after a run is judged, keep
the full captures only where something later reads them; the rest are summed up by the
run's per-anchor statistics (:mod:`anpred.pipeline.statistics`).

Kept, for every participant (fp64 and fp32 references included), both kinds (the
participant's own capture and stage isolation's):

* the first input, whole: a sample to look at, and to re-measure with a new metric;
* every input with a finding: the arrays of the anchors with a finding on it (all
  participants', so the consensus there can be formed again).

Everything else is removed after the analysis, the drill-down (it reads the fp64
reference's stage inputs of every input, and runs before the prune; those a chunked run
pruned already it computes again) and the report (it reads only the summary) are done, so
an interrupted run resumes as before. Each pruned
capture's record keeps its place (resume counts it done) and lists what was removed;
``pruned.json`` records the whole prune. A run directory's folders linked from another
run (``anpred eval``'s fault runs share the clean run's captures) are not pruned there.
``docs/run-directory.md`` says what each mode keeps and can re-derive.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from anpred.errors import UsageError
from anpred.progress import Say, quiet
from anpred.settings import (  # the --keep-captures values, read here by their callers
    DEFAULT_KEEP,  # noqa: F401
    KEEP_ALL,  # noqa: F401
    KEEP_MODES,
    KEEP_NEEDED,
)
from anpred.store import CAPTURE, ISOLATED, ParticipantStore, RunStore, Status
from anpred.store.pruning import has_statistics, read_prune_record, write_prune_record
from anpred.store.summary import Summary

#: What a run judged from its statistics cannot re-derive (said in one line).
NOT_REDERIVED = "metrics it did not compute, another alignment, numbers of changed metric code"


def check_keep(mode: str) -> str:
    """Validate a ``--keep-captures`` value.

    Raises:
        UsageError: Not one of :data:`KEEP_MODES`.
    """
    if mode not in KEEP_MODES:
        raise UsageError(f"--keep-captures takes {' or '.join(KEEP_MODES)}, got {mode!r}")
    return mode


def needed_anchors(summary: Summary) -> dict[str, set[str] | None]:
    """Per input, the anchors whose captures ``needed`` keeps (``None``: all of them)."""
    ids = summary.input_ids
    needed: dict[str, set[str] | None] = {i: set() for i in ids}
    for finding in summary.findings:
        kept = needed.setdefault(finding.input, set())
        if kept is not None:
            kept.add(finding.anchor)
    if ids:
        needed[ids[0]] = None
    return needed


def capture_bytes(folders: Iterable[ParticipantStore]) -> int:
    """Bytes of the capture files in ``folders``."""
    return sum(p.lstat().st_size for f in folders for p in f.array_files())


def own_folders(store: RunStore) -> tuple[list[ParticipantStore], list[str]]:
    """The run's participant folders it owns, and the names of those linked from elsewhere."""
    own, linked = [], []
    for folder in store.participant_folders():
        if folder.folder.is_symlink():
            linked.append(folder.folder.name)
        else:
            own.append(folder)
    return own, linked


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _remove_rewritten_graphs(folders: Iterable[ParticipantStore]) -> int:
    """Remove the graphs transforms rewrote for finished participants (a faulty
    onnxruntime's or OpenVINO's ONNX, ~195 MB per resnet50 fault run); return the bytes
    freed. A resumed run plans its transforms again and rewrites them, so nothing that a
    later step reads is lost.
    """
    from anpred.pipeline.transforms import MODEL_FOLDER

    freed = 0
    for folder in folders:
        graphs = folder.folder / MODEL_FOLDER
        if graphs.is_dir() and not graphs.is_symlink():
            freed += sum(p.lstat().st_size for p in graphs.rglob("*") if p.is_file())
            shutil.rmtree(graphs)
    return freed


def prune_run(run_dir: Path, summary: Summary, say: Say = quiet) -> dict[str, Any] | None:
    """Prune a judged run's captures to those :func:`needed_anchors` names; write and return
    the prune record (``None``: the run has no statistics to be judged again from, so
    nothing is pruned). Idempotent: a resumed run prunes what its new findings allow.
    """
    record, freed = _prune(run_dir, summary, say)
    if record is not None:
        say(_pruned_line("", freed, record["bytes_after"]))
    return record


def _pruned_line(runs: str, freed: int, kept: int) -> str:
    return (
        f"keep captures by need: {runs}{freed / 1e6:.1f} MB of captures pruned, "
        f"{kept / 1e6:.1f} MB kept (--keep-captures all keeps everything)"
    )


def _prune(run_dir: Path, summary: Summary, say: Say) -> tuple[dict[str, Any] | None, int]:
    """:func:`prune_run`'s work: the record (or ``None``) and the bytes it freed."""
    store = RunStore(run_dir)
    if not has_statistics(store):
        return None, 0
    failed = [
        n for n, r in store.read_participants().items() if Status.parse(r.get("status")).failed
    ]
    if failed:
        kept = "nothing more pruned" if _chunked(store) else "all kept"
        say(f"keep captures: {kept}, {', '.join(failed)} failed (a resumed run retries it)")
        return None, 0
    needed = needed_anchors(summary)
    own, linked = own_folders(store)
    before = capture_bytes(own)
    pruned: dict[str, dict[str, list[str]]] = {}
    freed = 0
    for folder in own:
        for kind in (CAPTURE, ISOLATED):
            for input_id in folder.finished_inputs(kind):
                keep = needed.get(input_id, set())
                if keep is None:
                    continue
                freed += folder.prune_capture(input_id, keep, kind)
                if folder.pruned_keys(input_id, kind):
                    pruned.setdefault(folder.folder.name, {}).setdefault(kind, []).append(input_id)
    graphs = _remove_rewritten_graphs(own)
    freed += graphs
    after = capture_bytes(own)
    earlier = read_prune_record(store)
    if not pruned and not graphs and earlier is None:  # e.g. one input: nothing to prune
        return None, 0
    before = max(before, _int(earlier.get("bytes_before")) if earlier else 0)
    record = {
        "mode": KEEP_NEEDED,
        "first_input": summary.input_ids[0] if summary.input_ids else None,
        "kept_anchors": {i: sorted(a) for i, a in needed.items() if a},
        "pruned": pruned,
        "linked": linked,
        "bytes_before": before,
        "bytes_after": after,
        "graph_bytes_removed": graphs + _int((earlier or {}).get("graph_bytes_removed")),
        **({"chunked": True} if _chunked(store) else {}),
    }
    write_prune_record(store, record)
    return record, freed


def _chunked(store: RunStore) -> bool:
    """Whether the run went in chunks whose captures were pruned as it went."""
    return bool((read_prune_record(store) or {}).get("chunked"))


def prune_runs(run_dirs: Iterable[Path], say: Say = quiet) -> int:
    """Prune every judged run of ``run_dirs`` (:func:`prune_run`); return how many were.

    Says what was freed and kept in one line for all of them (an evaluation prunes a
    model's dozens of fault runs at once).
    """
    count = freed = kept = 0
    for run_dir in run_dirs:
        store = RunStore(run_dir)
        if store.has_summary():
            record, run_freed = _prune(run_dir, Summary.from_dict(store.read_summary()), say)
            if record is not None:
                count, freed, kept = count + 1, freed + run_freed, kept + record["bytes_after"]
    if count:
        say(_pruned_line(f"{count} runs, ", freed, kept))
    return count


def captures_pruned(store: RunStore, folders: Sequence[str], input_ids: Sequence[str]) -> bool:
    """Whether any capture the analysis reads lost arrays (here, or in a linked folder)."""
    if read_prune_record(store) is not None:
        return True
    for name in folders:
        folder = store.participant(name)
        for input_id in input_ids:
            if folder.pruned_keys(input_id, CAPTURE) or folder.pruned_keys(input_id, ISOLATED):
                return True
    return False


#: How the line a run judged from its statistics starts (``anpred report`` prints it).
NOTE_START = "captures were pruned"


def statistics_note(missing: Sequence[str]) -> str:
    """The line a run judged from its statistics says."""
    extra = f"; metrics not computed then: {', '.join(missing)}" if missing else ""
    return (
        f"{NOTE_START} (--keep-captures needed): judged again from the run's "
        f"per-anchor statistics; not re-derivable without them: {NOT_REDERIVED}{extra}"
    )
