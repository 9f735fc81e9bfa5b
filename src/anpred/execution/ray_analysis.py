"""Analysis of a run directory as a Ray task, on any node: no shared file system.

:func:`analysis_pieces` says what the analysis reads of a run directory, in pieces that
travel through the object store (:meth:`~anpred.execution.ray_executor.RayExecutor.analyse`
ships them; a piece linked into another run directory, such as the clean participants of a
fault run, is put there once for all the runs that link it); :func:`analyse_on_node`
rebuilds the directory in a temporary folder of its node, analyses it with the analysis
the caller gives (:func:`anpred.pipeline.analyse.analyse`, as a local run), and returns the
summary and the files the analysis wrote.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from anpred.execution.ray_executor import TASK_PREFIX, Files, remove_orphans, snapshot, unpack
from anpred.store import RunStore
from anpred.store.summary import Summary


def analysis_pieces(run_dir: Path) -> list[tuple[str, Path, bool]]:
    """What the analysis of ``run_dir`` reads, in pieces: ``(relative path, path, shared)``.

    Every top-level file and folder but the analysis's outputs (summary, deviations table,
    report, plots), the ONNX graphs and the export job's folder; of each participant's
    folder its own files (captures, records) but the job file and the log, not its
    subfolders (a fault's rewritten graphs). A piece is ``shared`` when it is a link into
    another run directory (a derived run's export, inputs, calibration and clean
    participants): the same for every fault run of a model, so it is shipped once.
    """
    store = RunStore(run_dir)
    captures = store.participant("-").folder.parent
    skip = {
        store.summary_path,
        store.deviations_path,
        store.report_path,
        store.plots_dir,
        store.model_dir,
        store.export_job.folder,
        captures,
    }
    pieces = [
        (entry.name, entry, entry.is_symlink())
        for entry in sorted(store.root.iterdir())
        if entry not in skip and not entry.name.startswith(".")
    ]
    pieces += [
        (str(p.folder.relative_to(store.root)), p.folder, p.folder.is_symlink())
        for p in store.participant_folders()
    ]
    return pieces


def is_flat(relative: str, path: Path) -> bool:
    """Whether a piece is a participant's folder (packed without subfolders)."""
    return path.is_dir() and len(Path(relative).parts) > 1


def analyse_on_node(
    layout: list[list[Any]], analyse: Callable[[Path], Summary], *pieces: Files
) -> dict[str, Any]:
    """The body of an analysis's Ray task: analyse a copy of a run directory on this node.

    Args:
        layout: ``[relative path, is a file]`` of each piece (:func:`analysis_pieces`).
        analyse: The analysis (a module-level function: Ray ships it by reference).
        pieces: Each piece's files (:func:`pack`).

    Returns:
        ``summary`` (``Summary.to_dict()``), ``files`` (what the analysis wrote, by relative
        path: the deviations table), ``where`` (host name) and ``seconds``.
    """
    remove_orphans(Path(tempfile.gettempdir()))
    root = Path(tempfile.mkdtemp(prefix=f"{TASK_PREFIX}{os.getpid()}-"))
    try:
        for (relative, is_file), files in zip(layout, pieces, strict=True):
            unpack(files, root / Path(relative).parent if is_file else root / relative)
        before = snapshot(root)
        started = time.monotonic()
        summary = analyse(root)
        return {
            "summary": summary.to_dict(),
            "files": {
                name: (root / name).read_bytes()
                for name, stamp in snapshot(root).items()
                if before.get(name) != stamp
            },
            "where": socket.gethostname(),
            "seconds": round(time.monotonic() - started, 3),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
