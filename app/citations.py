"""The citation contract: ``[cite:card-X]`` markers, verified against the retrieved cards."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

CITATION = re.compile(r"\[cite:\s*([^\]]*?)\s*\]")
"""A citation marker; the id is whatever sits inside, so bad ids are caught, not ignored."""


def neutralise(card_text: str) -> str:
    """Card text with every ``[cite:...]`` marker removed, for quoting it or prompting with it.

    A marker means "the sentence before me is in this card" only when the answerer writes it;
    inside a card's own text it is text, and copying it into an answer would attribute the
    sentence to a card that may not contain it.

    Example:
        >>> neutralise("Keep tea away from iron [cite:card-iron-tablets]. Drink water.")
        'Keep tea away from iron. Drink water.'
    """
    return tidy(CITATION.sub("", card_text))


def tidy(text: str) -> str:
    """Collapse the spaces a removed marker leaves (doubled, or before punctuation)."""
    return re.sub(r"[ \t]+([.,;:!?])", r"\1", re.sub(r"[ \t]{2,}", " ", text)).strip()


def extract_citations(text: str) -> list[str]:
    """Cited ids in order of first appearance, without repeats.

    Example:
        >>> extract_citations("A [cite:card-a]. B [cite:card-b][cite:card-a].")
        ['card-a', 'card-b']
    """
    return list(dict.fromkeys(m.group(1) for m in CITATION.finditer(text)))


@dataclass(frozen=True)
class Verified:
    """A draft answer after verification."""

    answer: str
    """The answer with markers of rejected ids removed."""
    citations: list[str]
    """Cited ids that are among the retrieved cards, in order."""
    rejected: list[str]
    """Cited ids that are not among the retrieved cards."""
    uncited: bool
    """Cards were retrieved but none is cited."""


def verify_citations(answer: str, declared: Iterable[str], retrieved: Sequence[str]) -> Verified:
    """Keep only citations of retrieved cards; remove and report the others.

    Args:
        answer: Draft answer text with markers.
        declared: Ids the model listed separately (structured output), in its order.
        retrieved: Ids of the cards the retriever returned.

    Example:
        >>> v = verify_citations(
        ...     "Yes [cite:card-a] [cite:card-zz].", ["card-b"], ["card-a", "card-b"])
        >>> (v.answer, v.citations, v.rejected, v.uncited)
        ('Yes [cite:card-a].', ['card-a', 'card-b'], ['card-zz'], False)
    """
    allowed = set(retrieved)
    cited = list(dict.fromkeys([*extract_citations(answer), *declared]))
    rejected = [cid for cid in cited if cid not in allowed]

    def keep(match: re.Match[str]) -> str:
        return match.group(0) if match.group(1) in allowed else ""

    cleaned = tidy(CITATION.sub(keep, answer))
    valid = [cid for cid in cited if cid in allowed]
    return Verified(cleaned, valid, rejected, uncited=bool(retrieved) and not valid)
