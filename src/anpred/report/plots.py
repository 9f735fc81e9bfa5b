"""Report plots, rendered with matplotlib's Agg canvas into PNG bytes.

Each ``*_plot`` function takes a :class:`RunSummary` and returns PNG bytes, or ``None``
when the summary holds no data for it (a partial run). matplotlib is imported inside the
functions, and figures are built on an explicit Agg canvas (no pyplot, no global state).
Deviation values span many decades (1e-8 to 1), so every magnitude axis is logarithmic;
zero, missing and non-finite values are left out rather than clamped.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from anpred import fork_server
from anpred.report.run_summary import RunSummary, as_dict, as_float

DPI = 110
"""Resolution of the PNGs (the HTML shows them at their natural width, up to the page's)."""

MAX_ANNOTATED_CELLS = 240
"""Heatmaps with more cells than this show colours only (the numbers would not fit)."""

MAX_ANCHOR_LABELS = 60
"""At most this many anchor names on an axis (layer granularity can have hundreds)."""

MAX_BARS = 160
"""Above this many (stage, participant) bars, introduced error is drawn as marker lines."""

MAX_WIDTH = 16.0
"""Widest figure, in inches (1760 px at :data:`DPI`); more anchors make narrower steps."""

MAX_HEIGHT = 24.0
"""Tallest figure, in inches (the heatmap grows with the anchor count)."""

_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
            "#7f7f7f", "#bcbd22", "#17becf")


def _safe(text: Any) -> str:
    """Make a label matplotlib shows verbatim: ``$`` would start mathtext (and can raise)."""
    return str(text).replace("$", r"\$")


def _colour(index: int) -> str:
    return _PALETTE[index % len(_PALETTE)]


def _positive(value: float | None) -> float | None:
    return value if value is not None and value > 0 else None


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Any) -> bytes:
    """Draw the figure once on its Agg canvas and encode it.

    ``fig.savefig`` with a layout engine draws twice (once to lay out, once to print);
    the canvas's ``print_png`` lays out and draws in one pass, same pixels at :data:`DPI`.
    """
    buffer = io.BytesIO()
    fig.canvas.print_png(buffer, metadata={"Software": None})
    return buffer.getvalue()


def _anchor_axis(ax: Any, anchors: Sequence[str], axis: str = "x") -> None:
    """Label the anchor axis; with many anchors, every k-th so that labels stay readable."""
    step = max(1, math.ceil(len(anchors) / MAX_ANCHOR_LABELS))
    ticks = list(range(0, len(anchors), step))
    labels = [_safe(anchors[i]) for i in ticks]
    if axis == "x":
        ax.set_xticks(ticks)
        ax.set_xticklabels(labels, rotation=45 if len(anchors) > 4 else 0, ha="right"
                           if len(anchors) > 4 else "center", fontsize=8)
    else:
        ax.set_yticks(ticks)
        ax.set_yticklabels(labels, fontsize=8)


def _group_bands(ax: Any, view: RunSummary, anchors: Sequence[str]) -> None:
    """Shade alternate anchor groups (backbone / neck / head) and name them at the top."""
    groups = {str(r.get("key")): str(r.get("group") or "") for r in view.anchor_records}
    spans: list[tuple[str, int, int]] = []
    for i, anchor in enumerate(anchors):
        group = groups.get(anchor, "")
        if spans and spans[-1][0] == group:
            spans[-1] = (group, spans[-1][1], i)
        else:
            spans.append((group, i, i))
    if len(spans) < 2:
        return
    for n, (group, start, end) in enumerate(spans):
        if n % 2 == 0:
            ax.axvspan(start - 0.5, end + 0.5, color="#f0f0f0", zorder=0)
        if group:
            ax.text((start + end) / 2, 1.01, _safe(group), transform=ax.get_xaxis_transform(),
                    ha="center", va="bottom", fontsize=8, color="#555555")


def deviation_heatmap(view: RunSummary) -> bytes | None:
    """Median relative L2 deviation, anchors × participants, vs consensus and vs fp64."""
    import numpy as np
    from matplotlib.colors import LogNorm
    from matplotlib.patches import Rectangle

    tables = [(kind, title, view.deviation(kind)) for kind, title in
              (("vs_consensus", "vs consensus"), ("vs_fp64", "vs fp64 reference"))]
    tables = [t for t in tables if t[2]]
    anchors = view.anchors
    values = [_positive(v) for _, _, table in tables for row in table.values()
              for v in row.values()]
    values = [v for v in values if v is not None]
    if not tables or not anchors or not values:
        return None
    low, high = min(values), max(values)
    if high <= low:
        low, high = low / 2, high * 2
    norm = LogNorm(vmin=low, vmax=high)
    width = max(max(len(t[2]) for t in tables) * 0.95 + 1.8, 4.0) * len(tables) + 1.2
    width = min(width, MAX_WIDTH)
    height = min(1.6 + 0.34 * len(anchors), MAX_HEIGHT)
    fig = _figure(width, height)
    axes = fig.subplots(1, len(tables), squeeze=False)[0]
    findings = view.finding_cells()
    image = None
    for ax, (_, title, table) in zip(axes, tables, strict=True):
        participants = list(table)
        grid = np.full((len(anchors), len(participants)), np.nan)
        for j, p in enumerate(participants):
            for i, a in enumerate(anchors):
                v = _positive(table[p].get(a))
                if v is not None:
                    grid[i, j] = v
        ax.set_facecolor("#e4e4e4")  # missing cells (no capture, failed participant)
        image = ax.imshow(np.ma.masked_invalid(grid), norm=norm, cmap="viridis", aspect="auto")
        ax.set_title(_safe(title), fontsize=10)
        ax.set_xticks(range(len(participants)))
        ax.set_xticklabels([_safe(p) for p in participants], rotation=30, ha="right", fontsize=8)
        _anchor_axis(ax, anchors, "y")
        annotate = grid.size <= MAX_ANNOTATED_CELLS
        # cells lie inside the axes: left out of the layout, which need not measure them
        for i, a in enumerate(anchors):
            for j, p in enumerate(participants):
                if (p, a) in findings:
                    ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False,
                                           edgecolor="#d62728", linewidth=2.5, in_layout=False))
                if not annotate:
                    continue
                if math.isnan(grid[i, j]):
                    ax.text(j, i, "n/a", ha="center", va="center", fontsize=7, color="#777777",
                            in_layout=False)
                else:
                    dark = norm(grid[i, j]) < 0.6
                    ax.text(j, i, f"{grid[i, j]:.1e}", ha="center", va="center", fontsize=7,
                            color="white" if dark else "black", in_layout=False)
    if image is not None:
        bar = fig.colorbar(image, ax=list(axes), shrink=min(0.9, 12.0 / height))
        bar.set_label("median relative L2 over inputs (log)", fontsize=8)
    return _png(fig)


def propagation_plot(view: RunSummary) -> bytes | None:
    """Deviation vs fp64 along the anchor order, one line per participant, noise floor dashed."""
    anchors = view.anchors
    table = view.deviation("vs_fp64")
    profiles = view.propagation()
    if not anchors or not (table or profiles):
        return None
    position = {a: i for i, a in enumerate(anchors)}
    fig = _figure(min(max(6.5, 0.75 * len(anchors) + 2.5), MAX_WIDTH), 4.6)
    ax = fig.subplots()
    _group_bands(ax, view, anchors)
    plotted = False
    findings = view.finding_cells()
    participants = list(dict.fromkeys([*table, *profiles]))
    for n, p in enumerate(participants):
        colour = _colour(n)
        for profile in profiles.get(p, {}).get("profiles", {}).values():
            points = _profile_points(profile, position)
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, color=colour, alpha=0.25, linewidth=0.9)
        points = [(position[a], v) for a, v in table.get(p, {}).items()
                  if a in position and _positive(v) is not None]
        if points:
            points.sort()
            xs, ys = zip(*points, strict=True)
            few = len(anchors) <= 40
            ax.plot(xs, ys, color=colour, marker="o", markersize=4 if few else 2,
                    linewidth=1.8 if few else 1.1, label=_safe(p))
            hits = [(x, y) for x, y in points if (p, anchors[x]) in findings]
            if hits:
                ax.scatter(*zip(*hits, strict=True), marker="X", s=90, color="#d62728",
                           zorder=5, edgecolors="white", linewidths=0.8)
            plotted = True
    floor = [(position[a], v) for a, v in view.noise_floor().items()
             if a in position and _positive(v) is not None]
    if floor:
        floor.sort()
        xs, ys = zip(*floor, strict=True)
        ax.plot(xs, ys, color="black", linestyle="--", linewidth=1.2,
                label="noise floor (fp32 reference vs fp64)")
        plotted = True
    # one floor per reduced-precision class: its ideal reference's error (docs/oracle.md)
    classes = as_dict(view.section("precision").get("classes"))
    dashes = iter([(0, (5, 2, 1, 2)), ":", (0, (1, 1)), (0, (8, 3))])
    for name, record in classes.items():
        if name == "fp32":
            continue
        floor = [(position[a], v) for a, v in as_dict(as_dict(record).get("floor")).items()
                 if a in position and _positive(v) is not None]
        if floor:
            floor.sort()
            xs, ys = zip(*floor, strict=True)
            ax.plot(xs, ys, color="#444444", linestyle=next(dashes, "--"), linewidth=1.2,
                    label=_safe(f"{name} floor (ideal {name} arithmetic vs fp64)"))
    if not plotted:
        return None
    ax.set_yscale("log")
    _anchor_axis(ax, anchors)
    ax.set_xlim(-0.5, len(anchors) - 0.5)
    ax.set_ylabel("relative L2 vs fp64 (median; thin: per input)", fontsize=8)
    ax.grid(True, axis="y", which="major", color="#dddddd", linewidth=0.6)
    ax.legend(fontsize=8, loc="best", framealpha=0.9)
    return _png(fig)


def _profile_points(profile: Any, position: dict[str, int]) -> list[tuple[int, float]]:
    if not isinstance(profile, dict):
        return []
    anchors = profile.get("anchors")
    devs = profile.get("deviations")
    if not isinstance(anchors, list) or not isinstance(devs, list):
        return []
    points = [(position[str(a)], _positive(as_float(d))) for a, d in zip(anchors, devs,
                                                                          strict=False)
              if str(a) in position]
    return sorted((x, y) for x, y in points if y is not None)


def introduced_plot(view: RunSummary) -> bytes | None:
    """Introduced error per stage (stage isolation), grouped bars per participant, log y."""
    anchors = view.anchors
    per = {p: view.introduced(p) for p in view.localization_participants()}
    per = {p: row for p, row in per.items() if any(_positive(v) for v in row.values())}
    if not anchors or not per:
        return None
    stages = [a for a in anchors if any(_positive(row.get(a)) for row in per.values())]
    n = len(per)
    width = 0.8 / n
    fig = _figure(min(max(6.5, 0.28 * n * len(stages) + 2.5), MAX_WIDTH), 4.4)
    ax = fig.subplots()
    _group_bands(ax, view, stages)
    bars = n * len(stages) <= MAX_BARS
    for k, (p, row) in enumerate(per.items()):
        xs, heights = [], []
        for i, stage in enumerate(stages):
            v = _positive(row.get(stage))
            if v is not None:
                xs.append(i - 0.4 + width * (k + 0.5) if bars else i)
                heights.append(v)
        top = view.top_stage(p)
        label = _safe(p) + (f" (top stage {_safe(top)})" if top else "")
        if bars:
            ax.bar(xs, heights, width=width, color=_colour(k), label=label)
        else:  # too many bars to tell apart: one marker line per participant
            ax.plot(xs, heights, color=_colour(k), marker=".", markersize=4, linewidth=0.8,
                    label=label)
    ax.set_yscale("log")
    _anchor_axis(ax, stages)
    ax.set_xlim(-0.5, len(stages) - 0.5)
    ax.set_ylabel("relative L2 added by the stage alone (median)", fontsize=8)
    ax.grid(True, axis="y", which="major", color="#dddddd", linewidth=0.6)
    ax.legend(fontsize=8, loc="best", framealpha=0.9)
    return _png(fig)


def channel_plot(view: RunSummary) -> bytes | None:
    """Top-channel share and border/interior ratio of the error at each worst anchor."""
    from anpred.localization.dimension import DEFAULT_TOP_CHANNEL_FRACTION

    rows = []
    for p, record in view.propagation().items():
        dims = record.get("dimension_at_worst")
        dims = dims if isinstance(dims, dict) else {}
        share = as_float(dims.get("top_channel_share"))
        ratio = as_float(dims.get("border_interior_ratio"))
        if share is not None or ratio is not None:
            rows.append((p, str(record.get("worst_anchor") or "?"), share, ratio))
    if not rows:
        return None
    fig = _figure(min(max(7.5, 1.3 * len(rows) + 4), MAX_WIDTH), 3.8)
    left, right = fig.subplots(1, 2)
    labels = [f"{_safe(p)}\n@ {_safe(a)}" for p, a, _, _ in rows]
    xs = range(len(rows))
    shares = [s or 0.0 for _, _, s, _ in rows]
    ratios = [r or 0.0 for _, _, _, r in rows]
    left.bar(xs, shares, color=[_colour(i) for i in xs])
    channels = {a: view.anchor_shape(a) for _, a, _, _ in rows}
    uniform = {math.ceil(DEFAULT_TOP_CHANNEL_FRACTION * s[1]) / s[1]
               for s in channels.values() if len(s) > 1 and s[1] > 0}
    top = max(shares)
    if len(uniform) == 1:
        level = uniform.pop()
        top = max(top, level)
        left.axhline(level, color="black", linestyle="--", linewidth=1,
                     label="uniform error over channels")
        left.legend(fontsize=8, loc="upper right")
    left.set_ylim(0, min(1.0, top * 1.35) or 1.0)
    left.set_title(f"share of error in the top {DEFAULT_TOP_CHANNEL_FRACTION:.0%} channels",
                   fontsize=9)
    right.bar(xs, ratios, color=[_colour(i) for i in xs])
    right.axhline(1.0, color="black", linestyle="--", linewidth=1, label="border = interior")
    right.set_ylim(0, max(1.0, *ratios) * 1.3)
    right.legend(fontsize=8, loc="upper right")
    right.set_title("mean error at the border / in the interior", fontsize=9)
    for ax in (left, right):
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, fontsize=8)
        ax.grid(True, axis="y", color="#dddddd", linewidth=0.6)
    return _png(fig)


PLOTS: dict[str, tuple[str, Callable[[RunSummary], bytes | None]]] = {
    "heatmap": ("Deviation heatmap", deviation_heatmap),
    "propagation": ("Propagation", propagation_plot),
    "introduced": ("Introduced error per stage", introduced_plot),
    "channels": ("Per-channel error at the worst anchor", channel_plot),
}
"""File stem → (title, renderer) of every plot the report embeds."""


@dataclass(frozen=True)
class RenderedPlots:
    """The report's plots.

    Attributes:
        images: ``{file stem: PNG bytes}`` for the plots with data, in :data:`PLOTS` order.
        errors: ``{file stem: message}`` for plots whose rendering raised; the report shows
            the message instead of the plot rather than failing as a whole.
    """

    images: dict[str, bytes] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


PRELOAD = (
    "matplotlib.figure",
    "matplotlib.backends.backend_agg",
    "matplotlib.colors",
    "matplotlib.patches",
    "anpred.report.plots",
)
"""What a fork server imports for plotting processes (:func:`render_plots`)."""


def _render(name: str, view: RunSummary) -> tuple[bytes | None, str | None]:
    """One plot: ``(png, None)``, or ``(None, message)`` when drawing it raised."""
    try:
        return PLOTS[name][1](view), None
    except Exception as err:  # noqa: BLE001 - one bad plot must not lose the whole report
        return None, f"{err.__class__.__name__}: {err}"


def render_plots(view: RunSummary, processes: int = 1) -> RenderedPlots:
    """Render every plot that has data.

    Args:
        view: The run summary.
        processes: Processes to draw in at once. Used only when a run keeps a fork server
            that imported matplotlib (:mod:`anpred.fork_server`, :data:`PRELOAD`): the
            plots are then drawn beside each other; otherwise, and for whatever a process
            did not deliver, here, one after the other. Same PNGs either way.

    Returns:
        The PNGs, and the error of any plot that could not be drawn.
    """
    drawn: dict[str, tuple[bytes | None, str | None]] = {}
    if processes > 1 and fork_server.kept():
        drawn = _in_processes(view, processes)
    result = RenderedPlots()
    for name in PLOTS:
        png, error = drawn[name] if name in drawn else _render(name, view)
        if error is not None:
            result.errors[name] = error
        elif png:
            result.images[name] = png
    return result


def _in_processes(view: RunSummary, processes: int) -> dict[str, tuple[bytes | None, str | None]]:
    from concurrent.futures import ProcessPoolExecutor

    drawn: dict[str, tuple[bytes | None, str | None]] = {}
    try:
        with ProcessPoolExecutor(
            max_workers=min(processes, len(PLOTS)),
            mp_context=fork_server.context(PRELOAD),
            initializer=fork_server.init_helper,
        ) as pool:
            futures = {name: pool.submit(_render, name, view) for name in PLOTS}
            for name, future in futures.items():
                drawn[name] = future.result()
    except Exception:  # noqa: BLE001 - a process that failed: those plots are drawn here
        pass
    return drawn
