"""Running one question's independent reads: at once on a small shared pool, or in turn.

Chroma's queries and reads release the GIL, so on two cores two vector queries take the time
of one (measured at 10,000 cards: 2.9 ms one after the other, 1.6 ms at once). Scans of saved
vectors and BM25 hold it: run at once they only wait for each other, so they run in turn.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

_READS: dict[int, ThreadPoolExecutor] = {}
"""Threads for :func:`at_once` (reads only, never nested), one pool per process: a worker
forked from a process that had already read gets its own (a forked child inherits the pool
but not its threads)."""


def read_pool() -> ThreadPoolExecutor:
    """This process's pool for concurrent reads, made on first use."""
    pid = os.getpid()
    if pid not in _READS:
        _READS.clear()  # a parent's pool: its threads did not come along
        _READS[pid] = ThreadPoolExecutor(max_workers=4, thread_name_prefix="cardrag-read")
    return _READS[pid]


_IN_PLACE: set[Callable[[], Any]] = set()
"""Reads that cost nothing (:func:`in_place`): :func:`at_once` answers them in this thread."""

Read = TypeVar("Read", bound=Callable[[], Any])


def in_place(read: Read) -> Read:
    """Mark a read with nothing to read (a ranking that is off): never handed to the pool.

    Handing a pool thread a read that does nothing costs more than the reads themselves on
    an in-process store (FAISS: 0.1 ms a search, 0.1 ms more for the hand-offs).
    """
    _IN_PLACE.add(read)
    return read


@in_place
def nothing() -> list[Any]:
    """An empty ranking (:func:`in_place`)."""
    return []


def at_once(*reads: Callable[[], Any]) -> list[Any]:
    """Run reads at the same time: the first in this thread, the others on the pool.

    Reads marked :func:`in_place` are answered here, not on the pool.

    Example:
        >>> at_once(lambda: 1, nothing, lambda: 2)
        [1, [], 2]
    """
    pool = read_pool()
    later = [read if read in _IN_PLACE else pool.submit(read) for read in reads[1:]]
    first = reads[0]()
    return [first, *(f.result() if isinstance(f, Future) else f() for f in later)]


def in_turn(*reads: Callable[[], Any]) -> list[Any]:
    """Run reads one after the other (reads that hold the GIL, or one core per request).

    Example:
        >>> in_turn(lambda: 1, lambda: 2)
        [1, 2]
    """
    return [read() for read in reads]
