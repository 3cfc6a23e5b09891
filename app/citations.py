"""The citation contract: ``[cite:card-X]`` markers, checked against the retrieved cards.

A cited card must be retrieved, and (for a chat model's draft) hold the words its marker
follows (:func:`misattributed`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

CITATION = re.compile(r"\[cite:\s*([^\]]*?)\s*\]", re.IGNORECASE)
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


MARKER_RUN = re.compile(r"(?:\s*\[cite:\s*[^\]]*?\s*\])+", re.IGNORECASE)
"""One or more markers in a row: together they cite the text before them."""


@dataclass(frozen=True)
class Segment:
    """A stretch of an answer and the cards the markers after it cite."""

    text: str
    """The words since the previous run of markers."""
    cited: list[str]
    """Ids in the run of markers that follows them, in order, without repeats."""


def segments(answer: str) -> list[Segment]:
    """The answer's cited stretches, one per run of markers.

    Example:
        >>> [(s.text, s.cited) for s in segments("Cold [cite:card-a]. Ask [cite:b] [cite:c].")]
        [('Cold', ['card-a']), ('Ask', ['b', 'c'])]
    """
    out: list[Segment] = []
    start = 0
    for run in MARKER_RUN.finditer(answer):
        ids = list(dict.fromkeys(m.group(1) for m in CITATION.finditer(run.group(0))))
        text = answer[start : run.start()].strip().lstrip(".!?;:, ")
        out.append(Segment(text, ids))
        start = run.end()
    return out


def misattributed(cited: Sequence[str], support: Mapping[str, float]) -> list[str]:
    """The cited cards that are not among the cards supporting a stretch best.

    A stretch citing n cards must cite n of the n retrieved cards whose closest sentence is
    closest to it (``support``: each retrieved card's best similarity to the stretch). A
    sentence copied from card Y and attributed to card X is closest to Y, so X is rejected.
    The rule compares cards with each other and uses no threshold, so it behaves the same on
    every model's similarity scale.

    Example:
        >>> misattributed(["card-x"], {"card-x": 0.81, "card-y": 0.97})
        ['card-x']
        >>> misattributed(["card-x", "card-y"], {"card-x": 0.81, "card-y": 0.97, "card-z": 0.7})
        []
    """
    n = len(cited)
    best = sorted(support, key=lambda cid: -support[cid])[:n]
    return [cid for cid in cited if cid in support and cid not in best]


def drop_markers(answer: str, rejected: Sequence[Iterable[str]]) -> str:
    """The answer without the markers ``rejected[i]`` lists for its i-th run of markers.

    Example:
        >>> drop_markers("A [cite:card-x][cite:card-y]. B [cite:card-x].", [["card-y"], []])
        'A [cite:card-x]. B [cite:card-x].'
    """
    runs = iter([set(r) for r in rejected])

    def rebuild(run: re.Match[str]) -> str:
        drop = next(runs, set())
        kept = [m.group(0) for m in CITATION.finditer(run.group(0)) if m.group(1) not in drop]
        lead = run.group(0)[: len(run.group(0)) - len(run.group(0).lstrip())]
        return lead + "".join(kept) if kept else ""

    return tidy(MARKER_RUN.sub(rebuild, answer))
