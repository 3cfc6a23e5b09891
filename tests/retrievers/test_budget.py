from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.stores import InMemoryStore
from langchain_text_splitters import RecursiveCharacterTextSplitter

from cardrag import ScoredParentDocumentRetriever
from cardrag.retrievers.budget import (
    BUDGET_END_INDEX,
    BUDGET_SPANS,
    BUDGET_START_INDEX,
    PARENT_CHARS,
    SEPARATOR,
    budgeted,
    child_span,
    cut,
    matched_span,
    pieces,
    window,
)
from cardrag.retrievers.child_hit import ChildHit
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
    assert doc.metadata[BUDGET_SPANS] == [[51, 68]]
    assert doc.metadata[PARENT_CHARS] == len(TEXT)
    assert doc.metadata["matched_start_index"] == 51  # still an offset in the whole parent
    assert cut(parent(TEXT, 51, 68), 12).page_content == "A third"  # longer: its start, on words


def test_the_other_matched_children_are_kept_in_text_order_while_they_fit() -> None:
    best = parent(TEXT, 51, 68)  # "A third sentence."
    others = [ChildHit("p::01", "p", 0.8, "matched part"), ChildHit("p::02", "p", 0.7, "fourth")]
    doc = cut(best, 60, others)
    # "matched part" widened to its sentence, one apart from the best: one piece, then "fourth"
    assert doc.page_content == "The matched part is this one. A third sentence.\n…\nfourth"
    assert doc.metadata[BUDGET_SPANS] == [[21, 68], [75, 81]]
    assert (doc.metadata[BUDGET_START_INDEX], doc.metadata[BUDGET_END_INDEX]) == (21, 81)
    assert cut(best, 35, others).page_content == "matched part\n…\nA third sentence."
    # less room: the best child first, then the next that fits ("fourth", not "matched part")
    assert cut(best, 30, others).page_content == "A third sentence.\n…\nfourth"
    assert cut(best, 20, others).page_content == "A third sentence."  # only the best fits
    assert all(len(cut(best, n, others).page_content) <= n for n in range(17, 90))


def test_with_the_question_the_other_children_are_taken_by_the_sentences_it_asks_about() -> None:
    text = "Rice is a grain. Cloves grow in Zanzibar. Tea is a drink. Maize is tall."
    best = parent(text, 58, 72)  # "Maize is tall."
    others = [ChildHit("p::00", "p", 0.8, text[:41]), ChildHit("p::02", "p", 0.7, text[42:57])]
    # whole children, best first: the first child (two sentences) does not fit beside the best
    assert cut(best, 45, others).page_content == "Tea is a drink. Maize is tall."
    # by sentence: the one holding "cloves" and "grow" first, then the room is full
    with_question = cut(best, 45, others, "Where do cloves grow?")
    assert with_question.page_content == "Cloves grow in Zanzibar.\n…\nMaize is tall."
    assert with_question.metadata[BUDGET_SPANS] == [[17, 41], [58, 72]]
    assert cut(best, 200, others, "Where do cloves grow?").page_content == text  # it fits


def test_pieces_nearly_touching_are_one_and_the_room_left_widens_them_to_sentences() -> None:
    assert pieces(TEXT, [(25, 32), (33, 37)], 40) == [(21, 50)]  # 1 apart: one range
    assert pieces(TEXT, [(25, 32)], 12) == [(21, 32)]  # 4 to the sentence's start, 7 short
    assert pieces("x" * 50, [], 10) == [(0, 10)]  # nothing located: the window at the start


def test_a_childs_place_is_its_offsets_else_its_text_else_unknown() -> None:
    located = ChildHit("c", "p", 1.0, "ignored", {"start_index": 5, "end_index": 9})
    assert child_span(TEXT, located) == (5, 9)
    assert child_span(TEXT, ChildHit("c", "p", 1.0, "A third sentence.")) == (51, 68)
    assert child_span(TEXT, ChildHit("c", "p", 1.0, "elsewhere")) is None
    assert child_span("short", located) is None  # offsets outside the text, text not there


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
            spans = doc.metadata.get(BUDGET_SPANS, [[0, len(original.page_content)]])
            pieces_of = [original.page_content[start:end] for start, end in spans]
            assert SEPARATOR.join(pieces_of) == doc.page_content
        assert case["answer"] in found[0].page_content, case["question"]


def zanzibar(kind: str, **fields: Any) -> Document:
    """The first parent a retriever over one long text and a short one returns for the question.

    The long text is 120 one-sentence children, one of them about Zanzibar; 100 characters a
    parent hold two of them.
    """
    sentences = [f"Sentence {i} talks about ordinary things." for i in range(120)]
    sentences[77] = "The harbour of Zanzibar exported cloves."  # one child in 120, BM25's
    retriever = ScoredParentDocumentRetriever(
        vectorstore=new_store(kind, DeterministicFakeEmbedding(size=16)),
        docstore=InMemoryStore(),
        child_splitter=RecursiveCharacterTextSplitter(chunk_size=45, chunk_overlap=0),
        max_parent_chars=100,
        **fields,
    )
    docs = [Document(" ".join(sentences)), Document("Tea and rice.")]
    retriever.add_documents(docs, ids=["long", "tea"])
    (first, *_) = retriever.invoke("Which harbour exported cloves from Zanzibar?")
    assert first.metadata["matched_child_text"] in first.page_content.split(SEPARATOR)
    return first


@pytest.mark.parametrize("kind", STORES)
def test_a_hybrid_retriever_keeps_the_child_bm25_matched_beside_the_best_one(kind: str) -> None:
    kept = {}
    for hybrid in (False, True):  # dense's window held to 40 of the 120 children
        pieces_of = zanzibar(kind, hybrid=hybrid, max_fetch=40).page_content.split(SEPARATOR)
        kept[hybrid] = "The harbour of Zanzibar exported cloves." in pieces_of
    assert kept == {False: False, True: True}  # dense alone matched 40 of the 120, not it


@pytest.mark.parametrize("kind", STORES)
def test_of_the_matched_children_the_sentence_with_the_questions_words_is_kept(kind: str) -> None:
    # dense's window grows to every child (two parents for k=4): the Zanzibar child is one of
    # 119 matched, far down the fake ranking; its sentence holds the question's words
    first = zanzibar(kind)
    assert first.page_content.split(SEPARATOR)[0] == "The harbour of Zanzibar exported cloves."
