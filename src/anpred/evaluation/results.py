"""The compact results of a campaign: a folder meant to be committed, that a campaign resumes from.

A run store (``anpred eval --out``) holds every capture of every run: gigabytes, on one
machine's disk. The results folder (``--results``, default the run store's own top) holds
what the tables are made of, a few MB at most:

- ``faults.csv``: one row per fault run (:func:`~anpred.evaluation.scoring.fault_row`);
- ``skipped.csv``: the faults that match no node of their stage (nothing to run);
- ``records/<model>/settings.json``: the settings the model's runs were made with;
- ``records/<model>/clean.json.gz``, ``configurations.json.gz``: the clean run's and the
  configuration study's summaries (``summary.json``, gzip), ``sweep.json``: the input-size
  sweep;
- ``clean.csv``, ``configurations.csv``, ``stages.csv``, ``eval.md``, ``plots/``: the
  tables, written from the above (:func:`write_results`).

A fault whose row (or skip) is in the folder is not run again, even when the run store is
gone; rows are reused only for a model whose settings (libraries, images, granularity,
calibration inputs, the ONNX file's hash) are those of the folder's record.
"""

from __future__ import annotations

import ast
import csv
import gzip
import hashlib
import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anpred.inject.spec import FaultSpec
from anpred.progress import Say
from anpred.store import EvalStore, safe_name
from anpred.store.summary import Summary

SKIPPED = "skipped.csv"
RECORDS = "records"
SETTINGS = "settings.json"
CLEAN_RECORD = "clean.json.gz"
CONFIGURATIONS_RECORD = "configurations.json.gz"
SWEEP_RECORD = "sweep.json"

#: Seconds between two rewrites of the tables while a campaign runs (they also are written
#: at the end of every model and of the campaign).
TABLES_EVERY = 600.0

#: The columns of a fault row that hold booleans, floats and lists (CSV keeps strings).
_BOOL = (
    "anpred_detected",
    "anpred_flagged_at_stage",
    "isolation_top1",
    "isolation_top3",
    "library_blamed",
)
_FLOAT = ("emergence_at_stage", "output_rel_l2_vs_fp64", "stage_rel_l2_vs_fp64")
_KEY = ("library", "stage", "kind", "op", "severity", "node", "partial")


@dataclass
class ModelResult:
    """A model's clean summary, one row per injected fault, and its configuration study."""

    model: str
    clean: Summary
    rows: list[dict[str, Any]] = field(default_factory=list)
    configurations: Summary | None = None
    sweep: dict[str, Any] | None = None


def _severity(value: Any) -> str:
    return repr(float(value))


def fault_key(library: str, spec: FaultSpec) -> tuple[str, ...]:
    """The identity of one fault run of a model: its library and fault."""
    return (
        library,
        spec.stage,
        spec.kind,
        spec.op,
        _severity(spec.severity),
        spec.node or "",
        spec.partial or "",
    )


def row_key(row: dict[str, Any]) -> tuple[str, ...]:
    """:func:`fault_key` of a fault row (or a skip record)."""
    return tuple(
        _severity(row["severity"]) if k == "severity" else str(row.get(k) or "") for k in _KEY
    )


def _number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() and "." not in text and "e" not in text else value


def _typed(row: dict[str, str]) -> dict[str, Any]:
    """A fault row read from CSV, with the types :func:`fault_row` gave it."""
    out: dict[str, Any] = {}
    for key, text in row.items():
        if key in _BOOL or key.startswith("baseline:"):
            out[key] = text == "True"
        elif key in _FLOAT:
            out[key] = float(text) if text else None
        elif key == "stage_index":
            out[key] = int(text)
        elif key == "severity":
            out[key] = _number(text)
        elif key == "other_flagged":
            out[key] = list(ast.literal_eval(text)) if text else []
        else:
            out[key] = text
    return out


def model_settings(
    model: str,
    libs: str,
    images: int,
    granularity: str,
    calibration: int,
    calibrated_on: Sequence[str] = (),
) -> dict[str, Any]:
    """What a model's rows depend on besides the fault: reused only when these match.

    ``calibrated_on``: the fp32 configurations the calibration run adds to ``libs`` (the
    oracle's thresholds, hence every verdict, depend on them).
    """
    settings: dict[str, Any] = {
        "model": model,
        "libs": libs,
        "images": images,
        "granularity": granularity,
        "calibration": calibration,
        "calibrated_on": list(calibrated_on) if calibration else [],
    }
    if model.endswith(".onnx") and Path(model).is_file():
        settings["sha256"] = hashlib.sha256(Path(model).read_bytes()).hexdigest()
    return settings


def _write_text(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (a campaign may be killed at any moment)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _write_gz(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as handle:
        handle.write(json.dumps(data, separators=(",", ":")).encode())
    os.replace(tmp, path)


def _csv_text(rows: Sequence[dict[str, Any]]) -> str:
    import io

    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


class ResultsFolder:
    """A campaign's compact results: read at start, updated as each run ends.

    Args:
        root: The folder (created when first written).
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.store = EvalStore(self.root)
        self._lock = threading.Lock()
        self._tables_lock = threading.Lock()
        self._tables_at = time.monotonic()
        self.rows: dict[str, dict[tuple[str, ...], dict[str, Any]]] = {}
        self.skipped: dict[str, dict[tuple[str, ...], dict[str, Any]]] = {}
        if self.store.faults_csv_path.is_file():
            with open(self.store.faults_csv_path, newline="") as handle:
                for raw in csv.DictReader(handle):
                    row = _typed(raw)
                    self.rows.setdefault(row["model"], {})[row_key(row)] = row
        if (self.root / SKIPPED).is_file():
            with open(self.root / SKIPPED, newline="") as handle:
                for raw in csv.DictReader(handle):
                    self.skipped.setdefault(raw["model"], {})[row_key(raw)] = dict(raw)

    def records(self, model: str) -> Path:
        """The folder of one model's records."""
        return self.root / RECORDS / safe_name(Path(model).stem)

    def settings(self, model: str) -> dict[str, Any] | None:
        """The settings the model's recorded runs were made with (``None``: none recorded)."""
        path = self.records(model) / SETTINGS
        return json.loads(path.read_text()) if path.is_file() else None

    def start_model(self, model: str, settings: dict[str, Any], say: Say) -> bool:
        """Keep the model's records if made with ``settings``; else drop them, said, and
        return True (its runs still in the run store are then judged again).
        """
        known = self.settings(model)
        stale = known is not None and known != settings
        if stale:
            changed = sorted(k for k in {*known, *settings} if known.get(k) != settings.get(k))
            say(
                f"== {model}: the results in {self.root} were made with other settings "
                f"({', '.join(changed)}): its {len(self.rows.get(model, {}))} fault rows are "
                "dropped (runs still in the run store are judged again, the others run again)"
            )
            with self._lock:
                self.rows.pop(model, None)
                self.skipped.pop(model, None)
                for name in (CLEAN_RECORD, CONFIGURATIONS_RECORD, SWEEP_RECORD):
                    (self.records(model) / name).unlink(missing_ok=True)
                self._write_rows()
        _write_text(self.records(model) / SETTINGS, json.dumps(settings, indent=1) + "\n")
        return stale

    def done(self, model: str, key: tuple[str, ...]) -> bool:
        """Whether the fault ``key`` of ``model`` has its row or its skip recorded."""
        return key in self.rows.get(model, {}) or key in self.skipped.get(model, {})

    def row(self, model: str, key: tuple[str, ...]) -> dict[str, Any] | None:
        """The recorded row of a fault (``None``: none, or skipped)."""
        return self.rows.get(model, {}).get(key)

    def add(
        self, model: str, key: tuple[str, ...], row: dict[str, Any] | None, reason: str = ""
    ) -> None:
        """Record one finished fault run's row (``None``: skipped, for ``reason``)."""
        with self._lock:
            if row is not None:
                self.rows.setdefault(model, {})[key] = row
            else:
                self.skipped.setdefault(model, {})[key] = {
                    "model": model,
                    **dict(zip(_KEY, key, strict=True)),
                    "reason": reason,
                }
            self._write_rows()
            due = time.monotonic() - self._tables_at > TABLES_EVERY
            if due:  # claimed here: one thread of a distributed campaign writes them
                self._tables_at = time.monotonic()
        if due:
            self.write_tables()

    def order(self, model: str, keys: Sequence[tuple[str, ...]]) -> list[dict[str, Any]]:
        """The model's rows in campaign order (``keys``; recorded rows of other faults last),
        rewritten in that order.
        """
        with self._lock:
            mine = self.rows.get(model, {})
            ordered = {k: mine[k] for k in keys if k in mine}
            ordered.update(mine)
            self.rows[model] = ordered
            self._write_rows()
            return list(ordered.values())

    def _write_rows(self) -> None:
        rows = [r for per in self.rows.values() for r in per.values()]
        skipped = [r for per in self.skipped.values() for r in per.values()]
        for path, records in ((self.store.faults_csv_path, rows), (self.root / SKIPPED, skipped)):
            if records:
                _write_text(path, _csv_text(records))
            else:  # every record dropped (other settings)
                path.unlink(missing_ok=True)

    def write_summary(self, model: str, which: str, summary: Summary) -> None:
        """Record the clean run's (``which="clean"``) or configuration study's summary."""
        name = CLEAN_RECORD if which == "clean" else CONFIGURATIONS_RECORD
        _write_gz(self.records(model) / name, summary.to_dict())

    def write_sweep(self, model: str, sweep: dict[str, Any]) -> None:
        """Record the model's input-size sweep."""
        _write_text(self.records(model) / SWEEP_RECORD, json.dumps(sweep, indent=1) + "\n")

    def _summary(self, model: str, name: str) -> Summary | None:
        path = self.records(model) / name
        if not path.is_file():
            return None
        with gzip.open(path, "rt") as handle:
            return Summary.from_dict(json.load(handle))

    def model_result(self, model: str) -> ModelResult | None:
        """The model's recorded results (``None`` before its clean run is recorded)."""
        clean = self._summary(model, CLEAN_RECORD)
        if clean is None:
            return None
        sweep = self.records(model) / SWEEP_RECORD
        with self._lock:  # a distributed campaign's fault runs end in threads
            rows = list(self.rows.get(model, {}).values())
        return ModelResult(
            model,
            clean,
            rows,
            self._summary(model, CONFIGURATIONS_RECORD),
            json.loads(sweep.read_text()) if sweep.is_file() else None,
        )

    def models(self) -> list[str]:
        """Every model with a record, in the order of the fault table, then by name."""
        recorded = []
        base = self.root / RECORDS
        if base.is_dir():
            for folder in sorted(base.iterdir()):
                if (folder / SETTINGS).is_file():
                    recorded.append(json.loads((folder / SETTINGS).read_text())["model"])
        with self._lock:
            return list(dict.fromkeys([*self.rows, *recorded]))

    def results(self, first: Sequence[str] = ()) -> list[ModelResult]:
        """Every recorded model's results, the models of ``first`` first."""
        found = (self.model_result(m) for m in dict.fromkeys([*first, *self.models()]))
        return [r for r in found if r is not None]

    def write_tables(self, first: Sequence[str] = ()) -> Path:
        """Write the tables of every recorded model (:func:`write_results`)."""
        with self._lock:
            self._tables_at = time.monotonic()
        with self._tables_lock:  # matplotlib draws in one thread at a time
            return write_results(self, first)

    def skip_count(self, model: str) -> int:
        """Faults of ``model`` recorded as not applicable."""
        return len(self.skipped.get(model, {}))


def write_results(folder: ResultsFolder, first: Sequence[str] = ()) -> Path:
    """``eval.md``, its plots and the CSV tables of a results folder, from its records
    alone; return the path of ``eval.md``.
    """
    from anpred.evaluation.findings import write_findings
    from anpred.evaluation.tables import write_tables

    results = folder.results(first)
    path = write_tables(results, folder.root, faults_csv=False)  # the folder writes its own
    write_findings(results, folder.root)
    return path
