"""The conversion step of deployment runtimes: ONNX in, artifact out, cached, with a status.

Used by :class:`~anpred.backends.converted.ConvertedRunner` inside a runtime's worker. One
conversion is keyed by (the ONNX model's bytes, the runtime, its configuration settings,
the converter's version, whether onnxslim runs first) and kept under
``$ANPRED_CACHE/conversions/<runtime>/<key>/``: the ONNX source as converted, the
artifact, and ``record.json`` (written last) saying whether it worked, why not, and how
long it took. A failed conversion (:class:`~anpred.backends.converted.ConversionError`) is
cached too, with its reason; an unexpected error of the converter is reported the same way
but not cached. Workers converting the same thing at once wait for each other (a file lock).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import onnx

from anpred.cache import cache_dir

#: Bump when what a cached conversion holds changes, to invalidate older entries.
CONVERSION_VERSION = 1
_RECORD = "record.json"
_SOURCE = "model.onnx"
#: Settings that do not change the artifact (left out of the cache key).
_NOT_IN_KEY = ("threads",)


class ConversionFailure(Exception):
    """A conversion failed; ``reason`` is one line (the converter's own when it gave one)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Converted:
    """A conversion's result: the source as converted, the artifact and the record."""

    source: Any  # ConversionSource (typed loosely: that module imports this one)
    artifact: Path
    record: dict[str, Any]


def one_line(err: BaseException) -> str:
    """An exception as one line: its message's first line (its type when it has none)."""
    text = str(err).strip().splitlines()
    first = text[0].strip() if text else ""
    return (first or err.__class__.__name__)[:300]


def conversion_key(
    model_bytes: bytes,
    runtime: str,
    settings: Mapping[str, Any],
    converter_version: str,
    slimmed: bool,
) -> str:
    """The cache key of one conversion."""
    kept = {k: v for k, v in settings.items() if k not in _NOT_IN_KEY}
    blob = json.dumps(
        [
            CONVERSION_VERSION,
            hashlib.sha256(model_bytes).hexdigest(),
            runtime,
            kept,
            converter_version,
            slimmed,
        ],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _shapes(values: Any) -> tuple[tuple[str, ...], tuple[tuple[int, ...], ...]]:
    names, shapes = [], []
    for value in values:
        names.append(value.name)
        dims = value.type.tensor_type.shape.dim
        shapes.append(tuple(int(d.dim_value) if d.HasField("dim_value") else -1 for d in dims))
    return tuple(names), tuple(shapes)


def describe(model: onnx.ModelProto, path: Path, make_source: Callable[..., Any]) -> Any:
    """A ConversionSource of ``model`` saved at ``path`` (the graph's inputs and outputs)."""
    initializers = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    input_names, input_shapes = _shapes(inputs)
    output_names, output_shapes = _shapes(model.graph.output)
    return make_source(
        onnx_path=path,
        input_names=input_names,
        input_shapes=input_shapes,
        output_names=output_names,
        output_shapes=output_shapes,
    )


def convert_cached(
    model: onnx.ModelProto,
    runtime: str,
    settings: Mapping[str, Any],
    converter_version: str,
    slim: bool,
    make_source: Callable[..., Any],
    convert: Callable[[Any, Path], Path],
) -> Converted:
    """Convert ``model`` (or take the cached conversion).

    Args:
        model: The ONNX model to convert (anchored, plain or isolation model).
        runtime: The runtime (library) name.
        settings: The participant's configuration settings.
        converter_version: The converter's version.
        slim: Simplify with onnxslim first.
        make_source: Builds the ConversionSource from its graph fields (``onnx_path``,
            ``input_names``, ``input_shapes``, ``output_names``, ``output_shapes``); the
            caller fills in the rest.
        convert: The runner's ``convert_impl(source, folder) -> artifact path``.

    Raises:
        ConversionFailure: The conversion failed (now, or when it was cached).
    """
    data = model.SerializeToString()
    key = conversion_key(data, runtime, settings, converter_version, slim)
    parent = cache_dir("conversions", runtime)
    folder = parent / key
    with open(parent / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = _read(folder)
        cached = record is not None
        if record is None:
            record = _convert(model, folder, slim, make_source, convert)
    record = {**record, "cache_key": key, "cached": cached, "folder": str(folder)}
    if not record["ok"]:
        raise ConversionFailure(record["reason"])
    source_model = onnx.load(str(folder / _SOURCE), load_external_data=False)
    source = describe(source_model, folder / _SOURCE, make_source)
    source = replace(source, slimmed=slim) if hasattr(source, "slimmed") else source
    return Converted(source, folder / record["artifact"], record)


def _read(folder: Path) -> dict[str, Any] | None:
    try:
        record = json.loads((folder / _RECORD).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and "ok" in record else None


def _convert(
    model: onnx.ModelProto,
    folder: Path,
    slim: bool,
    make_source: Callable[..., Any],
    convert: Callable[[Any, Path], Path],
) -> dict[str, Any]:
    """Convert into an empty ``folder``; write and return its record (failures cached only
    when the converter reported them as :class:`ConversionError`).
    """
    from anpred.backends.converted import ConversionError

    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    start = time.perf_counter()
    record: dict[str, Any] = {"ok": False, "slimmed": slim}
    try:
        if slim:
            import onnxslim

            try:
                model = onnxslim.slim(model)
            except Exception as err:  # onnxslim's own error: the conversion's reason
                raise ConversionError(f"onnxslim: {one_line(err)}") from err
        onnx.save(model, str(folder / _SOURCE))
        source = describe(model, folder / _SOURCE, make_source)
        source = replace(source, slimmed=slim)
        artifact = Path(convert(source, folder))
        record.update(ok=True, artifact=str(artifact.resolve().relative_to(folder.resolve())))
    except ConversionError as err:
        record["reason"] = one_line(err)
    except Exception as err:  # a converter's unexpected error: reported, not cached
        shutil.rmtree(folder, ignore_errors=True)
        raise ConversionFailure(f"{err.__class__.__name__}: {one_line(err)}") from err
    record["seconds"] = round(time.perf_counter() - start, 3)
    (folder / _RECORD).write_text(json.dumps(record, indent=1))
    return record
