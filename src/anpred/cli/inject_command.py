"""``anpred inject``: run ``anpred run`` with one participant carrying a known fault.

The faulty participant (``onnxruntime!bf16@neck.p4``) replaces the clean one; the run
directory gets ``ground_truth.json`` (see :mod:`anpred.inject.ground_truth` and
:mod:`anpred.evaluation.scoring`) next to the usual results, so that detection and
localization can be scored against the truth.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anpred.errors import UsageError
from anpred.progress import to_stderr

if TYPE_CHECKING:
    from anpred.settings import RunOptions


def _severity(text: str) -> int | float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"severity must be a number, not {text!r}") from None
    return int(value) if value.is_integer() else value


def _options(args: argparse.Namespace, faults: dict[str, dict[str, Any]] | None) -> RunOptions:
    """The run's options: ``anpred run``'s flags, plus the faults in ``extra``."""
    from anpred.cli.flags import run_options
    from anpred.inject.participants import EXTRA_KEY

    options = run_options(args)
    if not faults:
        return options
    return dataclasses.replace(options, extra={**options.extra, EXTRA_KEY: faults})


def _export_here(args: argparse.Namespace) -> tuple[Any, Any]:
    """The model's anchored export (in a temporary directory) and its loaded graph."""
    import onnx

    from anpred.pipeline.model_export import export_model

    with tempfile.TemporaryDirectory(prefix="anpred-inject-") as tmp:
        # a user's ONNX file is exported into the temporary directory: read it before it goes
        export = export_model(_options(args, None), Path(tmp), to_stderr, args.export_timeout)
        graph = onnx.load(str(export.anchored_path))
    return export, graph


def _list_targets(args: argparse.Namespace) -> int:
    """Print every stage with its op counts (what ``--stage``/``--op`` can name), or, with
    ``--stage``, every node of that stage (what ``--node`` can name).
    """
    from anpred.inject.plan import stage_anchors
    from anpred.inject.stages import stage_nodes, stage_ops
    from anpred.interchange.drill_graph import module_path

    export, graph = _export_here(args)
    if args.stage is not None:
        for key, op_type, is_float in stage_nodes(graph, stage_anchors(export), args.stage):
            where = module_path(key) or ""
            note = "" if is_float else "  (no float32 output)"
            print(f"{key:<48} {op_type:<16} {where}{note}")
        return 0
    counts = stage_ops(graph, stage_anchors(export))
    for stage, ops in counts.items():
        listed = ", ".join(f"{op}×{n}" for op, n in sorted(ops.items()))
        print(f"{stage:<20} {listed}")
    return 0


def cmd_inject(args: argparse.Namespace) -> int:
    """Inject a fault into one participant, run the analysis, write ``ground_truth.json``."""
    import onnx

    from anpred.cli.flags import execution_settings
    from anpred.evaluation.scoring import score_injection
    from anpred.inject.ground_truth import injection_record
    from anpred.inject.participants import apply_faults, faulty_name
    from anpred.inject.plan import PlannedFault, stage_anchors
    from anpred.inject.spec import FaultSpec, fault_kind
    from anpred.inject.stages import resolve_targets
    from anpred.interchange.user_module import is_onnx_path
    from anpred.participants import parse_participant
    from anpred.pipeline.model_export import export_model
    from anpred.pipeline.plan import check_out_dir
    from anpred.pipeline.run import run
    from anpred.report.terminal import print_summary
    from anpred.store import RunStore

    if args.list_targets:
        return _list_targets(args)
    missing = [
        flag
        for flag, value in (
            ("--lib", args.lib),
            ("--stage", args.stage if args.node is None else ""),
            ("--fault", args.fault),
        )
        if value is None
    ]
    if missing:
        raise UsageError(f"{', '.join(missing)} required (--list-targets lists the stages)")
    kind = fault_kind(args.fault)
    severity = kind.default_severity if args.severity is None else args.severity
    stage = args.stage
    if stage is None:  # --node alone: its stage, from the (cached) export
        from anpred.inject.stages import stage_of_node

        export, graph = _export_here(args)
        stage = stage_of_node(graph, stage_anchors(export), args.node)
    fault = {"stage": stage, "op": args.op, "kind": kind.name, "severity": severity}
    if args.node is not None:
        fault["node"] = args.node
    if args.partial is not None:
        fault["partial"] = args.partial
    spec = FaultSpec.from_dict(fault)
    base = parse_participant(args.lib)
    apply_faults([base], {base.name: spec.to_dict()}, native_torch=not is_onnx_path(args.model))
    name = faulty_name(base.name, spec)
    options = _options(args, {base.name: spec.to_dict()})
    selection = spec.selection
    only_part = "" if selection is None else f"-{selection.label}"
    default_out = f"runs/{Path(args.model).stem}-{base.name}-{spec.kind}-{spec.stage}{only_part}"
    out = Path(args.out or default_out)
    check_out_dir(out, options)
    export = export_model(options, out, to_stderr, args.export_timeout)
    nodes = resolve_targets(onnx.load(str(export.anchored_path)), stage_anchors(export), spec)
    planned = PlannedFault(spec, tuple(nodes))
    what = (
        f"node {spec.node}"
        if spec.node is not None
        else f"{len(nodes)} {spec.op if spec.op != '*' else 'node'}(s)"
    )
    only = "" if spec.partial is None else f", only {spec.partial}"
    to_stderr(
        f"inject {spec.kind} (severity {spec.severity}{only}) into {base.name}: {what} of "
        f"stage {spec.stage} → participant {name}"
    )
    outcome = run(options, out, execution_settings(args, say=to_stderr))
    store = RunStore(out)
    workers = store.read_participants()
    if name not in workers:
        raise UsageError(
            f"the run has no participant {name}: this pipeline does not apply "
            "RunOptions.extra['faults'] (see anpred.inject.participants)"
        )
    record = injection_record(out, name, base.name, base.library, planned, outcome.summary)
    truth = score_injection(record, outcome.summary, outcome.exit_code)
    store.write_ground_truth(truth)
    print_summary(outcome.summary, outcome.run_dir)
    detected = truth["detected"]
    verdict = (
        "flagged at the injected stage"
        if detected["flagged_at_stage"]
        else f"flagged first at {detected['first_flagged_anchor']}"
        if detected["flagged"]
        else "not flagged"
    )
    applied = "applied as planned" if truth["worker"]["applied_as_planned"] else "NOT confirmed"
    print(f"ground truth: {name} ({applied}); oracle: {verdict}; {store.ground_truth_path}")
    return outcome.exit_code


def add_inject_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    common: argparse.ArgumentParser | None = None,
) -> None:
    """Register ``anpred inject`` (``common``: the parent parser every subcommand shares)."""
    from anpred.cli.flags import add_run_flags
    from anpred.inject.spec import fault_kinds
    from anpred.store.layout import GROUND_TRUTH_FILE

    kinds = fault_kinds()
    kind_help = "; ".join(
        f"{k.name}: {k.summary} (severity: {k.severity_doc}; default {k.default_severity})"
        for k in kinds.values()
    )
    inject = sub.add_parser(
        "inject",
        parents=[common] if common is not None else [],
        help="run an analysis with a known fault injected into one participant",
        description="Run `anpred run` with one participant carrying a fault: one op kind, in "
        "one stage, replaced by a reduced-precision version of chosen severity. The faulty "
        "participant is named <participant>!<fault>@<stage> and replaces the clean one in "
        f"--libs (or is added); {GROUND_TRUTH_FILE} in the run directory records what was "
        "injected where and what the oracle reported.",
    )
    fault = inject.add_argument_group("fault")
    fault.add_argument(
        "--lib",
        metavar="PARTICIPANT",
        help="participant to fault, e.g. onnxruntime, paddle, tensorflow[xla]",
    )
    fault.add_argument(
        "--stage",
        metavar="ANCHOR",
        help="anchor key: the fault hits the nodes of the stage producing it (see --list-targets)",
    )
    fault.add_argument(
        "--op",
        default="*",
        help="ONNX op type to fault (Conv, Sigmoid, ...); '*' = every node of "
        "the stage the fault applies to (default)",
    )
    fault.add_argument(
        "--node",
        metavar="NAME",
        help="fault only this ONNX node (its name, e.g. /model/model.2/cv1/conv/Conv; "
        "`--list-targets --stage STAGE` lists a stage's nodes); --stage is then optional",
    )
    fault.add_argument("--fault", choices=list(kinds), help=kind_help)
    fault.add_argument(
        "--severity",
        type=_severity,
        default=None,
        help="fault strength (meaning depends on --fault; default per fault)",
    )
    fault.add_argument(
        "--partial",
        metavar="SELECTION",
        help="fault only part of each faulted tensor, the rest keeps its clean value: "
        "above:K = the elements whose magnitude exceeds K times the tensor's RMS (e.g. "
        "above:2), channels:F = the first ceil(F*C) channels (0 < F < 1, e.g. channels:0.25; "
        "output faults only); not for eps. The participant is named "
        "<participant>!<fault>@<stage>~above2",
    )
    fault.add_argument(
        "--list-targets",
        action="store_true",
        help="list the stages and their op counts (with --stage: that stage's nodes), then exit",
    )
    add_run_flags(inject)
    inject.set_defaults(handler=cmd_inject)
