"""The subcommands of ``anpred`` and their flags."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from anpred.cli.flags import (
    add_keep_flag,
    add_parallel_flag,
    add_ray_flag,
    add_run_flags,
    execution_settings,
    executor_of,
    run_options,
)
from anpred.errors import UsageError
from anpred.execution.slots import AUTO, describe_auto, parse_parallel, resolve
from anpred.progress import to_stderr


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
            m["input"],
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
    from anpred.translate.node_coverage import NODE_TESTS
    from anpred.translate.node_coverage import describe as node_tests

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
        rows.append([lib.name, version, state, node_tests(lib.name), ", ".join(shown)])
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
            "node_tests": NODE_TESTS.get(lib.name),
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
        headers = ["library", "version", "status", "ONNX node tests", "participants (--libs)"]
        print(_table(rows, headers))
        print(
            "\nreduced-precision configurations are judged against their class's ideal "
            "reference (torch[ideal-<class>], added by the runs that need one; docs/oracle.md)"
        )
        if runtime_rows:
            print("\ndeployment runtimes (--libs runtimes; not in --libs all):")
            print(_table(runtime_rows, ["runtime", "converter", "environment (make runtimes)"]))
        from anpred.library.versions import releases_hint

        print(f"\n{releases_hint()}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Run an anchor-level analysis."""
    from anpred.pipeline.run import run
    from anpred.report.terminal import print_summary

    out = Path(args.out or f"runs/{Path(args.model).stem}")
    options = run_options(args)
    with executor_of(args) as executor:
        outcome = run(options, out, execution_settings(args, executor=executor))
    print_summary(outcome.summary, outcome.run_dir)
    return outcome.exit_code


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
    with executor_of(args) as executor:
        settings = execution_settings(args, executor=executor, say=to_stderr)
        result = sweep(options, sizes, out, settings=settings)
    print(sweep_table(result))
    print(f"sweep: {SweepStore(out).result_path}")
    return 0


def cmd_eval_known_bugs(args: argparse.Namespace) -> int:
    """``anpred eval --known-bugs`` / a known-bugs file: the real-bugs benchmark's runs and
    table (:mod:`anpred.evaluation.known_bugs`).
    """
    from anpred.evaluation.known_bugs_runs import run_known_bugs

    given = parse_parallel(args.parallel)
    parallel = 1 if given == AUTO else int(given)
    out = Path(args.out if args.out != "runs/eval" else "runs/known-bugs")
    path = run_known_bugs(
        args.config or "configs/known-bugs.json",
        out,
        Path(args.results) if args.results else None,
        to_stderr,
        only=args.bugs or (),
        threads=args.threads,
        parallel=parallel,
    )
    print(path.read_text())
    print(f"eval: {path}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """Run the evaluation grid and write its tables."""
    from anpred.evaluation.campaign import evaluate
    from anpred.evaluation.grid import load_grid
    from anpred.evaluation.known_bugs import is_known_bugs_file
    from anpred.evaluation.results import ResultsFolder
    from anpred.execution.resources import default_budget
    from anpred.store import EvalStore

    if getattr(args, "known_bugs", False) or is_known_bugs_file(args.config):
        return cmd_eval_known_bugs(args)
    grid = load_grid(args.config)
    given, budget = parse_parallel(args.parallel), default_budget()
    parallel = resolve(given, args.threads, budget)
    if given == AUTO:
        to_stderr(describe_auto(parallel, args.threads, budget))
    out = Path(args.out)
    for folder in dict.fromkeys([out, Path(args.results or out)]):
        EvalStore(folder).write_grid(grid.to_dict())
    with executor_of(args) as executor:
        results = evaluate(
            grid,
            out,
            say=to_stderr,
            threads=args.threads,
            parallel=parallel,
            reanalyse=args.reanalyse,
            executor=executor,
            keep_captures=args.keep_captures,
            results=Path(args.results) if args.results else None,
            fault_workers=args.fault_workers,
        )
    path = ResultsFolder(Path(args.results) if args.results else out).write_tables(
        [r.model for r in results]
    )
    print(path.read_text())
    print(f"eval: {path}")
    return 0


def _pruned_note(message: str) -> None:
    """``anpred report`` is quiet, but says (one line) when it judged from statistics."""
    from anpred.pipeline.prune import NOTE_START

    if message.startswith(NOTE_START):
        to_stderr(message)


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
    evaluation.add_argument(
        "--known-bugs",
        action="store_true",
        help="the benchmark of real, known library bugs (configs/known-bugs.json, or --config "
        "a file of that form): per bug one run with LIB@BUGGY, one with LIB@FIXED, scored",
    )
    evaluation.add_argument("--bugs", nargs="+", metavar="ID", help="with --known-bugs: only these")
    evaluation.add_argument("--out", default="runs/eval", help="output folder (default runs/eval)")
    evaluation.add_argument(
        "--results",
        metavar="DIR",
        help="the compact results folder, meant to be committed (default: the output folder): "
        "faults.csv, skipped.csv, the clean and configuration summaries, eval.md, plots; "
        "a fault recorded there is not run again, even when the output folder is gone",
    )
    evaluation.add_argument("--threads", type=int, default=1, help="threads per worker")
    add_parallel_flag(evaluation)
    evaluation.add_argument(
        "--reanalyse",
        action="store_true",
        help="judge finished fault and configuration runs again from their captures "
        "(after an oracle change; nothing is re-executed)",
    )
    evaluation.add_argument(
        "--fault-workers",
        choices=("served", "fresh"),
        default="served",
        help="served (default): one process per faulty library runs the fault runs in turn, "
        "imports paid once, and each run's analysis reads only what its fault changed; "
        "fresh: one worker process per fault run, every capture read (same results)",
    )
    add_keep_flag(evaluation)
    add_ray_flag(evaluation)
    evaluation.set_defaults(handler=cmd_eval)

    report = sub.add_parser(
        "report", parents=[common], help="re-render the report of a run directory"
    )
    report.add_argument("run_dir", help="a run directory written by `anpred run`")
    report.set_defaults(handler=cmd_report)
