"""The drill-down in the terminal and in ``report.html``: each flagged stage's layers (the
error at each layer's output, the named layer), then its operator chain with the error every
operator introduces, the named operator highlighted.

Both renderers read the summary's ``drill`` entry through :func:`drill_of`, which never
raises (a partial or foreign summary renders without the drill-down).
"""

from __future__ import annotations

from typing import Any

from anpred.errors import UsageError
from anpred.localization.drilldown import DrillLayer, drill_layers, named_layer
from anpred.report.markup import Markup, badge, esc, join, note, number, table, tag
from anpred.report.run_summary import RunSummary
from anpred.store.summary_drill import DrillDown, DrillOp, DrillTarget

#: Operators shown around the named one in the terminal (the HTML table shows them all).
_TERMINAL_CONTEXT = 3


def drill_of(view: RunSummary) -> DrillDown | None:
    """The summary's drill-down, or ``None`` (absent or unreadable)."""
    if view.typed is not None:
        return view.typed.drill
    raw = view.raw.get("drill")
    if not isinstance(raw, dict):
        return None
    try:
        return DrillDown.from_dict(raw)
    except (UsageError, TypeError, ValueError):
        return None


def _op_label(op: DrillOp) -> str:
    where = f" ({op.module})" if op.module else ""
    return f"{op.op_type} {op.node}{where}"


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1e}"


def named_line(target: DrillTarget) -> str:
    """One line: the operator named for (participant, stage), or why none is."""
    op = target.named_op
    head = f"{target.participant} @ {target.stage}: "
    if op is None:
        return head + f"no operator named ({target.reason})"
    how = "introduces" if target.basis == "introduced" else "first flagged"
    return head + f"{_op_label(op)} {how} {_fmt(op.introduced)} (threshold {_fmt(op.threshold)})"


def layer_lines(target: DrillTarget) -> list[str]:
    """The stage's layers on one line, error at each layer's output (``*`` flagged, ``»``
    the named layer), and the named layer with its operators; ``[]`` without module paths.
    """
    layers = drill_layers(target.ops)
    if not layers:
        return []
    layer, _ = named_layer(target)
    cells = [
        f"{'»' if x == layer else ''}{x.module} {_fmt(x.chain)}{'*' if x.finding else ''}"
        for x in layers
    ]
    lines = [f"    layers (error at the output): {' · '.join(cells)}"]
    if layer is not None:
        where = [i for i, key in enumerate(layer.ops, 1) if key in layer.introducing]
        adds = (
            f"operator {where[0]} of {len(layer.ops)} introduces error"
            if where
            else (f"{len(layer.ops)} operators, none introduces error alone")
        )
        flagged = "flagged" if layer.finding else "not flagged"
        lines.append(
            f"    layer {layer.module} ({layers.index(layer) + 1} of {len(layers)}): {adds}; "
            f"its output {_fmt(layer.chain)}, {flagged}"
        )
    return lines


def terminal_lines(view: RunSummary) -> list[str]:
    """The drill-down for the terminal summary (``[]`` when it did not run)."""
    drill = drill_of(view)
    if drill is None:
        return []
    cost = f" in {drill.wall_seconds:.1f}s" if drill.wall_seconds is not None else ""
    lines = ["", f"drill-down (flagged stages → operators){cost}:"]
    if drill.reason:
        return [*lines, f"  not run: {drill.reason}"]
    for target in drill.targets:
        lines.append("  " + named_line(target))
        lines += layer_lines(target)
        layer, _ = named_layer(target)
        ops = target.ops if layer is None else tuple(o for o in target.ops if o.key in layer.ops)
        index = next((i for i, o in enumerate(ops) if o.key == target.named), 0)
        low, high = max(0, index - _TERMINAL_CONTEXT), index + _TERMINAL_CONTEXT + 1
        shown = ops[low:high]
        scope = "operator(s)" if layer is None else f"operator(s) of {layer.module}"
        if low:
            lines.append(f"      ... {low} {scope} before")
        for op in shown:
            mark = "»" if op.key == target.named else " "
            flag = " *" if op.stands_out else ""
            lines.append(
                f"    {mark} {op.op_type:<18} introduced {_fmt(op.introduced):>8}  "
                f"chain {_fmt(op.chain):>8}{flag}  {op.node}"
            )
        rest = len(ops) - high
        if rest > 0:
            lines.append(f"      ... {rest} {scope} after")
    if drill.failed:
        lines.append("  drill jobs failed: " + ", ".join(sorted(drill.failed)))
    return lines


def _row(op: DrillOp, named: str | None) -> list[Any]:
    cells: list[Any] = [
        op.key,
        op.op_type,
        tag("code", op.node),
        op.module or "-",
        number(op.introduced),
        number(op.threshold),
        badge("stands out", "fail") if op.stands_out else "",
        number(op.chain),
        badge("finding", "warn") if op.finding else "",
    ]
    if op.key == named:
        return [tag("strong", c) for c in cells]
    return cells


def _layer_row(layer: DrillLayer, named: DrillLayer | None) -> list[Any]:
    cells: list[Any] = [
        tag("code", layer.module),
        len(layer.ops),
        layer.output,
        number(layer.chain),
        badge("finding", "warn") if layer.finding else "",
        ", ".join(layer.introducing) or "-",
    ]
    if layer == named:
        return [tag("strong", c) for c in cells]
    return cells


def reproducer_note(repro: dict[str, Any]) -> Markup:
    """A finding's reproducer (``anpred repro``): its link, status and size."""
    link = Markup(f'<a href="{esc(repro["path"])}">{esc(repro["path"])}</a>')
    said = (f"Reproducer ({repro['status']}): {repro['ops_in_case']} of "
            f"{repro['ops_in_model']} operators; ")  # fmt: skip
    return note(join([said, link]), "" if repro["status"] == "verified" else "warn")


def drill_section(view: RunSummary) -> Markup:
    """The HTML section: per flagged (participant, stage), its operator chain."""
    drill = drill_of(view)
    if drill is None:
        return note(
            "No drill-down in this summary (no findings, --no-drill, or an older run).", "muted"
        )
    parts = [
        note(
            "Every flagged stage re-run alone, in every participant, from the fp64 "
            "reference's stage input, with every operator output exposed. 'introduced': the "
            "operator's own error (run on the fp64 reference's values of its inputs, relative "
            "L2 vs fp64), judged against the population of participants and the fp32 "
            "reference's (threshold); 'chain': the error at its output when the stage runs "
            "from its exact input. The named operator (bold) is the first whose introduced "
            "error stands out. Layers group the operators by torch module; a layer's output "
            "is its last operator's, so its error and verdict are that operator's (the layer "
            "named, bold, is the named operator's)."
            + (f" Drill-down wall time: {drill.wall_seconds:.1f} s." if drill.wall_seconds else "")
        )
    ]
    if drill.reason:
        parts.append(note(f"The drill-down did not run: {drill.reason}", "warn"))
    for target in drill.targets:
        parts.append(tag("h3", f"{target.participant} at {target.stage}"))
        kind = "fail" if target.named else "warn"
        parts.append(note(named_line(target), kind))
        repro = view.reproducers.get(f"{target.participant}@{target.stage}")
        if repro is not None:
            parts.append(reproducer_note(repro))
        layers = drill_layers(target.ops)
        if layers:
            layer, _ = named_layer(target)
            parts.append(
                table(
                    ["layer", "operators", "output", "chain", "", "introducing operators"],
                    [_layer_row(x, layer) for x in layers],
                    cls="num",
                )
            )
        rows = [_row(op, target.named) for op in target.ops]
        parts.append(
            table(
                ["key", "op", "node", "module", "introduced", "threshold", "", "chain", ""],
                rows,
                cls="num",
            )
        )
    if drill.failed:
        parts.append(
            note(
                "Drill jobs that failed: "
                + "; ".join(f"{p}: {m}" for p, m in sorted(drill.failed.items())),
                "warn",
            )
        )
    return join(parts)
