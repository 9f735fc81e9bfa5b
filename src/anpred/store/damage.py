"""Structural check of a run directory: what in it is damaged, if anything.

Readers of a run directory trust its records' inner structure (a capture record's
``layouts`` is a mapping, ``model.json`` lists anchors with shapes, ...). When reading one
fails in a way only a bug or a damaged file explains, :func:`find_damage` decides which:
it checks every record the way anpred writes it. Damage found is the user's to fix (a file
changed or cut short outside anpred: a one-line error); none found means a bug in anpred.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from anpred.errors import AnpredError, DamagedRunError
from anpred.store.files import load_npz, read_array, read_json
from anpred.store.layout import RunStore

Check = Callable[[Any], str | None]


def _is_mapping_of(kind: type) -> Check:
    def check(value: Any) -> str | None:
        if not isinstance(value, dict):
            return f"is a {type(value).__name__}, not a mapping"
        bad = [k for k, v in value.items() if not isinstance(v, kind)]
        return f"{bad[0]!r} is not a {kind.__name__}" if bad else None

    return check


def _capture_record(record: Any) -> str | None:
    if not isinstance(record, dict):
        return f"is a {type(record).__name__}, not a mapping"
    layouts = _is_mapping_of(str)(record.get("layouts", {}))
    if layouts:
        return f"its layouts {layouts}"
    if not isinstance(record.get("observer", {}), dict | type(None)):
        return "its observer record is not a mapping"
    if not isinstance(record.get("nonfinite", []), list):
        return "its non-finite anchors are not a list"
    return None


def _export_record(record: Any) -> str | None:
    from anpred.interchange.export import AnchoredExport

    try:
        AnchoredExport.from_dict(record)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        return f"is not an export record ({err.__class__.__name__}: {err})"
    return None


def _inputs_record(record: Any) -> str | None:
    if not isinstance(record.get("ids"), list) or not all(
        isinstance(i, str) for i in record["ids"]
    ):
        return "its ids are not a list of names"
    return _is_mapping_of(str)(record.get("sources", {}))


def _summary(record: Any) -> str | None:
    from anpred.store.summary import Summary

    try:
        Summary.from_dict(record)
    except AnpredError as err:
        return str(err)
    return None


def find_damage(root: Path) -> list[str]:
    """Every damaged file of the run directory ``root`` (empty: none found)."""
    store = RunStore(root)
    problems: list[str] = []

    def check_json(path: Path, check: Check | None = None) -> None:
        if not path.exists():
            return
        try:
            value = read_json(path, dict)
        except DamagedRunError as err:
            problems.append(str(err))
            return
        problem = check(value) if check else None
        if problem:
            problems.append(str(DamagedRunError(path, problem)))

    def check_arrays(path: Path) -> None:
        try:
            with load_npz(path) as data:
                for key in data.files:
                    read_array(data, key, path)
        except DamagedRunError as err:
            problems.append(str(err))

    check_json(store.root / "run.json")
    check_json(store.root / "model.json", _export_record)
    check_json(store.root / "inputs.json", _inputs_record)
    check_json(store.root / "participants.json", _is_mapping_of(dict))
    check_json(store.summary_path, _summary)
    if store.inputs_path.exists():
        check_arrays(store.inputs_path)
    for folder in store.participant_folders():
        check_json(folder.folder / "status.json")
        for path in sorted(folder.folder.glob("*.json")):
            if path.name.endswith((".capture.json", ".isolated.json")):
                check_json(path, _capture_record)
                arrays = path.with_suffix(".npz")
                if not arrays.is_file():
                    problems.append(str(DamagedRunError(arrays, "missing beside its record")))
        for path in folder.array_files():
            check_arrays(path)
    return problems
