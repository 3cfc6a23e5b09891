"""The graph's state: what each node reads and writes."""

from __future__ import annotations

from typing import TypedDict

from langchain_core.documents import Document

from cardrag.app.grading import Grade
from cardrag.app.reply import CitedCard, Draft, Reply


class State(TypedDict, total=False):
    """Question in, reply out; retrieval and the draft in between."""

    question: str
    """The user's question."""
    query: str
    """The question as retrieval, grading and the answer read it: medicine names as the cards
    write them (:mod:`cardrag.app.names`); the reply keeps ``question``."""
    documents: list[Document]
    """Scored parent cards: from the retriever, then only those grading kept."""
    ranked: list[Document]
    """Every card the retriever ranked, its gate aside (grading's rivals)."""
    grades: list[Grade]
    """Grading's verdict on every retrieved card, in the retriever's order."""
    reason: str
    """Why the question is refused, when it is."""
    closest: CitedCard
    """A refusal after grading: the card that came closest."""
    closest_lacks: list[str]
    """What of the question that card does not say (names, aspects)."""
    draft: Draft
    """The answerer's unverified answer."""
    reply: Reply
    """The verified, structured reply."""
