"""The context budget: each returned parent cut to a window around its match, and all together.

Whole parents are what ``ParentDocumentRetriever`` returns, and with whole long documents as
parents k of them can fill a prompt (140,000 characters in one call of the how-to). Two limits,
both off by default:

* ``max_parent_chars``: each parent is cut to a window of at most this many characters around
  its matched child, ending on sentence boundaries where the window allows it, else on words;
* ``max_context_chars``: all returned parents together. The lowest-ranked parents are cut
  first (to a window around their match), then dropped; a higher parent is never cut or
  dropped to keep a lower one. The first parent is always returned, cut to the budget at most.

A cut parent's ``page_content`` is ``parent[budget_start_index:budget_end_index]`` (in its
metadata, with ``parent_chars``, the whole parent's length); its ``matched_start_index`` and
``matched_end_index`` stay offsets in the whole parent. Pure functions, shared by the sync and
async paths.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.documents import Document

from cardrag.ingest import metadata as md

MIN_WINDOW = 200
"""The least room, in characters, worth returning a lower-ranked parent in (less: dropped)."""

BUDGET_START_INDEX = "budget_start_index"
"""Where a cut parent's returned text starts in the whole parent."""
BUDGET_END_INDEX = "budget_end_index"
"""Where a cut parent's returned text ends in the whole parent (exclusive)."""
PARENT_CHARS = "parent_chars"
"""The whole parent's length, on a cut parent."""

_SENTENCE_END = re.compile(r"[.!?\u2026](?:[\"')\]\u201d\u2019]*)(?=\s)|\n")
_SPACE = re.compile(r"\s+")


def matched_span(text: str, metadata: dict[str, object]) -> tuple[int, int]:
    """Where the matched child lies in the parent's text (its offsets, else found, else 0).

    Example:
        >>> matched_span("Tea. Rice is a grain.", {"matched_child_text": "Rice is a grain."})
        (5, 21)
    """
    start, end = metadata.get(md.MATCHED_START_INDEX), metadata.get(md.MATCHED_END_INDEX)
    offset = metadata.get(BUDGET_START_INDEX, 0)  # offsets are in the whole parent
    if isinstance(start, int) and isinstance(end, int) and isinstance(offset, int):
        start, end = start - offset, end - offset
        if 0 <= start <= end <= len(text):
            return start, end
    child = str(metadata.get(md.MATCHED_CHILD_TEXT) or "")
    found = text.find(child) if child else -1
    return (found, found + len(child)) if found >= 0 else (0, 0)


def window(text: str, span: tuple[int, int], max_chars: int) -> tuple[int, int]:
    """A range of at most ``max_chars`` of ``text`` around ``span``, on sentence or word edges.

    The span is centred in the window; the window's edges then move inward to the nearest
    sentence edge that keeps the span whole, else to the nearest word edge.

    Example:
        >>> text = "One. Two is here. Three."
        >>> start, end = window(text, (5, 17), 14)
        >>> text[start:end]
        'Two is here.'
    """
    if len(text) <= max_chars:
        return 0, len(text)
    first, last = span
    if last - first >= max_chars:  # the match alone is longer: its start, cut on a word
        return first, _word_end(text, first, first + max_chars)
    start = max(0, first - (max_chars - (last - first)) // 2)
    end = min(len(text), start + max_chars)
    start = max(0, end - max_chars)
    return _edge_start(text, start, first), _edge_end(text, last, end)


def _edge_start(text: str, start: int, first: int) -> int:
    """The first sentence start in ``[start, first]``, else word start; ``start`` at 0."""
    if start == 0:
        return 0
    for found in _SENTENCE_END.finditer(text, start - 1, first):
        begin = found.end()
        while begin < first and text[begin].isspace():
            begin += 1
        if begin <= first:
            return begin
    space = _SPACE.search(text, start, first)
    return space.end() if space else start


def _edge_end(text: str, last: int, end: int) -> int:
    """The last sentence end in ``[last, end]``, else word end; ``end`` at the text's end."""
    if end >= len(text):
        return len(text)
    ends = [found.end() for found in _SENTENCE_END.finditer(text, max(last - 1, 0), end)]
    ends = [e - 1 if text[e - 1] == "\n" else e for e in ends]
    if ends and ends[-1] >= last:
        return ends[-1]
    return _word_end(text, last, end)


def _word_end(text: str, last: int, end: int) -> int:
    """The last word end in ``[last, end]`` (``end`` itself when no space lies between)."""
    if end >= len(text) or text[end].isspace():
        return end
    space = text.rfind(" ", last, end)
    return space if space >= last else end


def cut(doc: Document, max_chars: int) -> Document:
    """``doc`` cut to a window of at most ``max_chars`` around its match (as it is if shorter)."""
    text = doc.page_content
    start, end = window(text, matched_span(text, doc.metadata), max_chars)
    if (start, end) == (0, len(text)):
        return doc
    whole = int(doc.metadata.get(PARENT_CHARS, len(text)))
    offset = int(doc.metadata.get(BUDGET_START_INDEX, 0))
    metadata = {
        **doc.metadata,
        BUDGET_START_INDEX: offset + start,
        BUDGET_END_INDEX: offset + end,
        PARENT_CHARS: whole,
    }
    return Document(id=doc.id, page_content=text[start:end], metadata=metadata)


def budgeted(
    docs: Sequence[Document], max_parent_chars: int | None, max_context_chars: int | None
) -> list[Document]:
    """The returned parents within both budgets, in rank order (None: no limit).

    Example:
        >>> docs = [Document("a" * 300, metadata={}), Document("b" * 300, metadata={})]
        >>> [len(d.page_content) for d in budgeted(docs, None, 500)]
        [300, 200]
        >>> [len(d.page_content) for d in budgeted(docs, None, 450)]
        [300]
    """
    out = [cut(doc, max_parent_chars) if max_parent_chars else doc for doc in docs]
    if max_context_chars is None:
        return out
    room = max_context_chars
    kept: list[Document] = []
    for rank, doc in enumerate(out):
        fitted = doc
        if len(doc.page_content) > room:
            if rank and room < MIN_WINDOW:
                break
            fitted = cut(doc, room)
        kept.append(fitted)
        room -= len(fitted.page_content)
        if room <= 0:
            break
    return kept
