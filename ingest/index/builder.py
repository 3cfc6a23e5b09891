"""Building a generation: validate, write every row and record, complete, swap, collect.

One sequence for every layout (:class:`~cardrag.ingest.index.generations.Generations`), under the
store's writer lock: a failure anywhere drops the partial generation and leaves the live one
answering; only a complete generation whose counts match its manifest is swapped in; then
every generation but the new one and the one it replaced (the new one alone with ``clean``)
is removed.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from cardrag.ingest import metadata as md
from cardrag.ingest.cards import Card
from cardrag.ingest.corpus import card_aliases, load_cards
from cardrag.ingest.embeddings import LazyEmbeddings
from cardrag.ingest.index.cache import (
    Changes,
    EmbeddingCache,
    cached_embeddings,
    card_hash,
    changes,
    fill,
    load_record,
    missing,
    prune,
    save_record,
    text_key,
)
from cardrag.ingest.index.collections import Collections
from cardrag.ingest.index.generations import Generations, StoreMissingError, collect
from cardrag.ingest.index.local import LocalGenerations
from cardrag.ingest.index.manifest import make_manifest
from cardrag.ingest.index.parents import REDIS_SCHEMES
from cardrag.ingest.index.reader import Index, generations_of, own_client
from cardrag.ingest.index.remote import RemoteGenerations
from cardrag.ingest.index.rows import upsert_documents
from cardrag.ingest.index.vectors import VECTORS, RowVectors
from cardrag.ingest.lexical import BM25Index
from cardrag.ingest.settings import Settings
from cardrag.ingest.splitter import CardSplitter

logger = logging.getLogger(__name__)


class NotAStoreError(ValueError):
    """``--clean`` was asked of a folder that holds other things than a cardrag store."""


def saved_vectors(
    generations: Generations, generation: str, collections: Collections
) -> RowVectors | None:
    """The rows' vectors written beside a generation in a folder (None on a Chroma server)."""
    if not isinstance(generations, LocalGenerations):
        return None
    rows = collections.cards  # the whole-card rows' collection, if of its own
    sentences = collections.sentences
    return RowVectors.write_index(
        collections.children._collection,
        rows._collection if rows is not None else None,
        generations.path(generation) / VECTORS,
        sentences._collection if sentences is not None else None,
    )


def row_kinds(chunk_indexes: Iterable[object]) -> dict[str, int]:
    """How many rows of each kind: children, whole-card rows, sentence rows.

    Example:
        >>> row_kinds([0, 1, -1, -2, -3])
        {'child': 2, 'card': 1, 'sentence': 2}
    """
    kinds = {"child": 0, "card": 0, "sentence": 0}
    for chunk in chunk_indexes:
        kinds[md.row_kind(chunk)] += 1
    return kinds


def build(
    cards: Sequence[Card],
    generations: Generations,
    embeddings: Embeddings,
    splitter: CardSplitter,
    *,
    extra_manifest: dict[str, Any] | None = None,
    stemmed: Sequence[str] = (),
    progress: bool = True,
    clean: bool = False,
    locked: bool = False,
    cache: EmbeddingCache | None = None,
) -> tuple[Index, str | None]:
    """Build a complete new generation beside the live one, swap it in, collect the old ones.

    Args:
        cards: Validated cards (validate before calling: nothing is touched on a bad corpus).
        generations: Where the store keeps its generations.
        embeddings: The embedding model.
        splitter: The child splitter.
        extra_manifest: Recorded in the manifest (e.g. the model name).
        stemmed: Languages whose BM25 tokens are stemmed (each card is analysed in its own
            language either way).
        progress: Show progress bars.
        clean: Keep no generation but the new one (the replaced one too is removed).
        locked: The caller already holds ``generations.lock()`` (taken here otherwise).
        cache: Reuse the vectors of texts embedded before, count what changed against the
            live generation (``manifest["changes"]``) and prune what no generation uses.

    Returns:
        The new index, opened, and the generation it replaced.

    Raises:
        StoreLockedError: when another ingest holds the store's writer lock.
    """
    parents = [c.to_document() for c in cards]
    children = splitter.split_documents(parents)
    hashes = card_hashes(parents) if cache is not None else {}
    extra = dict(extra_manifest or {})
    extra["aliases"] = card_aliases(cards)
    with contextlib.nullcontext() if locked else generations.lock():
        if cache is not None:
            embeddings, counts = reuse(cache, embeddings, hashes, children, generations, progress)
            extra["changes"] = counts.as_dict()
        generation = generations.new()
        try:
            collections = generations.collections(generation, embeddings)
            docstore = generations.parent_store(generation)
            written = upsert_documents(
                collections,
                docstore,
                splitter,
                parents,
                children=children,
                progress=progress and cache is None,  # with a cache, fill() showed the work
            )
            bm25 = BM25Index.from_rows(
                ((str(d.id), d.page_content, d.metadata) for d in written), stemmed=stemmed
            )
            kinds = row_kinds(d.metadata.get(md.CHUNK_INDEX) for d in written)
            manifest = make_manifest(splitter, len(cards), len(written), extra, bm25, kinds)
            vectors = saved_vectors(generations, generation, collections)  # before complete
            generations.complete(generation, manifest, bm25)
            if cache is not None:
                keys = sorted({text_key(cache.model, c.page_content) for c in children})
                save_record(cache.store_dir, generation, hashes, keys)
            previous = generations.swap(generation)
        except BaseException:
            logger.warning("ingest failed; removing the partial index %s", generation)
            generations.drop(generation)
            raise
        keep = {generation} if clean or previous is None else {generation, previous}
        dropped = collect(generations, keep)
        if dropped:
            logger.info("removed %d old generation(s): %s", len(dropped), ", ".join(dropped))
        if cache is not None:
            prune(cache.store_dir, cache.vectors(), generations.generations())
    index = Index(
        path=generations.path(generation),
        collections=collections,
        docstore=docstore,
        manifest=manifest,
        bm25=bm25,
        generation=generation,
        client=own_client(generations, collections),
        vectors=vectors,
        removed=dropped,
    )
    return index, previous


def reuse(
    cache: EmbeddingCache,
    embeddings: Embeddings,
    hashes: dict[str, str],
    children: Sequence[Document],
    generations: Generations,
    progress: bool,
) -> tuple[Embeddings, Changes]:
    """Embed the texts the cache lacks (bar with rate and ETA); the cached model and counts."""
    store = cache.vectors()
    texts = [c.page_content for c in children]
    todo = missing(store, cache.model, texts)
    cached = cached_embeddings(embeddings, store, cache.model)
    fill(cached, todo, progress=progress)
    counts = plan(cache, hashes, children, generations, embedded=len(todo))
    return cached, counts


def card_hashes(parents: Sequence[Document]) -> dict[str, str]:
    """``{card id: card hash}`` of the cards an ingest writes (its record)."""
    return {str(p.id): card_hash(p) for p in parents}


def plan(
    cache: EmbeddingCache,
    after: dict[str, str],
    children: Sequence[Document],
    generations: Generations,
    embedded: int | None = None,
) -> Changes:
    """What an ingest of cards ``after`` (their hashes) would change against the live one.

    ``embedded``: how many of the children's texts the cache lacks, when already counted.
    """
    texts = {c.page_content for c in children}
    if embedded is None:
        embedded = len(missing(cache.vectors(), cache.model, texts))
    try:
        live: str | None = generations.current()
    except StoreMissingError:
        live = None
    before = load_record(cache.store_dir, live)["cards"]
    return changes(before, after, embedded, len(texts) - embedded)


def build_index(
    cards: Sequence[Card],
    store_dir: Path,
    embeddings: Embeddings,
    splitter: CardSplitter,
    *,
    extra_manifest: dict[str, Any] | None = None,
    progress: bool = True,
    stemmed: Sequence[str] = (),
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
        stemmed=stemmed,
        progress=progress,
    )
    return index


def ingest_folder(
    settings: Settings,
    cards_dir: Path | None = None,
    *,
    clean: bool = False,
    break_lock: bool = False,
) -> Index:
    """Load, validate and index a folder of cards with the configured model and budgets.

    Every check that can fail runs before anything is written or removed: the cards, the
    store folder (``clean`` refuses one that holds other things), the writer lock, the model.

    Args:
        settings: Paths, model and chunk budgets.
        cards_dir: Overrides ``settings.cards_dir``.
        clean: Remove every previous generation once the new one is live.
        break_lock: On a Chroma server, take the writer lock whoever holds it (a store
            folder's lock needs no breaking: the kernel releases it when its holder dies).

    Returns:
        The new index, already swapped in.

    Raises:
        NotAStoreError: when ``clean`` is asked of a folder that is not a cardrag store.
    """
    cards = load_cards(cards_dir or settings.cards_dir, settings.max_card_chars)
    generations = generations_of(settings)
    if break_lock and isinstance(generations, RemoteGenerations):
        generations.break_lock = True
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
            LazyEmbeddings(settings.embedding_model, ingest_threads(settings)),  # loaded if needed
            CardSplitter.from_settings(settings),
            extra_manifest=extra,
            stemmed=settings.bm25_stem_languages,
            clean=clean,
            locked=True,
            cache=cache_of(settings),
        )
    return index


def cache_of(settings: Settings) -> EmbeddingCache:
    """The store's embedding cache: in the parents' Redis when there is one, else a folder."""
    spec = settings.parent_store
    redis = spec if spec is not None and spec.startswith(REDIS_SCHEMES) else None
    return EmbeddingCache(settings.store_dir, settings.embedding_model, redis, settings.namespace)


def ingest_threads(settings: Settings) -> int:
    """The model threads an ingest uses: ``ingest_threads``, or every core."""
    return settings.ingest_threads or os.cpu_count() or 1


def plan_folder(settings: Settings, cards_dir: Path | None = None) -> Changes:
    """What ``ingest_folder`` would change, without loading the model or writing anything."""
    cards = load_cards(cards_dir or settings.cards_dir, settings.max_card_chars)
    parents = [c.to_document() for c in cards]
    children = CardSplitter.from_settings(settings).split_documents(parents)
    cache = cache_of(settings)
    return plan(cache, card_hashes(parents), children, generations_of(settings))
