"""A card's ``aliases``: the everyday names patients give its subject, read as the card's word.

No medicine dictionary knows that "water tablets" are the diuretics card's subject, or that a
"pílula para dormir" is a sleeping tablet. A card may say so in its front matter::

    aliases:
      water tablets: diuretics
      pastillas para orinar: diuretics

Each alias maps to a word or phrase of the card's own title or text (checked), and the app
reads a question's alias as that word before retrieval and grading (:mod:`cardrag.app.names`).
A card about a class may name members the dictionary cannot tie to it
(``rosuvastatin: statins``). Aliases are collected from every card into the index's manifest;
one alias meaning two things in two cards is refused, naming both files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

ALIAS = re.compile(r"[^\W\d_][^\W\d_' -]*(?:['\- ][^\W\d_]+)*", re.UNICODE)
"""Words of letters, joined by single spaces, hyphens or apostrophes ("water tablets")."""
MAX_ALIAS_CHARS = 60
"""The longest alias: a name, not a sentence."""


def alias_key(alias: str) -> str:
    """How an alias is compared: lower case, single spaces.

    Example:
        >>> alias_key("  Water   Tablets ")
        'water tablets'
    """
    return " ".join(alias.lower().split())


def parse_aliases(value: object, text: str) -> dict[str, str]:
    """A card's ``aliases`` field, validated against the card's own ``text`` (title and body).

    Args:
        value: The front matter's value (absent: None).
        text: The card's title and body; every alias's word must occur in it.

    Returns:
        Each alias (:func:`alias_key` form) to the card's word, as the card writes it.

    Raises:
        ValueError: naming the alias at fault and why.

    Example:
        >>> parse_aliases({"Water tablets": "diuretics"}, "Diuretics help your kidneys.")
        {'water tablets': 'diuretics'}
    """
    if value is None:
        return {}
    if not isinstance(value, dict):
        msg = f"must be a mapping of alias: the card's word for it, got {value!r}"
        raise ValueError(msg)
    out: dict[str, str] = {}
    for alias, word in value.items():
        if not isinstance(alias, str) or not isinstance(word, str) or not word.strip():
            msg = f"{alias!r}: {word!r} must be text: the card's word for it"
            raise ValueError(msg)
        key = alias_key(alias)
        if len(key) > MAX_ALIAS_CHARS or ALIAS.fullmatch(key) is None:
            msg = f"{alias!r} must be 1 to {MAX_ALIAS_CHARS} characters of words, no digits"
            raise ValueError(msg)
        word = " ".join(word.split())
        if not re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, re.IGNORECASE):
            msg = f"{alias!r}: {word!r} is not in the card's title or text"
            raise ValueError(msg)
        if key == alias_key(word):
            msg = f"{alias!r} is the card's own word: no alias needed"
            raise ValueError(msg)
        out[key] = word
    return out


class AliasConflictError(ValueError):
    """One alias means two different words in two cards."""

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(problem)
        self.source = source
        """The card file where the alias was seen the second time."""


def merged_aliases(cards: Iterable[tuple[str, dict[str, str]]]) -> dict[str, str]:
    """Every card's aliases in one mapping, from ``(source, aliases)`` pairs.

    Raises:
        AliasConflictError: when one alias maps to two different words, naming both sources.

    Example:
        >>> merged_aliases([("a.md", {"water pills": "diuretics"}), ("b.md", {})])
        {'water pills': 'diuretics'}
    """
    out: dict[str, str] = {}
    where: dict[str, str] = {}
    for source, aliases in cards:
        for alias, word in aliases.items():
            if alias in out and out[alias].lower() != word.lower():
                problem = f"{alias!r} means {word!r} here but {out[alias]!r} in {where[alias]}"
                raise AliasConflictError(source, problem)
            out.setdefault(alias, word)
            where.setdefault(alias, source)
    return out
