"""Spans of plain text kept as they are: placeholders ("{name}", "%s"), code, names a user marks.

A text whose spans match the user's pattern is translated as HTML in which each span is an inline
element with translate="no" (markup.py): the model reads the span with its sentence, and the span
is written back unchanged where its words land. Line breaks become <br> (a block's end, as a
line is in plain text), and the translation comes back as plain text.

    html = to_html("Hello {name}, you have {n} messages.", re.compile(r"\\{[^}]*\\}"))
    text = from_html(translated_html)
"""

from __future__ import annotations

import html
import re

OPEN, CLOSE = '<span translate="no">', "</span>"
_BREAK = "<br>"


def marks(text: str, pattern: re.Pattern) -> bool:
    """Whether `pattern` finds a span to keep in `text`."""
    return any(m.group(0) for m in pattern.finditer(text))


def to_html(text: str, pattern: re.Pattern) -> str:
    """`text` as HTML with every non-empty match of `pattern` kept (see the module)."""
    out, at = [], 0
    for m in pattern.finditer(text):
        if not m.group(0):
            continue
        out += [_escaped(text[at:m.start()]), OPEN, _escaped(m.group(0)), CLOSE]
        at = m.end()
    out.append(_escaped(text[at:]))
    return "".join(out)


def from_html(translated: str) -> str:
    """A translation of `to_html`'s HTML back as plain text."""
    text = translated.replace(OPEN, "").replace(CLOSE, "").replace(_BREAK, "\n")
    return html.unescape(text)


def _escaped(text: str) -> str:
    return html.escape(text, quote=False).replace("\n", _BREAK)
