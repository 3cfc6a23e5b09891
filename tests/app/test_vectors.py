from __future__ import annotations

from cardrag.app.vectors import QUESTIONS_KEPT, Vectors, dot
from tests.conftest import CountingEmbeddings


def test_each_question_and_sentence_is_embedded_once() -> None:
    model = CountingEmbeddings()
    vectors = Vectors(model)
    first = vectors.sentences(["a b", "c d", "a b"])
    again = vectors.sentences(["c d", "e f"])
    assert model.documents == ["a b", "c d", "e f"]
    assert first[0] == first[2]
    assert again[0] == first[1]
    assert vectors.question("q?") == vectors.question("q?")
    assert model.queries == ["q?"]
    assert dot(first[0], first[0]) == 1.0 or abs(dot(first[0], first[0]) - 1.0) < 1e-9


def test_only_the_most_recent_questions_are_kept() -> None:
    model = CountingEmbeddings()
    vectors = Vectors(model)
    for i in range(QUESTIONS_KEPT + 1):
        vectors.question(f"q{i}")
    vectors.question(f"q{QUESTIONS_KEPT}")  # kept
    vectors.question("q0")  # dropped, embedded again
    assert model.queries.count("q0") == 2
    assert model.queries.count(f"q{QUESTIONS_KEPT}") == 1


def test_a_cleared_question_cache_embeds_the_question_again() -> None:
    from cardrag.app.vectors import QuestionCache

    model = CountingEmbeddings()
    cache = QuestionCache(model, kept=2)
    assert cache.embed_query("q?") == cache.embed_query("q?")
    cache.clear()
    cache.embed_query("q?")
    assert model.queries == ["q?", "q?"]
    assert Vectors(cache).embeddings is cache  # the app's cache is shared, not wrapped again
