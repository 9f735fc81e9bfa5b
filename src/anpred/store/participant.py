"""One job's folder in a run directory: a participant's captures, or the export job.

Part of the run store (see :mod:`anpred.store.layout`): the only code that knows the file
names and formats inside such a folder.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from anpred.store.files import (
    PRUNED_FIELD,
    CaptureFile,
    load_npz,
    pruned_field,
    read_array,
    read_json,
    write_arrays,
    write_json,
)
from anpred.store.outcome import Status, Step

#: Capture kinds: the participant's own anchors, and stage isolation's recomputed ones.
CAPTURE = "capture"
ISOLATED = "isolated"

_JOB = "job.json"
_STATUS = "status.json"
_LOG = "worker.log"
#: A deployment runtime's conversions: artifacts, cache hits, the output mapping rule and
#: each anchor's layout (:mod:`anpred.backends.output_map`).
_CONVERSION = "conversion.json"
#: File names of a job folder, for code that ships a folder elsewhere (the Ray executor):
#: the job file, the log, and the status record (written last).
JOB_FILE, LOG_FILE, STATUS_FILE = _JOB, _LOG, _STATUS


def safe_name(participant: str) -> str:
    """Folder name of a participant (``torch[fp64]`` → ``torch_fp64``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", participant).strip("_")


@dataclass(frozen=True)
class ParticipantStore:
    """One job's folder: its job file, status, log and, for a participant, its captures.

    Per input, a capture is ``<input>.<kind>.npz`` (arrays) plus ``<input>.<kind>.json``
    (layouts, observer record, non-finite anchors); the ``.json`` is written last, so its
    presence marks the input done.

    Args:
        folder: The folder (``captures/<safe name>`` for a participant).
    """

    folder: Path

    def create(self) -> ParticipantStore:
        """Create the folder (and its parents); return ``self``."""
        self.folder.mkdir(parents=True, exist_ok=True)
        return self

    @property
    def job_path(self) -> Path:
        """The job file a worker process is started with."""
        return self.folder / _JOB

    @property
    def log_path(self) -> Path:
        """The worker's stdout/stderr."""
        return self.folder / _LOG

    def write_job(self, job: Mapping[str, Any]) -> Path:
        """Write the job file; return its path."""
        write_json(self.job_path, dict(job))
        return self.job_path

    def start_job(self, job: Mapping[str, Any]) -> Path:
        """Write the job file of a worker about to start, and a status record saying it runs;
        return the job file's path.

        The status an earlier job of this folder left (a run's previous chunk, an attempt
        before a resume) no longer describes it: until the worker writes its own, whoever
        polls the status (the early pass, the pool recording a killed worker's end) must
        not take that job's end for this one's.
        """
        self.create()
        path = self.write_job(job)
        self.write_status({"state": Status.RUNNING, "step": Step.LOAD})
        return path

    def read_job(self) -> dict[str, Any]:
        """Read the job file."""
        return self.load_job(self.job_path)

    @staticmethod
    def load_job(path: Path) -> dict[str, Any]:
        """Read a job file given by path (a worker process's argument)."""
        return read_json(path, dict)

    def open_log(self) -> IO[bytes]:
        """Open the worker log for appending (the caller closes it)."""
        return open(self.log_path, "ab")  # noqa: SIM115 - the caller closes it

    def has_status(self) -> bool:
        """Whether the job's worker wrote a status."""
        return (self.folder / _STATUS).exists()

    def read_status(self) -> dict[str, Any]:
        """The job's status record (``{}`` when none was written)."""
        path = self.folder / _STATUS
        return read_json(path, dict) if path.exists() else {}

    def write_status(self, status: Mapping[str, Any]) -> None:
        """Replace the status record."""
        write_json(self.folder / _STATUS, dict(status))

    def copy_status_from(self, source: ParticipantStore) -> None:
        """Copy ``source``'s status record here (if it has one)."""
        if source.has_status():
            shutil.copy(source.folder / _STATUS, self.folder / _STATUS)

    def write_conversion(self, record: Mapping[str, Any]) -> None:
        """Replace the conversion record of a deployment runtime (see :data:`_CONVERSION`)."""
        write_json(self.folder / _CONVERSION, dict(record))

    def read_conversion(self) -> dict[str, Any]:
        """The conversion record (``{}`` for a participant that converts nothing)."""
        path = self.folder / _CONVERSION
        return read_json(path, dict) if path.exists() else {}

    def arrays_path(self, input_id: str, kind: str = CAPTURE) -> Path:
        """The ``.npz`` of one capture."""
        return self.folder / f"{input_id}.{kind}.npz"

    def _meta_path(self, input_id: str, kind: str) -> Path:
        return self.folder / f"{input_id}.{kind}.json"

    def capture_done(self, input_id: str, kind: str = CAPTURE) -> bool:
        """Whether a capture of ``kind`` is complete on disk."""
        return self._meta_path(input_id, kind).exists()

    def write_capture(
        self,
        input_id: str,
        arrays: dict[str, np.ndarray],
        meta: Mapping[str, Any],
        kind: str = CAPTURE,
    ) -> None:
        """Write one capture: arrays first, then the record that marks it done."""
        write_arrays(self.arrays_path(input_id, kind), arrays)
        write_json(self._meta_path(input_id, kind), dict(meta))

    def read_capture_meta(self, input_id: str, kind: str = CAPTURE) -> dict[str, Any]:
        """The record of one capture (layouts, observer record, non-finite anchors)."""
        return read_json(self._meta_path(input_id, kind), dict)

    def open_capture(self, input_id: str, kind: str = CAPTURE) -> CaptureFile | None:
        """Open one capture lazily (``None`` when it is not done)."""
        if not self.capture_done(input_id, kind):
            return None
        return CaptureFile(self.arrays_path(input_id, kind), self._meta_path(input_id, kind))

    def load_capture(self, input_id: str, kind: str = CAPTURE) -> dict[str, np.ndarray]:
        """Read every array of one capture.

        Raises:
            FileNotFoundError: The capture is not done.
        """
        capture = self.open_capture(input_id, kind)
        if capture is None:
            raise FileNotFoundError(f"no {kind} of {input_id!r} in {self.folder}")
        with capture:
            return capture.arrays()

    def finished_inputs(self, kind: str = CAPTURE) -> list[str]:
        """Ids of the inputs whose capture of ``kind`` is done, sorted."""
        suffix = f".{kind}.json"
        try:  # a listing, not Path.glob (~10x cheaper): the pool asks while workers run
            names = os.listdir(self.folder)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(n[: -len(suffix)] for n in names if n.endswith(suffix))

    def pruned_keys(self, input_id: str, kind: str = CAPTURE) -> list[str]:
        """Arrays of one capture removed by :meth:`prune_capture` (``[]``: none, or not done)."""
        if not self.capture_done(input_id, kind):
            return []
        return pruned_field(self.read_capture_meta(input_id, kind), self._meta_path(input_id, kind))

    def prune_capture(self, input_id: str, keep: Collection[str] = (), kind: str = CAPTURE) -> int:
        """Remove every array of one capture but ``keep``; return the bytes freed.

        The capture stays done (its record stays, resume counts it); the record lists the
        removed arrays first, then the ``.npz`` is rewritten with the kept ones (or removed),
        so an interrupted prune leaves a record that says more was removed than was, never
        less. A linked ``.npz`` (a capture shared with another run) is replaced, not
        rewritten: its target is untouched and nothing is freed. Idempotent.
        """
        if not self.capture_done(input_id, kind):
            return 0
        path = self.arrays_path(input_id, kind)
        meta = self.read_capture_meta(input_id, kind)
        pruned = set(pruned_field(meta, self._meta_path(input_id, kind)))
        if not path.exists() and not path.is_symlink():
            return 0
        with load_npz(path) as data:
            stored = list(data.files)
            wanted = [k for k in stored if k in keep and k not in pruned]
            if len(wanted) == len(stored):
                return 0
            kept = {k: read_array(data, k, path) for k in wanted}
        removed = [k for k in stored if k not in kept]
        size = 0 if path.is_symlink() else path.stat().st_size
        write_json(
            self._meta_path(input_id, kind), {**meta, PRUNED_FIELD: sorted(pruned | set(removed))}
        )
        if kept:
            if path.is_symlink():
                path.unlink()
            write_arrays(path, kept)
            return max(0, size - path.stat().st_size)
        path.unlink()
        return size

    def array_files(self) -> list[Path]:
        """Every ``.npz`` in the folder, sorted."""
        return sorted(self.folder.glob("*.npz"))

    def link_capture_from(
        self, source: ParticipantStore, source_id: str, input_id: str, kind: str = CAPTURE
    ) -> bool:
        """Make ``source``'s capture of ``source_id`` this folder's capture of ``input_id``.

        The arrays are linked, the record copied. Returns whether the source had it.
        """
        if not source.capture_done(source_id, kind):
            return False
        os.symlink(source.arrays_path(source_id, kind), self.arrays_path(input_id, kind))
        shutil.copy(source._meta_path(source_id, kind), self._meta_path(input_id, kind))
        return True
