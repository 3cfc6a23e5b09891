"""What a generation records about how it was built, and the model check made on opening it."""

from __future__ import annotations

import datetime as dt
from typing import Any

from cardrag.ingest.index.collections import DISTANCE_SPACE, KINDS
from cardrag.ingest.index.parents import PARENT_FORMAT_VERSION
from cardrag.ingest.lexical import BM25Index
from cardrag.ingest.splitter import CardSplitter


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
    kind (``child``, ``card``, ``sentence``).
    """
    return {
        **(extra or {}),
        "built_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cards": cards,
        "children": children,
        **({"rows": kinds} if kinds is not None else {}),
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
