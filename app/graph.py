"""The answering graph: retrieve -> generate -> verify_citations, or retrieve -> refuse.

Example:
    >>> from app.context import Context                       # doctest: +SKIP
    >>> from ingest.settings import Settings
    >>> reply = answer("How do I store insulin?", Context.from_settings(Settings()))
    >>> reply.citations[0].id
    'card-insulin-storage'
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Literal

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from app.citations import verify_citations as check_citations
from app.context import Context, resolve_chat_model
from app.extractive import ExtractiveAnswerer
from app.prompts import REFUSAL, SYSTEM_PROMPT, cards_context
from app.reply import CitedCard, Draft, Reply, RetrievedCard
from app.state import State
from ingest import metadata as md

logger = logging.getLogger(__name__)

MAX_QUESTION_CHARS = 2000
"""Longest question accepted by the CLI and the API."""


class QuestionError(ValueError):
    """A question that cannot be asked (empty or too long)."""


def check_question(question: str) -> str:
    """The question stripped, or a :class:`QuestionError` saying what is wrong."""
    text = question.strip()
    if not text:
        msg = "the question is empty"
        raise QuestionError(msg)
    if len(text) > MAX_QUESTION_CHARS:
        msg = f"the question is {len(text)} characters long; the limit is {MAX_QUESTION_CHARS}"
        raise QuestionError(msg)
    return text


# -- nodes ------------------------------------------------------------------------------------


def retrieve(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Fetch up to k scored cards that pass the similarity gate."""
    ctx = runtime.context
    docs = ctx.retriever.invoke(state["question"], k=ctx.k, min_similarity=ctx.min_similarity)
    logger.info("retrieved %s", [(d.id, round(d.metadata.get(md.SCORE, 0.0), 3)) for d in docs])
    return {"documents": docs}


def route_after_retrieve(state: State) -> Literal["generate", "refuse"]:
    """Skip generation when the gate left nothing."""
    return "generate" if state["documents"] else "refuse"


def generate(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Draft an answer with the chat model, or the extractive answerer when there is none."""
    ctx = runtime.context
    docs = state["documents"]
    if ctx.chat_model is None:
        answerer = ctx.answerer or ExtractiveAnswerer(_embeddings_of(ctx))
        return {"draft": answerer(state["question"], docs, ctx.prompt_budget)}
    model = resolve_chat_model(ctx.chat_model)
    return {"draft": ask_chat_model(model, state["question"], docs, ctx.prompt_budget)}


def verify_citations(state: State) -> dict[str, Any]:
    """Keep only citations of retrieved cards and build the reply."""
    docs = state["documents"]
    draft = state["draft"]
    checked = check_citations(draft.answer, draft.citations, [str(d.id) for d in docs])
    if checked.rejected:
        logger.warning("removed citations of cards that were not retrieved: %s", checked.rejected)
    titles = {str(d.id): str(d.metadata.get(md.TITLE, "")) for d in docs}
    reply = Reply(
        question=state["question"],
        answer=checked.answer,
        citations=[CitedCard(id=cid, title=titles[cid]) for cid in checked.citations],
        retrieved=[retrieved_card(d) for d in docs],
        rejected_citations=checked.rejected,
        uncited=checked.uncited,
    )
    return {"reply": reply}


def refuse(state: State) -> dict[str, Any]:
    """The knowledge base does not cover the question: say so, cite nothing."""
    return {"reply": Reply(question=state["question"], answer=REFUSAL, refused=True)}


# -- helpers ----------------------------------------------------------------------------------


def ask_chat_model(model: BaseChatModel, question: str, docs: list[Document], budget: int) -> Draft:
    """Ask for a structured :class:`Draft`; models without tool calling answer in JSON text."""
    messages = [
        ("system", SYSTEM_PROMPT.format(cards=cards_context(docs, budget))),
        ("human", question),
    ]
    try:
        structured = model.with_structured_output(Draft)
    except NotImplementedError:
        return parse_draft(str(model.invoke(messages).content))
    result = structured.invoke(messages)
    return result if isinstance(result, Draft) else Draft.model_validate(result)


def parse_draft(content: str) -> Draft:
    """A draft from a JSON reply (possibly inside prose or a code fence), else the raw text."""
    match = re.search(r"\{.*\}", content, re.DOTALL)
    if match:
        try:
            return Draft.model_validate(json.loads(match.group(0)))
        except ValueError:
            pass
    return Draft(answer=content.strip(), citations=[])


def retrieved_card(doc: Document) -> RetrievedCard:
    """The reply's view of a retrieved card, with its matched passage."""
    meta = doc.metadata
    start, end = meta.get(md.MATCHED_START_INDEX), meta.get(md.MATCHED_END_INDEX)
    passage = doc.page_content[start:end] if start is not None and end is not None else ""
    return RetrievedCard(
        id=str(doc.id),
        title=str(meta.get(md.TITLE, "")),
        score=float(meta.get(md.SCORE, 0.0)),
        matched_child_id=str(meta.get(md.MATCHED_CHILD_ID, "")),
        matched_passage=passage or str(meta.get(md.MATCHED_CHILD_TEXT, "")),
        matched_start_index=start,
        matched_end_index=end,
        window_start_index=meta.get(md.MATCHED_WINDOW_START_INDEX),
        window_end_index=meta.get(md.MATCHED_WINDOW_END_INDEX),
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
builder.add_node("generate", generate)
builder.add_node("verify_citations", verify_citations)
builder.add_node("refuse", refuse)
builder.add_edge(START, "retrieve")
builder.add_conditional_edges("retrieve", route_after_retrieve, ["generate", "refuse"])
builder.add_edge("generate", "verify_citations")
builder.add_edge("verify_citations", END)
builder.add_edge("refuse", END)
graph = builder.compile(name="cardrag")
