"""Folders that hold several runs: ``anpred eval`` and ``anpred sweep`` output folders.

Each run inside is a run directory (:class:`~anpred.store.layout.RunStore`); these classes
know only the folder names around them and the files the studies write themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from anpred.store.files import write_json
from anpred.store.participant import safe_name

_GRID = "grid.json"
_TABLES = "eval.md"
_FAULTS = "faults.csv"
_PLOTS = "plots"
_CLEAN = "clean"
_FAULT_RUNS = "faults"
_CONFIGURATIONS = "configurations"
_CALIBRATION_RUN = "calibration"
_SWEEP = "sweep"
_SWEEP_RESULT = "sweep.json"

#: What ``anpred eval`` writes at the top of its folder (for help texts).
EVAL_OUTPUTS = f"{_TABLES}, {_FAULTS} and {_PLOTS}/"


class EvalStore:
    """An ``anpred eval`` output folder.

    ``<out>/<model>/clean`` is the model's clean run; ``<out>/<model>/calibration`` the
    clean run on calibration inputs; ``<out>/<model>/faults/<fault>`` one run per injected
    fault, ``<out>/<model>/configurations`` the configuration study and
    ``<out>/<model>/sweep`` the input-size sweep.

    Args:
        root: The output folder.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @property
    def grid_path(self) -> Path:
        """The grid as run (defaults filled in)."""
        return self.root / _GRID

    def write_grid(self, grid: Mapping[str, Any]) -> None:
        """Write the grid as run."""
        self.root.mkdir(parents=True, exist_ok=True)
        write_json(self.grid_path, dict(grid))

    @property
    def tables_path(self) -> Path:
        """The Markdown tables."""
        return self.root / _TABLES

    @property
    def faults_csv_path(self) -> Path:
        """One row per injected fault (CSV)."""
        return self.root / _FAULTS

    def plot_path(self, name: str) -> Path:
        """Where plot ``name`` (``detection``...) is written."""
        return self.root / _PLOTS / f"{name}.png"

    def plot_link(self, name: str) -> str:
        """Plot ``name``'s path relative to the tables (for a Markdown image link)."""
        return f"{_PLOTS}/{name}.png"

    def model_dir(self, model: str) -> Path:
        """The folder of one model's runs (a zoo name, or an ONNX path's stem)."""
        return self.root / safe_name(Path(model).stem)

    def clean_run(self, model: str) -> Path:
        """The model's clean run directory."""
        return self.model_dir(model) / _CLEAN

    def fault_run(self, model: str, name: str) -> Path:
        """The run directory of one injected fault."""
        return self.model_dir(model) / _FAULT_RUNS / safe_name(name)

    def derived_runs(self, model: str) -> list[Path]:
        """The model's runs that own only some captures and link the clean run's: its fault
        runs and its configuration run (those that exist), in name order.
        """
        faults = self.model_dir(model) / _FAULT_RUNS
        found = sorted(p for p in faults.iterdir() if p.is_dir()) if faults.is_dir() else []
        configurations = self.configurations_run(model)
        return found + ([configurations] if configurations.is_dir() else [])

    def calibration_run(self, model: str) -> Path:
        """The clean run on calibration inputs the oracle's thresholds are learnt from."""
        return self.model_dir(model) / _CALIBRATION_RUN

    def configurations_run(self, model: str) -> Path:
        """The configuration study's run directory."""
        return self.model_dir(model) / _CONFIGURATIONS

    def sweep_dir(self, model: str) -> Path:
        """The input-size sweep's folder (a :class:`SweepStore`)."""
        return self.model_dir(model) / _SWEEP


class SweepStore:
    """An ``anpred sweep`` output folder: one run directory per input size, and the fit.

    Args:
        root: The output folder.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def size_run(self, size: int) -> Path:
        """The run directory of one input size."""
        return self.root / f"size-{size}"

    @property
    def result_path(self) -> Path:
        """The sweep's fits (JSON)."""
        return self.root / _SWEEP_RESULT

    def write_result(self, result: Mapping[str, Any]) -> None:
        """Write the sweep's fits."""
        self.root.mkdir(parents=True, exist_ok=True)
        write_json(self.result_path, dict(result))
