"""The ``anpred`` command: one entry point, subcommands (``models``, ``libs``, ``run``, ``report``).

Exit codes: 0 no findings; 1 findings; 2 usage or input error; 3 a participant or the model
export failed (crash, timeout or error). Errors are one line; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import traceback
from collections.abc import Sequence
from pathlib import Path

from anpred import __version__
from anpred.cli.doctor_command import add_doctor_parser
from anpred.cli.repro_command import add_repro_parsers
from anpred.errors import AnpredError

EXIT_CODES = """exit codes:
  0  no findings
  1  findings (a participant deviates from the population at some anchor)
  2  usage or input error (unknown model, missing library, bad file, ...)
  3  a participant failed (crash, timeout or error); the others' results are kept;
     or the model export failed or timed out (--export-timeout)
  4  internal error (a bug in anpred; --debug shows the traceback)"""


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser (subcommands register themselves here)."""
    from anpred.cli import commands

    parser = argparse.ArgumentParser(
        prog="anpred",
        description="Find where deep-learning libraries introduce numerical precision errors "
        "into a model, and how they propagate to the output.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"anpred {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks of errors"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_all(sub, common)
    add_doctor_parser(sub, common)
    add_repro_parsers(sub, common)
    return parser


def _terminated(_signum: int, _frame: object) -> None:
    """SIGTERM ends anpred like Ctrl-C: workers are stopped, finished work is kept."""
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if main_thread else None
    try:
        return _handle(args)
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def _handle(args: argparse.Namespace) -> int:
    """Run the command; turn errors into one line and an exit code."""
    try:
        return int(args.handler(args))
    except AnpredError as err:
        if args.debug:
            traceback.print_exc()
        print(f"anpred: error: {err}", file=sys.stderr)
        return err.exit_code
    except Exception as err:  # a bug, or a run directory damaged outside anpred
        if args.debug:
            traceback.print_exc()
        damage = _damage(args)
        if damage:
            more = f" (and {len(damage) - 1} more)" if len(damage) > 1 else ""
            print(f"anpred: error: {damage[0]}{more}", file=sys.stderr)
            return 2
        print(
            f"anpred: internal error: {err.__class__.__name__}: {err} "
            "(run with --debug for the traceback)",
            file=sys.stderr,
        )
        return 4
    except KeyboardInterrupt:
        print("anpred: interrupted; run the same command again to resume", file=sys.stderr)
        return 130


def _damage(args: argparse.Namespace) -> list[str]:
    """Damaged files of the run directory the command read, if it read one."""
    folder = getattr(args, "run_dir", None) or getattr(args, "out", None)
    if not folder or not Path(folder).is_dir():
        return []
    from anpred.store.damage import find_damage

    try:
        return find_damage(Path(folder))
    except Exception:  # the check itself must never hide the original error
        return []


if __name__ == "__main__":
    raise SystemExit(main())
