"""Glossaries: how terms must be translated. A file has one entry per line, source term TAB target
term (blank lines and lines starting with # are skipped). Every entry whose source term occurs in a
sentence, as whole words and with the case the file gives, makes its target term a constraint of
that sentence's translation (decoding/constrained.py). Where entries overlap ("New York", "York"),
the longest match wins; a target term is asked for once per sentence.
"""

from __future__ import annotations

import re
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

    def targets(self, sentence: str) -> list[str]:
        """The target terms of the entries whose source term occurs in `sentence`, in order of
        occurrence, each once."""
        if self._pattern is None:
            return []
        return list(dict.fromkeys(self._target[m.group(0)] for m in self._pattern.finditer(sentence)))
