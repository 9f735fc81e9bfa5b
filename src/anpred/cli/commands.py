"""The subcommands of ``anpred`` and their flags."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

from anpred.errors import UsageError
from anpred.execution.slots import AUTO, describe_auto, parse_parallel, resolve


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def cmd_models(args: argparse.Namespace) -> int:
    """List the zoo (built in a torch worker process)."""
    from anpred.execution.pool import worker_env
    from anpred.participants import is_available

    if not is_available("torch"):
        raise UsageError("the model zoo needs torch; install it with: pip install 'anpred[torch]'")
    proc = subprocess.run(
        [sys.executable, "-m", "anpred.zoo.describe"],
        capture_output=True,
        text=True,
        env=worker_env(2),
    )
    if proc.returncode != 0:
        raise UsageError(f"could not build the zoo: {proc.stderr.strip().splitlines()[-1:]}")
    models = json.loads(proc.stdout.strip().splitlines()[-1])
    if args.json:
        print(json.dumps(models, indent=1))
        return 0
    rows = [
        [
            m["name"],
            m["family"],
            m["source"],
            f"{m['parameters'] / 1e6:.1f}M",
            f"{m['input_size']}x{m['input_size']}",
            str(m["anchors"]["stage"]),
            str(m["anchors"]["layer"]),
            m["weights"] + (f"; {m['notes']}" if m["notes"] else ""),
        ]
        for m in models
    ]
    print(
        _table(
            rows,
            [
                "model",
                "family",
                "source",
                "params",
                "input",
                "stage anchors",
                "layer anchors",
                "default weights",
            ],
        )
    )
    return 0


def cmd_libs(args: argparse.Namespace) -> int:
    """List libraries, versions, availability and configurations (no library is imported)."""
    from anpred.library import libraries
    from anpred.library.precision import IDEAL_PREFIX

    rows, data, runtime_rows = [], [], []
    for lib in libraries():
        available = lib.available()
        version = (lib.version() or "?") if available else "-"
        names = lib.participant_names()
        state = "available" if available else f"missing ({lib.install_hint()})"
        # reduced precision declared beside the name; the ideal references are internal
        shown = [
            n + (f" ({p.describe()})" if p.reduced else "")
            for n, p in zip(names, map(lib.precision, lib.configurations), strict=True)
            if not n.startswith(f"{lib.name}[{IDEAL_PREFIX}")
        ]
        rows.append([lib.name, version, state, ", ".join(shown)])
        entry = {
            "library": lib.name,
            "version": version,
            "available": available,
            "extra": lib.extra,
            "participants": {
                n: dict(settings)
                for n, settings in zip(names, lib.configurations.values(), strict=True)
            },
            "precision": {
                n: lib.precision(c).to_dict()
                for n, c in zip(names, lib.configurations, strict=True)
            },
            "loads": lib.loads.value,
            "runner": lib.runner,
            "shares_process": lib.shares_process,
            "in_all": lib.in_all,
        }
        if lib.converter or lib.environment:
            converter = (lib.converter_version() or "-") if available else "-"
            entry.update(
                converter=lib.converter,
                converter_version=converter,
                environment=lib.environment,
                environment_built=available,
            )
            built = "built" if available else "not built"
            runtime_rows.append(
                [lib.name, f"{lib.converter} {converter}", f"{lib.environment} ({built})"]
            )
        data.append(entry)
    if args.json:
        print(json.dumps(data, indent=1))
    else:
        print(_table(rows, ["library", "version", "status", "participants (--libs)"]))
        print(
            "\nreduced-precision configurations are judged against their class's ideal "
            "reference (torch[ideal-<class>], added by the runs that need one; docs/oracle.md)"
        )
        if runtime_rows:
            print("\ndeployment runtimes (--libs runtimes; not in --libs all):")
            print(_table(runtime_rows, ["runtime", "converter", "environment (make runtimes)"]))
    return 0


def max_memory(text: str | None) -> int | None | Literal["default"]:
    """``--max-memory``: bytes, ``None`` for ``none``, ``"default"`` when not given."""
    if text is None:
        return "default"
    if text.strip().lower() == "none":
        return None
    from anpred.pipeline.budget import parse_size

    return parse_size(text)


def execution_settings(args: argparse.Namespace) -> dict[str, Any]:
    """How ``run`` executes, from the execution flags ``add_run_flags`` defines."""
    from anpred.pipeline.calibration_cache import calibration_mode
    from anpred.pipeline.chunks import check_chunk

    return {
        "threads": args.threads,
        "parallel": parse_parallel(args.parallel),
        "timeout": args.timeout,
        "export_timeout": args.export_timeout,
        "max_memory": max_memory(args.max_memory),
        "drill": not args.no_drill,
        "calibration": calibration_mode(args.calibration),
        "keep_captures": args.keep_captures,
        "chunk": check_chunk(args.chunk),
    }


def cmd_run(args: argparse.Namespace) -> int:
    """Run an anchor-level analysis."""
    from anpred.pipeline.run import run
    from anpred.report.terminal import print_summary

    out = Path(args.out or f"runs/{Path(args.model).stem}")
    options = run_options(args)
    with _executor(args) as executor:
        outcome = run(
            options,
            out,
            **execution_settings(args),
            executor=executor,
        )
    print_summary(outcome.summary, outcome.run_dir)
    return outcome.exit_code


def run_options(args: argparse.Namespace) -> Any:
    """The :class:`~anpred.pipeline.options.RunOptions` of ``run``/``sweep`` flags."""
    from anpred.pipeline.options import RunOptions
    from anpred.ports.spec import ports_extra

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
        extra=ports_extra(getattr(args, "ports", None), getattr(args, "anchor_map", None)),
        **_own_model_options(args),
    )


def _floats(text: str | None, flag: str) -> tuple[float, ...]:
    import math

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
    from anpred.interchange.input_shapes import parse_input_shapes
    from anpred.interchange.user_module import is_module_source
    from anpred.pipeline.run import is_onnx_path

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
    from anpred.inputs.tensors import parse_input_ranges

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


def cmd_sweep(args: argparse.Namespace) -> int:
    """Run at several input sizes and fit the error's dependence on size."""
    from anpred.pipeline.sweep import sweep, sweep_table
    from anpred.store import SweepStore

    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        raise UsageError(f"--sizes takes comma-separated integers, got {args.sizes!r}") from None
    out = Path(args.out or f"runs/{Path(args.model).stem}-sweep")
    options = run_options(args)
    with _executor(args) as executor:
        result = sweep(
            options,
            sizes,
            out,
            say=_say,
            **execution_settings(args),
            executor=executor,
        )
    print(sweep_table(result))
    print(f"sweep: {SweepStore(out).result_path}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """Run the evaluation grid and write its tables."""
    from anpred.evaluation.campaign import evaluate
    from anpred.evaluation.grid import load_grid
    from anpred.evaluation.tables import write_tables
    from anpred.pipeline.budget import default_budget
    from anpred.store import EvalStore

    grid = load_grid(args.config)
    given, budget = parse_parallel(args.parallel), default_budget()
    parallel = resolve(given, args.threads, budget)
    if given == AUTO:
        _say(describe_auto(parallel, args.threads, budget))
    out = Path(args.out)
    EvalStore(out).write_grid(grid.to_dict())
    with _executor(args) as executor:
        results = evaluate(
            grid,
            out,
            say=_say,
            threads=args.threads,
            parallel=parallel,
            reanalyse=args.reanalyse,
            executor=executor,
            keep_captures=args.keep_captures,
        )
    path = write_tables(results, out)
    print(path.read_text())
    print(f"eval: {path}")
    return 0


def _executor(args: argparse.Namespace) -> Any:
    """The executor of ``--ray`` (local processes when not given); a context manager."""
    from anpred.execution.executor import open_executor

    return open_executor(getattr(args, "ray", None), parse_parallel(args.parallel), args.threads)


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _pruned_note(message: str) -> None:
    """``anpred report`` is quiet, but says (one line) when it judged from statistics."""
    from anpred.pipeline.prune import NOTE_START

    if message.startswith(NOTE_START):
        _say(message)


def cmd_report(args: argparse.Namespace) -> int:
    """Re-render the report of a finished or interrupted run."""
    import dataclasses

    from anpred.pipeline.analyse import analyse
    from anpred.report.html import write_report
    from anpred.report.terminal import print_summary
    from anpred.store import RunStore

    run_dir = Path(args.run_dir)
    store = RunStore.open(run_dir)
    summary = analyse(run_dir, say=_pruned_note)
    if store.has_summary():  # keep what only the original run knew (read raw: any version)
        wall = store.read_summary().get("wall_seconds")
        summary = dataclasses.replace(summary, wall_seconds=wall)

    store.write_summary(summary.to_dict())
    write_report(run_dir, summary)
    print_summary(summary, run_dir)
    return 0


def add_all(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Register every subcommand (``common`` holds flags every subcommand accepts)."""
    from anpred.store.studies import EVAL_OUTPUTS

    models = sub.add_parser(
        "models", parents=[common], help="list the model zoo with anchor counts"
    )
    models.add_argument("--json", action="store_true", help="print JSON")
    models.set_defaults(handler=cmd_models)

    libs = sub.add_parser(
        "libs", parents=[common], help="list libraries, versions and participant configurations"
    )
    libs.add_argument("--json", action="store_true", help="print JSON")
    libs.set_defaults(handler=cmd_libs)

    run = sub.add_parser(
        "run",
        parents=[common],
        help="run an anchor-level analysis of a model across libraries",
        description="Run every participant on the inputs in its own worker "
        "process, plus the fp64 reference; align anchors, judge them with the "
        "consensus oracle, localize and characterize errors, run the output-level "
        "baselines, and write the run directory and report.",
    )
    add_run_flags(run)
    run.set_defaults(handler=cmd_run)

    sweep = sub.add_parser(
        "sweep",
        parents=[common],
        help="run at several input sizes: how errors depend on the input resolution",
    )
    add_run_flags(sweep)
    sweep.add_argument(
        "--sizes", default="320,480,640", help="comma-separated input sizes (default 320,480,640)"
    )
    sweep.set_defaults(handler=cmd_sweep)

    from anpred.cli.inject_command import add_inject_parser

    add_inject_parser(sub, common)

    from anpred.cli.calibrate_command import add_calibrate_parser

    add_calibrate_parser(sub, common)

    evaluation = sub.add_parser(
        "eval",
        parents=[common],
        help="evaluate detection/localization on injected faults and clean runs (RQ1-RQ3)",
        description="Sweep models x faulty participants x stages x fault kinds x severities "
        "(a JSON grid, --config; the default grid finishes in minutes) and write "
        f"{EVAL_OUTPUTS}: detection per method, localization accuracy, "
        "characterization, false positives on clean fp32 runs, and (grid key "
        "'configurations') the real-configuration study. configs/study.json runs the "
        "study on every zoo model.",
    )
    evaluation.add_argument(
        "--config",
        metavar="GRID.json",
        help="grid file (default grid: "
        "yolov8n, all libraries; onnxruntime faulty at every stage; bf16 and mantissa 7/10/14)",
    )
    evaluation.add_argument("--out", default="runs/eval", help="output folder (default runs/eval)")
    evaluation.add_argument("--threads", type=int, default=1, help="threads per worker")
    add_parallel_flag(evaluation)
    evaluation.add_argument(
        "--reanalyse",
        action="store_true",
        help="judge finished fault and configuration runs again from their captures "
        "(after an oracle change; nothing is re-executed)",
    )
    add_keep_flag(evaluation)
    add_ray_flag(evaluation)
    evaluation.set_defaults(handler=cmd_eval)

    report = sub.add_parser(
        "report", parents=[common], help="re-render the report of a run directory"
    )
    report.add_argument("run_dir", help="a run directory written by `anpred run`")
    report.set_defaults(handler=cmd_report)


def add_run_flags(parser: argparse.ArgumentParser) -> None:
    """The flags ``run`` and ``sweep`` share."""
    from anpred.execution.pool import DEFAULT_EXPORT_TIMEOUT
    from anpred.pipeline.chunks import DEFAULT_CHUNK

    parser.add_argument(
        "model",
        help="zoo model name (see `anpred models`), path to an .onnx file, or a torch module: "
        "path/to/file.py:function (returning the module, or (module, example_inputs)) or a "
        "module saved whole with torch.save (.pt)",
    )
    what = parser.add_argument_group("participants and inputs")
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
    model = parser.add_argument_group("model and anchors")
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
    ports = parser.add_argument_group("your own ports of the model to other libraries")
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
    own = parser.add_argument_group("your own ONNX file")
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
    where = parser.add_argument_group("execution and output")
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


def add_parallel_flag(group: Any) -> None:
    """``--parallel N|auto``: workers (and analysis processes) at once."""
    group.add_argument(
        "--parallel",
        default="auto",
        metavar="N|auto",
        help="workers running at once, and the analysis's processes (default 'auto': the "
        "CPUs anpred may use, over --threads, within the memory budget)",
    )


def add_keep_flag(group: Any) -> None:
    """``--keep-captures all|needed``: what a judged run keeps of its captures."""
    from anpred.pipeline.prune import DEFAULT_KEEP, KEEP_MODES

    group.add_argument(
        "--keep-captures",
        choices=KEEP_MODES,
        default=DEFAULT_KEEP,
        help="after the run is judged, keep every capture ('all') or only those needed later "
        "(default 'needed': the first input, and the anchors with findings; the rest is kept "
        "as per-anchor statistics; see docs/run-directory.md)",
    )


def add_ray_flag(group: Any) -> None:
    """``--ray ADDRESS``: run the workers as Ray tasks (see docs/distributed.md)."""
    group.add_argument(
        "--ray",
        metavar="ADDRESS",
        default=None,
        help="run the workers as tasks of a Ray cluster: 'local' (an embedded instance with "
        "--parallel x --threads CPUs), 'auto', or HOST:PORT / ray://HOST:10001; results come "
        "back to --out (see docs/distributed.md)",
    )
