"""The Python API: run an analysis, or load a finished run, from a notebook or a test suite.

``anpred.run(model, libs=..., images=..., out=...)`` does what ``anpred run`` does, with
every flag of ``anpred run`` as a keyword of the same name and default, and returns a
:class:`Run`; the model may also be a ``torch.nn.Module`` with ``example_inputs``
(:mod:`anpred.interchange.user_module`). ``anpred.load(run_dir)`` reads a run directory
back. A :class:`Run` exposes the typed summary (:class:`~anpred.store.summary.Summary`) and
the deviations table as a pandas DataFrame. Errors are
:class:`~anpred.errors.AnpredError` subclasses with a one-line message, as on the command
line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anpred.errors import UsageError
from anpred.progress import to_stderr
from anpred.store.repro_record import REPRO_FOLDER, ReproRecord, load_reproducers
from anpred.store.summary import Anchor, Finding, Localization, ParticipantRecord, Summary

if TYPE_CHECKING:
    import pandas

Progress = Callable[[str], None]


def _silent(_message: str) -> None:
    """Say nothing (``progress=None``)."""


@dataclass(frozen=True)
class Run:
    """A run directory and what its analysis found.

    Attributes:
        dir: The run directory.
        summary: The typed summary (``summary.json``).
        exit_code: For :func:`run`: 0 no findings, 1 findings, 3 a participant failed;
            ``None`` for :func:`load`.
    """

    dir: Path
    summary: Summary
    exit_code: int | None = None

    @property
    def findings(self) -> tuple[Finding, ...]:
        """Every (participant, anchor, input) the oracle flagged."""
        return self.summary.findings

    @property
    def localization(self) -> Localization:
        """Library blame and, per participant, emergence and introduced error per stage."""
        return self.summary.localization

    @property
    def participants(self) -> tuple[ParticipantRecord, ...]:
        """What each participant's worker did (status, version, settings, timings...)."""
        return self.summary.participants

    @property
    def anchors(self) -> tuple[Anchor, ...]:
        """The anchors in topological order, final output last."""
        return self.summary.anchors

    @property
    def reproducers(self) -> list[ReproRecord]:
        """The reproducers ``anpred repro`` wrote into the run's ``repro/`` (empty: none)."""
        return load_reproducers(self.dir / REPRO_FOLDER)

    @property
    def deviations(self) -> pandas.DataFrame:
        """One row per participant × input × anchor with every metric (read on each access).

        Columns: ``participant``, ``anchor``, ``input``, ``finding``, the primary and
        secondary metrics vs the consensus, ``<metric>_vs_fp64``, ``threshold``,
        ``noise_floor``, ``population_median``, ``introduced``, ``pairwise``, ``non_finite``.
        """
        import pandas

        from anpred.store.layout import RunStore

        path = RunStore(self.dir).deviations_path
        if not path.exists():  # nothing was judged (every participant failed)
            return pandas.DataFrame(columns=["participant", "anchor", "input", "finding"])
        return pandas.read_parquet(path)


#: Keywords of :func:`run` that are not ``anpred run`` flags.
API_ONLY = ("example_inputs", "progress")
#: ``anpred run`` flags whose keyword states the positive: ``--no-drill`` is ``drill=False``.
NEGATED = {"no_drill": "drill", "no_isolation": "isolation"}


def _is_module(model: Any) -> bool:
    """Whether ``model`` is a ``torch.nn.Module``.

    Without importing torch: a caller holding a module has imported it.
    """
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(model, torch.nn.Module)


def _strings(value: Any, name: str) -> list[str] | None:
    """A repeatable flag's values: one string/path, or a sequence of them."""
    if value is None:
        return None
    if isinstance(value, str | PathLike):
        return [str(value)]
    if isinstance(value, Sequence) and all(isinstance(v, str | PathLike) for v in value):
        return [str(v) for v in value]
    raise UsageError(f"{name} takes a string or a list of strings, got {value!r}")


def _numbers(value: Any, name: str) -> str | None:
    """``mean``/``std``: ``"0.5,0.5,0.5"`` or a sequence of numbers, as the flag's text."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, Sequence) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in value
    ):
        return ",".join(str(v) for v in value)
    raise UsageError(f"{name} takes numbers, got {value!r}")


def _checked(action: argparse.Action, value: Any) -> Any:
    """A keyword's value checked against its flag's type and choices (one-line errors)."""
    name = action.dest
    if value is None or action.type is None and action.choices is None:
        return value
    if action.type is int and (not isinstance(value, int) or isinstance(value, bool)):
        raise UsageError(f"{name} must be an integer, got {value!r}")
    if action.type is float:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise UsageError(f"{name} must be a number, got {value!r}")
        value = float(value)
    if action.choices is not None and value not in action.choices:
        raise UsageError(f"{name} must be one of {', '.join(map(str, action.choices))}: {value!r}")
    return value


def run_parser() -> argparse.ArgumentParser:
    """The flags of ``anpred run`` (the same parser the command line uses)."""
    from anpred.cli.flags import add_run_flags

    parser = argparse.ArgumentParser(prog="anpred run", add_help=False)
    add_run_flags(parser)
    return parser


def _namespace(model: str, given: dict[str, Any]) -> argparse.Namespace:
    """The parsed flags ``anpred run`` would have for :func:`run`'s keywords ``given``."""
    parser = run_parser()
    args = parser.parse_args([model])
    actions = {a.dest: a for a in parser._actions}
    for flag, keyword in NEGATED.items():
        value = given.pop(keyword)
        if not isinstance(value, bool):
            raise UsageError(f"{keyword} must be True or False, got {value!r}")
        setattr(args, flag, not value)
    libs = given.pop("libs")
    names = libs.split(",") if isinstance(libs, str) else list(libs)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise UsageError(f"libs must name participants, e.g. 'torch,onnxruntime'; got {libs!r}")
    args.libs = ",".join(names)
    images = given.pop("images")
    if isinstance(images, int) and not isinstance(images, bool):
        if images < 1:
            raise UsageError("images must be at least 1")
        args.images = images
    elif images is not None:  # image files, as --image
        given["image"] = [
            *(_strings(images, "images") or []),
            *(_strings(given["image"], "image") or []),
        ]
    for name in ("image", "anchors", "input_shape", "input_range"):
        given[name] = _strings(given[name], name)
    for name in ("mean", "std"):
        given[name] = _numbers(given[name], name)
    if isinstance(given["ports"], Mapping):  # as --ports values
        given["ports"] = [f"{lib}={src}" for lib, src in given["ports"].items()]
    given["ports"] = _strings(given["ports"], "ports")
    if isinstance(given["anchor_map"], Mapping):  # a file on the command line; here the map
        mapping, given["anchor_map"] = given["anchor_map"], None
    else:
        mapping = None
    for name in ("weights", "inputs", "out", "calibration", "anchor_map"):
        if isinstance(given[name], PathLike):
            given[name] = str(given[name])
    if isinstance(given["parallel"], int) and not isinstance(given["parallel"], bool):
        given["parallel"] = str(given["parallel"])
    memory = given["max_memory"]
    if isinstance(memory, int) and not isinstance(memory, bool):
        given["max_memory"] = str(memory)
    for name, value in given.items():
        setattr(args, name, _checked(actions[name], value))
    if mapping is not None:
        args.anchor_map = mapping  # run_options reads a map or a file alike
    return args


def run(
    model: Any,
    libs: str | Sequence[str] = "all",
    images: int | str | PathLike[str] | Sequence[str | PathLike[str]] | None = None,
    out: str | PathLike[str] | None = None,
    *,
    example_inputs: Any = None,
    progress: Progress | None = to_stderr,
    image: str | PathLike[str] | Sequence[str | PathLike[str]] | None = None,
    synthetic: int = 0,
    granularity: str = "stage",
    anchors: str | Sequence[str] | None = None,
    weights: str | PathLike[str] | None = None,
    seed: int = 0,
    input_size: int | None = None,
    input_shape: str | Sequence[str] | None = None,
    inputs: str | PathLike[str] | None = None,
    preprocess: str | None = None,
    mean: str | float | Sequence[float] | None = None,
    std: str | float | Sequence[float] | None = None,
    bgr: bool = False,
    input_range: str | Sequence[str] | None = None,
    stages: int | None = None,
    isolation: bool = True,
    drill: bool = True,
    calibration: str | PathLike[str] = "auto",
    metrics: str = "candidates",
    keep_captures: str = "needed",
    chunk: int = 32,
    threads: int = 1,
    parallel: int | str = "auto",
    timeout: float | None = None,
    max_memory: int | str | None = None,
    export_timeout: float = 1800.0,
    ray: str | None = None,
    ports: Mapping[str, str] | Sequence[str] | None = None,
    anchor_map: Mapping[str, Mapping[str, str]] | str | PathLike[str] | None = None,
    **unknown: Any,
) -> Run:
    """Run an anchor-level analysis, as ``anpred run`` does, and return the run.

    Every ``anpred run`` flag is a keyword of the same name and default (``--no-drill`` is
    ``drill=False``, ``--no-isolation`` ``isolation=False``); values are checked as the
    command line checks them.

    Args:
        model: A zoo model name (``anpred models``), the path of an ONNX file, a
            ``torch.nn.Module``, or ``"path/to/file.py:function"`` (a function returning
            the module, or ``(module, example_inputs)``). A module's anchors come from its
            module tree (``granularity``, or ``anchors`` as module paths); the fp64
            reference is the module itself in float64; every other participant runs its
            ONNX export.
        libs: Participants, as a list or comma-separated (``"torch,onnxruntime[O1]"``);
            ``"all"``: every installed library.
        images: How many bundled photographs to use (default 2), or image file paths.
        out: The run directory (default ``runs/<model>``, ``runs/<class name>`` for a
            module); a run with the same settings there is resumed.
        example_inputs: With a module: a tensor, a tuple of tensors, or a dict of named
            tensors (then passed by name); they fix the input shapes and dtypes. A module
            whose inputs are images gets the photographs; other inputs are seeded random
            tensors (``input_range``) or the arrays of ``inputs`` (a ``.npz``).
        progress: Called with each progress line (default: print to stderr; ``None``:
            silent).
        image: Image file paths (``--image``).
        synthetic: Seeded synthetic images added to the inputs.
        granularity: Anchor plan: ``"stage"`` or ``"layer"``.
        anchors: Anchor module paths (zoo model, module) or tensor names (ONNX file).
        weights: Checkpoint of a zoo model.
        seed: Seed of generated weights (torch's seed while a module is built) and inputs.
        input_size: Input side of a zoo model.
        input_shape: Shapes of dynamic ONNX inputs, or of a module without example inputs
            (``"1x3x224x224"``, ``["ids=1x16", ...]``).
        inputs: A ``.npz`` with the inputs themselves, by input name.
        preprocess: Image preprocessing of an ONNX file's or module's image input.
        mean: Per-channel mean subtracted after preprocessing.
        std: Per-channel std divided by after preprocessing.
        bgr: Feed the channels in BGR order.
        input_range: Range of seeded non-image inputs (``"0,255"``, ``["ids=0,30000"]``).
        stages: Automatic stages of an ONNX graph without module scopes.
        isolation: Stage isolation (introduced error per stage).
        drill: When the run has findings, drill from the flagged stages down to the
            operators.
        calibration: The noise thresholds: ``"auto"`` (a calibration ``anpred calibrate``
            cached for this model, input shape, anchors and fp32 participants, else the
            fixed 10x rule), ``"off"`` (the fixed rule) or a calibration file.
        metrics: Where the corroborating metrics are computed: ``"candidates"`` (where a
            participant may be a finding) or ``"all"`` (everywhere).
        keep_captures: ``"needed"`` (prune what nothing reads later) or ``"all"``.
        chunk: Inputs per chunk with ``keep_captures="needed"`` (0: in one go).
        threads: Threads per worker.
        parallel: Workers at once, or ``"auto"``.
        timeout: Seconds per worker (default 900 + 120 per input).
        max_memory: Memory budget: bytes, or ``"8G"``; ``None``: 80 % of the memory
            available now; ``"none"``: no budget.
        export_timeout: Seconds the model export may take.
        ray: Run the workers as tasks of a Ray cluster (``"local"``, ``"auto"``, an
            address).
        ports: The user's own ports of the model to other libraries, by library:
            ``{"paddle": "port.py:build_port"}`` (a function returning the port, its
            weights transferred; paddle and tensorflow's Keras); each runs as the
            participant ``<library>-port`` through its own code (:mod:`anpred.ports`).
        anchor_map: Per port library, ``{port layer: reference anchor}`` for anchors whose
            layer is neither named like the reference's module nor found by order and
            shape; or the path of a JSON file holding it.
        **unknown: Refused with the list of known keywords.

    Returns:
        The run, with its ``exit_code`` (0 no findings, 1 findings, 3 a participant failed).

    Raises:
        AnpredError: Bad arguments or input (one-line message), as the CLI reports them.
    """
    given = {k: v for k, v in locals().items() if k not in ("model", "unknown", *API_ONLY)}
    from anpred.cli.flags import execution_settings, executor_of, run_options
    from anpred.pipeline.run import run as run_pipeline

    if unknown:
        known = sorted([*given, *API_ONLY, *NEGATED.values()])
        raise UsageError(
            f"anpred.run() got unknown option(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(set(known)))}"
        )
    label = None
    if _is_module(model):
        from anpred.interchange.module_bundle import save_module

        label = type(model).__name__
        model = save_module(model, example_inputs)
    elif example_inputs is not None:
        raise UsageError(
            "example_inputs goes with a torch.nn.Module; a 'file.py:function' returns its own"
        )
    if not isinstance(model, str | PathLike):
        raise UsageError(
            "model must be a zoo name, an ONNX path, 'file.py:function' or a torch.nn.Module, "
            f"not {type(model).__name__}"
        )
    args = _namespace(str(model), given)
    options = run_options(args)
    directory = Path(args.out or Path("runs") / (label or Path(str(model)).stem))
    with executor_of(args) as executor:
        settings = execution_settings(args, executor=executor, say=progress or _silent)
        outcome = run_pipeline(options, directory, settings)
    return Run(outcome.run_dir, outcome.summary, outcome.exit_code)


def load(run_dir: str | PathLike[str]) -> Run:
    """Read a finished run directory (written by ``anpred run`` or :func:`run`).

    Raises:
        UsageError: Not a run directory, not analysed yet, or written by an incompatible
            anpred.
    """
    from anpred.store.layout import RunStore

    store = RunStore.open(Path(run_dir))
    if not store.has_summary():
        raise UsageError(
            f"{str(run_dir)!r} has no analysis yet (interrupted run?): finish it with "
            "`anpred run` and the same settings, or analyse it with `anpred report`"
        )
    return Run(store.root, Summary.from_dict(store.read_summary()))
