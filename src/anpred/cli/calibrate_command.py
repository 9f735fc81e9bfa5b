"""``anpred calibrate``: learn a model's per-anchor noise thresholds and cache them.

The calibration run is a clean run of the participants on seeded synthetic inputs only
(never the inputs a run judges; :func:`~anpred.calibration.cache.calibration_options`);
the calibration learnt from it goes to the anpred cache, where ``anpred run`` and
``anpred inject`` find it (``--calibration auto``, their default).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from anpred.errors import UsageError
from anpred.progress import to_stderr

DEFAULT_INPUTS = 4
"""Calibration inputs by default (``CALIBRATION_SYNTHETIC``: 24 ratios per anchor with six
participants)."""


#: ``anpred run`` flags that do not apply: the calibration draws its own inputs, always runs
#: stage isolation (its introduced-error factors) and judges nothing.
NOT_CALIBRATE_FLAGS = {
    "--images": "images",
    "--image": "image",
    "--synthetic": "synthetic",
    "--no-isolation": "no_isolation",
    "--no-drill": "no_drill",
    "--calibration": "calibration",
}


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Run a calibration run, learn its calibration and store it in the cache."""
    from anpred.calibration.cache import fp32_participants
    from anpred.cli.flags import execution_settings, executor_of, run_options
    from anpred.participants import parse_participants
    from anpred.pipeline.calibration_run import calibrate_model

    given = [flag for flag, dest in NOT_CALIBRATE_FLAGS.items() if getattr(args, dest, None)]
    if given:
        raise UsageError(
            f"{given[0]} does not apply to calibrate: it draws --inputs N seeded synthetic "
            "inputs and judges nothing"
        )
    n_inputs = args.inputs
    args.inputs = None  # run's --inputs is an .npz; calibrate's a count
    args.calibration = "off"
    options = run_options(args)
    out = Path(args.out or f"runs/{Path(args.model).stem}-calibration")
    with executor_of(args) as executor:
        settings = execution_settings(args, executor=executor, say=to_stderr)
        calibration, path = calibrate_model(options, n_inputs, out, settings)
    wanted = set(fp32_participants(parse_participants(list(options.libs))))
    missing = sorted(wanted - set(calibration.participants))
    if missing:
        to_stderr(
            f"note: {', '.join(missing)} did not finish the calibration run; the calibration "
            "applies to runs without them"
        )
    factors = ", ".join(
        f"{a} {t.factor:.2g}" if t.factor is not None else f"{a} fixed"
        for a, t in calibration.anchors.items()
    )
    print(
        f"calibration of {options.model} on {len(calibration.inputs)} inputs, participants "
        f"{', '.join(calibration.participants)}"
    )
    print(f"deviation factors: {factors}")
    print(f"cached: {path}")
    print(f"calibration run: {out}")
    return 0


def add_calibrate_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    common: argparse.ArgumentParser | None = None,
) -> None:
    """Register ``anpred calibrate`` (``common``: the parent parser every subcommand shares).

    It takes ``anpred run``'s flags except the judged inputs' (``--images``, ``--image``,
    ``--synthetic``, an ``.npz``) and the analysis switches; ``--inputs N`` is the number
    of seeded synthetic calibration inputs.
    """
    from anpred.cli.flags import add_run_flags

    calibrate = sub.add_parser(
        "calibrate",
        parents=[common] if common is not None else [],
        help="learn a model's per-anchor noise thresholds on held-out inputs; cache them",
        description="Run the participants (legitimate implementations of their precision "
        "class) on seeded "
        "synthetic inputs that no run judges, learn a noise factor per anchor from their "
        "spread (docs/oracle.md) and store it in the anpred cache ($ANPRED_CACHE, default "
        "~/.cache/anpred/calibrations), keyed by model and weights (or the ONNX file's "
        "digest), input shape, anchors and fp32 participants. `anpred run` and `anpred "
        "inject` with the same model and participants use it (--calibration auto).",
        conflict_handler="resolve",
    )
    add_run_flags(calibrate)
    for action in calibrate._actions:
        if set(action.option_strings) & set(NOT_CALIBRATE_FLAGS):
            action.help = argparse.SUPPRESS
    calibrate.add_argument(  # replaces run's --inputs FILE.npz (conflict_handler="resolve")
        "--inputs",
        type=int,
        default=DEFAULT_INPUTS,
        metavar="N",
        help=f"seeded synthetic calibration inputs (default {DEFAULT_INPUTS}; at least 2)",
    )
    calibrate.set_defaults(handler=cmd_calibrate, calibration=None)  # given: refused
