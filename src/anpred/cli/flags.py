"""The flags ``anpred`` subcommands share, in groups, and what they build.

``run``, ``sweep``, ``calibrate`` and ``inject`` take the run flags (:func:`add_run_flags`);
:func:`run_options` turns them into the run's :class:`~anpred.settings.RunOptions` and
:func:`execution_settings` into its :class:`~anpred.settings.ExecutionSettings`. The Python
API (:func:`anpred.run`) parses its keywords with the same parser, so both build the two
settings the same way.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any, Literal

from anpred.errors import UsageError
from anpred.execution.resources import parse_size
from anpred.execution.slots import parse_parallel
from anpred.settings import (
    DEFAULT_CHUNK,
    DEFAULT_EXPORT_TIMEOUT,
    DEFAULT_KEEP,
    DEFAULT_MEMORY,
    KEEP_MODES,
    ExecutionSettings,
    RunOptions,
)

# Building the settings imports the pipeline's checks; defining the flags does not: the
# checks are imported where the flags are read, so that ``anpred --help`` and every other
# subcommand start without them (19 anpred modules and no numpy or onnx, against 84 and
# both when imported here; `python -X importtime -m anpred --help`).

Group = Any
"""An ``argparse`` parser or argument group (anything with ``add_argument``)."""


def add_run_flags(parser: argparse.ArgumentParser) -> None:
    """The flags ``run``, ``sweep``, ``calibrate`` and ``inject`` share, in their groups."""
    parser.add_argument(
        "model",
        help="zoo model name (see `anpred models`), path to an .onnx file, or a torch module: "
        "path/to/file.py:function (returning the module, or (module, example_inputs)) or a "
        "module saved whole with torch.save (.pt)",
    )
    add_input_flags(parser.add_argument_group("participants and inputs"))
    model = parser.add_argument_group("model and anchors")
    add_model_flags(model)
    add_port_flags(parser.add_argument_group("your own ports of the model to other libraries"))
    add_own_model_flags(parser.add_argument_group("your own ONNX file"))
    add_judging_flags(model)
    add_execution_flags(parser.add_argument_group("execution and output"))


def add_input_flags(what: Group) -> None:
    """``--libs``, ``--images``, ``--image``, ``--synthetic``: who runs on what."""
    what.add_argument(
        "--libs",
        default="all",
        help="comma-separated participants, e.g. torch,onnxruntime,tensorflow[xla] "
        "(see `anpred libs`); 'all' = every installed library (default)",
    )
    what.add_argument(
        "--images", type=int, default=None, help="number of bundled photographs to use (default 2)"
    )
    what.add_argument(
        "--image",
        action="append",
        metavar="PATH",
        help="an input image file (repeatable); replaces the bundled photographs",
    )
    what.add_argument(
        "--synthetic", type=int, default=0, help="add N seeded synthetic images (default 0)"
    )


def add_model_flags(model: Group) -> None:
    """``--granularity``, ``--anchors``, ``--weights``, ``--seed``, ``--input-size``."""
    model.add_argument(
        "--granularity",
        choices=("stage", "layer"),
        default="stage",
        help="anchor plan: stage boundaries (default) or every top-level layer",
    )
    model.add_argument(
        "--anchors",
        nargs="+",
        metavar="NAME",
        help="anchor module paths (zoo model) or tensor names (ONNX file)",
    )
    model.add_argument(
        "--weights",
        metavar="PATH",
        help="checkpoint to load (torch state_dict or ultralytics .pt); "
        "default: deterministic weights from --seed",
    )
    model.add_argument("--seed", type=int, default=0, help="seed of generated weights (default 0)")
    model.add_argument(
        "--input-size",
        type=int,
        default=None,
        metavar="N",
        help="input side for zoo models (default: the model's own, 640 YOLO / 224 classifiers)",
    )


def add_port_flags(ports: Group) -> None:
    """``--ports``, ``--anchor-map``: the user's own ports of the model."""
    ports.add_argument(
        "--ports",
        action="append",
        metavar="LIBRARY=FILE.py:FUNCTION",
        help="a hand-written port of the model to LIBRARY (paddle, tensorflow: Keras), "
        "returned by FUNCTION with its weights transferred; runs as the participant "
        "LIBRARY-port through its own code (repeatable)",
    )
    ports.add_argument(
        "--anchor-map",
        metavar="FILE.json",
        help='{"LIBRARY": {"port layer": "reference anchor"}} for anchors whose layer is '
        "neither named like the reference's module nor found by order and shape",
    )


def add_own_model_flags(own: Group) -> None:
    """The flags of a user's ONNX file or module: shapes, inputs, preprocessing, stages."""
    own.add_argument(
        "--input-shape",
        action="append",
        metavar="[NAME=]DIMS",
        help="concrete shape of an input with dynamic dimensions, e.g. images=1x3x640x640 "
        "(repeatable; a bare 1x3x640x640 when the model has one input); default: the file's "
        "own, or batch 1 and the preprocessing's side for an image input",
    )
    own.add_argument(
        "--inputs",
        metavar="FILE.npz",
        help="the inputs themselves: arrays named by model input (a leading N gives N inputs)",
    )
    own.add_argument(
        "--preprocess",
        choices=("letterbox", "imagenet", "scale", "none"),
        default=None,
        help="image preprocessing: letterbox (YOLO, side 640; default), imagenet (crop, "
        "side 224), scale (resize, /255), none (resize, raw 0-255)",
    )
    own.add_argument("--mean", metavar="M[,M,M]", help="per-channel mean subtracted after it")
    own.add_argument("--std", metavar="S[,S,S]", help="per-channel std divided by after it")
    own.add_argument("--bgr", action="store_true", help="feed the channels in BGR order")
    own.add_argument(
        "--input-range",
        action="append",
        metavar="[NAME=]LO,HI",
        help="range of seeded random non-image inputs, e.g. 0,255 for bytes, 0,30000 for "
        "token ids (default: standard normal floats, integers 0-100); NAME=LO,HI for one "
        "input of a model with several (repeatable)",
    )
    own.add_argument(
        "--stages",
        type=int,
        default=None,
        metavar="K",
        help="automatic anchors: K stages of about equal cost, cut where every path passes "
        "(default for graphs without module scopes: 8, or 32 with --granularity layer)",
    )


def add_judging_flags(model: Group) -> None:
    """``--no-isolation``, ``--no-drill``, ``--calibration``, ``--metrics``: how the run is
    judged.
    """
    model.add_argument(
        "--no-isolation",
        action="store_true",
        help="skip stage isolation (introduced error per stage)",
    )
    model.add_argument(
        "--no-drill",
        action="store_true",
        help="skip the drill-down from flagged stages to operators (it runs when a run "
        "has findings: one more small job per participant)",
    )
    model.add_argument(
        "--calibration",
        metavar="auto|off|PATH",
        default="auto",
        help="noise thresholds: 'auto' (default) uses the calibration `anpred calibrate` "
        "cached for this model, input shape, anchors and fp32 participants, else the fixed "
        "10x rule; 'off' the fixed rule; PATH a calibration file (see docs/oracle.md)",
    )
    model.add_argument(
        "--metrics",
        choices=("candidates", "all"),
        default="candidates",
        help="where the corroborating metrics (max abs, max ULP, cosine, Wasserstein, channel "
        "moments) are computed: 'candidates' (default) where a participant may be a finding, "
        "'all' everywhere; the verdict reads relative L2 alone (docs/oracle.md)",
    )


def add_execution_flags(where: Group) -> None:
    """Where the run goes and how it executes (the :class:`ExecutionSettings` flags)."""
    where.add_argument(
        "--out",
        metavar="DIR",
        help="run directory (default runs/<model>); an existing run with the same "
        "settings is resumed",
    )
    add_keep_flag(where)
    where.add_argument(
        "--chunk",
        type=int,
        default=DEFAULT_CHUNK,
        metavar="N",
        help="with --keep-captures needed, run more inputs than N a chunk of N at a time, each "
        "analysed and pruned before the next, so disk peaks at about one chunk's captures "
        f"(default {DEFAULT_CHUNK}; 0: all in one go)",
    )
    where.add_argument("--threads", type=int, default=1, help="threads per worker (default 1)")
    add_parallel_flag(where)
    where.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds per worker before it counts as hung (default 900 + 120/input)",
    )
    where.add_argument(
        "--max-memory",
        metavar="SIZE",
        default=None,
        help="memory budget, e.g. 8G (default: 80%% of the memory available now; 'none': "
        "no budget); a run estimated above it is refused, a worker above it is stopped",
    )
    where.add_argument(
        "--export-timeout",
        type=float,
        default=DEFAULT_EXPORT_TIMEOUT,
        metavar="SECONDS",
        help="seconds the model export may take before it counts as hung "
        f"(default {DEFAULT_EXPORT_TIMEOUT:g})",
    )
    add_ray_flag(where)


def add_parallel_flag(group: Group) -> None:
    """``--parallel N|auto``: workers (and analysis processes) at once."""
    group.add_argument(
        "--parallel",
        default="auto",
        metavar="N|auto",
        help="workers running at once, and the analysis's processes (default 'auto': the "
        "CPUs anpred may use, over --threads, within the memory budget)",
    )


def add_keep_flag(group: Group) -> None:
    """``--keep-captures all|needed``: what a judged run keeps of its captures."""
    group.add_argument(
        "--keep-captures",
        choices=KEEP_MODES,
        default=DEFAULT_KEEP,
        help="after the run is judged, keep every capture ('all') or only those needed later "
        "(default 'needed': the first input, and the anchors with findings; the rest is kept "
        "as per-anchor statistics; see docs/run-directory.md)",
    )


def add_ray_flag(group: Group) -> None:
    """``--ray ADDRESS``: run the workers as Ray tasks (see docs/distributed.md)."""
    group.add_argument(
        "--ray",
        metavar="ADDRESS",
        default=None,
        help="run the workers as tasks of a Ray cluster: 'local' (an embedded instance with "
        "--parallel x --threads CPUs), 'auto', or HOST:PORT / ray://HOST:10001; results come "
        "back to --out (see docs/distributed.md)",
    )


def run_options(args: argparse.Namespace) -> RunOptions:
    """The :class:`~anpred.settings.RunOptions` of the run flags (checked)."""
    from anpred.ports.spec import ports_extra
    from anpred.zoo.registry import module_source

    args.model = module_source(args.model)  # a zoo transformer runs from its module source
    if args.images is not None and args.images < 1:
        raise UsageError("--images must be at least 1")
    return RunOptions(
        model=args.model,
        libs=tuple(args.libs.split(",")),
        images=args.images or 2,
        image_paths=tuple(args.image or ()),
        granularity=args.granularity,
        anchors=tuple(args.anchors or ()),
        weights=args.weights,
        seed=args.seed,
        synthetic=args.synthetic,
        isolation=not args.no_isolation,
        input_size=getattr(args, "input_size", None),
        extra={
            **ports_extra(getattr(args, "ports", None), getattr(args, "anchor_map", None)),
            # OracleParams.metrics_scope; kept in run.json only when asked for
            **({"metrics": "all"} if getattr(args, "metrics", None) == "all" else {}),
        },
        **_own_model_options(args),
    )


def _floats(text: str | None, flag: str) -> tuple[float, ...]:
    if text is None:
        return ()
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise UsageError(f"{flag} takes comma-separated numbers, got {text!r}") from None
    if not all(math.isfinite(v) for v in values):
        raise UsageError(f"{flag} takes finite numbers, got {text!r}")
    return values


def _own_model_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``run_options`` fields of the flags for a user's ONNX file (validated)."""
    from anpred.inputs.tensors import parse_input_ranges
    from anpred.interchange.input_shapes import parse_input_shapes
    from anpred.interchange.user_module import is_module_source, is_onnx_path

    given = {
        flag: value
        for flag, value in (
            ("--input-shape", getattr(args, "input_shape", None)),
            ("--inputs", getattr(args, "inputs", None)),
            ("--preprocess", getattr(args, "preprocess", None)),
            ("--mean", getattr(args, "mean", None)),
            ("--std", getattr(args, "std", None)),
            ("--bgr", getattr(args, "bgr", False) or None),
            ("--input-range", getattr(args, "input_range", None)),
            ("--stages", getattr(args, "stages", None)),
        )
        if value is not None
    }
    if not given:
        return {}
    if not is_onnx_path(args.model) and not is_module_source(args.model):
        raise UsageError(f"{next(iter(given))} applies to an ONNX file or a module, not a zoo name")
    shapes = tuple(args.input_shape or ())
    parse_input_shapes(shapes)
    std = _floats(args.std, "--std")
    if any(v == 0 for v in std):
        raise UsageError("--std values must not be 0")
    given_ranges = tuple(args.input_range or ())
    bounds = parse_input_ranges(given_ranges).get(None, ())
    named_ranges = tuple(v for v in given_ranges if "=" in v)
    if args.stages is not None and args.stages < 2:
        raise UsageError("--stages must be at least 2")
    inputs = args.inputs
    if inputs is not None and not Path(inputs).is_file():
        raise UsageError(f"--inputs {inputs!r} does not exist")
    return {
        "input_shapes": shapes,
        "inputs_file": str(Path(inputs).resolve()) if inputs else None,
        "preprocess": args.preprocess,
        "mean": _floats(args.mean, "--mean"),
        "std": std,
        "bgr": bool(args.bgr),
        "input_range": bounds,
        "input_ranges": named_ranges,
        "stages": args.stages,
    }


def max_memory(text: str | None) -> int | None | Literal["default"]:
    """``--max-memory``: bytes, ``None`` for ``none``, ``"default"`` when not given."""
    if text is None:
        return DEFAULT_MEMORY
    if text.strip().lower() == "none":
        return None
    return parse_size(text)


def execution_settings(args: argparse.Namespace, **fields: Any) -> ExecutionSettings:
    """The :class:`~anpred.settings.ExecutionSettings` of the execution flags (checked);
    ``fields`` set the others (``executor``, ``say``).
    """
    from anpred.calibration.cache import calibration_mode
    from anpred.pipeline.chunks import check_chunk

    return ExecutionSettings(
        threads=args.threads,
        parallel=parse_parallel(args.parallel),
        timeout=args.timeout,
        export_timeout=args.export_timeout,
        max_memory=max_memory(args.max_memory),
        drill=not args.no_drill,
        calibration=calibration_mode(args.calibration),
        keep_captures=args.keep_captures,
        chunk=check_chunk(args.chunk),
        **fields,
    )


def executor_of(args: argparse.Namespace) -> Any:
    """The executor of ``--ray`` (local processes when not given); a context manager."""
    from anpred.execution.factory import open_executor

    return open_executor(getattr(args, "ray", None), parse_parallel(args.parallel), args.threads)
