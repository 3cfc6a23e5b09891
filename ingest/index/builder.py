"""Building a generation: validate, write every row and record, complete, swap, collect.

One sequence for every layout (:class:`~ingest.index.generations.Generations`), under the
store's writer lock: a failure anywhere drops the partial generation and leaves the live one
answering; only a complete generation whose counts match its manifest is swapped in; then
every generation but the new one and the one it replaced (the new one alone with ``clean``)
is removed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from ingest.cards import Card, load_cards
from ingest.embeddings import load_embeddings
from ingest.index.generations import Generations, collect
from ingest.index.local import LocalGenerations
from ingest.index.manifest import make_manifest
from ingest.index.reader import Index, generations_of, own_client
from ingest.index.remote import RemoteGenerations
from ingest.index.rows import upsert_documents
from ingest.lexical import BM25Index
from ingest.settings import Settings
from ingest.splitter import CardSplitter

logger = logging.getLogger(__name__)


class NotAStoreError(ValueError):
    """``--clean`` was asked of a folder that holds other things than a cardrag store."""


def build(
    cards: Sequence[Card],
    generations: Generations,
    embeddings: Embeddings,
    splitter: CardSplitter,
    *,
    extra_manifest: dict[str, Any] | None = None,
    languages: Sequence[str] = ("en",),
    progress: bool = True,
    clean: bool = False,
    locked: bool = False,
) -> tuple[Index, str | None]:
    """Build a complete new generation beside the live one, swap it in, collect the old ones.

    Args:
        cards: Validated cards (validate before calling: nothing is touched on a bad corpus).
        generations: Where the store keeps its generations.
        embeddings: The embedding model.
        splitter: The child splitter.
        extra_manifest: Recorded in the manifest (e.g. the model name).
        languages: Languages of the cards, for BM25 stop words.
        progress: Show progress bars.
        clean: Keep no generation but the new one (the replaced one too is removed).
        locked: The caller already holds ``generations.lock()`` (taken here otherwise).

    Returns:
        The new index, opened, and the generation it replaced.

    Raises:
        StoreLockedError: when another ingest holds the store's writer lock.
    """
    with contextlib.nullcontext() if locked else generations.lock():
        generation = generations.new()
        try:
            collections = generations.collections(generation, embeddings)
            docstore = generations.parents(generation)
            written = upsert_documents(
                collections, docstore, splitter, [c.to_document() for c in cards], progress=progress
            )
            bm25 = BM25Index.from_rows(
                ((str(d.id), d.page_content, d.metadata) for d in written), languages
            )
            manifest = make_manifest(splitter, len(cards), len(written), extra_manifest)
            generations.complete(generation, manifest, bm25)
            previous = generations.swap(generation)
        except BaseException:
            logger.warning("ingest failed; removing the partial index %s", generation)
            generations.drop(generation)
            raise
        keep = {generation} if clean or previous is None else {generation, previous}
        dropped = collect(generations, keep)
        if dropped:
            logger.info("removed %d old generation(s): %s", len(dropped), ", ".join(dropped))
    index = Index(
        path=generations.path(generation),
        collections=collections,
        docstore=docstore,
        manifest=manifest,
        bm25=bm25,
        generation=generation,
        client=own_client(generations, collections),
    )
    return index, previous


def build_index(
    cards: Sequence[Card],
    store_dir: Path,
    embeddings: Embeddings,
    splitter: CardSplitter,
    *,
    extra_manifest: dict[str, Any] | None = None,
    progress: bool = True,
    languages: Sequence[str] = ("en",),
    parents: str | None = None,
) -> Index:
    """:func:`build` into a store folder (see :class:`LocalGenerations`); the new index."""
    generations = LocalGenerations(Path(store_dir), parents)
    index, _ = build(
        cards,
        generations,
        embeddings,
        splitter,
        extra_manifest=extra_manifest,
        languages=languages,
        progress=progress,
    )
    return index


def ingest_folder(
    settings: Settings, cards_dir: Path | None = None, *, clean: bool = False
) -> Index:
    """Load, validate and index a folder of cards with the configured model and budgets.

    Every check that can fail runs before anything is written or removed: the cards, the
    store folder (``clean`` refuses one that holds other things), the writer lock, the model.

    Args:
        settings: Paths, model and chunk budgets.
        cards_dir: Overrides ``settings.cards_dir``.
        clean: Remove every previous generation once the new one is live.

    Returns:
        The new index, already swapped in.

    Raises:
        NotAStoreError: when ``clean`` is asked of a folder that is not a cardrag store.
    """
    cards = load_cards(cards_dir or settings.cards_dir, settings.max_card_chars)
    generations = generations_of(settings)
    if clean and isinstance(generations, LocalGenerations) and not generations.looks_like_a_store():
        msg = (
            f"{settings.store_dir}: --clean refused: the folder holds files that are not a "
            "cardrag store (no `current` link, no index-* generation); set CARDRAG_STORE_DIR"
        )
        raise NotAStoreError(msg)
    extra: dict[str, Any] = {"embedding_model": settings.embedding_model}
    if isinstance(generations, RemoteGenerations):
        extra["chroma_url"] = generations.url
    with generations.lock():  # before the model loads: a second ingest is refused at once
        index, _ = build(
            cards,
            generations,
            load_embeddings(settings.embedding_model, settings.threads),
            CardSplitter.from_settings(settings),
            extra_manifest=extra,
            languages=settings.bm25_languages,
            clean=clean,
            locked=True,
        )
    return index
