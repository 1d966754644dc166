"""HTML translated: its text, and nothing else, changes.

    doc = Document.parse('<p>A <b>dog</b> runs. <code>ls -l</code></p>', "en")
    doc.sentences  # ["A dog runs.", "ls -l"]
    doc.join(["Ein Hund rennt.", "ls -l"], "de", project)

The HTML is read by the standard library's tolerant parser (html.parser) as a stream of tags,
text, entities and comments, each kept as the characters it was written with. Block elements
(<p>, <li>, <td>, <br>, any tag not listed as inline here) end a block; the text between them,
with its inline elements (<b>, <a href>, <span>, ...) as spans, is a `blocks.Block`: cut into
sentences, translated, and its spans carried onto the translation (see blocks.py). Everything
else is written back as it was: tags with their attributes, comments, the doctype, whitespace
between blocks, and the content of <script>, <style>, <code>, <pre>, <textarea> and of any
element with translate="no" (or class "notranslate"). An inline element kept this way inside a
sentence (<code>ls</code>) is read with the sentence and written back unchanged where its words
land. The translations are written with &, < and > escaped, so the output is HTML whatever the
model writes; a word of the source that the translation copies (a name, "5&nbsp;km") is written as
the source spelled it, entities included, and no other character is written as an entity.
"""

from __future__ import annotations

import bisect
import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from html.parser import HTMLParser

from aiayn.text.blocks import Block, Projector, Span

INLINE = frozenset({"a", "abbr", "acronym", "b", "bdi", "bdo", "big", "cite", "code", "data", "del",
                    "dfn", "em", "font", "i", "img", "ins", "kbd", "label", "mark", "q", "s", "samp",
                    "small", "span", "strike", "strong", "sub", "sup", "time", "tt", "u", "var", "wbr"})
VOID = frozenset({"img", "wbr", "br", "hr", "input", "meta", "link", "area", "base", "col", "embed",
                  "param", "source", "track"})
KEPT = frozenset({"script", "style", "code", "pre", "textarea", "kbd", "samp", "var", "math", "svg"})


@dataclass(frozen=True)
class Document:
    """An HTML text as written: the characters between its blocks, and its blocks."""

    items: list[str | Block]
    entity_words: list[EntityWords]  # each Block's words written with entities, in the order of the Blocks

    @classmethod
    def parse(cls, text: str, lang: str, sentences: bool = True) -> Document:
        """`text` read as HTML; with `sentences` False, each block is one sentence."""
        reader = _Reader(text, lang, sentences)
        reader.feed(text)
        reader.close()
        return cls(reader.finish(), reader.entity_words)

    @property
    def sentences(self) -> list[str]:
        return [s for item in self.items if isinstance(item, Block) for s in item.parts.sentences]

    def fit(self, fits: Callable[[str], bool]) -> Document:
        return replace(self, items=[i.fit(fits) if isinstance(i, Block) else i for i in self.items])

    def join(self, translations: Sequence[str], target_lang: str,
             project: Callable[[int], Projector]) -> str:
        """The HTML with each sentence's translation in its place (`project(i)`: blocks.Block)."""
        out, done = [], 0
        entity_words = iter(self.entity_words)
        for item in self.items:
            if isinstance(item, str):
                out.append(item)
                continue
            n, first = len(item.parts.sentences), done
            text, root = item.translated(translations[done:done + n], target_lang,
                                         lambda i, first=first: project(first + i))
            out.append(_written(text, root, _Escaper(text, next(entity_words))))
            done += n
        return "".join(out)


# A word of a block's text (a run of characters between ASCII whitespace) that the source wrote with
# entities -> where they are in it: (offset, characters, the entity as written).
EntityWords = dict[str, tuple[tuple[int, int, str], ...]]
_WORD = re.compile(r"[^ \t\n\r\f]+")


def _entity_words(text: str, entities: dict[int, tuple[int, str]]) -> EntityWords:
    """The words of `text` that hold an entity (`entities`: at a position of `text`, the characters it
    stands for and the entity as written)."""
    found: EntityWords = {}
    if not entities:
        return found
    at = sorted(entities)
    for m in _WORD.finditer(text):
        inside = at[bisect.bisect_left(at, m.start()):bisect.bisect_left(at, m.end())]
        if inside:
            found.setdefault(m.group(), tuple((i - m.start(), *entities[i]) for i in inside))
    return found


class _Escaper:
    """A block's translation written as HTML: `&`, `<` and `>` escaped, and each word that is a word of
    the source written with an entity (`EntityWords`) spelled as the source spelled it."""

    def __init__(self, text: str, words: EntityWords) -> None:
        self.entities: dict[int, tuple[int, str]] = {}
        for m in _WORD.finditer(text) if words else ():
            for offset, length, raw in words.get(m.group(), ()):
                self.entities[m.start() + offset] = (length, raw)
        self.at = sorted(self.entities)
        self.text = text

    def __call__(self, start: int, end: int) -> str:
        """The characters [start, end) of the translation, as HTML."""
        out = []
        for i in self.at[bisect.bisect_left(self.at, start):bisect.bisect_left(self.at, end)]:
            length, raw = self.entities[i]
            if i < start or i + length > end:  # cut by a tag: written plainly
                continue
            out += [html.escape(self.text[start:i], quote=False), raw]
            start = i + length
        out.append(html.escape(self.text[start:end], quote=False))
        return "".join(out)


def _written(text: str, span: Span, escaped: _Escaper) -> str:
    """`text` with `span` and its children around their characters. A kept span moved off a glossary's
    term (`Span.spaced`) between two words of a script written with spaces gets a space on the side
    that has none."""
    if span.keep is not None:
        kept = span.open + span.keep + span.close
        if span.spaced:
            before = 0 < span.start and _spaced(text[span.start - 1])
            after = span.start < len(text) and _spaced(text[span.start])
            kept = (" " if before else "") + kept + (" " if after and not before else "")
        return kept
    out, at = [span.open], span.start
    for child in span.children:
        out += [escaped(at, child.start), _written(text, child, escaped)]
        at = child.end
    out += [escaped(at, span.end), span.close]
    return "".join(out)


class _Reader(HTMLParser):
    """Reads HTML into `Document.items`, keeping every character of it."""

    def __init__(self, source: str, lang: str, sentences: bool) -> None:
        super().__init__(convert_charrefs=False)
        self.source, self.lang, self.sentences = source, lang, sentences
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", source)]
        self.items: list[str | Block] = []
        self._new_block()
        self.kept: tuple[str, int, Span | None] | None = None  # tag, depth, inline span
        self.kept_raw: list[str] = []
        self.kept_text: list[str] = []
        self.entity_words: list[EntityWords] = []  # of each Block so far

    def finish(self) -> list[str | Block]:
        if self.kept is not None:  # a kept element never closed: kept to the end
            self._end_kept("")
        self._end_block()
        return [item for item in self.items if item != ""]

    # --- the parser's events, each with its raw characters -------------------------------
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raw = self.get_starttag_text() or ""
        if self.kept is not None:
            name, depth, span = self.kept
            self.kept = (name, depth + (tag == name), span)
            self.kept_raw.append(raw)
        elif tag in VOID:
            self._point(raw) if tag in INLINE else self._boundary(raw)
        elif tag in KEPT or _says_no(attrs):
            self._start_kept(tag, raw)
        elif tag in INLINE:
            span = Span(len(self.text), len(self.text), open=raw)
            self.stack[-1].children.append(span)
            self.stack.append(span)
            self.raws.append(raw)
        else:
            self._boundary(raw)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raw = self.get_starttag_text() or ""
        if self.kept is not None:
            self.kept_raw.append(raw)
        elif tag in INLINE:
            self._point(raw)
        else:
            self._boundary(raw)

    def handle_endtag(self, tag: str) -> None:
        raw = self._end_tag_text(tag)
        if self.kept is not None:
            name, depth, span = self.kept
            if tag == name and depth == 1:
                self._end_kept(raw)
            else:
                self.kept = (name, depth - (tag == name), span)
                self.kept_raw.append(raw)
        elif tag in INLINE and tag in [_name(s.open) for s in self.stack[1:]]:
            while self.stack[-1] is not self.stack[0]:
                span = self.stack.pop()
                span.end = len(self.text)
                if _name(span.open) == tag:
                    span.close = raw
                    break
            self.raws.append(raw)
        elif tag in INLINE:
            self._point(raw)
        else:
            self._boundary(raw)

    def handle_data(self, data: str) -> None:
        self._text(data, data)

    def handle_entityref(self, name: str) -> None:
        self._entity("&" + name + (";" if self.source.startswith(f"&{name};", self._at()) else ""))

    def handle_charref(self, name: str) -> None:
        self._entity("&#" + name + (";" if self.source.startswith(f"&#{name};", self._at()) else ""))

    def _entity(self, raw: str) -> None:
        chars = html.unescape(raw)
        # Not one without its ";" ("&#8364<b>"): written before other characters, it would read as another
        if self.kept is None and raw.endswith(";") and raw != html.escape(chars, quote=False):
            self.entities[len(self.text)] = (len(chars), raw)
        self._text(chars, raw)

    def handle_comment(self, data: str) -> None:
        self._other(f"<!--{data}-->")

    def handle_decl(self, decl: str) -> None:
        self._other(f"<!{decl}>")

    def handle_pi(self, data: str) -> None:
        self._other(f"<?{data}>")

    def unknown_decl(self, data: str) -> None:
        self._other(f"<![{data}]>")

    # --- blocks and spans ---------------------------------------------------------------------
    def _new_block(self) -> None:
        self.text = ""
        self.root = Span(0, 0)
        self.stack = [self.root]
        self.raws: list[str] = []
        self.entities: dict[int, tuple[int, str]] = {}  # in `text`: the characters and the entity written

    def _end_block(self) -> None:
        """The block so far as a Block, or as its own characters if it has no sentence."""
        for span in self.stack[1:]:  # inline elements still open: their end tags come later
            span.end = len(self.text)
        self.root.end = len(self.text)
        block = Block.cut(self.text, self.root, self.lang, self.sentences) if self.text.strip() else None
        if block is not None and block.parts.sentences:
            self.items.append(block)
            self.entity_words.append(_entity_words(self.text, self.entities))
        else:
            self.items.append("".join(self.raws))
        self._new_block()

    def _boundary(self, raw: str) -> None:
        self._end_block()
        self.items.append(raw)

    def _text(self, text: str, raw: str) -> None:
        if self.kept is not None:
            self.kept_raw.append(raw)
            self.kept_text.append(text)
        else:
            self.text += text
            self.raws.append(raw)

    def _point(self, raw: str) -> None:
        """Something that stays where it is in the text: an image, a comment, a stray end tag."""
        self.stack[-1].children.append(Span(len(self.text), len(self.text), open=raw))
        self.raws.append(raw)

    def _other(self, raw: str) -> None:
        if self.kept is not None:
            self.kept_raw.append(raw)
        elif self.text.strip():
            self._point(raw)
        else:
            self.raws.append(raw)

    def _start_kept(self, tag: str, raw: str) -> None:
        """An element kept as it is: inline inside text (<code> in a sentence), a block otherwise."""
        span = Span(len(self.text), len(self.text), open=raw) if tag in INLINE else None
        if span is None:
            self._end_block()
            self.items.append(raw)
        self.kept, self.kept_raw, self.kept_text = (tag, 1, span), [], []

    def _end_kept(self, raw: str) -> None:
        _, _, span = self.kept  # type: ignore[misc]
        inner = "".join(self.kept_raw)
        self.kept = None
        if span is None:
            self.items.append(inner + raw)
            return
        span.keep, span.close = inner, raw
        self.text += "".join(self.kept_text)
        span.end = len(self.text)
        self.stack[-1].children.append(span)
        self.raws.append(span.open + inner + raw)

    def _at(self) -> int:
        line, column = self.getpos()
        return self.line_starts[line - 1] + column

    def _end_tag_text(self, tag: str) -> str:
        """The end tag as written ("</B >")."""
        m = re.compile(r"</[^>]*>").match(self.source, self._at())
        return m.group(0) if m else f"</{tag}>"


def _name(start_tag: str) -> str:
    m = re.match(r"<\s*([^\s/>]+)", start_tag)
    return m.group(1).lower() if m else ""


def _says_no(attrs: list[tuple[str, str | None]]) -> bool:
    """translate="no", or the class "notranslate" (Google's and LibreTranslate's convention)."""
    for name, value in attrs:
        if name == "translate" and (value or "").lower() == "no":
            return True
        if name == "class" and "notranslate" in (value or "").split():
            return True
    return False


def _spaced(char: str) -> bool:
    """Whether `char` is a letter or digit of a script written with spaces between words (not CJK)."""
    return char.isalnum() and ord(char) < 0x2E80
