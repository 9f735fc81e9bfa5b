"""The self-contained HTML report of a run, and its plot PNGs, in the run directory.

The page needs nothing but itself: the plots are embedded as base64 PNG data URIs, the CSS
is inline, there is no script and no external URL, so it opens offline and can be mailed.
Every user-provided string (model path, input ids, participant names, messages, settings)
is HTML-escaped (:mod:`anpred.report.markup`). A partial summary renders: sections without
data say so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from anpred.report.drill import drill_section
from anpred.report.markup import Markup, esc, join
from anpred.report.plots import PLOTS, RenderedPlots, render_plots
from anpred.report.records import libraries_section, observer_alignment_section, problems_section
from anpred.report.run_summary import RunSummary
from anpred.report.sections import (
    baselines_section,
    channel_section,
    findings_section,
    heatmap_section,
    introduced_section,
    propagation_section,
    verdict_section,
)
from anpred.store.layout import PLOTS_FOLDER, RunStore
from anpred.store.repro_record import REPRO_FOLDER, load_reproducers
from anpred.store.summary import Summary

_CSS = """
:root { --fg: #1d2433; --muted: #6b7280; --line: #e3e6eb; --bg: #ffffff; --panel: #f7f8fa;
  --pass: #17803d; --pass-bg: #e5f5ea; --fail: #b42318; --fail-bg: #fdecea;
  --warn: #9a6700; --warn-bg: #fff6dd; --accent: #2f5da8; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: var(--bg);
  font: 14px/1.5 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
header { background: #1d2433; color: #fff; padding: 18px 32px; }
header h1 { margin: 0; font-size: 22px; font-weight: 600; }
header .sub { color: #c5cbd6; font-size: 13px; margin-top: 4px; }
nav { position: sticky; top: 0; z-index: 2; background: var(--panel);
  border-bottom: 1px solid var(--line); padding: 8px 32px; font-size: 13px; }
nav a { display: inline-block; color: var(--accent); text-decoration: none; margin-right: 16px;
  white-space: nowrap; }
main { max-width: 1320px; padding: 8px 32px 48px; }
section { border-bottom: 1px solid var(--line); padding: 8px 0 20px; }
h2 { font-size: 18px; margin: 18px 0 10px; }
h3 { font-size: 15px; margin: 16px 0 8px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 4px 9px; text-align: left; vertical-align: top; }
th { background: var(--panel); font-weight: 600; }
tbody tr:nth-child(even) td { background: #fbfcfd; }
table.num td { font-variant-numeric: tabular-nums; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace;
  font-size: 12px; }
pre { margin: 0; white-space: pre-wrap; word-break: break-word; max-width: 720px; }
figure { margin: 8px 0 12px; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: 12.5px; max-width: 900px; margin-top: 4px; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px;
  font-weight: 600; background: #eef0f3; color: var(--muted); }
.badge.pass { background: var(--pass-bg); color: var(--pass); }
.badge.fail { background: var(--fail-bg); color: var(--fail); }
.badge.warn { background: var(--warn-bg); color: var(--warn); }
.badge.big { font-size: 16px; padding: 3px 14px; border-radius: 14px; margin-right: 8px; }
.headline { font-size: 15px; margin: 6px 0 12px; }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: 3px 18px; margin: 8px 0; }
dl.kv dt { color: var(--muted); }
dl.kv dd { margin: 0; word-break: break-word; }
.note { background: var(--panel); border-left: 3px solid var(--line); padding: 6px 10px;
  margin: 8px 0; max-width: 960px; }
.note.warn { background: var(--warn-bg); border-color: var(--warn); }
.note.fail { background: var(--fail-bg); border-color: var(--fail); }
.note.muted { color: var(--muted); }
.small { color: var(--muted); font-size: 12px; }
details { margin: 6px 0; }
summary { cursor: pointer; color: var(--accent); font-size: 13px; }
footer { color: var(--muted); font-size: 12px; padding: 16px 32px; }
"""


def _sections(view: RunSummary, plots: RenderedPlots) -> list[tuple[str, str, Callable[[], Any]]]:
    """(id, heading, builder) of every section, in page order."""
    return [
        ("verdict", "Verdict at a glance", lambda: verdict_section(view)),
        ("heatmap", "Deviation heatmap", lambda: heatmap_section(view, plots)),
        ("propagation", "Propagation along the anchors", lambda: propagation_section(view, plots)),
        ("introduced", "Introduced error per stage (stage isolation)",
         lambda: introduced_section(view, plots)),
        ("channels", "Per-channel error at the worst anchor", lambda: channel_section(view, plots)),
        ("drill", "Drill-down: operators of the flagged stages", lambda: drill_section(view)),
        ("baselines", "Baselines vs anpred", lambda: baselines_section(view)),
        ("findings", "Findings", lambda: findings_section(view)),
        ("records", "Observer effect and alignment", lambda: observer_alignment_section(view)),
        ("libraries", "Library versions and settings", lambda: libraries_section(view)),
        ("problems", "Unaligned and failed items", lambda: problems_section(view)),
    ]


def render_html(
    summary: Summary | Mapping[str, Any],
    plots: RenderedPlots | None = None,
    reproducers: Mapping[str, dict[str, Any]] | None = None,
) -> str:
    """Return the report page for ``summary``.

    Args:
        summary: The run's summary (possibly partial).
        plots: Rendered plots; rendered here when ``None``.
        reproducers: Finding → its reproducer's record (see ``RunSummary.reproducers``).

    Returns:
        The complete HTML document.
    """
    view = RunSummary(summary)
    view.reproducers = dict(reproducers or {})
    plots = render_plots(view) if plots is None else plots
    sections = _sections(view, plots)
    nav = join(Markup(f'<a href="#{sid}">{esc(title)}</a>') for sid, title, _ in sections)
    body = join(Markup(f'<section id="{sid}"><h2>{esc(title)}</h2>{esc(build())}</section>')
                for sid, title, build in sections)
    counts = view.findings_per_participant
    total = sum(counts.values())
    status = (f"{total} finding{'s' if total != 1 else ''}" if total
              else "clean" if view.judged else "no verdict")
    subtitle = (f"{len(view.participants)} participants · {len(view.input_ids)} inputs · "
                f"{len(view.anchors)} anchors · {status}")
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>anpred report: {esc(view.model_name)}</title><style>{_CSS}</style></head>"
        f"<body><header><h1>anpred report: {esc(view.model_name)}</h1>"
        f'<div class="sub">{esc(subtitle)}</div></header>'
        f"<nav>{nav}</nav><main>{body}</main>"
        f"<footer>Written by anpred on {esc(stamp)}. Self-contained: plots are embedded; the "
        f"PNG files are also in {esc(PLOTS_FOLDER)}/.</footer></body></html>\n"
    )


def write_report(
    run_dir: Path, summary: Summary | Mapping[str, Any], processes: int = 1
) -> Path:
    """Write the report page and the plot PNGs into the run directory.

    Args:
        run_dir: The run directory (created if missing).
        summary: The run's summary as written to ``summary.json`` (possibly partial).
        processes: Processes to draw the plots in (see :func:`render_plots`).

    Returns:
        The path of the report page.
    """
    store = RunStore(run_dir)
    view = RunSummary(summary)
    plots = render_plots(view, processes)
    folder = store.plots_dir
    folder.mkdir(parents=True, exist_ok=True)
    for name in PLOTS:
        target = folder / f"{name}.png"
        if name in plots.images:
            target.write_bytes(plots.images[name])
        else:
            target.unlink(missing_ok=True)  # a plot of an earlier rendering, now without data
    path = store.report_path
    path.write_text(render_html(summary, plots, _reproducers(run_dir)), encoding="utf-8")
    return path


def _reproducers(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The run's reproducers (``anpred repro``), by finding, each with its README's path."""
    return {
        r.finding: {**r.to_dict(), "path": f"{REPRO_FOLDER}/{r.folder}/README.md"}
        for r in load_reproducers(Path(run_dir) / REPRO_FOLDER)
    }
