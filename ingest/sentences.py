"""A card's sentences: where each sits in the body, short ones paired, and their windows.

The ``sentence_window`` chunker's children and the ``parent_child`` chunker's sentence rows
are these sentences (:class:`~cardrag.ingest.splitter.CardSplitter`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")
SHORT_SENTENCE = 60
"""Sentences shorter than this (headings, "Missed dose:") are paired with the next one."""


def sentences(text: str) -> list[tuple[int, int]]:
    r"""``(start, end)`` of each sentence or line of a text, whitespace excluded.

    Example:
        >>> text = "Take it. Then wait!\nNext line"
        >>> [text[s:e] for s, e in sentences(text)]
        ['Take it.', 'Then wait!', 'Next line']
    """
    out: list[tuple[int, int]] = []
    pos = 0
    for brk in [*_SENTENCE_BREAK.finditer(text), None]:
        end = len(text) if brk is None else brk.start()
        piece = text[pos:end]
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            out.append((pos + lead, pos + len(piece.rstrip())))
        if brk is not None:
            pos = brk.end()
    return out


def pair_short(bounds: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Join each sentence shorter than ``SHORT_SENTENCE`` to the one after it.

    A short last sentence joins the one before it. So a heading like "Missed dose:" travels
    with its sentence.

    Example:
        >>> pair_short([(0, 12), (13, 100), (101, 110)])
        [(0, 110)]
    """
    out: list[tuple[int, int]] = []
    carry: int | None = None
    for start, end in bounds:
        start = start if carry is None else carry
        if end - start < SHORT_SENTENCE:
            carry = start
            continue
        carry = None
        out.append((start, end))
    if carry is not None:
        if out:
            out[-1] = (out[-1][0], bounds[-1][1])
        else:
            out.append((carry, bounds[-1][1]))
    return out


def sentence_window(bounds: Sequence[tuple[int, int]], i: int, budget: int) -> tuple[int, int]:
    """The window around sentence ``i``, in body offsets.

    Whole neighbours are added alternately before and after while the window (from the first
    sentence's start to the last one's end) fits ``budget``.

    The sentence itself is always in its window, even when longer than the budget.

    Example:
        >>> sentence_window([(0, 10), (11, 20), (21, 30), (31, 40)], 1, 20)
        (0, 20)
    """
    lo = hi = i
    grew = True
    while grew:
        grew = False
        if lo > 0 and bounds[hi][1] - bounds[lo - 1][0] <= budget:
            lo -= 1
            grew = True
        if hi + 1 < len(bounds) and bounds[hi + 1][1] - bounds[lo][0] <= budget:
            hi += 1
            grew = True
    return bounds[lo][0], bounds[hi][1]
