"""The children's vectors beside an index: the scores Chroma gives, at a fraction of the reads."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from cardrag.evals.bench.synthetic import synthetic_cards
from cardrag.ingest.index import build_index, open_index
from cardrag.ingest.index import vectors as vectors_module
from cardrag.ingest.index.vectors import NORMS, VECTORS, RowVectors
from cardrag.ingest.splitter import CardSplitter
from cardrag.retrievers.bm25 import rows_of
from cardrag.retrievers.hits import SCAN_ROWS, RowReader
from cardrag.retrievers.parent import ScoredParentDocumentRetriever
from cardrag.retrievers.scan import scores_of

QUESTIONS = [
    "tablet dose morning food stomach",
    "insulin pen fridge travel luggage",
    "missed dose double skip leaflet",
    "kidney liver blood pressure heart",
]


@pytest.fixture(scope="module")
def long_index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Twelve parents of about 6,000 characters (some twenty rows each, too long for a card
    row), fake embeddings."""
    from tests.conftest import FakeEmbeddings

    store = tmp_path_factory.mktemp("long-parents")
    cards = list(synthetic_cards(12, chars=6000))
    build_index(cards, store, FakeEmbeddings(), CardSplitter(), progress=False).close()
    return store


def test_an_ingest_saves_every_child_rows_vector_and_the_index_opens_them(
    long_index_dir: Path, fake_embeddings: Embeddings
) -> None:
    index = open_index(long_index_dir, fake_embeddings)
    assert index.vectors is not None
    assert (index.path / VECTORS).is_dir()
    rows = index.collections.children._collection.get(include=["embeddings"])
    assert sorted(index.vectors.ids) == sorted(rows["ids"])  # every child row
    assert len(index.vectors.ids) == index.manifest["children"]  # (no card row: too long)
    stored = dict(zip(rows["ids"], rows["embeddings"], strict=True))
    for row_id, vector in zip(index.vectors.ids[:5], index.vectors.matrix[:5], strict=True):
        assert np.array_equal(vector, np.asarray(stored[row_id], dtype=np.float32))
    assert isinstance(index.vectors.matrix, np.memmap)  # not read into memory whole
    # an ingest writes a parent's rows together: a scan reads each parent as one slice
    assert set(index.vectors.spans) == set(index.vectors.rows_by_parent) != set()


def test_rows_are_read_back_a_page_at_a_time(
    long_index_dir: Path,
    fake_embeddings: Embeddings,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    collection = open_index(long_index_dir, fake_embeddings).collections.children._collection
    whole = RowVectors.from_collection(collection)
    monkeypatch.setattr(vectors_module, "READ_PAGE", 7)
    paged = RowVectors.from_collection(collection)
    assert paged.ids == whole.ids
    assert np.array_equal(paged.matrix, whole.matrix)
    written = RowVectors.write(collection, tmp_path / VECTORS)  # into the file, page by page
    assert written.ids == whole.ids
    assert np.array_equal(written.matrix, whole.matrix)
    assert written.saved_norms is not None  # each row's length, written page by page too
    lengths = np.linalg.norm(np.asarray(whole.matrix, dtype=np.float64), axis=1)
    assert np.allclose(written.saved_norms, lengths, rtol=1e-6, atol=0)


def test_a_saved_matrix_loads_back_and_a_folder_without_one_is_none(tmp_path: Path) -> None:
    saved = RowVectors(["a::00", "b::00"], np.array([[1, 0], [0.6, 0.8]], dtype=np.float32))
    saved.save(tmp_path / VECTORS)
    loaded = RowVectors.load(tmp_path / VECTORS)
    assert loaded is not None
    assert (loaded.ids, loaded.matrix.tolist()) == (saved.ids, saved.matrix.tolist())
    assert scores_of(loaded, [0.0, 1.0], ["b::00", "c::00"]) == (["b::00"], [pytest.approx(0.8)])
    assert loaded.saved_norms is not None
    assert loaded.norms.tolist() == [1.0, 1.0]
    assert RowVectors.load(tmp_path / "elsewhere") is None
    (tmp_path / VECTORS / NORMS).unlink()  # a generation saved before the lengths were
    older = RowVectors.load(tmp_path / VECTORS)
    assert older is not None
    assert older.saved_norms is None
    assert older.norms.tolist() == [1.0, 1.0]  # computed on first use


def test_each_parents_best_row_is_the_same_from_the_vectors_as_from_chroma(
    long_index_dir: Path, fake_embeddings: Embeddings
) -> None:
    index = open_index(long_index_dir, fake_embeddings)
    saved, chroma = (
        RowReader(index.collections, vectors=index.vectors),
        RowReader(index.collections),
    )
    assert index.bm25 is not None
    parents = [f"card-syn-{i:06d}" for i in range(0, 12, 2)]
    rows = rows_of(index.bm25, parents)
    assert len(rows) > 120
    for question in QUESTIONS:
        vector = fake_embeddings.embed_query(question)
        best = saved.best_of(vector, rows, None)
        assert [(h.child_id, h.score) for h in best] == [
            (h.child_id, h.score) for h in chroma.best_of(vector, rows, None)
        ]  # exactly: the same float32 values, the same cosine
        assert len(best) == 6  # one per parent
        by_parent = saved.best_of_parents(vector, parents, partial(rows_of, index.bm25), None)
        assert [(h.child_id, h.score) for h in by_parent] == [
            (h.child_id, h.score) for h in best
        ]  # each parent's rows as one slice: the same hits, in the same order
        every = chroma.by_ids(vector, rows, None, kind="child")
        for hit in best:
            assert hit.score == max(h.score for h in every if h.parent_id == hit.parent_id)


def test_a_scanned_window_is_chromas_window_scored_as_rows_read_by_id(
    long_index_dir: Path, fake_embeddings: Embeddings
) -> None:
    index = open_index(long_index_dir, fake_embeddings)
    assert index.vectors is not None
    assert len(index.vectors.ids) <= SCAN_ROWS
    saved = RowReader(index.collections, vectors=index.vectors)
    chroma = RowReader(index.collections)
    assert saved.queries(None, ["child", "card"]) == 0  # both scanned
    assert chroma.queries(None, ["child", "card"]) == 2  # nothing saved: both asked
    assert saved.window_queries(None)[:2] == [False, False]
    assert chroma.window_queries(None)[:2] == [True, True]
    assert (saved.by_id_reads(None), chroma.by_id_reads(None)) == ([False, False], [True, True])
    every = list(index.vectors.ids)  # in the matrix's order: equal scores keep it
    for question in QUESTIONS:
        vector = fake_embeddings.embed_query(question)
        exact = chroma.by_ids(vector, every, None, kind="child")  # every row, scored
        for fetch in (8, 40, 160):
            scanned = saved.nearest(vector, fetch, None, kind="child")
            assert [(h.child_id, h.score) for h in scanned] == [
                (h.child_id, h.score) for h in exact[:fetch]
            ]  # the exact window, scored as rows read by id are
        queried = chroma.nearest(vector, 8, None, kind="child")
        assert [h.child_id for h in scanned[:8]] == [h.child_id for h in queried]  # HNSW's too


def test_the_retriever_answers_as_without_them_and_drops_them_on_a_write(
    long_index_dir: Path, fake_embeddings: Embeddings
) -> None:
    from cardrag.ingest.settings import Settings

    index = open_index(long_index_dir, fake_embeddings)
    settings = Settings(min_similarity=-1.0)
    fast = ScoredParentDocumentRetriever.from_index(index, settings)
    slow = ScoredParentDocumentRetriever.from_index(index, settings, row_vectors=None)
    assert fast.row_vectors is index.vectors
    for question in QUESTIONS:
        got, want = fast.invoke(question), slow.invoke(question)
        assert [(d.id, d.metadata["matched_child_id"]) for d in got] == [
            (d.id, d.metadata["matched_child_id"]) for d in want
        ]
        # a scanned window's rows are scored exactly (float64 over the stored float32), a
        # queried one's from Chroma's float32 distance: equal to float32's precision
        for g, w in zip(got, want, strict=True):
            assert g.metadata["score"] == pytest.approx(w.metadata["score"], abs=1e-6)
    fast.delete([str(got[0].id)])  # the saved vectors describe the rows before the write
    assert fast.row_vectors is None


@pytest.fixture(scope="module")
def mixed_index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ten card-like parents (each with a whole-card row) and two too long for one."""
    from tests.conftest import FakeEmbeddings

    store = tmp_path_factory.mktemp("mixed-parents")
    short = list(synthetic_cards(10))
    long = [
        c.model_copy(update={"id": f"card-long-{i}"})
        for i, c in enumerate(synthetic_cards(2, seed=1, chars=6000))
    ]
    splitter = CardSplitter(card_rows=True)
    build_index([*short, *long], store, FakeEmbeddings(), splitter, progress=False).close()
    return store


def test_whole_card_rows_are_saved_too_and_score_as_chroma_scores_them(
    mixed_index_dir: Path, fake_embeddings: Embeddings
) -> None:
    index = open_index(mixed_index_dir, fake_embeddings)
    assert index.vectors is not None
    assert index.vectors.cards is not None
    assert index.collections.cards is not None
    in_chroma = index.collections.cards._collection.get()["ids"]
    assert sorted(index.vectors.cards.ids) == sorted(in_chroma)
    assert len(in_chroma) == 10  # the two long parents have none
    saved, chroma = (
        RowReader(index.collections, vectors=index.vectors),
        RowReader(index.collections),
    )
    asked = [f"card-syn-{i:06d}::card" for i in range(0, 10, 3)] + ["card-long-0::card"]
    for question in QUESTIONS:
        vector = fake_embeddings.embed_query(question)
        got = saved.by_ids(vector, asked, None, kind="card")
        assert [(h.child_id, h.score) for h in got] == [
            (h.child_id, h.score) for h in chroma.by_ids(vector, asked, None, kind="card")
        ]
        assert {h.parent_id for h in got} == {f"card-syn-{i:06d}" for i in range(0, 10, 3)}


def test_a_generation_saved_before_card_rows_were_reads_them_from_chroma(
    mixed_index_dir: Path, fake_embeddings: Embeddings, tmp_path: Path
) -> None:
    index = open_index(mixed_index_dir, fake_embeddings)
    assert index.vectors is not None
    old = tmp_path / VECTORS
    RowVectors(index.vectors.ids, np.asarray(index.vectors.matrix)).save(old)  # no cards/
    loaded = RowVectors.load(old)
    assert loaded is not None
    assert loaded.cards is None
    reader = RowReader(index.collections, vectors=loaded)
    vector = fake_embeddings.embed_query(QUESTIONS[0])
    got = reader.by_ids(vector, ["card-syn-000001::card"], None, kind="card")
    assert [h.parent_id for h in got] == ["card-syn-000001"]  # from Chroma, not "no row"


def test_with_card_rows_the_retriever_answers_as_without_saved_vectors(
    mixed_index_dir: Path, fake_embeddings: Embeddings
) -> None:
    from cardrag.ingest.settings import Settings

    index = open_index(mixed_index_dir, fake_embeddings)
    # plain RRF: the adaptive weights follow score leads, so float32 noise (below) would also
    # break the fake embedding's many fused-score ties one way or the other; BM25 below the
    # dense weight for the same reason (with equal weights, first here and second there ties
    # second here and first there)
    settings = Settings(
        min_similarity=-1.0, card_rows=True, adaptive_fusion=False, bm25_weight=0.75
    )
    fast = ScoredParentDocumentRetriever.from_index(index, settings)
    slow = ScoredParentDocumentRetriever.from_index(index, settings, row_vectors=None)
    for question in QUESTIONS:
        got, want = fast.invoke(question, k=6), slow.invoke(question, k=6)
        assert [(d.id, d.metadata["matched_child_id"]) for d in got] == [
            (d.id, d.metadata["matched_child_id"]) for d in want
        ]
        # scanned rows score as float64 cosines, queried ones from Chroma's float32 distance:
        # two rows of equal text can swap places, which moves a parent by one rank in one
        # ranking, at most 1 / ((c + 1) (c + 2)) of fused score with weight 1 and c = 20
        step = 1 / ((settings.rrf_c + 1) * (settings.rrf_c + 2))
        for g, w in zip(got, want, strict=True):
            assert g.metadata["score"] == pytest.approx(w.metadata["score"], abs=1e-6)
            assert g.metadata["fused_score"] == pytest.approx(w.metadata["fused_score"], abs=step)


@pytest.fixture(scope="module")
def sentence_index_dir(sentence_index: Callable[[str, int], Path]) -> Path:
    """Eight card-like parents with card rows and sentence rows, one of them restricted."""
    return sentence_index("sentence-rows", 8)


def test_sentence_rows_have_their_own_collection_saved_vectors_and_no_bm25_entry(
    sentence_index_dir: Path, fake_embeddings: Embeddings
) -> None:
    from cardrag.ingest import metadata as md

    index = open_index(sentence_index_dir, fake_embeddings)
    stores = index.collections
    assert stores.sentences is not None
    assert stores.restricted is not None
    splitter = CardSplitter(card_rows=True, sentence_rows=True)
    docs = [index.docstore.mget([f"card-syn-{i:06d}"])[0] for i in range(8)]
    written = splitter.split_documents([d for d in docs if d is not None])
    ids = {md.child_id(r.metadata["parent_id"], r.metadata["chunk_index"]): r for r in written}
    sentence_ids = {i for i, r in ids.items() if md.is_sentence_row(r.metadata["chunk_index"])}
    public = set(stores.sentences.get(include=[])["ids"])
    hidden = {i for i in stores.restricted.get(include=[])["ids"] if "::s" in i}
    # the restricted card's sentence rows live with its other rows, out of every public read
    assert public | hidden == sentence_ids
    assert hidden == {i for i in sentence_ids if i.startswith("card-syn-000003::")}
    assert index.vectors is not None
    assert index.vectors.sentences is not None
    assert sorted(index.vectors.sentences.ids) == sorted(public)
    assert index.manifest["children"] == len(ids) == stores.count()
    # BM25 indexes the children alone: no card row, no sentence row
    assert index.bm25 is not None
    assert set(index.bm25.child_ids) == {
        i for i, r in ids.items() if md.is_child(r.metadata["chunk_index"])
    }
    public_reader = RowReader(stores, vectors=index.vectors)
    vector = fake_embeddings.embed_query(QUESTIONS[0])
    found = public_reader.nearest(vector, 500, None, kind="sentence")
    assert {h.child_id for h in found} == public
    staff = RowReader(stores, allow_restricted=True)
    assert {h.child_id for h in staff.nearest(vector, 500, None, kind="sentence")} == sentence_ids
    assert {h.child_id for h in staff.nearest(vector, 500, None, kind="child")} == {
        i for i, r in ids.items() if r.metadata["chunk_index"] >= 0
    }


def test_with_sentence_rows_the_retriever_answers_as_without_saved_vectors(
    sentence_index_dir: Path, fake_embeddings: Embeddings
) -> None:
    from cardrag.ingest.settings import Settings

    index = open_index(sentence_index_dir, fake_embeddings)
    settings = Settings(min_similarity=-1.0, adaptive_fusion=False, bm25_weight=0.75)  # as above
    assert settings.uses_sentence_rows
    fast = ScoredParentDocumentRetriever.from_index(index, settings)
    slow = ScoredParentDocumentRetriever.from_index(index, settings, row_vectors=None)
    without = ScoredParentDocumentRetriever.from_index(index, settings, sentence_rows=False)
    moved = 0
    for question in QUESTIONS:
        got, want = fast.invoke(question, k=6), slow.invoke(question, k=6)
        assert [(d.id, d.metadata["matched_child_id"]) for d in got] == [
            (d.id, d.metadata["matched_child_id"]) for d in want
        ]
        # the score and the matched passage stay a child's or the card row's, never a sentence
        assert all("::s" not in d.metadata["matched_child_id"] for d in got)
        plain = without.invoke(question, k=6)
        assert {d.id: d.metadata["score"] for d in plain} == pytest.approx(
            {d.id: d.metadata["score"] for d in got if d.id in {p.id for p in plain}}
        )
        moved += [d.id for d in plain] != [d.id for d in got]
    assert moved > 0  # the fourth ranking changes some order


def test_past_scan_rows_the_sentence_ranking_is_each_candidates_best_saved_sentence(
    sentence_index_dir: Path, fake_embeddings: Embeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cardrag.ingest.settings import Settings
    from cardrag.retrievers import hits as hits_module

    index = open_index(sentence_index_dir, fake_embeddings)
    assert index.vectors is not None
    assert index.vectors.sentences is not None
    saved = RowReader(index.collections, vectors=index.vectors)
    assert not saved.sentences_by_parent(None)  # a window of them is one scan
    monkeypatch.setattr(hits_module, "SCAN_ROWS", len(index.vectors.sentences.ids) - 1)
    assert saved.sentences_by_parent(None)
    assert not saved.sentences_by_parent({"topics": {"$contains": "pain"}})  # read filtered
    assert not RowReader(index.collections).sentences_by_parent(None)  # nothing saved
    parents = [f"card-syn-{i:06d}" for i in (0, 2, 3, 5)]  # 3 is restricted: no public row
    every = list(index.vectors.sentences.ids)
    for question in QUESTIONS:
        vector = fake_embeddings.embed_query(question)
        best = saved.best_sentences(vector, parents)
        rows = saved.by_ids(vector, every, None, kind="sentence")  # from Chroma, every row
        want = {}
        for hit in rows:  # best first: each parent's first is its best
            want.setdefault(hit.parent_id, (hit.child_id, hit.score))
        assert [(h.child_id, h.score) for h in best] == sorted(
            (want[p] for p in parents if p in want), key=lambda pair: -pair[1]
        )
        assert {h.parent_id for h in best} == {parents[0], parents[1], parents[3]}
    held = sum(len(index.vectors.sentences.rows_by_parent.get(p, ())) for p in parents)
    limit = hits_module.SCORED_SENTENCES
    monkeypatch.setattr(hits_module, "SCORED_SENTENCES", held)
    assert saved.best_sentences(vector, parents) is not None
    read, is_query = saved.sentences_of(vector, parents, 8)
    assert (read(), is_query) == (saved.best_sentences(vector, parents), False)  # a scan
    monkeypatch.setattr(hits_module, "SCORED_SENTENCES", held - 1)
    assert saved.best_sentences(vector, parents) is None  # more rows than scored: a window
    read, is_query = saved.sentences_of(vector, parents, 8)
    window = saved.nearest(vector, 8, None, kind="sentence")
    assert (read(), is_query) == (window, True)  # a query, of every sentence row
    assert len(window) == 8
    monkeypatch.setattr(hits_module, "SCORED_SENTENCES", limit)
    asked: list[str] = []
    query = RowReader._query

    def spy(self: RowReader, store: Any, vector: Any, fetch: int, where: Any) -> Any:
        asked.append(store._collection.name)
        return query(self, store, vector, fetch, where)

    monkeypatch.setattr(RowReader, "_query", spy)
    monkeypatch.setattr(hits_module, "SCAN_ROWS", 0)  # every window asks Chroma
    settings = Settings(min_similarity=-1.0, adaptive_fusion=False, bm25_weight=0.75)
    retriever = ScoredParentDocumentRetriever.from_index(index, settings)
    docs = retriever.invoke(QUESTIONS[0], k=6)
    assert len(docs) == 6
    assert asked  # the children's and the card rows' windows are queries
    assert not [name for name in asked if name.endswith("sentences")]  # no sentence window


def test_queries_run_on_the_pool_while_bm25_and_the_scans_run_here(
    sentence_index_dir: Path, fake_embeddings: Embeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from cardrag.ingest.settings import Settings
    from cardrag.retrievers import hits as hits_module
    from cardrag.retrievers import parent as parent_module

    index = open_index(sentence_index_dir, fake_embeddings)
    monkeypatch.setattr(hits_module, "SCAN_ROWS", 0)  # every window a query, as past 20,000
    monkeypatch.setattr(hits_module, "SCORED_SENTENCES", 0)  # the sentences: a window of all
    threads: list[tuple[str, str]] = []

    def spy(cls: Any, name: str, label: Callable[..., str]) -> None:
        original = getattr(cls, name)

        def spied(*args: Any) -> Any:
            threads.append((label(*args), threading.current_thread().name))
            return original(*args)

        monkeypatch.setattr(cls, name, spied)

    spy(RowReader, "_query", lambda self, store, *_: store._collection.name.rsplit("_")[-1])
    spy(parent_module, "resolve", lambda *_: "resolve")  # BM25's parents' rows, a scan
    spy(parent_module, "card_rows_of", lambda *_: "card rows of")  # by id, a scan
    spy(ScoredParentDocumentRetriever, "_lexical", lambda *_: "bm25")
    settings = Settings(min_similarity=-1.0, adaptive_fusion=False, bm25_weight=0.75)
    retriever = ScoredParentDocumentRetriever.from_index(index, settings)
    here = threading.current_thread().name
    for question in QUESTIONS:
        threads.clear()
        together = [(d.id, d.metadata["score"]) for d in retriever.invoke(question, k=6)]
        kinds = {kind: name == here for kind, name in threads}
        assert kinds == {
            "children": False,
            "cards": False,
            "sentences": False,
            "bm25": True,
            "resolve": True,
            "card rows of": True,
        }
        retriever.concurrent_reads = False
        threads.clear()
        assert [(d.id, d.metadata["score"]) for d in retriever.invoke(question, k=6)] == together
        assert {name for _, name in threads} == {here}
        retriever.concurrent_reads = True
