"""How text becomes BM25 tokens in each language: words, stop words, Snowball stems.

Each child is analysed in its card's language: lower-cased words of two or more characters
(bm25s's pattern), that language's stop words dropped (one list per card, never a mixed one: a
mixed list removes English content words such as "come" or "con" and cost 2 points of
recall@1 on the golden set) and, for stemmed languages, Snowball stemming (PyStemmer), so
"tomar", "tomo" and "tomando" meet. A question is analysed the same way, in each language the
index holds (:func:`cardrag.retrievers.bm25.question_tokens`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

TOKEN = re.compile(r"(?u)\b\w\w+\b")
"""A token: a word of two or more characters (bm25s's and scikit-learn's pattern)."""
STEMMERS = {
    "en": "english",
    "es": "spanish",
    "pt": "portuguese",
    "it": "italian",
    "fr": "french",
    "de": "german",
}
"""Snowball stemmers (PyStemmer's names), by ISO 639-1 code."""
STOPWORD_LISTS = {
    "en": "STOPWORDS_EN",
    "es": "STOPWORDS_SPANISH",
    "pt": "STOPWORDS_PORTUGUESE",
    "it": "STOPWORDS_ITALIAN",
    "fr": "STOPWORDS_FRENCH",
    "de": "STOPWORDS_GERMAN",
}
"""Languages with a stop-word list, by ISO 639-1 code."""


def analyse(text: str, language: str, *, stem: bool) -> list[str]:
    """The BM25 tokens of ``text`` read as ``language``.

    A language without a stop-word list or a stemmer keeps every word as it is.

    Example:
        >>> analyse("Tomando o comprimido", "pt", stem=True)
        ['tom', 'comprim']
        >>> analyse("Taking the tablet", "en", stem=False)
        ['taking', 'tablet']
    """
    tokens = _words(text, language)
    if stem and language in STEMMERS:
        return list(stemmer(language).stemWords(tokens))
    return tokens


def analyse_each(texts: Sequence[str], language: str, *, stem: bool) -> list[set[str]]:
    """Each text's distinct BM25 tokens (:func:`analyse`), every distinct word stemmed once.

    Example:
        >>> [sorted(t) for t in analyse_each(["Tomando o comprimido", "tomar"], "pt", stem=True)]
        [['comprim', 'tom'], ['tom']]
    """
    words = [set(_words(text, language)) for text in texts]
    if not (stem and language in STEMMERS):
        return words
    distinct = sorted(set().union(*words))
    stems = dict(zip(distinct, stemmer(language).stemWords(distinct), strict=True))
    return [{stems[w] for w in held} for held in words]


def _words(text: str, language: str) -> list[str]:
    """The lower-cased words of ``text``, ``language``'s stop words left out."""
    stop = _stopwords(language)
    return [t for t in TOKEN.findall(text.lower()) if t not in stop]


@functools.cache
def _stopwords(language: str) -> frozenset[str]:
    """The stop words of ``language`` (none for a language without a list)."""
    from bm25s import stopwords as sw

    name = STOPWORD_LISTS.get(language)
    return frozenset(getattr(sw, name) if name else ())


@functools.cache
def stemmer(language: str) -> Any:
    """PyStemmer's Snowball stemmer for ``language`` (one of :data:`STEMMERS`), made once."""
    import Stemmer

    return Stemmer.Stemmer(STEMMERS[language])
