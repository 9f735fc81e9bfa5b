"""The drill-down folder of a run directory (``drill/``): the store's part that knows it.

The drill-down (:mod:`anpred.pipeline.drill`) is a small run of its own: a drill graph
(the flagged stages' operators, see :mod:`anpred.interchange.drill_graph`), packed stage
inputs, one capture folder per participant. It lives in ``drill/`` as a nested run store
(:class:`~anpred.store.layout.RunStore`: ``model.json``, ``inputs.npz``, ``captures/``)
plus ``drill/model/`` (the drill graphs) and ``drill/drill.json``, the drill-down's
record (the ``drill`` entry of ``summary.json`` is the same record).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from anpred.store.files import read_json, write_json
from anpred.store.layout import RunStore

_FOLDER = "drill"
_MODEL = "model"
_RECORD = "drill.json"
_REFERENCE = "reference"


class DrillStore:
    """The drill-down folder of run directory ``run_dir`` (constructing touches nothing).

    Args:
        run_dir: The run directory.
    """

    def __init__(self, run_dir: Path) -> None:
        self.root = Path(run_dir) / _FOLDER

    @property
    def run(self) -> RunStore:
        """The nested run store: export record, packed inputs, participants' captures."""
        return RunStore(self.root)

    @property
    def model_dir(self) -> Path:
        """Folder of the clean drill graphs (anchored and plain)."""
        return self.root / _MODEL

    @property
    def reference_run(self) -> RunStore:
        """A run store for the fp64 reference run again on the run's own model, for the
        inputs whose stage inputs a chunked run pruned (:mod:`anpred.pipeline.drill`);
        emptied batch by batch.
        """
        return RunStore(self.root / _REFERENCE)

    def remove_reference_run(self) -> None:
        """Remove :attr:`reference_run` (its captures are packed into the drill's inputs)."""
        if self.reference_run.root.exists():
            shutil.rmtree(self.reference_run.root)

    def participant_model_dir(self, name: str) -> Path:
        """Folder of a participant's rewritten drill graphs (a fault rewrites them)."""
        return self.run.participant(name).folder / _MODEL

    def clear(self) -> None:
        """Remove an earlier drill-down (a run re-analysed with other findings)."""
        if self.root.exists():
            shutil.rmtree(self.root)

    def prune_arrays(self) -> int:
        """Delete the drill jobs' capture arrays (every operator output of every input),
        keeping graphs, job and status records and the drill-down's record: the record
        holds everything the report shows. Returns the bytes freed.

        A yolov8n drill-down of five participants wrote 4.7 GB of arrays; they are judged
        once and never read again.
        """
        freed = 0
        for path in self.run.root.glob("*/*/*.npz") if self.root.exists() else ():
            freed += path.stat().st_size
            path.unlink()
        return freed

    def has_record(self) -> bool:
        """Whether the drill-down's record is written."""
        return (self.root / _RECORD).exists()

    def read_record(self) -> dict[str, Any]:
        """The drill-down's record (``DrillDown.to_dict()``)."""
        return read_json(self.root / _RECORD, dict)

    def write_record(self, record: Mapping[str, Any]) -> None:
        """Write the drill-down's record."""
        self.root.mkdir(parents=True, exist_ok=True)
        write_json(self.root / _RECORD, dict(record))
