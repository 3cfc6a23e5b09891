"""Metadata keys: the contract between ingest, the retriever, the app and the evaluation.

Child rows in Chroma carry the card keys plus ``chunk_index``, ``start_index`` and
``end_index``. Parents returned by the retriever carry the card keys plus ``score`` and the
``matched_*`` provenance of their best child.
"""

PARENT_ID = "parent_id"
"""Card id of the parent (on children and returned parents)."""
TITLE = "title"
"""Card title."""
LICENSE = "license"
"""Licence of the card text."""
TOPICS = "topics"
"""List of topic tags."""
ACCESSED_AT = "accessed_at"
"""ISO date the card was last checked."""
SENSITIVITY = "sensitivity"
"""``public``, ``internal`` or ``restricted``."""
SOURCE = "source"
"""File the card was loaded from."""
LANGUAGE = "language"
"""ISO 639-1 language of the card text (English when absent)."""

CHUNK_INDEX = "chunk_index"
"""Position of a child within its card, from 0; always 0 on a returned parent."""
CARD_ROW = -1
"""``chunk_index`` of the optional card-level row (the whole card as one vector); such a row is
ranked with the others but never shown as a matched passage."""
SENTENCE_ROW = -2
"""``chunk_index`` of a card's first sentence row; its n-th has ``SENTENCE_ROW - n``
(:func:`sentence_row`). Sentence rows (one per sentence, short ones paired) are a fourth
ranking beside the children, the card rows and BM25; like card rows, never shown as a matched
passage."""
HAS_CARD_ROW = "has_card_row"
"""On children indexed with card rows on: whether their card got a whole-card row (cards
longer than the row limit do not), so fusion knows whether the card-row ranking applies."""
START_INDEX = "start_index"
"""Offset in the card body where a child's own text starts (after title and overlap)."""
END_INDEX = "end_index"
"""Offset in the card body where a child's own text ends (exclusive)."""
WINDOW_START_INDEX = "window_start_index"
"""Sentence-window children only: where the child's window (the sentences around it, up to
the window budget) starts in the card body."""
WINDOW_END_INDEX = "window_end_index"
"""Sentence-window children only: where that window ends (exclusive)."""
DOCUMENT_ID = "document_id"
"""Sections of a long Markdown document only: the id of the document they were cut from."""

SCORE = "score"
"""Best dense similarity of a returned parent's rows (higher is better, cosine in [-1, 1]); the
``min_similarity`` gate applies to it."""
FUSED_SCORE = "fused_score"
"""Reciprocal-rank-fusion score that ordered the parent (only when several rankings are fused)."""
MATCHED_CHILD_ID = "matched_child_id"
"""Id ``{card_id}::{NN}`` of the child that gave the parent its score."""
MATCHED_CHILD_TEXT = "matched_child_text"
"""Text of that child as embedded (title prefix and overlap included)."""
MATCHED_START_INDEX = "matched_start_index"
"""``start_index`` of that child in the card body."""
MATCHED_END_INDEX = "matched_end_index"
"""``end_index`` of that child in the card body."""

MATCHED_WINDOW_START_INDEX = "matched_window_start_index"
"""Start of the matched child's sentence window in the card body (sentence-window only)."""
MATCHED_WINDOW_END_INDEX = "matched_window_end_index"
"""End (exclusive) of that window."""
PROMPT_TEXT = "prompt_text"
"""Sentence-window only: the window's text, which the app gives the model for this card
instead of a window of the whole card. Never changes the ranking."""


def sentence_row(n: int) -> int:
    """The ``chunk_index`` of a card's ``n``-th sentence row (from 0).

    Example:
        >>> sentence_row(0), sentence_row(3), is_sentence_row(sentence_row(3)), is_sentence_row(0)
        (-2, -5, True, False)
    """
    return SENTENCE_ROW - n


def is_sentence_row(chunk_index: object) -> bool:
    """Whether a ``chunk_index`` is a sentence row's (:func:`sentence_row`)."""
    return isinstance(chunk_index, int) and chunk_index <= SENTENCE_ROW


def is_child(chunk_index: object) -> bool:
    """Whether a row's ``chunk_index`` is a real child's, not a whole-card or sentence row.

    A row without one (written by other means) is a child.

    Example:
        >>> is_child(0), is_child(None), is_child(CARD_ROW), is_child(sentence_row(0))
        (True, True, False, False)
    """
    return row_kind(chunk_index) == "child"


def row_kind(chunk_index: object) -> str:
    """Which kind of row a ``chunk_index`` is: ``child``, ``card`` or ``sentence``.

    Example:
        >>> row_kind(3), row_kind(CARD_ROW), row_kind(sentence_row(1)), row_kind(None)
        ('child', 'card', 'sentence', 'child')
    """
    if chunk_index == CARD_ROW:
        return "card"
    return "sentence" if is_sentence_row(chunk_index) else "child"


def child_id(card_id: str, chunk_index: int) -> str:
    """Deterministic child id, so re-ingesting a card replaces its rows.

    Example:
        >>> child_id("card-iron-tablets", 3)
        'card-iron-tablets::03'
        >>> child_id("card-iron-tablets", CARD_ROW)
        'card-iron-tablets::card'
        >>> child_id("card-iron-tablets", sentence_row(4))
        'card-iron-tablets::s04'
    """
    if chunk_index == CARD_ROW:
        return f"{card_id}::card"
    if is_sentence_row(chunk_index):
        return f"{card_id}::s{SENTENCE_ROW - chunk_index:02d}"
    return f"{card_id}::{chunk_index:02d}"


def parse_child_id(row_id: str) -> tuple[str, int] | None:
    """The card id and chunk index a :func:`child_id` was made of (None for any other id).

    Example:
        >>> parse_child_id("card-iron-tablets::03"), parse_child_id("card-iron-tablets::card")
        (('card-iron-tablets', 3), ('card-iron-tablets', -1))
        >>> parse_child_id("card-iron-tablets::s04")
        ('card-iron-tablets', -6)
        >>> parse_child_id("3f2a9c1e-uuid") is None
        True
    """
    card_id, sep, suffix = row_id.rpartition("::")
    if not sep or not card_id:
        return None
    if suffix == "card":
        return card_id, CARD_ROW
    if len(suffix) >= 2 and suffix.isdigit():
        return card_id, int(suffix)
    if len(suffix) >= 3 and suffix[0] == "s" and suffix[1:].isdigit():
        return card_id, sentence_row(int(suffix[1:]))
    return None
