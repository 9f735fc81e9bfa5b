"""Calibrations stored per model in the anpred cache, and reused by later runs.

``anpred calibrate MODEL`` runs a clean calibration run on held-out seeded synthetic
inputs (:func:`calibration_options`; :mod:`anpred.pipeline.calibration_run` runs it) and
stores the calibration it learns under
``$ANPRED_CACHE/calibrations/``, keyed by :func:`calibration_key`: what the noise ratios
depend on, and nothing else:

- the **model identity**: zoo name and weights (the export's weights id: the checkpoint's
  digest, or the seed of generated weights), or the ONNX file's digest and the input
  recipe (preprocessing, mean/std, channel order, range of seeded tensors);
- the **input shape** and the **anchor plan** (anchor keys in order);
- the **fp32 participants** (:func:`fp32_participants`: the run's participants with faults
  stripped to the clean participant they replace, reduced-precision configurations left
  out, the fp32 reference included);
- the **oracle**: primary metric and the calibration rule's name and version.

``anpred run`` and ``anpred inject`` (``--calibration auto``, the default) look the key up
(:func:`resolve`): a stored calibration with the same key judges the run; none, or one
learnt on an input the run judges, leaves the fixed rule, and the run says why. A cached
calibration of another fp32 participant set is **not** used (not even a superset): the
noise ratios are deviations from the consensus *of that population*, and a population
with one library more or less has another consensus and another spread
(``docs/oracle.md``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from os import PathLike
from pathlib import Path
from typing import Any

from anpred.cache import cache_dir, file_digest
from anpred.calibration.rule import RULE, VERSION, Calibration
from anpred.errors import UsageError
from anpred.interchange.export import AnchoredExport
from anpred.interchange.user_module import is_onnx_path
from anpred.participants import (
    FAULT_MARK,
    REFERENCE32,
    Participant,
    parse_participant,
    precision_of,
)
from anpred.settings import RunOptions
from anpred.store import RunStore

FOLDER = "calibrations"
"""Folder of the calibration cache under ``$ANPRED_CACHE``."""

SEED_OFFSET = 1_000_003
"""Added to the seed of a calibration run whose seed does not make the model's weights
(an ONNX file, a zoo model with ``--weights``): its seeded inputs then differ from every
input a run with the same seed draws, tensor inputs included (those are drawn by index,
not by image id)."""

MODES = ("auto", "off")
"""``--calibration`` values besides a path."""


def fp32_participants(participants: Sequence[Participant]) -> tuple[str, ...]:
    """The run's legitimate fp32 participants, sorted: faulty participants count as the clean
    participant they replace, configurations whose library descriptor declares a reduced
    precision (``torch[bf16]``, and the ideal references ``torch[ideal-bf16]``, declared in
    their class's format; :mod:`anpred.library.precision`) are left out, the fp32 reference
    is always in.
    """
    names = {REFERENCE32}
    for p in participants:
        name = p.name.split(FAULT_MARK, 1)[0]
        if not precision_of(name).reduced:
            names.add(name)
    return tuple(sorted(names))


def model_identity(options: RunOptions, export: AnchoredExport) -> dict[str, Any]:
    """What makes the model the same model: zoo name and weights (the export's weights id,
    ``seed0`` or ``sha256:...``), or the ONNX file's digest and the recipe of its inputs.
    """
    if is_onnx_path(options.model):
        return {
            "onnx": file_digest(options.model, 32),
            "preprocess": options.preprocess,
            "mean": list(options.mean),
            "std": list(options.std),
            "bgr": options.bgr,
            "input_range": list(options.input_range),
            # only when given, so that the keys of earlier calibrations stay as they were
            **({"input_ranges": list(options.input_ranges)} if options.input_ranges else {}),
            # several inputs are packed into one: the packed length alone does not say which
            # shapes made it
            **({"input_shapes": list(options.input_shapes)} if options.input_shapes else {}),
        }
    weights = export.weights_id
    if weights is None:  # an export recorded before weights ids existed
        weights = (
            f"seed{options.seed}" if options.weights is None else file_digest(options.weights, 32)
        )
    return {"zoo": options.model, "weights": weights}


def calibration_key(
    options: RunOptions,
    export: AnchoredExport,
    participants: Sequence[Participant],
    metric: str,
) -> dict[str, Any]:
    """The cache key of a run's calibration (see the module docstring)."""
    return {
        "model": model_identity(options, export),
        "input_shape": [int(d) for d in export.input_shape],
        "anchors": [a.key for a in export.anchors],
        "participants": list(fp32_participants(participants)),
        "metric": metric,
        "rule": RULE,
        "version": VERSION,
    }


def _digest(key: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]


def entry_path(key: Mapping[str, Any]) -> Path:
    """The cache file of ``key`` (``<model>-<digest>.json``)."""
    model = key["model"]
    label = str(model.get("zoo") or "onnx-" + str(model.get("onnx", ""))[:12])
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)
    return cache_dir(FOLDER) / f"{slug}-{_digest(key)}.json"


def store_calibration(
    key: Mapping[str, Any], calibration: Calibration, run_dir: Path | None = None
) -> Path:
    """Write ``calibration`` to the cache under ``key``; return the file."""
    path = entry_path(key)
    record = {
        "key": dict(key),
        "calibration": calibration.to_dict(),
        "calibration_run": None if run_dir is None else str(Path(run_dir).resolve()),
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(path)
    return path


def _entries() -> list[tuple[Path, dict[str, Any]]]:
    found = []
    for path in sorted(cache_dir(FOLDER).glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and isinstance(record.get("key"), dict):
            found.append((path, record))
    return found


@dataclass(frozen=True)
class Resolution:
    """What judges a run: a calibration and where it came from, or the fixed rule and why.

    Attributes:
        calibration: The calibration (its ``source`` set), or ``None`` for the fixed rule.
        message: One line for the run's progress output.
    """

    calibration: Calibration | None
    message: str


def lookup(key: Mapping[str, Any]) -> Resolution:
    """The cached calibration of ``key``; or the fixed rule and why (other participant sets
    of the same model are named, never used).
    """
    path = entry_path(key)
    if path.exists():
        try:
            record = json.loads(path.read_text())
            if record.get("key") == dict(key):
                calibration = Calibration.from_dict(record["calibration"])
                return Resolution(replace(calibration, source=f"cache:{path}"), "")
        except (OSError, ValueError, KeyError, TypeError, UsageError):
            pass
    others = [
        record["key"].get("participants")
        for _, record in _entries()
        if {k: v for k, v in record["key"].items() if k != "participants"}
        == {k: v for k, v in key.items() if k != "participants"}
    ]
    wanted = ",".join(key["participants"])
    if others:
        sets = "; ".join(",".join(o or []) for o in others)
        return Resolution(
            None,
            f"cached calibrations of this model are for the fp32 participants {sets}, not "
            f"{wanted}: fixed noise rule (calibrate with --libs {wanted})",
        )
    return Resolution(
        None,
        "no cached calibration for this model, shape, anchors and fp32 "
        f"participants ({wanted}): fixed noise rule (see `anpred calibrate`)",
    )


def from_file(path: Path, key: Mapping[str, Any]) -> Calibration:
    """The calibration in ``path``: a cache entry (its key must equal ``key``) or a run
    directory's ``calibration.json`` (its anchors and participants must be the run's).

    Raises:
        UsageError: Unreadable, or made for another model, shape, anchor plan or
            participant set.
    """
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise UsageError(f"--calibration {str(path)!r}: cannot read it ({err})") from None
    if not isinstance(record, dict):
        raise UsageError(f"--calibration {str(path)!r}: not a calibration record")
    if "key" in record:
        if record["key"] != dict(key):
            differ = sorted(k for k in key if record["key"].get(k) != key[k])
            raise UsageError(
                f"--calibration {str(path)!r} does not fit this run: its "
                f"{', '.join(differ)} differ"
            )
        record = record.get("calibration") or {}
    calibration = Calibration.from_dict(record)
    if set(calibration.anchors) != set(key["anchors"]):
        raise UsageError(f"--calibration {str(path)!r} was made for other anchors")
    if sorted(calibration.participants) != list(key["participants"]):
        raise UsageError(
            f"--calibration {str(path)!r} was learnt on the fp32 participants "
            f"{','.join(calibration.participants)}, this run's are "
            f"{','.join(key['participants'])}"
        )
    return replace(calibration, source=f"file:{Path(path).resolve()}")


def calibration_mode(value: str | PathLike[str]) -> str:
    """A ``--calibration`` value checked: ``auto``, ``off`` or an existing file (resolved).

    Raises:
        UsageError: Neither a mode nor a file.
    """
    text = str(value)
    if text in MODES:
        return text
    if not Path(text).is_file():
        raise UsageError(f"--calibration takes auto, off or a calibration file, got {text!r}")
    return str(Path(text).resolve())


def resolve(mode: str, key: Mapping[str, Any], judged: Sequence[str]) -> Resolution:
    """The calibration ``--calibration MODE`` gives a run judging the inputs ``judged``.

    ``off``: the fixed rule. ``auto``: the cached calibration of ``key`` if there is one and
    it was not learnt on a judged input, else the fixed rule (the message says why). A
    path: that file's calibration.

    Raises:
        UsageError: A path whose calibration does not fit the run, or was learnt on one of
            its inputs.
    """
    if mode == "off":
        return Resolution(None, "calibration off: fixed noise rule")
    if mode == "auto":
        found = lookup(key)
    else:
        found = Resolution(from_file(Path(mode), key), "")
    if found.calibration is None:
        return found
    shared = sorted(set(found.calibration.inputs) & set(judged))
    if shared:
        if mode != "auto":
            raise UsageError(
                f"--calibration {mode!r} was learnt on inputs {shared} this run judges"
            )
        return Resolution(
            None,
            f"the cached calibration was learnt on inputs {shared} this run judges: fixed "
            "noise rule",
        )
    origin = found.calibration.source.split(":", 1)
    return Resolution(
        found.calibration,
        f"calibrated noise thresholds ({RULE}) from the {origin[0]}: {origin[1]}",
    )


def calibration_options(options: RunOptions, n_inputs: int) -> RunOptions:
    """The options of the calibration run of ``options``'s model: ``n_inputs`` seeded
    synthetic inputs and nothing else (no photographs, files or faults); the seed moved by
    :data:`SEED_OFFSET` where it does not make the weights.

    Raises:
        UsageError: Fewer than 2 inputs.

    Reduced-precision participants may take part: their classes' factors are learnt from
    their ratios to their ideal references (``Calibration.classes``).
    """
    if n_inputs < 2:
        raise UsageError(f"--inputs: a calibration needs at least 2 inputs, got {n_inputs}")
    weights_from_seed = not is_onnx_path(options.model) and options.weights is None
    return replace(
        options,
        images=0,
        image_paths=(),
        synthetic=n_inputs,
        inputs_file=None,
        seed=options.seed if weights_from_seed else options.seed + SEED_OFFSET,
        isolation=True,
        extra={},
    )


def cache_calibration_run(options: RunOptions, run_dir: Path, calibration: Calibration) -> Path:
    """Store ``calibration``, learnt from the finished calibration run ``run_dir``, in the
    cache under the key a run of ``options``'s model with the participants that finished
    the calibration run looks up (``anpred calibrate``; ``anpred eval``'s calibration runs);
    return the cache file.
    """
    export = AnchoredExport.from_dict(RunStore.open(run_dir).read_export())
    measured = [parse_participant(p) for p in calibration.participants]
    key = calibration_key(options, export, measured, calibration.metric)
    return store_calibration(key, calibration, run_dir)
