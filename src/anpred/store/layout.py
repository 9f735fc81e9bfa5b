"""The run directory: the only code that knows its file names and formats.

``docs/run-directory.md`` describes the layout. A run directory carries a format marker
(``store.json``, ``{"format": 2}``) written when it is created; a directory without one was
written before the marker existed (format 1, the same layout, readable). A directory of a
newer format is refused with one line.

:class:`RunStore` is one run directory; :class:`~anpred.store.participant.ParticipantStore`
is one job's folder in it (a participant's captures, or the model export's job). Writes are
atomic (a temporary file, then a rename), so an interrupted run leaves only complete files
and resumes.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anpred.errors import DamagedRunError, UsageError
from anpred.store.files import load_npz, read_array, read_json, write_json
from anpred.store.participant import ParticipantStore, safe_name

#: The store format this anpred writes, and the newest it reads.
FORMAT = 2
#: Format of a run directory without a marker (written before the run store existed).
LEGACY_FORMAT = 1

_MARKER = "store.json"
_SETTINGS = "run.json"
_EXPORT = "model.json"
_MODEL_DIR = "model"
_FOLDING = "folding.json"
_PACKING = "packing.json"
_INPUTS = "inputs.npz"
_INPUTS_META = "inputs.json"
_CAPTURES = "captures"
_EXPORT_JOB = "export"
_PARTICIPANTS = "participants.json"
_DEVIATIONS = "deviations.parquet"
_SUMMARY = "summary.json"
_MACHINE = "machine.json"
_CALIBRATION = "calibration.json"
_REPORT = "report.html"
#: Folder of the report's plot PNGs, inside the run directory (the report's footer names it).
PLOTS_FOLDER = "plots"
#: ``anpred inject``'s record of what was injected where (help texts name it).
GROUND_TRUTH_FILE = "ground_truth.json"


def _field(path: Path, key: str, kind: type, default: Any = None) -> Any:
    """One top-level field of a JSON record, checked.

    Raises:
        DamagedRunError: The file is damaged, or the field is missing (without a default)
            or of another type.
    """
    record = read_json(path, dict)
    if key not in record and default is not None:
        return default
    value = record.get(key)
    if not isinstance(value, kind):
        raise DamagedRunError(path, f"its {key!r} is not a {kind.__name__}")
    return value


def _link(target: Path, link: Path) -> None:
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target.resolve(), link)


class RunStore:
    """One run directory (``anpred run --out DIR``).

    Constructing one touches nothing; :meth:`open` checks that the directory is a run of a
    format this anpred reads, :meth:`create` starts a new one.

    Args:
        root: The run directory.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"RunStore({str(self.root)!r})"

    # -- the directory and its format ------------------------------------------------------

    @classmethod
    def open(cls, root: Path) -> RunStore:
        """An existing run directory.

        Raises:
            UsageError: Not a run directory, or written by a newer anpred.
        """
        store = cls(root)
        if not store.is_run():
            raise UsageError(f"{str(store.root)!r} is not an anpred run directory (no {_SETTINGS})")
        store.check_format()
        return store

    @classmethod
    def create(cls, root: Path, settings: Mapping[str, Any]) -> RunStore:
        """Start a new run directory: the format marker, then the settings."""
        store = cls(root)
        store.root.mkdir(parents=True, exist_ok=True)
        store.write_marker()
        store.write_settings(settings)
        return store

    @property
    def format(self) -> int:
        """The store format of the directory (:data:`LEGACY_FORMAT` without a marker).

        Raises:
            UsageError: The marker is unreadable.
        """
        path = self.root / _MARKER
        if not path.exists():
            return LEGACY_FORMAT
        try:
            value = read_json(path)["format"]
        except (ValueError, KeyError, TypeError, OSError):
            raise UsageError(
                f"{str(self.root)!r} has an unreadable store marker ({_MARKER}); "
                "it was not written by this anpred"
            ) from None
        if not isinstance(value, int) or isinstance(value, bool):
            raise UsageError(
                f"{str(self.root)!r} has an unknown store format {value!r}; "
                f"this anpred reads formats 1 to {FORMAT}"
            )
        return value

    def check_format(self) -> None:
        """Refuse a directory this anpred cannot read.

        Raises:
            UsageError: Written by a newer (or unknown) store format.
        """
        found = self.format
        if not LEGACY_FORMAT <= found <= FORMAT:
            raise UsageError(
                f"{str(self.root)!r} was written by anpred format {found}; this anpred reads "
                f"≤ {FORMAT}: use a newer anpred to read it"
            )

    def write_marker(self) -> None:
        """Write the format marker (this anpred's format)."""
        write_json(self.root / _MARKER, {"format": FORMAT})

    def is_run(self) -> bool:
        """Whether the directory holds a run (its settings)."""
        return (self.root / _SETTINGS).exists()

    def is_empty(self) -> bool:
        """Whether the directory holds nothing but, possibly, the format marker."""
        return all(p.name == _MARKER for p in self.root.iterdir())

    def ensure_writable(self) -> None:
        """Create the directory and check that files can be written in it.

        Raises:
            UsageError: It cannot be created or written.
        """
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.root / f".write-test{os.getpid()}"
            probe.write_text("")
            probe.unlink()
        except OSError as err:
            raise UsageError(
                f"output directory {str(self.root)!r} is not writable ({err.strerror})"
            ) from None

    @classmethod
    def derive(
        cls, root: Path, base: RunStore, keep: Iterable[str], settings: Mapping[str, Any]
    ) -> RunStore:
        """A run directory made from ``base``: its export and inputs, and the captures of the
        participants ``keep``, linked (not copied); ``settings`` as the run's settings.

        Resumable: links already there are kept.
        """
        store = cls(root)
        store.root.mkdir(parents=True, exist_ok=True)
        if (store.root / _MARKER).exists():
            store.check_format()
        else:
            store.write_marker()
        for name in (_EXPORT, _INPUTS, _INPUTS_META):
            _link(base.root / name, store.root / name)
        if base.has_packing():  # the packed inputs' meaning goes with them
            _link(base.packing_path, store.packing_path)
        if base.has_calibration():  # the oracle's thresholds go with the clean participants
            _link(base.root / _CALIBRATION, store.root / _CALIBRATION)
        store.write_settings(settings)
        for name in keep:
            _link(base.participant(name).folder, store.participant(name).folder)
        return store

    # -- settings, export, inputs ----------------------------------------------------------

    def read_settings(self) -> dict[str, Any]:
        """The run's settings (``RunOptions.to_dict()``)."""
        return read_json(self.root / _SETTINGS, dict)

    def write_settings(self, settings: Mapping[str, Any]) -> None:
        """Write the run's settings."""
        write_json(self.root / _SETTINGS, dict(settings))

    def has_export(self) -> bool:
        """Whether the anchored export is recorded."""
        return (self.root / _EXPORT).exists()

    def read_export(self) -> dict[str, Any]:
        """The anchored export record (``AnchoredExport.to_dict()``)."""
        return read_json(self.root / _EXPORT, dict)

    def write_export(self, export: Mapping[str, Any]) -> None:
        """Record the anchored export."""
        write_json(self.root / _EXPORT, dict(export))

    @property
    def model_dir(self) -> Path:
        """Folder of a user's ONNX file's anchored and plain graphs."""
        return self.root / _MODEL_DIR

    @property
    def folding_path(self) -> Path:
        """What folding a user's ONNX file's shape arithmetic did, and how it was checked."""
        return self.root / _FOLDING

    @property
    def packing_path(self) -> Path:
        """How a user's ONNX file's several inputs are packed into its one graph input."""
        return self.root / _PACKING

    def has_packing(self) -> bool:
        """Whether the model's inputs are packed (a user's ONNX file with several inputs)."""
        return self.packing_path.exists()

    def read_packing(self) -> dict[str, Any]:
        """The packing record (:mod:`anpred.interchange.packing`)."""
        return read_json(self.packing_path, dict)

    @property
    def export_job(self) -> ParticipantStore:
        """The export job's folder (job file, status, log)."""
        return ParticipantStore(self.root / _EXPORT_JOB)

    @property
    def inputs_path(self) -> Path:
        """The preprocessed inputs (one float32 array per input id)."""
        return self.root / _INPUTS

    def has_inputs(self) -> bool:
        """Whether the inputs and their record are written."""
        return self.inputs_path.exists() and (self.root / _INPUTS_META).exists()

    def write_inputs(self, arrays: Mapping[str, np.ndarray], sources: Mapping[str, str]) -> None:
        """Write the inputs (in order) and their record."""
        np.savez(self.inputs_path, **arrays)
        self.write_inputs_record(list(arrays), sources)

    def write_inputs_record(self, ids: Sequence[str], sources: Mapping[str, str]) -> None:
        """Write the inputs' record: ids in order, and where each came from."""
        write_json(self.root / _INPUTS_META, {"ids": list(ids), "sources": dict(sources)})

    def read_input_ids(self) -> list[str]:
        """Input ids, in order."""
        return list(_field(self.root / _INPUTS_META, "ids", list))

    def read_input_sources(self) -> dict[str, str]:
        """Where each input came from (file path, bundled photo, synthetic seed)."""
        return dict(_field(self.root / _INPUTS_META, "sources", dict, {}))

    def load_inputs(self) -> dict[str, np.ndarray]:
        """Every preprocessed input."""
        with load_npz(self.inputs_path) as data:
            return {key: read_array(data, key, self.inputs_path) for key in data.files}

    # -- participants ----------------------------------------------------------------------

    def participant(self, name: str) -> ParticipantStore:
        """The folder of a participant (by name, or by its folder name)."""
        return ParticipantStore(self.root / _CAPTURES / safe_name(name))

    def participant_folders(self) -> list[ParticipantStore]:
        """Every participant folder on disk, sorted by folder name."""
        folder = self.root / _CAPTURES
        if not folder.is_dir():
            return []
        return [ParticipantStore(p) for p in sorted(folder.iterdir()) if p.is_dir()]

    def has_participants(self) -> bool:
        """Whether the workers' results are recorded."""
        return (self.root / _PARTICIPANTS).exists()

    def read_participants(self) -> dict[str, Any]:
        """The workers' results, by participant (``{}`` when none are recorded)."""
        path = self.root / _PARTICIPANTS
        return read_json(path, dict) if path.exists() else {}

    def write_participants(self, results: Mapping[str, Any]) -> None:
        """Record the workers' results, by participant."""
        write_json(self.root / _PARTICIPANTS, dict(results))

    def copy_records_from(self, base: RunStore) -> None:
        """Copy ``base``'s export, participants and machine records here."""
        for name in (_EXPORT, _PARTICIPANTS):
            shutil.copy(base.root / name, self.root / name)
        if (base.root / _MACHINE).exists():
            shutil.copy(base.root / _MACHINE, self.root / _MACHINE)

    # -- results ---------------------------------------------------------------------------

    @property
    def deviations_path(self) -> Path:
        """The deviations table (Parquet)."""
        return self.root / _DEVIATIONS

    def write_deviations(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Write one row per (participant, input, anchor); nothing when there are none."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if rows:
            columns = list(dict.fromkeys(k for r in rows for k in r))
            table = pa.table({c: [r.get(c) for r in rows] for c in columns})
            pq.write_table(table, self.deviations_path)

    def read_deviations(self) -> list[dict[str, Any]]:
        """The deviations table's rows (``[]`` when none were written)."""
        import pyarrow.parquet as pq

        if not self.deviations_path.exists():
            return []
        return pq.read_table(self.deviations_path).to_pylist()

    def write_machine(self, record: Mapping[str, Any]) -> None:
        """Record the machine the workers run on (the last one, when a run is resumed)."""
        write_json(self.root / _MACHINE, dict(record))

    def read_machine(self) -> dict[str, Any] | None:
        """The machine record, or ``None`` for runs recorded before it existed."""
        path = self.root / _MACHINE
        return read_json(path, dict) if path.exists() else None

    def has_calibration(self) -> bool:
        """Whether the run carries a calibration of the oracle's noise thresholds."""
        return (self.root / _CALIBRATION).exists()

    def read_calibration(self) -> dict[str, Any] | None:
        """The calibration record (``anpred.calibration.rule``), or ``None``."""
        path = self.root / _CALIBRATION
        return read_json(path, dict) if path.exists() else None

    def write_calibration(self, record: Mapping[str, Any]) -> None:
        """Record the calibration the oracle judges this run with (replaces a link)."""
        path = self.root / _CALIBRATION
        if path.is_symlink():
            path.unlink()
        write_json(path, dict(record))

    def remove_calibration(self) -> None:
        """Judge the run with the fixed rule again: drop its calibration (or link to one)."""
        path = self.root / _CALIBRATION
        if path.is_symlink() or path.exists():
            path.unlink()

    @property
    def summary_path(self) -> Path:
        """The summary (JSON)."""
        return self.root / _SUMMARY

    def has_summary(self) -> bool:
        """Whether the summary is written."""
        return self.summary_path.exists()

    def read_summary(self) -> dict[str, Any]:
        """The summary as written."""
        return read_json(self.summary_path, dict)

    def write_summary(self, summary: Mapping[str, Any]) -> None:
        """Write the summary."""
        write_json(self.summary_path, dict(summary))

    @property
    def report_path(self) -> Path:
        """The self-contained HTML report."""
        return self.root / _REPORT

    @property
    def plots_dir(self) -> Path:
        """The report's plot PNGs."""
        return self.root / PLOTS_FOLDER

    @property
    def ground_truth_path(self) -> Path:
        """What ``anpred inject`` injected and what the analysis made of it."""
        return self.root / GROUND_TRUTH_FILE

    def read_ground_truth(self) -> dict[str, Any]:
        """The ground-truth record."""
        return read_json(self.ground_truth_path, dict)

    def write_ground_truth(self, truth: Mapping[str, Any]) -> None:
        """Write the ground-truth record."""
        write_json(self.ground_truth_path, dict(truth))
