from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from cardrag import ScoredParentDocumentRetriever
from cardrag.retrievers.budget import (
    BUDGET_END_INDEX,
    BUDGET_START_INDEX,
    PARENT_CHARS,
    budgeted,
    cut,
    matched_span,
    window,
)
from tests.retrievers.test_parent_dropin import QUESTIONS, STORES, howto, load_docs, new_store

TEXT = "First sentence here. The matched part is this one. A third sentence. And a fourth one."


def parent(text: str, start: int | None, end: int | None, child: str = "") -> Document:
    metadata: dict[str, Any] = {"matched_start_index": start, "matched_end_index": end}
    return Document(id="p", page_content=text, metadata={**metadata, "matched_child_text": child})


def test_the_window_keeps_the_match_and_ends_on_sentence_edges() -> None:
    start, end = window(TEXT, (21, 50), 50)
    assert TEXT[start:end] == "The matched part is this one."
    start, end = window(TEXT, (21, 50), 70)
    assert TEXT[start:end] == "The matched part is this one. A third sentence."  # centred


def test_without_a_sentence_edge_in_reach_the_window_ends_on_words() -> None:
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa"
    start, end = window(text, (17, 22), 16)  # "delta", centred from the "amma" of gamma
    assert text[start:end] == "delta"  # "amma" would be half a word: the window starts after
    assert window(text, (0, len(text)), 10) == (0, 10)  # a longer match: its start, on words


def test_a_short_parent_is_returned_whole_and_untouched() -> None:
    doc = parent(TEXT, 21, 50)
    assert window(TEXT, (21, 50), len(TEXT)) == (0, len(TEXT))
    assert cut(doc, 500) is doc


def test_the_match_is_found_by_its_text_when_the_splitter_kept_no_offsets() -> None:
    assert matched_span(TEXT, parent(TEXT, None, None, "A third sentence.").metadata) == (51, 68)
    assert matched_span(TEXT, parent(TEXT, None, None, "not there").metadata) == (0, 0)


def test_a_cut_parent_says_where_its_text_lies_in_the_whole() -> None:
    doc = cut(parent(TEXT, 51, 68), 30)
    assert doc.page_content == "A third sentence."
    assert doc.metadata[BUDGET_START_INDEX] == 51
    assert doc.metadata[BUDGET_END_INDEX] == 68
    assert doc.metadata[PARENT_CHARS] == len(TEXT)
    assert doc.metadata["matched_start_index"] == 51  # still an offset in the whole parent
    again = cut(doc, 12)  # cut twice (per parent, then the context): offsets in the whole
    assert again.page_content == "A third"
    assert (again.metadata[BUDGET_START_INDEX], again.metadata[BUDGET_END_INDEX]) == (51, 58)


def test_the_context_budget_cuts_and_drops_from_the_bottom_never_a_higher_parent() -> None:
    docs = [
        Document(id=name, page_content=name * size, metadata={})
        for name, size in (("a", 500), ("b", 400), ("c", 300))
    ]
    assert [len(d.page_content) for d in budgeted(docs, None, None)] == [500, 400, 300]
    assert [len(d.page_content) for d in budgeted(docs, None, 1100)] == [500, 400, 200]
    assert [d.id for d in budgeted(docs, None, 1050)] == ["a", "b"]  # 150 left: under 200
    assert [len(d.page_content) for d in budgeted(docs, None, 300)] == [300]  # the first, cut
    assert [len(d.page_content) for d in budgeted(docs, 350, 800)] == [350, 350]


@pytest.mark.real
@pytest.mark.parametrize("kind", STORES)
def test_the_budget_keeps_the_answer_and_the_order_on_every_store(
    kind: str, real_embeddings: Embeddings
) -> None:
    docs = load_docs()
    whole = howto(ScoredParentDocumentRetriever, new_store(kind, real_embeddings), sections=False)
    whole.add_documents(docs, ids=None)
    fields = {"max_parent_chars": 2000, "max_context_chars": 5000}
    cut_down = ScoredParentDocumentRetriever(
        **{**dict(whole), **fields}  # same stores, same index
    )
    for case in QUESTIONS:
        full, found = whole.invoke(case["question"]), cut_down.invoke(case["question"])
        assert [d.id for d in found] == [d.id for d in full][: len(found)]
        assert sum(len(d.page_content) for d in found) <= 5000
        assert all(len(d.page_content) <= 2000 for d in found)
        for doc, original in zip(found, full, strict=False):
            start, end = doc.metadata[BUDGET_START_INDEX], doc.metadata[BUDGET_END_INDEX]
            assert original.page_content[start:end] == doc.page_content
        assert case["answer"] in found[0].page_content, case["question"]
