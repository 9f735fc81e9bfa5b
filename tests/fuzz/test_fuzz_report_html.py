"""Fuzz: every user string that reaches ``report.html`` is escaped.

User strings reach the report as node and tensor names (anchors of an ONNX file), file
names (the model, the input images: an image's id is its file stem), the run folder, and
anything a tampered ``summary.json`` holds (participant names, anchor keys and input ids are
also *keys* of its mappings). The property: the page holds no markup but the report's own,
checked on the parsed page: only the report's tags, only its attributes, no ``<script>``,
no ``on*=`` handler, no URL but ``#anchors`` and ``data:image/png``.
"""

from __future__ import annotations

import copy
import json
import random
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import onnx
from fuzz_support import CHEAP_RUN, REPO, Cases, case_dir, fuzz, run_cli, tiny_model
from hypothesis import given
from hypothesis import strategies as st

HOSTILE = (
    "<script>alert(1)</script>",
    '"onerror="alert(1)',
    "'onmouseover='alert(1)",
    "<img src=x onerror=alert(1)>",
    "</td></tr></table><script>alert(2)</script>",
    "<!--",
    "]]><svg onload=alert(3)>",
    "javascript:alert(4)",
    "<a href='javascript:alert(5)'>x</a>",
    "&lt;script&gt;",
    "<style>body{display:none}</style>",
    "\u2028<iframe src=//evil>",
)
#: Hostile strings that can be file names (no "/").
FILE_SAFE = tuple(h for h in HOSTILE if "/" not in h)

TAGS = {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "div",
        "nav", "a", "main", "section", "footer", "table", "thead", "tbody", "tr", "th", "td",
        "p", "span", "code", "pre", "br", "dl", "dt", "dd", "figure", "img", "figcaption",
        "details", "summary", "ul", "ol", "li", "b", "strong", "em", "i", "small", "sup",
        "sub", "abbr"}
ATTRIBUTES = {"lang", "charset", "name", "content", "class", "title", "id", "href", "src",
              "alt", "colspan", "rowspan"}


class _Page(HTMLParser):
    """Collects what the page's markup does (not its text)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self.styles = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in TAGS:
            self.problems.append(f"<{tag}> in the page")
        if tag == "style":
            self.styles += 1
        for name, value in attrs:
            if name not in ATTRIBUTES or name.startswith("on"):
                self.problems.append(f"attribute {name}= on <{tag}>")
            if name == "href" and not (value or "").startswith("#"):
                self.problems.append(f"href={value!r:.60}")
            if name == "src" and not (value or "").startswith("data:image/png;base64,"):
                self.problems.append(f"src={value!r:.60}")

    def handle_comment(self, data: str) -> None:
        self.problems.append("a comment in the page")


def markup_problems(page: str) -> list[str]:
    """What ``page`` holds beyond the report's own markup."""
    parser = _Page()
    parser.feed(page)
    parser.close()
    if parser.styles > 1:
        parser.problems.append(f"{parser.styles} <style> elements")
    return sorted(set(parser.problems))


# --------------------------------------------------------------------------- in process


def _inject(value: Any, rng: random.Random, strings: list[str]) -> Any:
    """``value`` with some string leaves and mapping keys replaced by hostile strings."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            new_key = rng.choice(strings) + key if rng.random() < 0.15 else key
            out[new_key] = _inject(item, rng, strings)
        return out
    if isinstance(value, list):
        return [_inject(item, rng, strings) for item in value]
    if isinstance(value, str) and rng.random() < 0.3:
        return rng.choice(strings)
    return value


def test_fuzz_summary_strings_are_escaped_in_process() -> None:
    from anpred.report.html import render_html
    from anpred.report.plots import RenderedPlots

    sample = json.loads((REPO / "tests" / "report" / "data" / "summary.json").read_text())
    cases = Cases("report.html (summary strings, in process)")

    @fuzz(short_examples=25, cheap=True)
    @given(seed=st.integers(0, 2**32 - 1),
           extra=st.lists(st.text(min_size=1, max_size=30), max_size=3))
    def case(seed: int, extra: list[str]) -> None:
        strings = [*HOSTILE, *(f"<b>{e}</b>" for e in extra)]
        summary = _inject(copy.deepcopy(sample), random.Random(seed), strings)
        try:
            problems = markup_problems(render_html(summary, RenderedPlots()))
        except Exception as err:  # noqa: BLE001 - a summary must always render
            problems = [f"render_html raised {err.__class__.__name__}: {err}"]
        cases.add(f"seed={seed} extra={extra!r}", problems)

    case()
    cases.finish()


# --------------------------------------------------------------------------- the CLI


def _hostile_model(folder: Path, name: str, node: str, tensor: str) -> Path:
    """The tiny CNN with a hostile node name and a hostile anchor (tensor) name."""
    model = onnx.load(str(tiny_model()))
    graph = model.graph
    graph.node[0].name = f"/{node}/conv/Conv"  # a module scope → an inferred anchor
    graph.node[1].name = f"/{node}/act/Relu"
    old = graph.node[3].output[0]  # the sigmoid's output, an anchor
    for other in graph.node:
        for i, item in enumerate(other.input):
            if item == old:
                other.input[i] = tensor
    graph.node[3].output[0] = tensor
    path = folder / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def test_fuzz_report_of_a_run_with_hostile_names() -> None:
    from PIL import Image

    cases = Cases("report.html (run with hostile names)")

    @fuzz(short_examples=1)
    @given(file_name=st.sampled_from(FILE_SAFE), node=st.sampled_from(FILE_SAFE),
           tensor=st.sampled_from(HOSTILE), image=st.sampled_from(FILE_SAFE))
    def case(file_name: str, node: str, tensor: str, image: str) -> None:
        with case_dir() as tmp:
            model = _hostile_model(tmp, file_name, node, tensor)
            picture = tmp / f"{image}.png"
            Image.new("RGB", (20, 12), (200, 10, 10)).save(picture)
            out = tmp / f"out{file_name}"
            args = ["run", str(model), *CHEAP_RUN, "--image", str(picture), "--out", str(out)]
            result = run_cli(args, cwd=tmp)
            description = f"model={file_name!r} node={node!r} tensor={tensor!r} image={image!r}"
            report = out / "report.html"
            found = []
            if result.returncode in (0, 1):  # a finished run (exit 3 may stop before one)
                found = (markup_problems(report.read_text(encoding="utf-8"))
                         if report.is_file() else ["no report.html"])
            cases.check(description, result, extra=found)

    case()
    cases.finish()
