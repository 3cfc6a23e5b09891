"""What a question asks about a medicine, and whether a card says anything about it.

A card about the right medicine passes grading's veto and its calibrated score ("Is it safe to
take ibuprofen while breastfeeding?" retrieves the ibuprofen card, which never mentions
breastfeeding), and the extractive answerer then quotes its closest sentence on another
subject. Across languages grading cannot compare words at all. A few things patients ask
about, and cards either cover or do not, are named by a closed list of words in each language
we serve: pregnancy and breastfeeding, children, the kidneys, the liver, hair, weight, cancer,
memory, suppositories, the maximum dose. A question that asks about one of them (in its own
language's words) can only be answered by a card that mentions it (in any of the languages'
words): :func:`missing_aspects`. A question in several parts ("Should I take ibuprofen with
food, and is it safe while breastfeeding?") keeps the card for the parts it answers, and the
reply says what the cards do not cover (:func:`aspect_verdict`). The lists are pharmacists'
everyday words; a word that has a second, ordinary meaning in a language ("pelo" is "by the"
in Portuguese) is left out of that language.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

from cardrag.app.question_types import BY_ASPECT, asked_types, folded, says_type

ASPECTS: dict[str, dict[str, tuple[str, ...]]] = {
    "pregnancy or breastfeeding": {
        "en": ("pregnan", "breastfe", "breast-fe", "lactat", "conceiv"),
        "pt": ("gravid", "gestant", "gestacao", "amament", "lactant", "lactacao"),
        "es": ("embaraz", "gestant", "amamant", "lactanc", "lactant"),
        "it": ("gravidanz", "incint", "allatt", "gestant"),
    },
    "children": {
        "en": (
            "child",
            "kid",
            "kids",
            "toddler",
            "infant",
            "baby",
            "babies",
            "paediatr",
            "pediatr",
        ),
        "pt": ("crianca", "infantil", "pediatr"),
        "es": ("nino", "ninos", "nina", "ninas", "infantil", "pediatr"),
        "it": ("bambin", "neonat", "pediatr", "infantil"),
    },
    "the kidneys": {
        "en": ("kidney", "renal"),
        "pt": ("rim", "rins", "renal", "renais"),
        "es": ("rinon", "renal", "renales"),
        "it": ("rene", "reni", "renal"),
    },
    "the liver": {
        "en": ("liver", "hepat"),
        "pt": ("figado", "hepat"),
        "es": ("higado", "hepat"),
        "it": ("fegato", "epat"),
    },
    "hair": {
        "en": ("hair",),
        "pt": ("cabelo", "calvic"),
        "es": ("cabello", "pelo", "calvic"),
        "it": ("capell", "calvizi"),
    },
    "weight": {
        "en": ("weight",),
        "pt": ("peso", "engord", "emagrec"),
        "es": ("peso", "engord", "adelgaz"),
        "it": ("peso", "ingrass", "dimagr"),
    },
    "cancer": {
        "en": ("cancer", "tumour", "tumor"),
        "pt": ("cancer", "tumor"),
        "es": ("cancer", "tumor"),
        "it": ("cancro", "tumor"),
    },
    "memory or dementia": {
        "en": ("dementia", "memory", "alzheimer"),
        "pt": ("demencia", "memoria", "alzheimer"),
        "es": ("demencia", "memoria", "alzheimer"),
        "it": ("demenza", "memoria", "alzheimer"),
    },
    "suppositories": {
        "en": ("suppositor",),
        "pt": ("supositori",),
        "es": ("supositori",),
        "it": ("suppost",),
    },
    "the maximum dose": {
        "en": ("maximum", "max", "limit"),
        "pt": ("maxim", "limite"),
        "es": ("maxim", "limite"),
        "it": ("massim", "limite"),
    },
}
"""Each aspect's words, per language, in folded spelling (lower case, accents off). A word
matches a stem of five letters or more by prefix; shorter stems ("rim", "kid", "max") must be
the whole word."""
WHOLE_WORD = 4
"""Stems this long or shorter match whole words only ("rim" is not "rimedio")."""

MIN_PART_WORDS = 3
"""A part of a question shorter than this ("and why?") asks nothing of its own."""

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_PART_BREAK = re.compile(r"[?;]|,?\s+(?:and|but|also|e|ed|y|mas|pero|ma)\s+", re.IGNORECASE)
"""Where a question's parts meet: a question mark, a semicolon, or "and"/"but" in a language."""


def fold(text: str) -> list[str]:
    """The words of a text, lower-cased, accents off.

    Example:
        >>> fold("Amamentação e gestação")
        ['amamentacao', 'e', 'gestacao']
    """
    plain = unicodedata.normalize("NFKD", text.lower())
    plain = "".join(c for c in plain if not unicodedata.combining(c))
    return _WORD.findall(plain)


def _matches(words: Iterable[str], stems: Iterable[str]) -> bool:
    stems = tuple(stems)
    for word in words:
        for stem in stems:
            if word == stem or (len(stem) > WHOLE_WORD and word.startswith(stem)):
                return True
    return False


@functools.lru_cache(maxsize=1024)
def aspects_of(question: str, language: str) -> tuple[str, ...]:
    """The aspects a question asks about, in its language's words (English when not served).

    Example:
        >>> aspects_of("Posso tomar ibuprofeno durante a amamentação?", "pt")
        ('pregnancy or breastfeeding',)
        >>> aspects_of("Can I take it with milk?", "en")
        ()
    """
    words = fold(question)
    named = tuple(
        aspect
        for aspect, stems in ASPECTS.items()
        if _matches(words, stems.get(language, stems["en"]))
    )
    return named + asked_types(folded(words), language)


@functools.lru_cache(maxsize=4096)
def _card_words(text: str) -> frozenset[str]:
    return frozenset(fold(text))


def missing_aspects(asked: Iterable[str], card_text: str) -> tuple[str, ...]:
    """The asked aspects a card never mentions, in any of the languages' words.

    Example:
        >>> missing_aspects(["pregnancy or breastfeeding", "children"],
        ...                 "Not for children under 12.")
        ('pregnancy or breastfeeding',)
    """
    words = _card_words(card_text)
    return tuple(
        aspect
        for aspect in asked
        if not (
            says_type(aspect, _card_text(card_text))
            if aspect in BY_ASPECT
            else _matches(words, (s for stems in ASPECTS[aspect].values() for s in stems))
        )
    )


@functools.lru_cache(maxsize=4096)
def _card_text(text: str) -> str:
    return folded(fold(text))


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


BROAD_WORDS: dict[str, frozenset[str]] = {
    "en": _words("know need tell information info about for what should"),
    "pt": _words("saber preciso devo sobre serve informacao informacoes fale diga que"),
    "es": _words("saber debo necesito sobre sirve informacion dime hablame cuentame que"),
    "it": _words(
        "sapere devo bisogno serve informazioni dimmi parlami cosa che su sul sulla sui sugli "
        "sulle del della dello dei degli delle"
    ),
}
"""The words of a broad question in each language ("What should I know about warfarin?",
"Cosa devo sapere sulla metformina?", "¿Para qué sirve la levotiroxina?"), folded."""


def asks_broadly(question: str, language: str, names: Iterable[str]) -> bool:
    """Whether a question asks about the medicines it names as a whole, nothing in particular.

    Its words, less the ``names`` (grading's salient terms), stop words and the language's
    :data:`BROAD_WORDS`, are none. A card whose title names those medicines is about exactly
    what such a question asks.

    Example:
        >>> asks_broadly("Cosa devo sapere sulla metformina?", "it", ["metformina"])
        True
        >>> asks_broadly("La metformina fa dimagrire?", "it", ["metformina"])
        False
    """
    from cardrag.app.terms import stop_words

    named = {w for n in names for w in fold(n)}
    if not named:
        return False
    broad = BROAD_WORDS.get(language, BROAD_WORDS["en"])
    stops = {w for s in stop_words() for w in fold(s)}
    return all(w in named or w in stops or w in broad for w in fold(question))


@functools.lru_cache(maxsize=1024)
def parts_of(question: str) -> tuple[str, ...]:
    """The parts of a question that ask something of their own (cached: grading asks per card).

    Example:
        >>> parts_of("Do I take it with food, and is it safe while breastfeeding?")
        ('Do I take it with food', 'is it safe while breastfeeding')
        >>> parts_of("Is it safe in pregnancy, and why?")
        ('Is it safe in pregnancy',)
    """
    parts = (p.strip(" ,.") for p in _PART_BREAK.split(question))
    return tuple(p for p in parts if len(fold(p)) >= MIN_PART_WORDS)


def aspect_verdict(
    question: str, language: str, card_text: str
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What a card cannot answer of a question: ``(vetoing, unanswered)`` aspects.

    ``vetoing``: the card never mentions what every part of the question asks about, so it
    cannot answer. ``unanswered``: it answers some part, not the aspects another part asks about
    (the reply says the cards do not cover them). At most one of the two is non-empty.

    Example:
        >>> card = "Take ibuprofen with food."
        >>> aspect_verdict("Is ibuprofen safe while breastfeeding?", "en", card)
        (('pregnancy or breastfeeding',), ())
        >>> aspect_verdict("Do I take ibuprofen with food, and is it safe while "
        ...                "breastfeeding?", "en", card)
        ((), ('pregnancy or breastfeeding',))
    """
    lacking = missing_aspects(aspects_of(question, language), card_text)
    if not lacking:
        return (), ()
    free = [p for p in parts_of(question) if not set(aspects_of(p, language)) & set(lacking)]
    return ((), lacking) if free else (lacking, ())
