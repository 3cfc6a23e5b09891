"""What kind of thing a question asks, and whether a card says anything of that kind.

A card about the right medicine passes grading whatever the question asks of it: "How do I
store warfarin?" retrieves the warfarin card, which says nothing about storage, and the
extractive answerer then quotes its closest sentence on another subject. Some of the question
types of real consumer medication questions (MedicationQA: Ben Abacha et al., MedInfo 2019)
are asked and answered in words of their own, in every language we serve: storage, what to do
after too much, the forms and strengths that exist, what a tablet looks like, what it
contains, how to stop it. A question of one of these types (in its own language's words) can
only be answered by a card that says something of that type (in any language's words): each
type is an aspect of :mod:`cardrag.app.aspects`, named by what a refusal says the card does
not cover ("how to store it").

The other types (dose, usage, interactions, side effects, time, ...) are said by too many of a
card's sentences to tell a card that answers from one that does not; they are left to the
sentence similarity. The words were written from the taxonomy's definitions, in pharmacists'
everyday words (``question_types.toml``), and checked on the tuning part of the question-type
matrix (``evals/cases/matrix.jsonl``); patterns match the folded text (lower case, accents and
digits off, words joined by single spaces).
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

LANGUAGES = ("en", "pt", "es", "it")
"""The languages whose question words are listed (others are read as English)."""


@dataclass(frozen=True)
class QuestionType:
    """A question type with words of its own, in questions and in cards."""

    name: str
    """The MedicationQA type ("storage")."""
    aspect: str
    """What a refusal says the card does not cover ("how to store it")."""
    asked: dict[str, str]
    """Per language, the pattern of a question of this type (folded text)."""
    said: str
    """The pattern of a card that says something of this type, in any language."""


TYPES_FILE = Path(__file__).with_name("question_types.toml")
"""The types' words: per type, its name, its aspect, ``said`` and ``asked`` per language."""


def _pattern(alternatives: list[str]) -> str:
    return r"\b(?:" + "|".join(alternatives) + r")\b"


def load_question_types(path: Path = TYPES_FILE) -> tuple[QuestionType, ...]:
    """The question types of a TOML file (by default the shipped ``question_types.toml``).

    Raises:
        ValueError: naming the file and the type when a type lacks a field or a language, or a
            pattern does not compile.
    """
    with path.open("rb") as f:
        entries = tomllib.load(f).get("types", [])
    types = []
    for n, entry in enumerate(entries, 1):
        where = f"{path}: type {n} ({entry.get('name', '?')})"
        try:
            asked = {lang: _pattern(entry["asked"][lang]) for lang in LANGUAGES}
            kind = QuestionType(entry["name"], entry["aspect"], asked, _pattern(entry["said"]))
            for pattern in (kind.said, *asked.values()):
                re.compile(pattern)
        except KeyError as e:
            raise ValueError(f"{where}: missing field {e}") from None
        except re.error as e:
            raise ValueError(f"{where}: a pattern does not compile ({e})") from None
        types.append(kind)
    return tuple(types)


QUESTION_TYPES: tuple[QuestionType, ...] = load_question_types()
"""The question types that have words of their own, in MedicationQA's order."""

BY_ASPECT: dict[str, QuestionType] = {t.aspect: t for t in QUESTION_TYPES}
"""Each type by the aspect it is named as."""

_ASKED = {t.aspect: {lang: re.compile(p) for lang, p in t.asked.items()} for t in QUESTION_TYPES}
_SAID = {t.aspect: re.compile(t.said) for t in QUESTION_TYPES}


def folded(words: list[str]) -> str:
    """Folded words (:func:`cardrag.app.aspects.fold`) as the text the patterns read."""
    return " ".join(words)


@functools.lru_cache(maxsize=1024)
def asked_types(text: str, language: str) -> tuple[str, ...]:
    """The aspects of the types a question (folded) asks, in its language's words.

    Example:
        >>> asked_types("how do i store insulin pens", "en")
        ('how to store it',)
        >>> asked_types("posso tomar com leite", "pt")
        ()
    """
    lang = language if language in LANGUAGES else "en"
    return tuple(a for a, pattern in _ASKED.items() if pattern[lang].search(text))


def says_type(aspect: str, text: str) -> bool:
    """Whether a card's text (folded) says something of a type (``aspect``), in any language.

    Example:
        >>> says_type("how to store it", "keep it in a cool dry place")
        True
        >>> says_type("how to store it", "take it with food")
        False
    """
    return _SAID[aspect].search(text) is not None
