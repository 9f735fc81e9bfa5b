"""Small HTML building blocks for the report; every piece of text goes through ``escape``.

Functions here take *text* and return *markup*. Cells given as :class:`Markup` are
inserted as they are (they were built by these functions); anything else is escaped.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any


class Markup(str):
    """A string that is already HTML (built here from escaped parts)."""

    __slots__ = ()


def esc(value: Any) -> Markup:
    """Escape any value for HTML text or a quoted attribute (``None`` becomes ``-``)."""
    return value if isinstance(value, Markup) else Markup(escape("-" if value is None
                                                                  else str(value)))


def number(value: Any, digits: int = 2) -> Markup:
    """Format a number compactly (``2.4e-07``, ``0.53``); ``-`` when missing."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return esc(value)
    if isinstance(value, int):
        return esc(value)
    if value != value or value in (float("inf"), float("-inf")):
        return esc(value)
    return esc(f"{value:.{digits}g}" if 1e-3 <= abs(value) < 1e4 or value == 0
               else f"{value:.{digits - 1}e}")


def tag(name: str, content: Any = "", cls: str = "", title: str | None = None) -> Markup:
    """``<name class=cls title=title>content</name>``; ``content`` is escaped unless Markup."""
    attrs = f' class="{esc(cls)}"' if cls else ""
    if title:
        attrs += f' title="{esc(title)}"'
    return Markup(f"<{name}{attrs}>{esc(content)}</{name}>")


def badge(text: str, kind: str) -> Markup:
    """Return a coloured label; ``kind`` is ``pass``, ``fail``, ``warn`` or ``muted``."""
    return tag("span", text, cls=f"badge {kind}")


def verdict_badge(passed: bool | None, detail: str = "", label: str = "") -> Markup:
    """Return a PASS / FAIL / - badge; ``label`` replaces the word, ``detail`` is the tooltip."""
    if passed is None:
        return badge("-", "muted")
    return tag("span", label or ("PASS" if passed else "FAIL"),
               cls=f"badge {'pass' if passed else 'fail'}", title=detail or None)


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], cls: str = "") -> Markup:
    """Return a table; header and body cells are escaped unless they are Markup."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    attrs = f' class="{esc(cls)}"' if cls else ""
    return Markup(f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def key_values(pairs: Iterable[tuple[str, Any]]) -> Markup:
    """Return a definition list of (label, value) pairs."""
    items = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in pairs)
    return Markup(f'<dl class="kv">{items}</dl>')


def mapping_text(values: Mapping[str, Any]) -> Markup:
    """``key = value`` lines for settings-like mappings (each value escaped)."""
    if not values:
        return esc("-")
    return Markup("<br>".join(f"<code>{esc(k)}</code> = {esc(v)}" for k, v in values.items()))


def figure(png: bytes, alt: str, caption: str) -> Markup:
    """Embed a PNG (base64 data URI) with its caption."""
    data = base64.b64encode(png).decode("ascii")
    return Markup(f'<figure><img src="data:image/png;base64,{data}" alt="{esc(alt)}">'
                  f"<figcaption>{esc(caption)}</figcaption></figure>")


def note(text: Any, kind: str = "") -> Markup:
    """Return a paragraph styled as a note (``kind``: ``warn``, ``fail``, ``muted`` or plain)."""
    return tag("p", text, cls=f"note {kind}".strip())


def details(summary: str, content: Any) -> Markup:
    """Return a collapsed ``<details>`` block."""
    return Markup(f"<details><summary>{esc(summary)}</summary>{esc(content)}</details>")


def join(parts: Iterable[Any], sep: str = "") -> Markup:
    """Concatenate parts, escaping the ones that are not Markup."""
    return Markup(esc(sep).join(esc(p) for p in parts))
