"""The two settings of a run: what it computes and how it executes.

* :class:`RunOptions`: everything that determines a run's results; the run directory
  remembers it (``run.json``) so that a run resumes only with the same options.
* :class:`ExecutionSettings`: how the run executes (executor, threads, parallel workers,
  timeouts, memory budget, chunks, kept captures, drill-down, calibration, progress); it
  changes how long a run takes and what it keeps, not its numbers.

The CLI (:mod:`anpred.cli.flags`) and the Python API (:func:`anpred.run`) build both from
the same flags; the pipeline passes the two objects down to the workers instead of a dozen
parameters. Importing this module imports nothing else of anpred at run time but
:mod:`anpred.progress` (standard library only).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Literal

from anpred.progress import to_stderr

if TYPE_CHECKING:
    from anpred.execution.executor import Executor
    from anpred.progress import Say

#: Seconds the model export may take (``--export-timeout``). Generous on purpose: the limit
#: is not a performance budget, it only ends an export that hangs.
DEFAULT_EXPORT_TIMEOUT = 1800.0
#: Inputs per chunk of a run that prunes its captures (``--chunk``; :mod:`anpred.pipeline.chunks`):
#: runs of up to this many inputs go in one go. yolov8n, six libraries: ~9 GB of captures at
#: the peak of a chunk.
DEFAULT_CHUNK = 32
#: ``--keep-captures`` values: keep every capture, or only those needed later (the default;
#: :mod:`anpred.pipeline.prune`).
KEEP_ALL, KEEP_NEEDED = "all", "needed"
KEEP_MODES = (KEEP_ALL, KEEP_NEEDED)
DEFAULT_KEEP = KEEP_NEEDED
#: ``--parallel auto``: as many workers as the CPUs and the memory budget allow.
AUTO: Literal["auto"] = "auto"
#: ``--max-memory`` not given: 80 % of the memory available when the run starts.
DEFAULT_MEMORY: Literal["default"] = "default"


@dataclass(frozen=True)
class RunOptions:
    """Everything that determines a run's results (``run.json`` in the run directory).

    Attributes:
        model: Zoo model name, path of an ``.onnx`` file, or a torch module's source
            (``file.py:function``, ``file.pt``; :mod:`anpred.interchange.user_module`).
        libs: Participant specs (``torch``, ``onnxruntime[O1]``) or ``("all",)``.
        images: Number of bundled photographs (ignored when ``image_paths`` is set).
        image_paths: User image files.
        granularity: ``stage`` or ``layer``.
        anchors: Module paths (zoo) or tensor names (ONNX) to use as anchors.
        weights: Checkpoint path, or ``None`` for seeded weights.
        seed: Seed of generated weights and synthetic inputs.
        synthetic: Number of seeded synthetic images added to the inputs.
        isolation: Whether to run stage isolation.
        input_size: Input side for zoo models (default: the model's own, e.g. 640 for YOLO).
        extra: Settings of later features (e.g. injected faults), kept in ``run.json``.
        input_shapes: ``--input-shape`` values (``NAME=1x3x640x640`` or a bare shape).
        inputs_file: ``--inputs FILE.npz``: the inputs themselves, by model input name.
        preprocess: Image preprocessing of a user's ONNX file (``letterbox``, ``imagenet``,
            ``scale``, ``none``); ``None``: letterbox for image inputs.
        mean: Per-channel mean subtracted after preprocessing (``--mean``).
        std: Per-channel std divided by after preprocessing (``--std``).
        bgr: Feed channels in BGR order.
        input_range: ``(LO, HI)`` of seeded random non-image inputs (``--input-range``).
        input_ranges: ``NAME=LO,HI`` ranges of single inputs (``--input-range NAME=LO,HI``),
            which take precedence over ``input_range`` for their input.
        stages: Number of automatic stages of a graph without module scopes (``--stages``).
    """

    model: str
    libs: tuple[str, ...] = ("all",)
    images: int = 2
    image_paths: tuple[str, ...] = ()
    granularity: str = "stage"
    anchors: tuple[str, ...] = ()
    weights: str | None = None
    seed: int = 0
    synthetic: int = 0
    isolation: bool = True
    input_size: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    input_shapes: tuple[str, ...] = ()
    inputs_file: str | None = None
    preprocess: str | None = None
    mean: tuple[float, ...] = ()
    std: tuple[float, ...] = ()
    bgr: bool = False
    input_range: tuple[float, ...] = ()
    stages: int | None = None
    input_ranges: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (lists for tuples).

        Settings added for users' ONNX files (issue 12) are left out while at their
        defaults, so ``run.json`` of an earlier run still equals its settings (resume).
        """
        data = asdict(self)
        for key, default in _LATER_DEFAULTS.items():
            if data[key] == default:
                del data[key]
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunOptions:
        """Inverse of :meth:`to_dict` (``run.json``; a field it lacks takes its default).

        Raises:
            ValueError: A key that is no field (a run written by another anpred).
        """
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"run settings with unknown fields {unknown}")
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return cls(**{**values, "extra": dict(data.get("extra") or {})})


#: Fields added after ``run.json`` files existed, with their defaults (see ``to_dict``).
_LATER_DEFAULTS: dict[str, Any] = {
    "input_shapes": (),
    "inputs_file": None,
    "preprocess": None,
    "mean": (),
    "std": (),
    "bgr": False,
    "input_range": (),
    "stages": None,
    "input_ranges": (),
}


@dataclass(frozen=True)
class ExecutionSettings:
    """How a run executes; nothing here changes its numbers.

    The defaults are ``anpred run``'s. The pipeline resolves the two ``auto`` values once
    (:meth:`resolved`) before any worker starts; the execution layer reads only resolved
    settings.

    Attributes:
        threads: Compute threads per worker.
        parallel: Workers (and analysis processes) at once, or ``"auto"`` (the CPUs this
            process may use, over ``threads``, within the memory budget:
            :mod:`anpred.execution.slots`).
        timeout: Seconds per worker (``None``: a start allowance plus one per input).
        export_timeout: Seconds the model export may take.
        max_memory: Memory budget in bytes (``"default"``: 80 % of the memory available
            when the run starts; ``None``: no budget). A run estimated above it is refused
            before anything large is allocated; a worker that alone goes over it is stopped
            as a recorded crash of its participant (:mod:`anpred.execution.resources`).
        executor: Where the workers run (``None``: local processes;
            :mod:`anpred.execution.executor`); the export and the analysis run here.
        drill: When the run has findings, drill from the flagged stages down to operators.
        calibration: ``auto``, ``off`` or a calibration file
            (:mod:`anpred.calibration.cache`); ``None`` keeps what the run
            directory holds (``anpred eval`` attaches its own).
        keep_captures: ``needed`` prunes the captures nothing reads later once the run is
            judged and reported; ``all`` keeps every one.
        chunk: With ``needed``, a run of more inputs than this goes ``chunk`` inputs at a
            time (:mod:`anpred.pipeline.chunks`); 0: in one go.
        say: Progress printer (default: stderr).
        env: Extra environment variables of every worker (set by :meth:`resolved`: the
            memory limit of each).
    """

    threads: int = 1
    parallel: int | Literal["auto"] = AUTO
    timeout: float | None = None
    export_timeout: float = DEFAULT_EXPORT_TIMEOUT
    max_memory: int | None | Literal["default"] = DEFAULT_MEMORY
    executor: Executor | None = None
    drill: bool = True
    calibration: str | None = None
    keep_captures: str = KEEP_NEEDED
    chunk: int = DEFAULT_CHUNK
    say: Say = to_stderr
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def workers(self) -> int:
        """Workers at once (resolved settings only).

        Raises:
            ValueError: ``parallel`` is still ``"auto"``.
        """
        if self.parallel == AUTO:
            raise ValueError("parallel is 'auto': resolve the settings first")
        return int(self.parallel)

    @property
    def budget(self) -> int | None:
        """The memory budget in bytes (resolved settings only; ``None``: none).

        Raises:
            ValueError: ``max_memory`` is still ``"default"``.
        """
        if self.max_memory == DEFAULT_MEMORY:
            raise ValueError("max_memory is 'default': resolve the settings first")
        return self.max_memory

    def resolved(
        self, parallel: int, budget: int | None, env: Mapping[str, str]
    ) -> ExecutionSettings:
        """These settings with their ``auto`` values decided and the workers' environment."""
        return replace(self, parallel=parallel, max_memory=budget, env=dict(env))

    def quiet(self) -> ExecutionSettings:
        """These settings, saying nothing."""
        return replace(self, say=_quiet)


def _quiet(_message: str) -> None:
    """Say nothing."""
