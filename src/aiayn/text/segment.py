"""Text into sentences and back. The models are trained on single sentences, so a paragraph is cut
into its sentences before the search and put back together after it, with its own whitespace.

    parts = split("A dog runs.  A cat sleeps.\\n\\nThe end.", "en")
    parts.sentences  # ["A dog runs.", "A cat sleeps.", "The end."]
    parts.spaces     # ["", "  ", "\\n\\n", ""]: before, between and after the sentences
    join(parts, ["Ein Hund rennt.", "Eine Katze schläft.", "Ende."], "de")
    # "Ein Hund rennt.  Eine Katze schläft.\\n\\nEnde."

Lines are kept exactly: each line is cut on its own. Within a line, sentencex (Wikimedia's
segmenter: about 300 languages, its own abbreviation lists, every character of the text kept)
finds the sentences (in Chinese and Japanese, one also ends after ； and …), and four corrections
of ours mend what it gets wrong on the hard cases of tests/text/test_segment.py: an initial or
one-letter abbreviation ("M. Dupont", "J. K. Rowling"), or one that is no word ("approx. Paris",
`NEVER_END`), never ends a sentence; in languages that write ordinals with a full stop ("am 19.
Mai") a number of up to three digits and its stop do not either; "?!" ends one before a capital
letter; and so does a lower-case word with a full stop ("a work of art. Busy ..."), where nouns are not
capitalised. The choice, measured: docs/text.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import sentencex

# Languages written without spaces between words (or sentences).
NO_SPACES = frozenset({"zh", "ja", "th", "lo", "km", "my", "bo"})
# Languages whose ordinal numbers end with a full stop ("am 3. Mai", "3. května").
DOT_ORDINALS = frozenset({"de", "da", "nb", "nn", "no", "fi", "cs", "sk", "pl", "hu", "is", "et", "lv",
                          "lt", "sl", "hr", "sr", "bs", "tr"})

_INITIAL = re.compile(r"(?:^|[\s(\[«„“\"'])[^\W\d_]\.\s*$")  # "M. ", "(J. "
_ORDINAL = re.compile(r"(?:^|\s)\d{1,3}\.\s*$")  # "am 19. "
# Abbreviations that are no word of any language served here, so a sentence never ends at them ("approx.
# Paris", "incl. VAT", "bzw. Berlin"); "etc." and "usw." often end one, and are not among them.
NEVER_END = frozenset({"approx", "incl", "excl", "esp", "resp", "viz", "vs", "cf", "ca", "cca", "dept",
                       "govt", "inkl", "exkl", "zzgl", "bzw", "vgl", "ggf", "evtl", "tzv", "např", "popř",
                       "env"})
_NEVER_END = re.compile(r"(?:^|[\s(\[«„“\"'])(\w+)\.\s*$")
_AFTER_INTERROBANG = re.compile(r"(?:\?!|!\?)[\"'”“»)\]]*\s+(?=[\"'“„«(\[]?[^\W\d_])")
# A lower-case word and a full stop: sentencex takes some for abbreviations ("art. Busy" was kept
# whole); before a capital, in a language that does not capitalise its nouns, it ends a sentence.
_AFTER_WORD_STOP = re.compile(r"(?<![\w.'’-])([^\W\d_]{3,})\.[\"'”“»)\]]*\s+(?=[\"'“„«(\[]?[^\W\d_])")
CAPITALISED_NOUNS = frozenset({"de", "lb", "gsw", "bar"})
# Chinese and Japanese: a sentence ends after 。！？；… (full or half width) and the closing quotes and
# brackets after them, wherever more text follows; no space need come between two sentences.
_CJK_END = re.compile(r"[。！？；!?;…]++[”’」』）】〕〉》\"')\]]*+(?=\S)")
CJK_STOPS = frozenset({"zh", "ja"})


@dataclass(frozen=True)
class Parts:
    """A text cut into sentences: spaces[0] + sentences[0] + spaces[1] + ... + sentences[-1] +
    spaces[-1] is the text, character for character."""

    sentences: list[str]
    spaces: list[str]  # one more than the sentences: the text before, between and after them

    @property
    def text(self) -> str:
        return join(self, self.sentences)

    def fit(self, fits: Callable[[str], bool]) -> Parts:
        return fit(self, fits)

    def join(self, translations: list[str], target_lang: str = "", project: object = None) -> str:
        """`join` (as markup.Document.join, which needs `project` to carry its tags over); a text
        without words translates to ""."""
        return join(self, translations, target_lang) if self.sentences else ""


def split(text: str, lang: str, sentences: bool = True) -> Parts:
    """`text` cut into lines and each line into its sentences; with `sentences` False, the text is
    one sentence. Whitespace stays out of the sentences; a text of whitespace alone has none."""
    if not sentences:
        body = text.strip()
        start = text.index(body) if body else len(text)
        return Parts([body], [text[:start], text[start + len(body):]]) if body else Parts([], [text])
    found, spaces = [], [""]
    for line in re.split(r"(\r?\n)", text):
        pieces = _sentences(line, lang) if line.strip() else [line]
        for piece in pieces:
            stripped = piece.strip()
            if not stripped:
                spaces[-1] += piece
                continue
            start = piece.index(stripped)
            spaces[-1] += piece[:start]
            found.append(stripped)
            spaces.append(piece[start + len(stripped):])
    return Parts(found, spaces)


def join(parts: Parts, translations: list[str], target_lang: str = "") -> str:
    """The translations in place of the sentences, with the text's own whitespace; between two
    sentences on one line, a space where the target language has them and the source had none
    (Chinese into English), and none where it has none (English into Chinese)."""
    return "".join(layout(parts, translations, target_lang))


def layout(parts: Parts, translations: list[str], target_lang: str = "") -> list[str]:
    """What `join` joins: the whitespace before the first translation, the translation, the
    whitespace after it, and so on."""
    if len(translations) != len(parts.sentences):
        raise ValueError(f"{len(translations)} translations for {len(parts.sentences)} sentences")
    out = [parts.spaces[0]]
    for i, translation in enumerate(translations):
        out.append(translation)
        space = parts.spaces[i + 1]
        if 0 < i + 1 < len(translations) and "\n" not in space and target_lang:
            space = "" if target_lang in NO_SPACES else (space or " ")
        out.append(space)
    return out


def fit(parts: Parts, fits: Callable[[str], bool]) -> Parts:
    """`parts` with each sentence that does not fit the model (`fits(sentence)` is False) cut into
    pieces that do, at the best boundaries: nothing is dropped or truncated."""
    sentences, spaces = [], [parts.spaces[0]]
    for sentence, after in zip(parts.sentences, parts.spaces[1:], strict=True):
        for j, piece in enumerate(_cut(sentence, fits)):  # the pieces join to the sentence
            body = piece.lstrip()
            if j:  # the whitespace at a cut goes between the pieces
                spaces[-1] += piece[: len(piece) - len(body)]
            sentences.append(body.rstrip())
            spaces.append(body[len(body.rstrip()):])
        spaces[-1] += after
    return Parts(sentences, spaces)


def _sentences(line: str, lang: str) -> list[str]:
    """The sentences of one line, with the whitespace around them (they join to the line)."""
    pieces = [part for p in sentencex.segment(lang or "en", line) if p for part in _split_missed(p, lang)]
    merged: list[str] = []
    for piece in pieces:  # joined again where sentencex, or `_split_missed`, cut after an abbreviation
        if merged and (_INITIAL.search(merged[-1]) or (lang in DOT_ORDINALS and _ORDINAL.search(merged[-1]))
                       or _abbreviated(merged[-1])):
            merged[-1] += piece
        else:
            merged.append(piece)
    return merged


def _abbreviated(piece: str) -> bool:
    """`piece` ends with one of the abbreviations that never end a sentence (NEVER_END)."""
    m = _NEVER_END.search(piece)
    return m is not None and m.group(1).lower() in NEVER_END


def _split_missed(piece: str, lang: str) -> list[str]:
    """`piece` cut where a capital letter follows "?!" or "!?", or (see _AFTER_WORD_STOP) a
    lower-case word and a full stop; in Chinese and Japanese, after each sentence's end (_CJK_END)."""
    if lang in CJK_STOPS:
        cuts = [0] + [m.end() for m in _CJK_END.finditer(piece)] + [len(piece)]
        return [piece[a:b] for a, b in zip(cuts, cuts[1:], strict=False) if b > a]
    ends = [m for m in _AFTER_INTERROBANG.finditer(piece)]
    if lang not in CAPITALISED_NOUNS:
        ends += [m for m in _AFTER_WORD_STOP.finditer(piece) if m.group(1).islower()]
    parts, start = [], 0
    for m in sorted(ends, key=lambda m: m.end()):
        if m.end() > start and (piece[m.end()].isupper() or piece[m.end() + 1:m.end() + 2].isupper()):
            parts.append(piece[start:m.end()])
            start = m.end()
    return parts + [piece[start:]]


# Where a sentence too long for the model is best cut, strongest first: after ; or : or a dash,
# after a comma or a closing bracket, at any space; in text without spaces, after its commas.
_BOUNDARIES = [re.compile(r"(?<=[;:–—])\s+"), re.compile(r"(?<=[,)\]])\s+"), re.compile(r"\s+"),
               re.compile(r"(?<=[，、；：])")]


def _cut(sentence: str, fits: Callable[[str], bool]) -> list[str]:
    """`sentence` as pieces that each fit and join to it (the whitespace at a cut starts a piece)."""
    if len(sentence.strip()) <= 1 or fits(sentence.strip()):
        return [sentence]
    at = _best_cut(sentence)
    return _cut(sentence[:at], fits) + _cut(sentence[at:], fits)


def _best_cut(sentence: str) -> int:
    """Where to cut: the strongest boundary in the middle half of the sentence, else the boundary
    nearest the middle, else the middle character."""
    lead = len(sentence) - len(sentence.lstrip())
    end = len(sentence.rstrip())
    middle = (lead + end) / 2
    everywhere = []
    for boundary in _BOUNDARIES:
        cuts = [m.start() for m in boundary.finditer(sentence, lead, end) if lead < m.start() < end]
        everywhere += cuts
        central = [c for c in cuts if abs(c - middle) <= (end - lead) / 4]
        if central:
            return min(central, key=lambda c: abs(c - middle))
    if everywhere:
        return min(everywhere, key=lambda c: abs(c - middle))
    return int(middle)
