from __future__ import annotations

import struct
from typing import Any

from anpred.report.plots import channel_plot, deviation_heatmap, render_plots
from anpred.report.run_summary import RunSummary


def _size(png: bytes) -> tuple[int, int]:
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = struct.unpack(">II", png[16:24])  # IHDR follows the 8-byte signature
    return width, height


def test_sample_heatmap_is_a_png_of_readable_size(sample: dict[str, Any]) -> None:
    png = deviation_heatmap(RunSummary(sample))
    assert png is not None
    width, height = _size(png)
    assert 600 <= width <= 2000 and 300 <= height <= 2000


def test_no_data_gives_no_plots_and_no_errors() -> None:
    rendered = render_plots(RunSummary({}))
    assert rendered.images == {} and rendered.errors == {}


def test_non_positive_and_missing_deviations_are_left_out(sample: dict[str, Any]) -> None:
    for table in sample["deviation"].values():
        for row in table.values():
            for anchor in row:
                row[anchor] = 0.0
    sample["deviation"]["vs_fp64"]["torch"]["output"] = float("nan")
    assert deviation_heatmap(RunSummary(sample)) is None  # nothing positive to colour


def test_dollar_signs_in_labels_do_not_start_mathtext(sample: dict[str, Any]) -> None:
    # An unbalanced "$" would make matplotlib's mathtext parser raise.
    for table in sample["deviation"].values():
        table["torch[$x^2"] = table.pop("torch")
    sample["characterization"]["propagation"]["a$b"] = (
        sample["characterization"]["propagation"].pop("torch"))
    view = RunSummary(sample)
    assert deviation_heatmap(view) is not None
    assert channel_plot(view) is not None


def _layer_granularity_summary(n_anchors: int, participants: list[str]) -> dict[str, Any]:
    anchors = [f"blocks.{i}" for i in range(n_anchors - 1)] + ["output"]
    dev = {p: {a: 1e-7 * (1 + i + k) for i, a in enumerate(anchors)}
           for k, p in enumerate(participants)}
    return {"anchors": [{"key": a, "group": "encoder", "shape": [1, 197, 768]} for a in anchors],
            "deviation": {"vs_consensus": dev, "vs_fp64": dev},
            "noise_floor": {a: {"median": v} for a, v in dev[participants[0]].items()},
            "localization": {"participants": {p: {"introduced": row} for p, row in dev.items()}}}


def test_many_anchors_keep_plots_within_bounds() -> None:
    # Layer granularity of a ViT gives ~150 anchors; the figures must not grow without bound.
    participants = ["torch", "onnxruntime", "openvino", "tensorflow", "jax", "paddle"]
    rendered = render_plots(RunSummary(_layer_granularity_summary(150, participants)))
    assert rendered.errors == {}
    assert set(rendered.images) == {"heatmap", "propagation", "introduced"}
    for png in rendered.images.values():
        width, height = _size(png)
        assert width <= 16 * 110 and height <= 24 * 110  # MAX_WIDTH/MAX_HEIGHT at DPI


def test_plots_drawn_in_the_runs_fork_server_are_the_plots_drawn_here(
    sample: dict[str, Any], monkeypatch
) -> None:
    from anpred import fork_server
    from anpred.report import plots

    view = RunSummary(sample)
    here = render_plots(view)
    assert len(here.images) >= 3
    assert render_plots(view, processes=2).images == here.images  # no server: drawn here
    drawn_here: list[str] = []

    def spied(name: str, draw: Any) -> Any:
        return lambda v: drawn_here.append(name) or draw(v)

    spies = {n: (title, spied(n, draw)) for n, (title, draw) in plots.PLOTS.items()}
    monkeypatch.setattr(plots, "PLOTS", spies)  # here only: the server imported its own
    assert fork_server.start(plots.PRELOAD, keep=True)
    try:
        there = render_plots(view, processes=2)
    finally:
        fork_server.stop()
    assert drawn_here == []  # every plot came from a process forked from the server
    assert there.images == here.images and there.errors == here.errors


def test_one_draw_png_lays_out_as_savefig_does() -> None:
    """``_png`` draws once on the canvas; the constrained layout must still run (labels
    that would otherwise be cut off), giving savefig's pixels."""
    import io

    import numpy as np
    from matplotlib.image import imread

    from anpred.report.plots import DPI, _figure, _png

    def figure() -> Any:
        fig = _figure(4.0, 3.0)
        ax = fig.subplots()
        ax.plot([0, 1], [1, 2])
        ax.set_ylabel("a long label the layout must make room for")
        return fig

    buffer = io.BytesIO()
    figure().savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    ours = imread(io.BytesIO(_png(figure())))
    theirs = imread(io.BytesIO(buffer.getvalue()))
    assert ours.shape == theirs.shape and np.array_equal(ours, theirs)
    fig = figure()
    fig.set_layout_engine("none")  # the check fails without the layout
    assert not np.array_equal(imread(io.BytesIO(_png(fig))), theirs)
