"""Deterministic card-like cards for growth benchmarks: any number, same every run.

Each card has a title and 3 to 6 paragraphs of 2 to 4 sentences drawn from a fixed vocabulary
of patient-support words, so lengths (median ~1,100 characters) and structure match the
shipped cards. The text means nothing; it only has to split, embed and index like a card.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterator

from cardrag.ingest.cards import Card

_VOCABULARY = (
    "tablet dose morning evening food stomach water pharmacist doctor nurse clinic fridge "
    "insulin pen vial travel luggage alcohol milk tea coffee iron calcium vitamin routine "
    "reminder organiser side effect nausea dizziness rash headache sleep kidney liver blood "
    "pressure sugar heart breathing inhaler spacer cream patch drops injection needle week "
    "month missed double skip label leaflet box storage heat light child pregnancy"
)
WORDS: tuple[str, ...] = tuple(_VOCABULARY.split())


def sentence(rng: random.Random) -> str:
    """One sentence of 7 to 16 words."""
    words = [rng.choice(WORDS) for _ in range(rng.randint(7, 16))]
    return " ".join(words).capitalize() + "."


def synthetic_cards(n: int, seed: int = 0, chars: int | None = None) -> Iterator[Card]:
    """``n`` card-like cards (English, public), ids ``card-syn-000000`` onwards.

    Args:
        n: How many.
        seed: Another seed, other cards.
        chars: Make each body about this long (paragraphs are added until it is); None: 3 to
            6 paragraphs, as a card.

    Example:
        >>> [d.id for d in synthetic_cards(2)]
        ['card-syn-000000', 'card-syn-000001']
        >>> 10_000 <= len(next(synthetic_cards(1, chars=10_000)).body) < 10_800
        True
    """
    for i in range(n):
        rng = random.Random(seed * 1_000_003 + i)
        paragraphs = [
            " ".join(sentence(rng) for _ in range(rng.randint(2, 4)))
            for _ in range(rng.randint(3, 6))
        ]
        while chars is not None and sum(len(p) + 2 for p in paragraphs) < chars:
            paragraphs.append(" ".join(sentence(rng) for _ in range(rng.randint(2, 4))))
        yield Card(
            id=f"card-syn-{i:06d}",
            title=" ".join(rng.choice(WORDS) for _ in range(4)).capitalize(),
            license="CC0-1.0",
            topics=[rng.choice(WORDS)],
            accessed_at=dt.date(2026, 11, 29),
            sensitivity="public",
            body="\n\n".join(paragraphs),
            source="synthetic",
            language="en",
        )
