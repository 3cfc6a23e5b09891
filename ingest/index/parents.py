"""Parent records (versioned JSON) and the stores that hold them, one per index generation.

A parent record is the whole card: ``{"format_version", "id", "page_content", "metadata"}``.
The store behind it is LangChain's: ``LocalFileStore`` in the generation's folder by default,
an in-memory store, a shared folder, or ``RedisStore`` (``CARDRAG_PARENT_STORE``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from langchain_classic.storage import EncoderBackedStore, LocalFileStore
from langchain_core.documents import Document
from langchain_core.stores import BaseStore, InMemoryByteStore

from cardrag.ingest import metadata as md

PARENT_FORMAT_VERSION = 1
"""Version written into every parent record; readers fill defaults for older records."""
PARENT_DEFAULTS: dict[str, Any] = {
    md.LICENSE: "",
    md.TOPICS: [],
    md.ACCESSED_AT: "",
    md.SENSITIVITY: "public",
    md.SOURCE: "",
}
"""Metadata a record written before a field existed gets on reading. Version 0 (no
``format_version``, no ``id``) predates sensitivity, so everything in it was served: public."""
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
FILES = "files"
"""The part of a generation's stores that holds its files other than parents (BM25)."""
_MEMORY: dict[str, InMemoryByteStore] = {}
"""Parent stores of ``CARDRAG_PARENT_STORE=memory``, per index generation (this process)."""


def redis_down(exc: BaseException, spec: str | None) -> str | None:
    """The one line to show when ``exc`` is the parent store's Redis not answering, else None.

    Example:
        >>> redis_down(ValueError("x"), "redis://localhost:6379/0") is None
        True
    """
    try:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import ResponseError
        from redis.exceptions import TimeoutError as RedisTimeoutError
    except ImportError:  # the ``distributed`` extra is not installed: no Redis to be down
        return None
    if isinstance(exc, ResponseError) and "DB index" in str(exc):  # redis://host:port/99999
        return f"CARDRAG_PARENT_STORE={spec}: the Redis server has no such database ({exc})"
    if not isinstance(exc, RedisConnectionError | RedisTimeoutError):
        return None
    return f"CARDRAG_PARENT_STORE={spec}: the Redis server does not answer ({exc})"


def serialize_parent(doc: Document) -> bytes:
    """A parent card as a versioned JSON record."""
    record = {
        "format_version": PARENT_FORMAT_VERSION,
        "id": doc.id,
        "page_content": doc.page_content,
        "metadata": doc.metadata,
    }
    return json.dumps(record, ensure_ascii=False, sort_keys=True).encode("utf-8")


def deserialize_parent(data: bytes) -> Document:
    """Read a parent record of any known format version; missing fields get defaults.

    Reading never rewrites the record: an old store stays as it was written, and a re-ingest
    writes the new format into a new index beside it.
    """
    record: dict[str, Any] = json.loads(data.decode("utf-8"))
    metadata = dict(record.get("metadata") or {})
    doc_id = record.get("id") or metadata.get(md.PARENT_ID)
    metadata.setdefault(md.PARENT_ID, doc_id)
    metadata.setdefault(md.TITLE, doc_id)
    for key, default in PARENT_DEFAULTS.items():
        metadata.setdefault(key, list(default) if isinstance(default, list) else default)
    return Document(id=doc_id, page_content=record.get("page_content", ""), metadata=metadata)


def open_parent_store(path: Path) -> BaseStore[str, Document]:
    """Parent cards on disk: ``LocalFileStore`` with a versioned JSON encoding."""
    return encoded(LocalFileStore(path))


def encoded(store: BaseStore[str, bytes]) -> BaseStore[str, Document]:
    """Any byte store as a parent store: the same versioned JSON records everywhere."""
    return EncoderBackedStore(
        store,
        key_encoder=lambda key: key,
        value_serializer=serialize_parent,
        value_deserializer=deserialize_parent,
    )


def parent_store(
    spec: str | None, generation: str, default: Path, namespace: str = "cardrag"
) -> BaseStore[str, Document]:
    """The parent store of one index generation, wherever ``CARDRAG_PARENT_STORE`` says.

    Args:
        spec: ``None`` (the folder ``default``), ``memory``, a Redis URL (``redis://...``,
            LangChain's ``RedisStore``, keys prefixed ``{namespace}:{generation}/``), or a
            folder (one subfolder ``{namespace}/{generation}`` per generation).
        generation: The index generation the parents belong to.
        default: The folder used when ``spec`` is None.
        namespace: The knowledge base's prefix on shared stores (``CARDRAG_NAMESPACE``).
    """
    return encoded(_byte_store(spec, *_location(spec, namespace, generation, default)))


def generation_files(
    spec: str | None, generation: str, default: Path, namespace: str = "cardrag"
) -> BaseStore[str, bytes]:
    """A generation's files other than its parents (its BM25 index), kept beside its parents.

    Wherever ``CARDRAG_PARENT_STORE`` puts the parents, so every worker that reads them can
    read these too: keys prefixed ``{namespace}:{generation}:files/`` in Redis, a subfolder
    ``{namespace}/{generation}.files`` of a shared folder, or the folder ``default``.
    """
    return _byte_store(spec, *_location(spec, namespace, generation, default, FILES))


def _location(
    spec: str | None, namespace: str, generation: str, default: Path, part: str = ""
) -> tuple[str, Path]:
    """The key (in memory, in Redis) and the folder (no spec, a shared folder) of a store."""
    key = f"{namespace}:{generation}" + (f":{part}" if part else "")
    if spec is None:
        return key, default
    return key, Path(spec) / namespace / (f"{generation}.{part}" if part else generation)


def _byte_store(spec: str | None, key: str, folder: Path) -> BaseStore[str, bytes]:
    if spec == "memory":
        return _MEMORY.setdefault(key, InMemoryByteStore())
    if spec is not None and spec.startswith(REDIS_SCHEMES):
        return redis_store(spec, key)
    return LocalFileStore(folder)


def redis_store(url: str, prefix: str) -> BaseStore[str, bytes]:
    """LangChain's Redis byte store, keys under ``prefix`` (the ``distributed`` extra)."""
    try:
        from langchain_community.storage import RedisStore
    except ImportError as exc:  # pragma: no cover - depends on the environment
        msg = "a Redis parent store needs the extra: pip install 'cardrag[distributed]'"
        raise ImportError(msg) from exc
    store: BaseStore[str, bytes] = RedisStore(redis_url=url, namespace=prefix)
    return store


def drop_parent_store(
    spec: str | None, generation: str, default: Path, namespace: str = "cardrag"
) -> None:
    """Remove one generation's parents, wherever :func:`parent_store` put them."""
    _drop(spec, *_location(spec, namespace, generation, default))


def drop_generation_files(
    spec: str | None, generation: str, default: Path, namespace: str = "cardrag"
) -> None:
    """Remove one generation's other files, wherever :func:`generation_files` put them."""
    _drop(spec, *_location(spec, namespace, generation, default, FILES))


def _drop(spec: str | None, key: str, folder: Path) -> None:
    if spec == "memory":
        _MEMORY.pop(key, None)
    elif spec is not None and spec.startswith(REDIS_SCHEMES):
        store = redis_store(spec, key)
        keys = list(store.yield_keys())
        for start in range(0, len(keys), 1000):
            store.mdelete(keys[start : start + 1000])
    else:
        shutil.rmtree(folder, ignore_errors=True)


def count_parents(store: BaseStore[str, Document]) -> int:
    """How many parent records a store holds (one pass over its keys)."""
    return sum(1 for _ in store.yield_keys())
