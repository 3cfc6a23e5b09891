"""The answering graph: retrieve -> grade -> generate -> verify_citations, or -> refuse.

LangGraph's corrective-RAG shape: retrieval ranks, grading decides which retrieved cards can
answer this question (:mod:`cardrag.app.grading`), and only those reach the answer. When none can,
the reply refuses and says why.

Example:
    >>> from cardrag.app.context import Context                      # doctest: +SKIP
    >>> from cardrag.ingest.settings import Settings                 # doctest: +SKIP
    >>> context = Context.from_settings(Settings())                  # doctest: +SKIP
    >>> answer("How do I store insulin?", context).citations[0].id   # doctest: +SKIP
    'card-insulin-storage'
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.documents import Document
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from cardrag.app.citations import (
    Verified,
    drop_markers,
    extract_citations,
    misattributed,
    neutralise,
    segments,
)
from cardrag.app.citations import verify_citations as check_citations
from cardrag.app.context import Context, resolve_chat_model
from cardrag.app.extractive import ExtractiveAnswerer, split_sentences
from cardrag.app.glossary import unglossed
from cardrag.app.grading import card_language, refusal_reason
from cardrag.app.names import WORD, Names
from cardrag.app.prompts import (
    GATE_REASON,
    MODEL_REASON,
    REFUSAL,
    ask_chat_model,
    not_covered,
)
from cardrag.app.reply import CitedCard, Reply, RetrievedCard
from cardrag.app.state import State
from cardrag.app.terms import question_language
from cardrag.app.vectors import Vectors, dot
from cardrag.ingest import metadata as md
from cardrag.retrievers.matched import MatchedCard
from cardrag.retrievers.parent import ScoredParentDocumentRetriever

logger = logging.getLogger(__name__)

MAX_QUESTION_CHARS = 2000
"""Longest question accepted by the CLI and the API."""


class QuestionError(ValueError):
    """A question that cannot be asked (empty or too long)."""


def check_question(question: str) -> str:
    """The question stripped, or a :class:`QuestionError` saying what is wrong."""
    text = question.strip()
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate ("\ud800") is not text
        msg = f"the question is not valid text (character {exc.start + 1} cannot be encoded)"
        raise QuestionError(msg) from exc
    if not text:
        msg = "the question is empty"
        raise QuestionError(msg)
    if len(text) > MAX_QUESTION_CHARS:
        msg = f"the question is {len(text)} characters long; the limit is {MAX_QUESTION_CHARS}"
        raise QuestionError(msg)
    return text


# -- nodes ------------------------------------------------------------------------------------


def retrieve(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Fetch up to k scored cards (the retriever applies its own similarity gate)."""
    ctx = runtime.context
    # a [cite:...] marker in a question is not words to match (it once lifted a hostile card)
    query = ctx.read(neutralise(state["question"]) or state["question"])
    if query != state["question"]:
        logger.info("read as %r", query)
    retriever = ctx.retriever
    if ctx.grader is not None:
        ctx.grader.prefetch(query)  # what grading embeds next, beside the retriever's embedding
    if isinstance(retriever, ScoredParentDocumentRetriever):
        # rank without the gate, then apply it: grading compares a card with its rivals
        ranked = retriever.invoke(query, k=ctx.k, min_similarity=None)
        language = question_language(unglossed(query))
        docs = passing(ranked, retriever.similarity_gate, ctx.across_min_similarity, language)
    else:
        ranked = docs = retriever.invoke(query, k=ctx.k)
    logger.info("retrieved %s", [(d.id, round(d.metadata.get(md.SCORE, 0.0), 3)) for d in docs])
    return {"documents": docs, "ranked": ranked, "query": query}


def grade(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Keep the retrieved cards that can answer the question; say why when none can."""
    docs = state["documents"]
    if not docs:
        return {"grades": [], "reason": GATE_REASON}
    grader = runtime.context.grader
    if grader is None:
        return {"grades": []}
    grades = grader(_query(state), docs, state.get("ranked"))
    kept = [d for d, g in zip(docs, grades, strict=True) if g.answerable]
    logger.info("graded %s", [(g.card_id, g.answerable, g.missing) for g in grades])
    if kept:
        return {"documents": kept, "grades": grades}
    titles = {str(d.id): str(d.metadata.get(md.TITLE, "")) for d in docs}
    written = _written(state, runtime.context.names)
    reason = refusal_reason(grades, titles, written)
    first = grades[0]
    return {
        "documents": [],
        "grades": grades,
        "reason": reason,
        "closest": CitedCard(id=first.card_id, title=titles[first.card_id]),
        "closest_lacks": [written.get(t, t) for t in first.missing] + list(first.missing_aspects),
    }


def route_after_grade(state: State) -> Literal["generate", "refuse"]:
    """Skip generation when neither the gate nor grading left a card."""
    return "generate" if state["documents"] else "refuse"


def generate(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Draft an answer with the chat model, or the extractive answerer when there is none."""
    ctx = runtime.context
    docs = state["documents"]
    if ctx.chat_model is None:
        answerer = ctx.answerer or ExtractiveAnswerer(_embeddings_of(ctx))
        return {"draft": answerer(_query(state), docs, ctx.prompt_budget)}
    model = resolve_chat_model(ctx.chat_model)
    return {"draft": ask_chat_model(model, unglossed(_query(state)), docs, ctx.prompt_budget)}


def verify_citations(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Keep only citations of retrieved cards that support what they follow; build the reply.

    The extractive answerer quotes a card's own sentence before its marker, so its citations
    are right by construction; a chat model's are checked (:func:`check_attribution`).
    """
    docs = state["documents"]
    draft = state["draft"]
    if not draft.answered:  # the chat model read the cards and found no answer in them
        return refuse({**state, "reason": MODEL_REASON})
    checked = check_citations(draft.answer, draft.citations, [str(d.id) for d in docs])
    if checked.rejected:
        logger.warning("removed citations of cards that were not retrieved: %s", checked.rejected)
    if runtime.context.chat_model is not None:
        checked = check_attribution(checked, docs, _vectors_of(runtime.context))
    titles = {str(d.id): str(d.metadata.get(md.TITLE, "")) for d in docs}
    grades = state.get("grades", [])
    scores = {g.card_id: g.answerability for g in grades}
    # ranks are the retriever's: a card grading dropped leaves a gap
    ranks = {g.card_id: n for n, g in enumerate(grades, 1)} or {
        str(d.id): n for n, d in enumerate(docs, 1)
    }
    kept = [g for g in grades if g.answerable]
    unsaid = [
        a for a in (kept[0].unanswered if kept else ()) if all(a in g.unanswered for g in kept)
    ]
    reply = Reply(
        question=state["question"],
        answer=f"{checked.answer}\n\n{not_covered(unsaid)}" if unsaid else checked.answer,
        not_covered=unsaid,
        citations=[CitedCard(id=cid, title=titles[cid]) for cid in checked.citations],
        retrieved=[retrieved_card(d, ranks[str(d.id)], scores.get(str(d.id))) for d in docs],
        rejected_citations=checked.rejected,
        uncited=checked.uncited,
    )
    return {"reply": reply}


def refuse(state: State) -> dict[str, Any]:
    """The knowledge base does not cover the question: say so and why, cite nothing."""
    reason = state.get("reason") or GATE_REASON
    reply = Reply(
        question=state["question"],
        answer=REFUSAL,
        refused=True,
        refusal_reason=reason,
        closest=state.get("closest"),
        closest_lacks=state.get("closest_lacks", []),
    )
    return {"reply": reply}


# -- helpers ----------------------------------------------------------------------------------


def passing(
    docs: Sequence[Document],
    gate: float | None,
    across: float | None = None,
    language: str | None = None,
) -> list[Document]:
    """The documents whose similarity reaches their gate, in order.

    ``gate`` is the retriever's (None: none); a card in another language than ``language``
    (the question's) needs ``across`` instead where that is lower (grading's across-language
    gate only ever lowers the gate). With ``across`` None this keeps what
    :func:`cardrag.retrievers.fusion.at_least` keeps.
    """

    def floor(doc: Document) -> float | None:
        if across is not None and gate is not None and card_language(doc) != language:
            return min(across, gate)
        return gate

    return [d for d in docs if (f := floor(d)) is None or _score(d) >= f]


def _score(doc: Document) -> float:
    return float(doc.metadata.get(md.SCORE, 0.0))


def _query(state: State) -> str:
    """The question as the nodes read it (names resolved, glossed), else as asked."""
    return state.get("query") or state["question"]


def _written(state: State, names: Names | None) -> dict[str, str]:
    """Each word of the question, as grading folds it, to how a refusal should name it.

    "No card mentions clopidogrel (Plavix).": the generic and the patient's own word.
    """
    words = WORD.findall(state["question"])
    if names is None:
        return {w.lower(): w for w in words}
    return {w.lower(): names.describe(w.lower(), w) for w in words}


def check_attribution(checked: Verified, docs: Sequence[Document], vectors: Vectors) -> Verified:
    """Remove the markers of cards that do not support the words they follow.

    Each cited stretch of the answer is compared with every retrieved card's sentences, the
    way grading compares the question (:func:`cardrag.app.citations.misattributed` decides). A card
    with a removed marker joins ``rejected``; it stays cited only where it still has one.
    """
    parts = segments(checked.answer)
    if not parts:
        return checked
    sentences = {
        str(d.id): split_sentences(neutralise(MatchedCard.from_document(d).text)) for d in docs
    }
    rejected: list[list[str]] = []
    for part in parts:
        if not part.text:
            rejected.append([])
            continue
        vector = vectors.question(part.text)
        support = {
            cid: max((dot(vector, v) for v in vectors.sentences(texts)), default=-1.0)
            for cid, texts in sentences.items()
        }
        rejected.append(misattributed(part.cited, support))
    if not any(rejected):
        return checked
    answer = drop_markers(checked.answer, rejected)
    wrong = list(dict.fromkeys(cid for ids in rejected for cid in ids))
    logger.warning("removed citations of cards that do not hold the cited words: %s", wrong)
    gone = set(extract_citations(checked.answer)) - set(extract_citations(answer))
    citations = [cid for cid in checked.citations if cid not in gone]
    return Verified(
        answer=answer,
        citations=citations,
        rejected=[*checked.rejected, *(cid for cid in wrong if cid not in checked.rejected)],
        uncited=bool(docs) and not citations,
    )


def _vectors_of(ctx: Context) -> Vectors:
    """The context's shared question and sentence vectors (made when it has none)."""
    for holder in (ctx.answerer, ctx.grader):
        if holder is not None and holder.vectors is not None:
            return holder.vectors
    return Vectors(_embeddings_of(ctx))


def retrieved_card(
    doc: Document, rank: int = 1, answerability: float | None = None
) -> RetrievedCard:
    """The reply's view of a retrieved card, with its rank, scores and matched passage."""
    card = MatchedCard.from_document(doc)
    return RetrievedCard(
        id=card.id,
        title=card.title,
        rank=rank,
        score=card.score,
        ordering_score=card.fused_score,
        answerability=answerability,
        matched_child_id=card.child_id,
        matched_passage=card.passage,
        matched_start_index=card.start,
        matched_end_index=card.end,
        window_start_index=card.window_start,
        window_end_index=card.window_end,
    )


def _embeddings_of(ctx: Context) -> Any:
    embeddings = getattr(getattr(ctx.retriever, "vectorstore", None), "embeddings", None)
    if embeddings is None:
        msg = "the offline answerer needs Context.answerer or a retriever with a vector store"
        raise ValueError(msg)
    return embeddings


def answer(question: str, context: Context) -> Reply:
    """Run the graph on one question (checked first) and return its reply."""
    result = graph.invoke({"question": check_question(question)}, context=context)
    reply: Reply = result["reply"]
    return reply


# -- the graph --------------------------------------------------------------------------------

builder = StateGraph(State, context_schema=Context)
builder.add_node("retrieve", retrieve)
builder.add_node("grade", grade)
builder.add_node("generate", generate)
builder.add_node("verify_citations", verify_citations)
builder.add_node("refuse", refuse)
builder.add_edge(START, "retrieve")
builder.add_edge("retrieve", "grade")
builder.add_conditional_edges("grade", route_after_grade, ["generate", "refuse"])
builder.add_edge("generate", "verify_citations")
builder.add_edge("verify_citations", END)
builder.add_edge("refuse", END)
graph = builder.compile(name="cardrag")
