import os
import threading

import pytest

from cardrag.retrievers.reads import at_once, beside, in_place, in_turn, nothing, read_pool


def test_a_forked_worker_gets_a_read_pool_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    first = read_pool()
    assert read_pool() is first  # one pool per process
    monkeypatch.setattr(os, "getpid", lambda: -1)  # as in a child forked after reads began
    child = read_pool()
    assert child is not first
    assert child.submit(lambda: 42).result(timeout=5) == 42


def test_reads_at_once_run_the_first_here_and_the_others_on_the_pool() -> None:
    def name() -> str:
        return threading.current_thread().name

    here, *others = at_once(name, name, name)
    assert here == threading.current_thread().name
    assert [o.startswith("cardrag-read") for o in others] == [True, True]
    assert in_turn(name, name) == [here, here]


def test_nothing_to_read_is_answered_in_place_not_on_the_pool() -> None:
    def name() -> str:
        return threading.current_thread().name

    here = threading.current_thread().name
    assert at_once(name, nothing, nothing) == [here, [], []]
    first, empty, other = at_once(name, nothing, name)
    assert (first, empty) == (here, [])
    assert other.startswith("cardrag-read")


def test_a_read_marked_in_place_runs_here() -> None:
    @in_place
    def here() -> str:
        return threading.current_thread().name

    assert at_once(nothing, here) == [[], threading.current_thread().name]


def test_beside_runs_the_queries_on_the_pool_and_the_other_reads_here() -> None:
    def name() -> str:
        return threading.current_thread().name

    here = threading.current_thread().name
    query, scan, off, lexical = beside([True, False, True, False])(name, name, nothing, name)
    assert query.startswith("cardrag-read")
    assert (scan, off, lexical) == (here, [], here)


def test_beside_with_nothing_but_queries_runs_the_first_here() -> None:
    def name() -> str:
        return threading.current_thread().name

    here = threading.current_thread().name
    first, off, second = beside([True, False, True])(name, nothing, name)
    assert (first, off) == (here, [])
    assert second.startswith("cardrag-read")
    assert beside([True, True])(nothing, name) == [[], here]  # an empty ranking is no query
