"""``anpred repro`` and ``anpred bisect``: verified minimal reproducers of a run's findings.

``anpred repro RUN_DIR`` writes one folder per drilled finding (``RUN_DIR/repro/`` unless
``--out``; docs/reproducers.md); ``anpred bisect RUN_DIR --finding P@A`` does the same for
one finding and adds the settings bisection (``repro --bisect`` adds it to every finding).

Exit codes: 0 every reproducer verified; 1 some finding has no verified reproducer (its
folder and ``repro.json`` say why); 2 usage or input error.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from anpred.errors import UsageError
from anpred.progress import to_stderr


def _g(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g}"


def _options(args: argparse.Namespace, bisect: bool) -> tuple[Path, object]:
    from anpred.repro import ReproOptions

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"no run directory {run_dir}")
    if args.parallel < 1 or args.threads < 1:
        raise UsageError("--parallel and --threads must be at least 1")
    options = ReproOptions(
        finding=args.finding,
        out=Path(args.out) if args.out else None,
        bisect=bisect,
        verify=not args.no_verify,
        threads=args.threads,
        parallel=args.parallel,
        keep_work=args.keep_work,
    )
    return run_dir, options


def _print(records: list) -> int:
    for r in records:
        ratio = r.reduction_ratio
        line = (
            f"{r.finding}: {r.status}  {r.op_type} {r.node}; {r.ops_in_case}/{r.ops_in_model} "
            f"operators ({_g(ratio)}), {r.folder_bytes / 1e6:.2f} MB; error "
            f"{_g(r.script.get('error', r.case_error))} vs floor {_g(r.floor.get('floor'))}"
        )
        if r.bisect.get("cause"):
            flips = ", ".join(f"{k}={v['to']!r}" for k, v in r.bisect["cause"].items())
            line += f"; gone with {flips}"
        elif r.bisect:
            line += f"; bisect: {r.bisect.get('reason', '')}"
        if r.reason:
            line += f"  ({r.reason})"
        print(line)
        print(f"  {r.folder}")
    return 0 if records and all(r.verified for r in records) else 1


def cmd_repro(args: argparse.Namespace) -> int:
    """``anpred repro``."""
    from dataclasses import replace

    from anpred.repro import make_reproducers

    run_dir, options = _options(args, args.bisect)
    records = make_reproducers(run_dir, options, to_stderr)  # type: ignore[arg-type]
    out = options.out or run_dir / "repro"  # type: ignore[attr-defined]
    return _print([replace(r, folder=str(out / r.folder)) for r in records])


def cmd_bisect(args: argparse.Namespace) -> int:
    """``anpred bisect``."""
    from dataclasses import replace

    from anpred.repro import make_reproducers

    if not args.finding:
        raise UsageError("bisect needs --finding PARTICIPANT@ANCHOR")
    run_dir, options = _options(args, True)
    records = make_reproducers(run_dir, options, to_stderr)  # type: ignore[arg-type]
    out = options.out or run_dir / "repro"  # type: ignore[attr-defined]
    return _print([replace(r, folder=str(out / r.folder)) for r in records])


def _flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="an analysed run with a drill-down")
    parser.add_argument("--out", metavar="DIR", help="where the folders go (default RUN_DIR/repro)")
    parser.add_argument("--no-verify", action="store_true",
                        help="write the scripts without running them")  # fmt: skip
    parser.add_argument("--parallel", type=int, default=2, metavar="N",
                        help="workers at the same time (default 2)")  # fmt: skip
    parser.add_argument("--threads", type=int, default=1, metavar="N",
                        help="threads per worker (default 1)")  # fmt: skip
    parser.add_argument("--keep-work", action="store_true",
                        help="keep the reduction's trial runs (OUT/work)")  # fmt: skip


def add_repro_parsers(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    common: argparse.ArgumentParser | None = None,
) -> None:
    """Register ``anpred repro`` and ``anpred bisect``."""
    parents = [common] if common is not None else []
    repro = sub.add_parser(
        "repro",
        parents=parents,
        help="a verified minimal reproducer per drilled finding",
        description="For every drilled finding (or --finding), find the smallest subgraph "
        "that shows the same symptom under the oracle, fed with the fp64 reference's "
        "values; write model.onnx, inputs, expected fp64 values, the floor, a script that "
        "needs only the library, and a README; run the script in the library's own "
        "environment and record whether it reproduces (repro.json). docs/reproducers.md",
    )
    _flags(repro)
    repro.add_argument("--finding", metavar="PARTICIPANT@ANCHOR",
                       help="only this finding (participant@stage, as drilled)")  # fmt: skip
    repro.add_argument("--bisect", action="store_true",
                       help="also find the library switches that turn the error on")  # fmt: skip
    repro.set_defaults(handler=cmd_repro)
    bisect = sub.add_parser(
        "bisect",
        parents=parents,
        help="the smallest set of a library's settings that causes a finding",
        description="Reproduce one finding (as anpred repro) and flip the library's declared "
        "switches on its reduced case, singly then in pairs, to find the smallest set that "
        "makes the error disappear; named in its README and repro.json.",
    )
    _flags(bisect)
    bisect.add_argument("--finding", metavar="PARTICIPANT@ANCHOR", required=True,
                        help="the finding (participant@stage)")  # fmt: skip
    bisect.set_defaults(handler=cmd_bisect)
