"""Running one question's independent reads: at once on a small shared pool, or in turn.

Chroma's queries and reads release the GIL, so on two cores two vector queries take the time
of one (measured at 10,000 cards: 2.9 ms one after the other, 1.6 ms at once). Scans of saved
vectors and BM25 hold it: run at once they only wait for each other, so they run in turn,
here, while the queries run on the pool (:func:`beside`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
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


def beside(asked: Sequence[bool]) -> Callable[..., list[Any]]:
    """Run reads with the store's queries (``asked``) on the pool, the others here meanwhile.

    A query waits on Chroma without the GIL; BM25 and scans hold it. So the queries go to
    the pool first and the reads that hold the GIL run here, in turn, beside them: at
    413,000 rows one children query and BM25 took 2.0 and 1.0 ms, 3.0 in turn, and 1.6 with
    BM25 here and the query on the pool, against 2.9 with the query here and BM25 on the
    pool (Intel Xeon, 2 cores). With nothing else to read, the first query runs here.

    Example:
        >>> beside([True, False, True])(lambda: 1, lambda: 2, nothing)
        [1, 2, []]
    """

    def run(*reads: Callable[[], Any]) -> list[Any]:
        queries = [n for n, a in enumerate(asked) if a and reads[n] not in _IN_PLACE]
        if all(a or reads[n] in _IN_PLACE for n, a in enumerate(asked)):
            queries = queries[1:]  # nothing else to run here: the first query is
        pool = read_pool()
        later = {n: pool.submit(reads[n]) for n in queries}
        here = {n: read() for n, read in enumerate(reads) if n not in later}
        return [later[n].result() if n in later else here[n] for n in range(len(reads))]

    return run
