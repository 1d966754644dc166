"""Formatted text translated sentence by sentence, its formatting carried onto the translation.

A block is a run of text with formatting: an HTML paragraph with its inline elements (<b>, <a
href>, <code>), a Word paragraph with its runs. Its plain text is cut into sentences (the same
`segment.split` as any text), the sentences are translated as plain text (so a block translates
to exactly what its text alone translates to), and each span of formatting is carried over:

- a span that covers whole sentences, or sits between them, covers the same translations;
- a span inside a sentence covers the words of the translation aligned with its words
  (`aligned`: each target token's most attended source token, from the model's cross-attention),
  or, where no alignment is at hand, the same fraction of the sentence (`proportional`); a span
  never splits a word;
- spans stay nested as they were: a child inside its parent, siblings one after another.

A span with `keep` (HTML <code>, translate="no") is written as it was: its translated words are
replaced by its original content, but never words a glossary put there (`Guarded`): a kept span that
lands on them gives up that part, or becomes a point after them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from aiayn.text import segment

# A span of a source sentence's characters [a, b) -> the span of its translation's characters.
Projector = Callable[[int, int], tuple[int, int]]


@dataclass(frozen=True)
class Guarded:
    """A projector, and the characters of the translation that a kept span must not replace: the
    target terms a constrained search put there (a glossary's), as [start, end) ranges."""

    project: Projector
    protected: tuple[tuple[int, int], ...] = ()

    def __call__(self, a: int, b: int) -> tuple[int, int]:
        return self.project(a, b)

    def kept(self, a: int, b: int) -> tuple[int, int]:
        """Where a kept span goes: the projected [a, b) less the protected ranges it overlaps; a point
        after a protected range that holds all of it."""
        for p0, p1 in sorted(self.protected):
            if a >= b or p1 <= a or p0 >= b:
                continue
            if a < p0:  # it begins before the term: it keeps that part
                b = p0
            elif b > p1:  # it ends after the term: it keeps that part
                a = p1
            else:  # within the term: after it
                a = b = p1
        return a, b


@dataclass
class Span:
    """Formatting over the characters [start, end) of a block's text (start == end: at a point,
    such as an image or a comment)."""

    start: int
    end: int
    open: str = ""  # written before the span (an HTML start tag)
    close: str = ""  # written after it (the end tag)
    keep: str | None = None  # written instead of its text, untranslated (HTML: its raw content)
    data: Any = None  # the format's own object (a Word run)
    spaced: bool = False  # a kept span moved off a glossary's term to a point: written as a word
    children: list[Span] = field(default_factory=list)


@dataclass
class Block:
    """A block's plain text and its spans (the root covers the whole text), cut into sentences."""

    text: str
    root: Span
    parts: segment.Parts  # the text's sentences: whitespace (and line breaks) between them is kept

    @classmethod
    def cut(cls, text: str, root: Span, lang: str, sentences: bool = True) -> Block:
        """A block of `text`, its sentences found as in running text: line breaks inside a block
        are spaces (an HTML source's wrapped lines), not ends of paragraphs. `sentences` False:
        the block is one sentence."""
        flat = re.sub(r"[\r\n\t\f\v]", " ", text)  # as many characters: offsets are the same
        return cls(text, root, _with_spaces_of(segment.split(flat, lang, sentences), text))

    def fit(self, fits: Callable[[str], bool]) -> Block:
        return replace(self, parts=segment.fit(self.parts, fits))

    def translated(self, translations: Sequence[str], target_lang: str,
                   project: Callable[[int], Projector]) -> tuple[str, Span]:
        """The block's translation and its spans over it. `project(i)`: how to carry a span of the
        i-th sentence over (asked for only when a span starts or ends inside that sentence)."""
        pieces = segment.layout(self.parts, list(translations), target_lang)
        text = "".join(pieces)
        sources = _offsets([len(p) for p in segment.layout(self.parts, self.parts.sentences)])
        targets = _offsets([len(p) for p in pieces])
        projectors: dict[int, Projector] = {}

        def projector(i: int) -> Projector:
            if i not in projectors:
                projectors[i] = project(i)
            return projectors[i]

        def place(span: Span) -> tuple[int, int, bool]:
            return _place(span, (self.text, sources), (text, targets), projector)

        return text, _nested(self.root, (0, len(text)), place)


def _with_spaces_of(parts: segment.Parts, text: str) -> segment.Parts:
    """`parts` (of a copy of `text` with other spaces) with `text`'s own characters between
    the sentences."""
    spaces, at = [], 0
    for sentence, space in zip(parts.sentences, parts.spaces, strict=False):
        spaces.append(text[at:at + len(space)])
        at += len(space) + len(sentence)
    spaces.append(text[at:])
    return segment.Parts(parts.sentences, spaces)


def _offsets(lengths: list[int]) -> list[tuple[int, int]]:
    """Where each sentence lies, from the lengths of space, sentence, space, ..., space."""
    spans, at = [], 0
    for i, n in enumerate(lengths):
        if i % 2:
            spans.append((at, at + n))
        at += n
    return spans


def _place(span: Span, source: tuple[str, list[tuple[int, int]]], target: tuple[str, list[tuple[int, int]]],
           projector: Callable[[int], Projector]) -> tuple[int, int, bool]:
    """Where `span` goes in the translation (source and target: the text and where its sentences
    lie): the union of its parts in each sentence it touches. Words that the translation has once,
    as they were (a name, a number, code), are found where they are. -> start, end, and whether a
    kept span moved off a term to a point (`Span.spaced`)."""
    (source_text, sources), (target_text, targets) = source, target
    placed, moved = [], False
    for i, ((s0, s1), (t0, t1)) in enumerate(zip(sources, targets, strict=True)):
        a, b = max(span.start, s0), min(span.end, s1)
        if a >= b and not (span.start == span.end and s0 < span.start < s1):
            continue
        if a == s0 and b == s1:
            placed.append((t0, t1))
            continue
        found = _once(source_text[a:b], target_text[t0:t1])
        ta, tb = found if found is not None else projector(i)(a - s0, b - s0)
        ta, tb = 0 if a == s0 else ta, t1 - t0 if b == s1 else tb  # a sentence's end stays its end
        project = projector(i) if span.keep is not None else None
        if isinstance(project, Guarded):
            before = (ta, tb)
            ta, tb = project.kept(ta, tb)
            while ta < tb and target_text[t0 + ta].isspace():  # the space left beside a term stays
                ta += 1
            while tb > ta and target_text[t0 + tb - 1].isspace():
                tb -= 1
            moved = moved or ((ta, tb) != before and ta == tb)
        placed.append((t0 + ta, t0 + tb))
    if placed:
        return min(p[0] for p in placed), max(p[1] for p in placed), moved
    # Between sentences (or over whitespace alone): as far into the whitespace there as it was.
    before_s, before_t = (0, 0), (0, 0)
    for (s0, s1), (t0, t1) in zip([*sources, (10**9, 10**9)], [*targets, (10**9, 10**9)], strict=True):
        if span.start <= s0:
            at = min(before_t[1] + span.start - before_s[1], t0)
            return at, at, False
        before_s, before_t = (s0, s1), (t0, t1)
    return before_t[1], before_t[1], False


def _nested(span: Span, bounds: tuple[int, int], place: Callable[[Span], tuple[int, int, bool]],
            is_root: bool = True) -> Span:
    """`span` placed in the translation within `bounds`, its children within it, one after another
    in the order they land (a child that lands inside an earlier sibling starts where it ends)."""
    lo, hi = bounds
    start, end, spaced = (lo, hi, False) if is_root else place(span)
    start = min(max(start, lo), hi)
    end = min(max(end, start), hi)
    children, cursor = [], start
    for child in sorted(span.children, key=lambda c: place(c)[0]):  # stable: ties keep their order
        placed = _nested(child, (cursor, end), place, is_root=False)
        children.append(placed)
        cursor = placed.end
    return replace(span, start=start, end=end, children=children, spaced=spaced)


def aligned(source_spans: list[tuple[int, int]], target_spans: list[tuple[int, int]], links: list[int],
            target: str) -> Projector:
    """A projector from a word alignment: `links[j]` is the source token that target token j is
    aligned with; `*_spans` are the tokens' characters in the sentence and in its translation."""

    def project(a: int, b: int) -> tuple[int, int]:
        if a == b:  # a point: after the target words of the source token before it
            inside = {k for k, (s, e) in enumerate(source_spans) if s < a <= e}
        else:
            inside = {k for k, (s, e) in enumerate(source_spans) if s < b and e > a}
        hits = [target_spans[j] for j, k in enumerate(links) if k in inside and j < len(target_spans)]
        if not hits:
            return proportional(max(s[1] for s in source_spans) if source_spans else 1, target)(a, b)
        if a == b:
            end = max(h[1] for h in hits)
            return _whole_words(target, end, end)
        return _whole_words(target, min(h[0] for h in hits), max(h[1] for h in hits))

    return project


def proportional(source_len: int, target: str) -> Projector:
    """A projector that keeps a span's place as a fraction of the sentence's length."""

    def project(a: int, b: int) -> tuple[int, int]:
        scale = len(target) / max(source_len, 1)
        return _whole_words(target, round(a * scale), round(b * scale))

    return project


def token_spans(pieces: Sequence[str], text: str) -> list[tuple[int, int]] | None:
    """Where each SentencePiece piece ("▁word", "ing") lies in `text`, or None if they do not
    spell it out (a normalised character)."""
    spans, at = [], 0
    for piece in pieces:
        body = piece.replace("\u2581", "")
        if piece.startswith("\u2581") or not body:
            while at < len(text) and text[at].isspace():
                at += 1
        if not text.startswith(body, at):
            return None
        spans.append((at, at + len(body)))
        at += len(body)
    return spans


def occurrences(terms: Sequence[str], text: str) -> tuple[tuple[int, int], ...]:
    """Where each of `terms` stands in `text` as whole words, every time."""
    return tuple(m.span() for term in terms if term.strip()
                 for m in re.finditer(rf"(?<!\w){re.escape(term.strip())}(?!\w)", text))


def _once(words: str, text: str) -> tuple[int, int] | None:
    """Where `words` stand in `text` as whole words, if they do exactly once."""
    words = words.strip()
    if not words:
        return None
    found = [m.span() for m in re.finditer(rf"(?<!\w){re.escape(words)}(?!\w)", text)]
    return found[0] if len(found) == 1 else None


def _whole_words(text: str, a: int, b: int) -> tuple[int, int]:
    """[a, b) widened so that it cuts no word, and narrowed to no space at either end."""
    a, b = min(max(a, 0), len(text)), min(max(b, 0), len(text))
    while 0 < a < len(text) and text[a - 1].isalnum() and text[a].isalnum():
        a -= 1
    while 0 < b < len(text) and text[b - 1].isalnum() and text[b].isalnum():
        b += 1
    if b > a:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
    return a, max(a, b)
