"""Small to big: ranked parent hits become the whole cards a caller may see, with provenance.

Pure functions shared by the sync and async paths: which cards a caller may see
(:func:`visible`), choosing the parents to return (:func:`select`, read by :func:`take`),
turning a docstore record into a returned document (:func:`parent_document`), and logging the
parents the docstore lacks (:func:`finish`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.documents import Document

from cardrag.ingest import metadata as md
from cardrag.retrievers.fusion import ParentHit

logger = logging.getLogger(__name__)


def select(
    ranked: Sequence[ParentHit],
    parents: Sequence[Document | None],
    k: int,
    *,
    allow_restricted: bool,
    allow_internal: bool = False,
) -> tuple[list[tuple[ParentHit, Document]], list[str]]:
    """The first k ranked parents the docstore has and the caller may see, with their records.

    Before the documents are made (:func:`parent_document`): the retriever decides from it
    whether a larger window is needed, and reads the matched rows' text only for the parents
    it finally returns.

    Returns:
        ``(hit, record)`` pairs, and the ids of parents missing from the docstore (skipped).
    """
    chosen: list[tuple[ParentHit, Document]] = []
    missing: list[str] = []
    for hit, parent in zip(ranked, parents, strict=True):
        if parent is None:
            missing.append(hit.parent_id)
            continue
        sensitivity = str(parent.metadata.get(md.SENSITIVITY, "public"))
        if not visible(
            sensitivity, allow_internal=allow_internal, allow_restricted=allow_restricted
        ):
            continue  # restricted: defence in depth (the query excludes their rows already)
        chosen.append((hit, parent))
        if len(chosen) == k:
            break
    return chosen, missing


def take(
    ranked: Sequence[ParentHit],
    k: int,
    records: dict[str, Document | None],
    read: Callable[[list[str]], Sequence[Document | None]],
    *,
    allow_restricted: bool,
    allow_internal: bool = False,
) -> tuple[list[tuple[ParentHit, Document]], list[str]]:
    """The first ``k`` ranked parents that exist and may be shown, with their records.

    :func:`select` over the records, read (``read``: the docstore's ``mget``) only where not
    read yet (``records``, kept across one question's windows), a slice at a time (each read
    opens files or makes a round trip).
    """
    chosen: list[tuple[ParentHit, Document]] = []
    missing: list[str] = []
    start = 0
    while len(chosen) < k and start < len(ranked):
        part = ranked[start : start + k - len(chosen)]
        unread = [p.parent_id for p in part if p.parent_id not in records]
        if unread:
            records.update(zip(unread, read(unread), strict=True))
        more, gone = select(
            part,
            [records[p.parent_id] for p in part],
            k - len(chosen),
            allow_restricted=allow_restricted,
            allow_internal=allow_internal,
        )
        chosen += more
        missing += gone
        start += len(part)
    return chosen, missing


def visible(sensitivity: str, *, allow_internal: bool, allow_restricted: bool) -> bool:
    """Whether a card of this sensitivity may be shown to the caller.

    ``public`` cards to everyone; ``internal`` ones to staff (or a caller allowed restricted
    cards); ``restricted`` ones only to a caller allowed them. An unknown value is restricted.

    Example:
        >>> [visible(s, allow_internal=False, allow_restricted=False)
        ...  for s in ("public", "internal", "restricted", "secret")]
        [True, False, False, False]
        >>> visible("internal", allow_internal=True, allow_restricted=False)
        True
    """
    if sensitivity == "public":
        return True
    if sensitivity == "internal":
        return allow_internal or allow_restricted
    return allow_restricted


def parent_document(hit: ParentHit, parent: Document) -> Document:
    """The returned parent: card text, card metadata, score and matched-child provenance.

    When the matched child carries a sentence window, the parent also carries the window's
    range and its text as ``prompt_text``: what the model reads for this card. The ranking,
    the citation and the matched passage are the same either way.
    """
    child = hit.best
    window = sentence_window_of(child.metadata, parent.page_content)
    return Document(
        id=hit.parent_id,
        page_content=parent.page_content,
        metadata={
            **parent.metadata,
            md.PARENT_ID: hit.parent_id,
            md.CHUNK_INDEX: 0,
            md.SCORE: hit.score,
            md.MATCHED_CHILD_ID: child.child_id,
            md.MATCHED_CHILD_TEXT: child.text,
            md.MATCHED_START_INDEX: child.metadata.get(md.START_INDEX),
            md.MATCHED_END_INDEX: child.metadata.get(md.END_INDEX),
            **({md.FUSED_SCORE: hit.fused} if hit.fused is not None else {}),
            **window,
        },
    )


def sentence_window_of(child: dict[str, Any], body: str) -> dict[str, Any]:
    """The matched window's range and text, from a child's metadata (empty without one)."""
    start, end = child.get(md.WINDOW_START_INDEX), child.get(md.WINDOW_END_INDEX)
    if not isinstance(start, int) or not isinstance(end, int):
        return {}
    return {
        md.MATCHED_WINDOW_START_INDEX: start,
        md.MATCHED_WINDOW_END_INDEX: end,
        md.PROMPT_TEXT: body[start:end],
    }


def finish(docs: list[Document], missing: list[str]) -> list[Document]:
    """Log parents that were skipped because the docstore lacks them, return the documents.

    The warning counts them; their ids are logged at DEBUG only, since a server's warnings
    reach logs a public request's operator reads, and an id may name a card it must not see.
    """
    if missing:
        logger.warning("%d parents missing from the docstore, skipped", len(missing))
        logger.debug("parents missing from the docstore: %s", ", ".join(missing))
    return docs
