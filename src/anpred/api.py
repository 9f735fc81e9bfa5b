"""The Python API: run an analysis, or load a finished run, from a notebook or a test suite.

``anpred.run(model, libs=..., images=..., out=...)`` does what ``anpred run`` does and
returns a :class:`Run`; ``anpred.load(run_dir)`` reads a run directory back. A :class:`Run`
exposes the typed summary (:class:`~anpred.store.summary.Summary`) and the deviations table
as a pandas DataFrame. Errors are :class:`~anpred.errors.AnpredError` subclasses with a
one-line message, as on the command line.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anpred.errors import UsageError
from anpred.store.summary import Anchor, Finding, Localization, ParticipantRecord, Summary

if TYPE_CHECKING:
    import pandas

Progress = Callable[[str], None]

#: Keyword options of :func:`run` that go to the pipeline rather than into the run settings.
_EXECUTION = ("threads", "parallel", "timeout", "keep_captures", "chunk")

#: Keyword arguments of :func:`run` besides the run settings (named in its error message).
_KEYWORDS = (*_EXECUTION, "progress", "drill", "calibration")


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


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


def _options(
    model: str | PathLike[str],
    libs: str | Sequence[str],
    images: int | str | PathLike[str] | Sequence[str | PathLike[str]] | None,
    options: dict[str, Any],
) -> Any:
    """The :class:`~anpred.pipeline.options.RunOptions` of :func:`run`'s arguments."""
    from anpred.pipeline.options import RunOptions

    known = {f.name for f in fields(RunOptions)} - {"model", "libs", "images", "image_paths"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise UsageError(
            f"anpred.run() got unknown option(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted([*known, *_KEYWORDS]))}"
        )
    names = tuple(libs.split(",")) if isinstance(libs, str) else tuple(libs)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise UsageError(f"libs must name participants, e.g. 'torch,onnxruntime'; got {libs!r}")
    counted: dict[str, Any] = {}
    if isinstance(images, int) and not isinstance(images, bool):
        if images < 1:
            raise UsageError("images must be at least 1")
        counted["images"] = images
    elif isinstance(images, str | PathLike):
        counted["image_paths"] = (str(images),)
    elif images is not None:
        counted["image_paths"] = tuple(str(i) for i in images)
    anchors = options.get("anchors")
    if anchors is not None:
        options["anchors"] = (anchors,) if isinstance(anchors, str) else tuple(anchors)
    return RunOptions(model=str(model), libs=names, **counted, **options)


def run(
    model: str | PathLike[str],
    libs: str | Sequence[str] = "all",
    images: int | str | PathLike[str] | Sequence[str | PathLike[str]] | None = None,
    out: str | PathLike[str] | None = None,
    *,
    progress: Progress | None = _stderr,
    drill: bool = True,
    calibration: str | PathLike[str] = "auto",
    **options: Any,
) -> Run:
    """Run an anchor-level analysis, as ``anpred run`` does, and return the run.

    Args:
        model: A zoo model name (``anpred models``) or the path of an ONNX file.
        libs: Participants, as a list or comma-separated (``"torch,onnxruntime[O1]"``);
            ``"all"``: every installed library.
        images: How many bundled photographs to use (default 2), or image file paths.
        out: The run directory (default ``runs/<model>``); a run with the same settings
            there is resumed.
        progress: Called with each progress line (default: print to stderr; ``None``:
            silent).
        drill: When the run has findings, drill from the flagged stages down to the
            operators (``--no-drill``: ``False``).
        calibration: The noise thresholds, as ``--calibration``: ``"auto"`` (the
            calibration ``anpred calibrate`` cached for this model, input shape, anchors
            and fp32 participants, else the fixed 10x rule), ``"off"`` (the fixed rule) or
            the path of a calibration file (``docs/oracle.md``).
        **options: Run settings, as the CLI flags: ``granularity``, ``anchors``,
            ``weights``, ``seed``, ``synthetic``, ``isolation``, ``input_size``; and
            execution settings: ``threads`` (per worker), ``parallel`` (workers at once),
            ``timeout`` (seconds per worker), ``keep_captures`` (``"needed"``, the
            default, or ``"all"``, as ``--keep-captures``) and ``chunk`` (inputs per
            chunk, as ``--chunk``; 0: in one go).

    Returns:
        The run, with its ``exit_code`` (0 no findings, 1 findings, 3 a participant failed).

    Raises:
        AnpredError: Bad arguments or input (one-line message), as the CLI reports them.
    """
    from anpred.pipeline.calibration_cache import calibration_mode
    from anpred.pipeline.run import run as run_pipeline

    execution = {k: options.pop(k) for k in _EXECUTION if k in options}
    settings = _options(model, libs, images, options)
    if not isinstance(drill, bool):
        raise UsageError(f"drill must be True or False, got {drill!r}")
    mode = calibration_mode(calibration)
    directory = Path(out) if out is not None else Path("runs") / Path(str(model)).stem
    outcome = run_pipeline(
        settings,
        directory,
        say=progress or (lambda _message: None),
        drill=drill,
        calibration=mode,
        **execution,
    )
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
