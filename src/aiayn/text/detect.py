"""Which language a text is written in, among the few a server translates from.

Lingua (`lingua-language-detector`, in the serve extra) restricted to those languages: choosing
among two or three is far easier than among all, and lingua is built for short texts. On the
Multi30k test sentences (1,000 per language and split) restricted to English, German and French it
is right on 5,999 of 6,000 (docs/text.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from aiayn.errors import AiaynError

# English names of ISO 639-1 codes, for LibreTranslate's /languages and Argos Translate packages
LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "cs": "Czech", "es": "Spanish",
                  "it": "Italian", "nl": "Dutch", "pt": "Portuguese", "ro": "Romanian", "ru": "Russian",
                  "zh": "Chinese", "zt": "Chinese (traditional)", "ja": "Japanese", "ko": "Korean",
                  "ar": "Arabic", "tr": "Turkish"}


class DetectionError(AiaynError, ValueError):
    """A language the detector does not know."""


class LanguageDetector:
    """Detects which of `languages` (ISO 639-1 codes) texts are written in."""

    def __init__(self, languages: Sequence[str]) -> None:
        try:
            from lingua import Language, LanguageDetectorBuilder
        except ImportError as e:
            raise ImportError(f"detecting languages needs the serve extra ({e.name} is missing): "
                              "pip install -e \".[serve]\"") from None
        known = {lang.iso_code_639_1.name.lower(): lang for lang in Language.all()}
        unknown = sorted(set(languages) - set(known))
        if unknown:
            raise DetectionError(f"cannot detect {', '.join(unknown)}: not among the languages lingua knows")
        self.languages = sorted(set(languages))
        self._code = {known[code]: code for code in self.languages}
        chosen = [known[code] for code in self.languages]
        self._detector = LanguageDetectorBuilder.from_languages(*chosen).build() if len(chosen) > 1 else None

    def confidences(self, text: str) -> list[tuple[str, float]]:
        """(language, confidence from 0 to 1) of `text`, most likely first; a text without letters:
        the first language, with confidence 0."""
        if self._detector is None:
            return [(self.languages[0], 1.0)]
        values = self._detector.compute_language_confidence_values(text)
        ranked = [(self._code[v.language], float(v.value)) for v in values]
        if not any(c > 0 for _, c in ranked):
            return [(self.languages[0], 0.0)]
        return ranked

    def detect(self, texts: Sequence[str]) -> list[tuple[str, float]]:
        """The languages of `texts` taken together, most likely first: each language's confidence is
        its mean over the texts, weighted by their length."""
        total: dict[str, float] = {}
        weights = 0
        for text in texts:
            weight = max(len(text.strip()), 1)
            weights += weight
            for code, confidence in self.confidences(text):
                total[code] = total.get(code, 0.0) + confidence * weight
        return sorted(((code, value / weights) for code, value in total.items()), key=lambda x: -x[1])
