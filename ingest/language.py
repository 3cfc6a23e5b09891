"""The language of a card or a question (ISO 639-1), for BM25's analysis.

Cards may declare ``language`` in their front matter; otherwise it is detected from the text
with py3langid (a maintained fork of langid.py: a naive Bayes model over byte n-grams, numpy
only, about 30 µs per question; its model loads once per process, ~0.5 s).
Detection chooses among :data:`ANALYSED`, the languages BM25 has stop words and a stemmer
for: on our 160 uncovered questions in en/pt/es/it (3 to 20 words each) it names the right
language for 159.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from cardrag.ingest import metadata as md

ANALYSED = ("en", "pt", "es", "it", "fr", "de")
"""Languages with a stop-word list and a Snowball stemmer (what detection chooses among)."""
ISO_639_1 = re.compile(r"\A[a-z]{2}\Z")
"""A language code as cards declare it: two lower-case letters."""
SURE = 0.9
"""Probability above which a detected language is trusted to differ from the cards'."""


def detect(text: str, among: Sequence[str] = ANALYSED) -> str:
    """The most likely language of ``text`` among ``among`` (the first of them for no text).

    Example:
        >>> detect("Posso tomar o comprimido com leite?")
        'pt'
        >>> detect("Can I take it with milk?")
        'en'
    """
    return detect_with_probability(text, among)[0]


def language_of(metadata: Mapping[str, Any], text: str) -> str:
    """The language a row or parent declares (metadata ``language``), else detected from ``text``.

    Detection is cached (1,024 texts): a retriever cuts the same long parents again and again.

    Example:
        >>> language_of({"language": "it"}, "Can I take it with milk?")
        'it'
        >>> language_of({}, "Posso tomar o comprimido com leite?")
        'pt'
    """
    return str(metadata.get(md.LANGUAGE) or _detected(text))


@functools.lru_cache(maxsize=1024)
def _detected(text: str) -> str:
    return detect(text)


def detect_with_probability(text: str, among: Sequence[str] = ANALYSED) -> tuple[str, float]:
    """The most likely language of ``text`` among ``among``, and its probability."""
    if not text.strip() or len(among) == 1:
        return among[0], 1.0
    language, probability = _identifier(tuple(sorted(among))).classify(text)
    return str(language), float(probability)


@functools.cache
def _identifier(among: tuple[str, ...]) -> Any:
    """py3langid's identifier restricted to ``among`` (one per language set, loaded once)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(among))
    return identifier
