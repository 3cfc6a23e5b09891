import pytest
from langchain_text_splitters import RecursiveCharacterTextSplitter

from cardrag.evals.bench import dropin as bench
from cardrag.evals.bench.growth import HashedEmbeddings


def test_a_question_is_embedded_once_then_served_from_the_cache() -> None:
    cache = bench.QuestionCache(HashedEmbeddings())
    first = cache.embed_query("how tall is the tower?")
    assert cache.embed_query("how tall is the tower?") is first
    assert list(cache.seen) == ["how tall is the tower?"]


@pytest.mark.parametrize("kind", bench.STORES)
def test_each_store_answers_the_three_calls_over_the_same_children(kind: str) -> None:
    docs = bench.corpus()[1][:3]
    calls, children = bench.systems(kind, docs)
    assert list(calls) == ["store", "skeleton", "plain PDR", "ours"]
    splitter = RecursiveCharacterTextSplitter(chunk_size=400)
    assert children == len(splitter.split_documents(docs))
    ours = calls["ours"]("a question")
    assert len(ours) == 3 == len({d.id for d in ours})  # k=4 distinct parents: all three
    skeleton = calls["skeleton"]("a question")
    assert isinstance(skeleton, list)
    whole = {d.id: d.page_content for d in docs}
    assert {d.id: d.page_content for d in skeleton} == whole  # the same parents, whole


def test_the_section_gives_ours_against_the_store_and_plain_pdr() -> None:
    row = {
        "store": "FAISS",
        "children": 1236,
        "p50_ms": {"store": 2.0, "skeleton": 2.2, "plain PDR": 2.5, "ours": 3.0},
    }
    lines = bench.dropin_section({"corpus": "9 documents", "questions": 5, "rows": [row]})
    assert lines[-3] == "| FAISS | 1,236 | 2.0 | 2.2 | 2.5 | 3.0 | 1.1x | 1.5x | 1.2x |"
    del row["p50_ms"]["skeleton"]  # a run from before the skeleton was measured
    lines = bench.dropin_section({"corpus": "9 documents", "questions": 5, "rows": [row]})
    assert lines[-3] == "| FAISS | 1,236 | 2.0 |  | 2.5 | 3.0 |  | 1.5x | 1.2x |"
    assert (lines[0], lines[1][:12]) == ("", "## Drop-in: ")  # a blank line before its title
    assert bench.dropin_section({}) == []
