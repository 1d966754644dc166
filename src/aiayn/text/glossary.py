"""Glossaries: how terms must be translated. A file has one entry per line, source term TAB target
term (blank lines and lines starting with # are skipped). Every entry whose source term occurs in a
sentence, as whole words and with the case the file gives, makes its target term a constraint of
that sentence's translation (decoding/constrained.py). Where entries overlap ("New York", "York"),
the longest match wins; a target term is asked for once per sentence.

A TBX file (ISO 30042 termbase: TBX-Basic's termEntry/langSet/tig, or TBX v3's
conceptEntry/langSec/termSec) is read as a `Termbase`: each concept's terms by language. The
direction a model translates picks its glossary: every source-language term of a concept (its
synonyms, deprecated ones too) -> the concept's first target-language term that may be written (not
deprecated, superseded, obsolete or not recommended).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from aiayn.errors import AiaynError


class GlossaryError(AiaynError, ValueError):
    """A glossary that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class Glossary:
    entries: tuple[tuple[str, str], ...]  # (source term, target term)
    _pattern: re.Pattern | None = field(default=None, compare=False, repr=False)
    _target: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for source, target in self.entries:
            if not source.strip() or not target.strip():
                raise GlossaryError(f"glossary entry {source!r} -> {target!r}: both terms must have text")
        terms = sorted({s.strip() for s, _ in self.entries}, key=len, reverse=True)  # longest first
        pattern = "|".join(rf"(?<!\w){re.escape(t)}(?!\w)" for t in terms)
        object.__setattr__(self, "_pattern", re.compile(pattern) if terms else None)
        object.__setattr__(self, "_target", {s.strip(): t.strip() for s, t in self.entries})  # the last wins

    @classmethod
    def of(cls, entries: Mapping[str, str] | Iterable[tuple[str, str]] | Glossary) -> Glossary:
        """A glossary from a mapping or pairs of source term -> target term (or a Glossary)."""
        if isinstance(entries, Glossary):
            return entries
        pairs = entries.items() if isinstance(entries, Mapping) else entries
        return cls(tuple((str(s), str(t)) for s, t in pairs))

    @classmethod
    def read(cls, path: str | Path) -> Glossary:
        """A glossary file (see the module); a line that is not two terms is a GlossaryError naming it."""
        path, entries = Path(path), []
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise GlossaryError(f"{path}: cannot read the glossary ({e})") from e
        for number, line in enumerate(lines, 1):
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split("\t")
            if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
                raise GlossaryError(f"{path}:{number}: a glossary line is a source term TAB a target term, "
                                    f"not {line[:60]!r}")
            entries.append((parts[0].strip(), parts[1].strip()))
        return cls(tuple(entries))

    def __len__(self) -> int:
        return len(self.entries)

    def towards(self, source: str, target: str) -> Glossary:
        """This glossary, for a model translating source -> target (a TBX termbase picks by them)."""
        return self

    def targets(self, sentence: str) -> list[str]:
        """The target terms of the entries whose source term occurs in `sentence`, in order of
        occurrence, each once."""
        if self._pattern is None:
            return []
        return list(dict.fromkeys(self._target[m.group(0)] for m in self._pattern.finditer(sentence)))


XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
# administrativeStatus values of terms not to write (TBX-Basic's deprecatedTerm-admn-sts and
# supersededTerm-admn-sts; TBX v3's deprecated, obsolete, notRecommended), lowercased
NOT_TO_WRITE = ("deprecated", "superseded", "obsolete", "notrecommended")


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


@dataclass(frozen=True)
class Termbase:
    """A TBX file's concepts, each a mapping of language (its primary subtag: en, de) -> its terms."""

    path: Path
    concepts: tuple[dict[str, tuple[tuple[str, bool], ...]], ...]  # (term, whether it may be written)

    @classmethod
    def read(cls, path: str | Path) -> Termbase:
        path = Path(path)
        try:
            root = ElementTree.parse(path).getroot()
        except ElementTree.ParseError as e:
            raise GlossaryError(f"{path}:{e.position[0]}: not a TBX file ({e})") from None
        except OSError as e:
            raise GlossaryError(f"{path}: cannot read the glossary ({e})") from e
        concepts = []
        for entry in (e for e in root.iter() if _local(e.tag) in ("termEntry", "conceptEntry")):
            terms: dict[str, list[str]] = {}
            for lang_set in (e for e in entry if _local(e.tag) in ("langSet", "langSec")):
                for term, preferred in _terms(lang_set):
                    terms.setdefault(_language(lang_set.get(XML_LANG, "")), []).append((term, preferred))
            concepts.append({lang: tuple(ts) for lang, ts in terms.items() if lang})
        if not concepts:
            raise GlossaryError(f"{path}: no termEntry or conceptEntry: not a TBX termbase")
        return cls(path, tuple(concepts))

    def languages(self) -> list[str]:
        return sorted({lang for concept in self.concepts for lang in concept})

    def towards(self, source: str, target: str) -> Glossary:
        """The glossary for source -> target: each source term of a concept (a deprecated one too: a
        text may use it) -> its first target term that may be written."""
        source, target = _language(source), _language(target)
        entries = []
        for concept in self.concepts:
            written = [term for term, preferred in concept.get(target, ()) if preferred]
            if source in concept and written:
                entries += [(term, written[0]) for term, _ in concept[source]]
        if not entries:
            raise GlossaryError(f"{self.path}: no concept has terms in both {source} and {target} "
                                f"(its languages: {', '.join(self.languages()) or 'none'})")
        return Glossary(tuple(entries))


def _language(code: str) -> str:
    """A language code's primary subtag, lowercased: en-US, en_US -> en."""
    return code.replace("_", "-").split("-")[0].lower()


def _terms(lang_set: ElementTree.Element) -> list[tuple[str, bool]]:
    """The terms of one language of a concept, in order, each with whether it may be written (not
    deprecated, superseded, obsolete or not recommended)."""
    found = []
    for group in (e for e in lang_set if _local(e.tag) in ("tig", "ntig", "termSec")):
        status = " ".join((e.text or "").strip().lower() for e in group.iter()
                          if _local(e.tag) == "termNote" and e.get("type") == "administrativeStatus")
        term = next((" ".join("".join(e.itertext()).split()) for e in group.iter()
                     if _local(e.tag) == "term"), "")
        if term:
            found.append((term, not status.startswith(NOT_TO_WRITE)))
    return found


def read(path: str | Path) -> Glossary | Termbase:
    """A glossary file: TBX (.tbx) or tab-separated (any other name). Either gives the glossary of a
    direction with `towards(source, target)`."""
    return Termbase.read(path) if Path(path).suffix.lower() == ".tbx" else Glossary.read(path)
