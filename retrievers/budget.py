"""The context budget: each returned parent cut to a window around its match, and all together.

Whole parents are what ``ParentDocumentRetriever`` returns, and with whole long documents as
parents k of them can fill a prompt (140,000 characters in one call of the how-to). Two limits,
both off by default:

* ``max_parent_chars``: each parent is cut to its matched children (the best child first,
  then the sentences of the parent's other children in the question's window, those holding
  the question's rarer words first, while they fit:
  :mod:`~cardrag.retrievers.sentence_order`), each piece widened to whole sentences where the
  room allows, at most this many characters together;
* ``max_context_chars``: all returned parents together. The lowest-ranked parents are cut
  first (to their matched children), then dropped; a higher parent is never cut or dropped to
  keep a lower one. The first parent is always returned, cut to the budget at most.

Why the other matched children: the answer often lies in another child of the right parent
than the best one. Over the shared squad-it articles (36,000 characters), a 2,000-character
window around the best child kept the answer for 66 % of the questions whole parents answer;
the matched children kept it for 81 %, in fewer characters (docs/library.md).

A cut parent's ``page_content`` is its pieces, ``parent[start:end]`` for each ``[start, end]``
of ``budget_spans``, joined by :data:`SEPARATOR` (one piece: ``parent[budget_start_index:
budget_end_index]``); ``parent_chars`` is the whole parent's length, and its
``matched_start_index`` and ``matched_end_index`` stay offsets in the whole parent. Pure
functions, shared by the sync and async paths.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import zip_longest

from langchain_core.documents import Document

from cardrag.ingest import metadata as md
from cardrag.ingest.language import language_of
from cardrag.retrievers.child_hit import ChildHit, nearest
from cardrag.retrievers.fusion import ParentHit
from cardrag.retrievers.sentence_order import by_question

MIN_WINDOW = 200
"""The least room, in characters, worth returning a lower-ranked parent in (less: dropped)."""

BUDGET_START_INDEX = "budget_start_index"
"""Where a cut parent's returned text starts in the whole parent."""
BUDGET_END_INDEX = "budget_end_index"
"""Where a cut parent's returned text ends in the whole parent (exclusive)."""
PARENT_CHARS = "parent_chars"
"""The whole parent's length, on a cut parent."""
BUDGET_SPANS = "budget_spans"
"""The ``[start, end]`` offsets in the whole parent of each piece a cut parent returns."""
SEPARATOR = "\n…\n"
"""What stands between two pieces of a cut parent (counted in the budget)."""

Span = tuple[int, int]

_SENTENCE_END = re.compile(r"[.!?\u2026](?:[\"')\]\u201d\u2019]*)(?=\s)|\n")
_SPACE = re.compile(r"\s+")


def matched_span(text: str, metadata: dict[str, object]) -> tuple[int, int]:
    """Where the matched child lies in the parent's text (its offsets, else found, else 0).

    Example:
        >>> matched_span("Tea. Rice is a grain.", {"matched_child_text": "Rice is a grain."})
        (5, 21)
    """
    child = str(metadata.get(md.MATCHED_CHILD_TEXT) or "")
    start, end = metadata.get(md.MATCHED_START_INDEX), metadata.get(md.MATCHED_END_INDEX)
    return _located(text, start, end, child) or (0, 0)


def _located(text: str, start: object, end: object, child: str) -> Span | None:
    """A child's range in ``text``: its offsets where they fit, else where its text is found."""
    if isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text):
        return start, end
    found = text.find(child) if child else -1
    return (found, found + len(child)) if found >= 0 else None


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


Rankings = Sequence[Sequence[ChildHit]]
"""A question's rankings of children: dense (any order: sorted here) and BM25's, best first."""


def matched_children(rankings: Rankings, shown: Sequence[ParentHit]) -> list[ChildHit]:
    """The shown parents' other children each ranking matched, the rankings taking turns.

    The first ranking (dense) is put in similarity order; the others (BM25) come best first.
    Their scores are on other scales, so their first rows are taken in turn, not by score.
    Each parent's best child is left out: it is read and placed as the parent's match.

    Example:
        >>> dense = [ChildHit("a::00", "a", 0.5), ChildHit("b::00", "b", 0.7),
        ...          ChildHit("a::01", "a", 0.9), ChildHit("a::03", "a", 0.8)]
        >>> bm25 = [ChildHit("a::02", "a", 7.0), ChildHit("a::00", "a", 5.0)]
        >>> shown = [ParentHit("a", 0.9, dense[2])]
        >>> [h.child_id for h in matched_children([dense, bm25], shown)]
        ['a::02', 'a::03', 'a::00']
    """
    parents = {p.parent_id for p in shown}
    best = {p.best.child_id for p in shown}
    first, *others = rankings or [[]]
    lists = [nearest(first, len(first)), *others]
    mine = [[hit for hit in ranking if hit.parent_id in parents] for ranking in lists]
    out: dict[str, ChildHit] = {}
    for turn in zip_longest(*mine):  # a best child takes its ranking's turn, then is left out
        for hit in turn:
            if hit is not None and hit.child_id not in out:
                out[hit.child_id] = hit
    return [hit for child_id, hit in out.items() if child_id not in best]


def child_span(text: str, hit: ChildHit) -> Span | None:
    """Where a matched child lies in its parent's text (its offsets, else found; None: not there).

    Example:
        >>> child_span("Tea. Rice is a grain.", ChildHit("c", "p", 0.9, "Rice is a grain."))
        (5, 21)
    """
    start, end = hit.metadata.get(md.START_INDEX), hit.metadata.get(md.END_INDEX)
    return _located(text, start, end, hit.text)


def pieces(text: str, spans: Sequence[Span], max_chars: int) -> list[Span]:
    """The ranges of ``text`` a cut parent returns: its matched spans, best first, while they fit.

    The first span (the best child) is always kept, cut as :func:`window` cuts it when alone
    it is longer than ``max_chars``. Each further span is kept when the ranges kept so far,
    merged where they overlap or nearly touch, and the separators between them stay within
    ``max_chars``. Each range then starts and ends on the nearest sentence edges outside it,
    as long as the room left allows, the best child's range first.

    Example:
        >>> text = "One. Two is here. Three. Four is far. Five."
        >>> [text[a:b] for a, b in pieces(text, [(9, 16), (30, 36)], 30)]
        ['Two is here.', 'Four is far.']
        >>> [text[a:b] for a, b in pieces(text, [(9, 16), (30, 36)], 24)]  # less room
        ['Two is here.', 'is far.']
        >>> [text[a:b] for a, b in pieces(text, [(9, 16), (30, 36)], 12)]  # no room for both
        ['Two is here.']
    """
    if len(text) <= max_chars:
        return [(0, len(text))]
    if not spans:  # no match located: the text's start, as a window cuts it
        return [window(text, (0, 0), max_chars)]
    first = spans[0]
    if first[1] - first[0] >= max_chars:
        return [window(text, first, max_chars)]
    kept = [first]
    for span in spans[1:]:
        trial = _merged([*kept, span])
        if _size(trial) <= max_chars:
            kept = trial
    room = max_chars - _size(kept)
    widened = list(kept)
    for i in sorted(range(len(kept)), key=lambda i: _rank(kept[i], spans)):  # the best first
        start, end = kept[i]
        begin = _sentence_start(text, start, max(0, start - room))
        room -= start - begin
        finish = _sentence_end(text, end, min(len(text), end + room))
        room -= finish - end
        widened[i] = (begin, finish)
    return _merged(widened)


def _rank(kept: Span, spans: Sequence[Span]) -> int:
    """The rank of the best span a kept range holds."""
    return next(i for i, (start, end) in enumerate(spans) if kept[0] <= start and end <= kept[1])


def _size(ranges: Sequence[Span]) -> int:
    """Characters the ranges return, separators included."""
    return sum(end - start for start, end in ranges) + len(SEPARATOR) * (len(ranges) - 1)


def _merged(ranges: Sequence[Span]) -> list[Span]:
    """The ranges in text order, joined where the gap between two is no longer than a separator."""
    out: list[Span] = []
    for start, end in sorted(ranges):
        if out and start <= out[-1][1] + len(SEPARATOR):
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _sentence_start(text: str, start: int, lowest: int) -> int:
    """The nearest sentence start in ``[lowest, start]`` (else ``start``; 0 counts as one)."""
    begin = 0 if lowest == 0 else start
    # a sentence end a few characters before ``lowest`` may start a sentence after it
    for found in _SENTENCE_END.finditer(text, max(0, lowest - 8), start):
        after = found.end()
        while after < start and text[after].isspace():
            after += 1
        if after >= lowest:
            begin = after
    return min(begin, start)


def _sentence_end(text: str, end: int, highest: int) -> int:
    """The nearest sentence end in ``[end, highest]`` (else ``end``; the text's end counts)."""
    # one character beyond: the space after a sentence's end is what marks it as one
    found = _SENTENCE_END.search(text, max(end - 1, 0), highest + 1)
    if found is None:
        return len(text) if highest >= len(text) else end
    finish = found.end() - 1 if text[found.end() - 1] == "\n" else found.end()
    return max(finish, end)


def cut(
    doc: Document, max_chars: int, matched: Sequence[ChildHit] = (), question: str = ""
) -> Document:
    """A whole parent cut to its matched children (:func:`pieces`): as it is if shorter.

    The best child is the one ``doc``'s metadata names (:func:`matched_span`); ``matched``
    adds the parent's other children in the question's window, best first. With the
    ``question``, those children are taken sentence by sentence, the sentences holding the
    question's rarer words first (:func:`~cardrag.retrievers.sentence_order.by_question`).
    """
    text = doc.page_content
    spans = [matched_span(text, doc.metadata)]
    spans += [span for hit in matched if (span := child_span(text, hit)) and span not in spans]
    if question and len(text) > max_chars and len(spans) > 1:
        language = language_of(doc.metadata, text[:2000])  # its opening says enough
        spans = [spans[0], *by_question(text, spans[1:], question, language)]
    ranges = pieces(text, [span for span in spans if span != (0, 0)], max_chars)
    if ranges == [(0, len(text))]:
        return doc
    metadata = {
        **doc.metadata,
        BUDGET_START_INDEX: ranges[0][0],
        BUDGET_END_INDEX: ranges[-1][1],
        BUDGET_SPANS: [[start, end] for start, end in ranges],
        PARENT_CHARS: len(text),
    }
    content = SEPARATOR.join(text[start:end] for start, end in ranges)
    return Document(id=doc.id, page_content=content, metadata=metadata)


def budgeted(
    docs: Sequence[Document],
    max_parent_chars: int | None,
    max_context_chars: int | None,
    matched: Sequence[ChildHit] = (),
    question: str = "",
) -> list[Document]:
    """The returned parents within both budgets, in rank order (None: no limit).

    Each whole parent is cut once (:func:`cut`), to the smaller of ``max_parent_chars`` and the
    context's room left; ``matched`` holds the question's matched children (any parents'),
    best first.

    Example:
        >>> docs = [Document("a" * 300, metadata={}), Document("b" * 300, metadata={})]
        >>> [len(d.page_content) for d in budgeted(docs, None, 500)]
        [300, 200]
        >>> [len(d.page_content) for d in budgeted(docs, None, 450)]
        [300]
    """
    room = max_context_chars
    kept: list[Document] = []
    for rank, doc in enumerate(docs):
        limit = max_parent_chars
        if room is not None:
            if rank and room < MIN_WINDOW:
                break
            limit = room if limit is None else min(limit, room)
        own = [hit for hit in matched if hit.parent_id == doc.id]
        fitted = cut(doc, limit, own, question) if limit is not None else doc
        kept.append(fitted)
        if room is not None:
            room -= len(fitted.page_content)
            if room <= 0:
                break
    return kept
