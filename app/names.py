"""Medicine names as the cards write them: a brand or another name resolved before grading.

A patient writes "Synthroid", "Glucophage" or "Advil"; the cards say levothyroxine, metformin
and ibuprofen. Grading's veto (a medicine the question names must be in the card) then
refused questions the cards answer ("No card mentions synthroid."). The medicine-name
dictionary already in the dependencies (``drug-named-entity-recognition``) maps every name it
knows, brand or generic, to its medicines; two names are one medicine when they map to the
same one, or when one is the other with a prefix of at least five letters off
(levothyroxine / thyroxine, which the dictionary keeps apart).

:class:`Names` knows the medicine names the cards use (from the index's BM25 vocabulary) and
rewrites a question with them ("Should I take my levothyroxine before breakfast?") for
retrieval, grading and the answer; the reply keeps the patient's words. A name that no card
uses stays as written, and a refusal names its generic too ("No card mentions clopidogrel
(Plavix).").
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from cardrag.app.terms import (
    MIN_LENGTH,
    SALIENT_ZIPF,
    medicine_names,
    medicine_variants,
    name_key,
    salience,
)
from cardrag.ingest.aliases import alias_key

WORD = re.compile(r"[^\W\d_][\w-]*[^\W\d_]", re.UNICODE)
"""A word as written (case kept), the unit a name is looked up and replaced in."""
SUFFIX_MIN = 7
"""A name this long or longer that ends another name is the same medicine (thyroxine /
levothyroxine); shorter ones would join unrelated names."""


@functools.cache
def medicines_of(word: str) -> frozenset[str]:
    """The medicines (the dictionary's canonical names) a word names; empty for none.

    Example:
        >>> sorted(medicines_of("Glucophage")), sorted(medicines_of("tea"))
        (['metformin'], [])
    """
    return frozenset(medicine_variants().get(word.lower(), ()))


@functools.cache
def _names_by_medicine() -> dict[str, frozenset[str]]:
    """Each medicine's one-word names, as :func:`name_key` forms."""
    out: dict[str, set[str]] = {}
    for variant, medicines in medicine_variants().items():
        if variant.isalpha() and len(variant) >= MIN_LENGTH:
            for medicine in medicines:
                out.setdefault(medicine, set()).add(name_key(variant))
    return {m: frozenset(keys) for m, keys in out.items()}


@dataclass(frozen=True)
class Names:
    """The medicine names the cards use, and how a question's names map onto them.

    Example:
        >>> names = Names.of_words(["levothyroxine", "metformin", "breakfast"])
        >>> names.rewrite("Should I take my Synthroid before breakfast?")
        'Should I take my levothyroxine before breakfast?'
        >>> names.rewrite("Is Glucophage better with food?")
        'Is metformin better with food?'
        >>> names.describe("plavix", "Plavix")
        'clopidogrel (Plavix)'
        >>> Names.of_words(["antidepressants"]).rewrite("Is my antidepressant working?")
        'Is my antidepressant working?'
    """

    cards: dict[str, str] = field(default_factory=dict)
    """:func:`name_key` of each medicine name the cards use, to the word as they write it."""
    aliases: dict[str, str] = field(default_factory=dict)
    """The cards' own aliases (:mod:`cardrag.ingest.aliases`): an everyday name to the card's
    word for it, read first ("water tablets" as "diuretics")."""

    @functools.cached_property
    def _alias_pattern(self) -> re.Pattern[str] | None:
        """Every alias, longest first, as whole words, plural or not, in any case."""
        if not self.aliases:
            return None
        spelled = [
            r"\s+".join(re.escape(w) for w in alias.split())
            for alias in sorted(self.aliases, key=lambda a: (-len(a), a))
        ]
        return re.compile(rf"(?<!\w)({'|'.join(spelled)})(?:e?s)?(?!\w)", re.IGNORECASE)

    @classmethod
    def of_words(cls, words: Iterable[str], aliases: dict[str, str] | None = None) -> Names:
        """The medicine names among the cards' words (e.g. the BM25 index's vocabulary).

        Args:
            words: The cards' words.
            aliases: The cards' aliases (the index manifest's ``aliases``), if any.
        """
        known = medicine_names()
        _names_by_medicine()  # built now (0.1 s), not on the first brand name asked
        cards: dict[str, str] = {}
        for word in words:
            key = name_key(word)
            if len(word) >= MIN_LENGTH and word.isalpha() and key in known:
                cards.setdefault(key, word.lower())
        return cls(cards, dict(aliases or {}))

    def card_name(self, word: str) -> str | None:
        """How the cards write the medicine ``word`` names.

        None when no card names that medicine, or when the cards already use ``word``.
        """
        key = name_key(word)
        if key in self.cards or len(word) < MIN_LENGTH or key not in medicine_names():
            return None
        if salience(word) >= SALIENT_ZIPF:  # a common word that is also a brand ("copy")
            return None
        found = self._same_medicine(word)
        lowered = word.lower()
        if found is None or found.startswith(lowered) or lowered.startswith(found):
            return None  # an inflection of the cards' own word ("antidepressant") stays
        return found

    def _same_medicine(self, word: str) -> str | None:
        for medicine in sorted(medicines_of(word)):  # a member of a card's class: its alias
            if alias_key(medicine) in self.aliases:
                return self.aliases[alias_key(medicine)]
        for medicine in sorted(medicines_of(word)):
            for other in [*sorted(_names_by_medicine().get(medicine, ())), name_key(medicine)]:
                if other in self.cards:
                    return self.cards[other]
                for card_key, written in sorted(self.cards.items()):
                    if len(other) >= SUFFIX_MIN and card_key.endswith(other):
                        return written
        return None

    def rewrite(self, question: str) -> str:
        """The question with each alias and medicine name in the cards' words.

        Example:
            >>> names = Names.of_words([], {"water tablet": "diuretics"})
            >>> names.rewrite("My Water  Tablets make me pee at night")
            'My diuretics make me pee at night'
        """
        pattern = self._alias_pattern
        if pattern is not None:
            question = pattern.sub(lambda m: self.aliases[alias_key(m.group(1))], question)

        def swap(match: re.Match[str]) -> str:
            return self.card_name(match.group(0)) or match.group(0)

        return WORD.sub(swap, question)

    def describe(self, term: str, written: str) -> str:
        """A missing medicine for a refusal: its generic name and the patient's word.

        ``term`` is grading's form of the word (lower-cased), ``written`` the patient's.
        """
        medicines = sorted(medicines_of(term))
        if not medicines or name_key(medicines[0]) == name_key(term):
            return written
        return f"{medicines[0]} ({written})"
