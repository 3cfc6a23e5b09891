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


def test_a_question_embedded_ahead_is_embedded_once_on_another_thread() -> None:
    import threading

    from cardrag.app.vectors import QuestionCache

    threads: list[str] = []

    class Recording(CountingEmbeddings):
        def embed_query(self, text: str) -> list[float]:
            threads.append(threading.current_thread().name)
            return super().embed_query(text)

    model = Recording()
    cache = QuestionCache(model, kept=2)
    cache.prefetch("q?")
    cache.prefetch("q?")  # already on its way
    assert cache.embed_query("q?") == model.embed_query("q?")
    cache.prefetch("q?")  # already kept
    assert model.queries == ["q?", "q?"]  # once ahead, once by the assertion itself
    assert threads[0].startswith("cardrag-ahead")
    assert threads[1] == threading.current_thread().name


def test_a_question_embedded_ahead_and_never_asked_is_forgotten_in_turn() -> None:
    from cardrag.app.vectors import QuestionCache, ahead_pool

    model = CountingEmbeddings()
    cache = QuestionCache(model, kept=2)
    cache.prefetch("never asked")
    ahead_pool().submit(lambda: None).result()  # the one thread has finished it
    cache.embed_query("a")
    cache.embed_query("b")  # the two most recent are kept: "never asked" is dropped
    cache.embed_query("never asked")
    assert model.queries == ["never asked", "a", "b", "never asked"]


def test_a_question_whose_embedding_ahead_failed_is_embedded_again_when_asked() -> None:
    from cardrag.app.vectors import QuestionCache, ahead_pool

    class FailsOnce(CountingEmbeddings):
        failed = False

        def embed_query(self, text: str) -> list[float]:
            if not self.failed:
                self.failed = True
                raise RuntimeError("model busy")
            return super().embed_query(text)

    model = FailsOnce()
    cache = QuestionCache(model)
    cache.prefetch("q?")
    ahead_pool().submit(lambda: None).result()
    assert model.failed  # the embedding ahead failed; asked for now, the question is embedded
    assert cache.embed_query("q?") == model.embed_query("q?")
    assert model.queries == ["q?", "q?"]
