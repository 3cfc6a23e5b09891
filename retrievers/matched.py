"""One typed view of a retrieved card, read once from the metadata the retriever sets.

The retriever returns LangChain ``Document`` objects (that is the contract with any chain);
everything downstream that needs the matched passage or the text a model should read (the
reply, the prompt, the extractive answerer, the reranker) reads it through
:class:`MatchedCard`, so they all agree on it, whichever chunker built the index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.documents import Document

from cardrag.ingest import metadata as md


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def window(text: str, start: int | None, end: int | None, budget: int) -> tuple[int, int]:
    """A window of at most ``budget`` characters that contains ``text[start:end]``.

    The window is centred on the matched passage, clamped to the text, and trimmed to whole
    words. Without a known passage it is the start of the text. A passage longer than the
    budget keeps its beginning.

    Example:
        >>> text = "aaaa bbbb cccc dddd eeee"
        >>> s, e = window(text, 20, 24, 10)
        >>> text[s:e]
        'dddd eeee'
    """
    if len(text) <= budget:
        return 0, len(text)
    if start is None or end is None or not 0 <= start <= end <= len(text):
        start, end = 0, 0
    if end - start >= budget:
        lo, hi = start, start + budget
    else:
        spare = budget - (end - start)
        lo = max(0, start - spare // 2)
        hi = min(len(text), lo + budget)
        lo = max(0, hi - budget)
    if lo > 0 and not text[lo - 1].isspace():  # do not start mid-word
        nxt = text.find(" ", lo, start if start > lo else hi)
        lo = nxt + 1 if nxt >= 0 else lo
    if hi < len(text) and not text[hi].isspace():  # do not end mid-word
        prev = text.rfind(" ", max(end, lo), hi)
        hi = prev if prev > lo else hi
    return lo, hi


@dataclass(frozen=True)
class MatchedCard:
    """A retrieved card as the app reads it.

    Example:
        >>> doc = Document(id="card-a", page_content="One. Two. Three.", metadata={
        ...     "title": "A", "score": 0.8, "matched_start_index": 5, "matched_end_index": 9})
        >>> card = MatchedCard.from_document(doc)
        >>> (card.passage, card.prompt_range(8))
        ('Two.', (5, 9))
    """

    id: str
    """Card id."""
    title: str
    """Card title."""
    text: str
    """The whole card text (the offsets below index into it)."""
    score: float
    """Best dense similarity (what the gate reads)."""
    fused_score: float | None
    """The reciprocal-rank-fusion score that ordered it, where rankings were fused."""
    child_id: str
    """The child that matched."""
    child_text: str
    """That child's text as embedded (title prefix and overlap included)."""
    start: int | None
    """Where the child's own text starts in :attr:`text` (None: unknown)."""
    end: int | None
    """Where it ends (exclusive)."""
    window_start: int | None
    """Sentence-window chunker: where the window around the matched sentence starts."""
    window_end: int | None
    """Where that window ends (exclusive)."""

    @classmethod
    def from_document(cls, doc: Document) -> MatchedCard:
        """Read a retrieved ``Document`` (missing metadata gets neutral values)."""
        meta = doc.metadata
        fused = meta.get(md.FUSED_SCORE)
        start, end = _int(meta.get(md.MATCHED_START_INDEX)), _int(meta.get(md.MATCHED_END_INDEX))
        if start is not None and end is not None and not 0 <= start <= end <= len(doc.page_content):
            start = end = None
        w_start = _int(meta.get(md.MATCHED_WINDOW_START_INDEX))
        w_end = _int(meta.get(md.MATCHED_WINDOW_END_INDEX))
        if w_start is None or w_end is None or not 0 <= w_start <= w_end <= len(doc.page_content):
            w_start = w_end = None
        return cls(
            id=str(doc.id or meta.get(md.PARENT_ID, "")),
            title=str(meta.get(md.TITLE, "") or ""),
            text=doc.page_content,
            score=float(meta.get(md.SCORE, 0.0)),
            fused_score=float(fused) if fused is not None else None,
            child_id=str(meta.get(md.MATCHED_CHILD_ID, "")),
            child_text=str(meta.get(md.MATCHED_CHILD_TEXT, "")),
            start=start,
            end=end,
            window_start=w_start,
            window_end=w_end,
        )

    @property
    def passage(self) -> str:
        """The matched child's own text in the card; else the child as embedded; else the card."""
        if self.start is not None and self.end is not None and self.start < self.end:
            return self.text[self.start : self.end]
        return self.child_text or self.text

    def prompt_range(self, budget: int) -> tuple[int, int]:
        """What a model reads of this card, as ``(start, end)`` in :attr:`text`.

        The sentence window where the chunker made one, otherwise a window of at most
        ``budget`` characters around the matched passage.
        """
        if self.window_start is not None and self.window_end is not None:
            return self.window_start, self.window_end
        return window(self.text, self.start, self.end, budget)
