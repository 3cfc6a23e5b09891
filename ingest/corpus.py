"""A folder of cards: its card files, each loaded, documents cut into sections, ids unique.

Symlinked folders are followed once; anything named ``*.md`` that is not a regular file is
refused, naming it. A bad card fails the whole load (:class:`~cardrag.ingest.cards.CardError`),
so a broken corpus never half-replaces a good index.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from cardrag.ingest.aliases import AliasConflictError, merged_aliases
from cardrag.ingest.cards import MAX_CARD_CHARS, Card, CardError, load_card
from cardrag.ingest.sections import sections_of

logger = logging.getLogger(__name__)


def load_cards(folder: Path | str, max_chars: int = MAX_CARD_CHARS) -> list[Card]:
    """Load every ``*.md`` card under a folder, sorted by file name.

    A long document (``kind: document``) becomes one card per section, in order. A file
    longer than ``max_chars`` characters is refused (:data:`MAX_CARD_CHARS`).

    Raises:
        CardError: for the first bad card, or a duplicate id (naming both files).
        FileNotFoundError: when the folder does not exist or holds no card.
    """
    root = Path(folder)
    if not root.is_dir():
        msg = f"{root}: cards folder not found"
        raise FileNotFoundError(msg)
    paths = card_files(root)
    if not paths:
        msg = f"{root}: no *.md cards found"
        raise FileNotFoundError(msg)
    cards = check_unique(
        section for p in paths for section in split_sections(load_card(p, max_chars))
    )
    card_aliases(cards)  # one alias, two meanings: refused now, before anything is written
    return cards


def card_aliases(cards: Iterable[Card]) -> dict[str, str]:
    """Every card's aliases in one mapping (the index's manifest keeps it).

    Raises:
        CardError: when one alias means two different words in two cards, naming both.
    """
    try:
        return merged_aliases((c.source, c.aliases) for c in cards)
    except AliasConflictError as exc:
        raise CardError(exc.source, "aliases", str(exc)) from exc


def card_files(root: Path) -> list[Path]:
    """Every ``*.md`` card file under ``root``, sorted; symlinked folders followed once.

    Only regular files are cards: a folder, FIFO, socket or dangling link named ``*.md`` is
    refused, naming it (a FIFO would otherwise block the ingest forever). A folder reached a
    second time through links (a loop) is skipped, with a warning naming it.

    Raises:
        CardError: for an entry named ``*.md`` that is not a regular file.
    """
    found: list[Path] = []
    seen: set[str] = set()
    for folder, dirs, files in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:
            logger.warning("%s: skipped, a folder already read through another path", folder)
            dirs.clear()
            continue
        seen.add(real)
        for name in sorted([*dirs, *files]):
            if not name.endswith(".md"):
                continue
            path = Path(folder) / name
            try:
                mode = path.stat().st_mode
            except OSError as exc:  # a dangling link, or a link loop
                raise CardError(path, "file", f"cannot be read ({exc.strerror})") from None
            if not stat.S_ISREG(mode):
                kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
                raise CardError(path, "file", f"is {kind}, not a card file")
            found.append(path)
    return sorted(found)


def check_unique(cards: Iterable[Card]) -> list[Card]:
    """Return the cards as a list, failing on the first id seen twice."""
    seen: dict[str, Card] = {}
    for card in cards:
        if card.id in seen:
            raise CardError(
                card.source, "id", f"duplicate id {card.id!r}, also in {seen[card.id].source}"
            )
        seen[card.id] = card
    return list(seen.values())


def split_sections(card: Card) -> list[Card]:
    """A card as it is, or a document as its sections (see the module docstring)."""
    if card.kind != "document":
        return [card]
    sections: list[Card] = []
    for trail, body in sections_of(card.body):
        title = f"{card.title}: {' / '.join(trail)}" if trail else card.title
        sections.append(
            card.model_copy(
                update={
                    "id": f"{card.id}-{len(sections) + 1:02d}",
                    "title": title,
                    "body": body,
                    "kind": "card",
                    "document_id": card.id,
                }
            )
        )
    return sections
