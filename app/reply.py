"""The structured reply: what the graph returns, the CLI prints and the API serves."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Draft(BaseModel):
    """What the chat model is asked to produce (structured output)."""

    answer: str = Field(description="The answer, citing cards inline as [cite:card-X].")
    citations: list[str] = Field(default_factory=list, description="Card ids cited, e.g. card-x.")
    answered: bool = Field(
        default=True,
        description="False when the cards do not answer the question (then say so in answer).",
    )


class CitedCard(BaseModel):
    """A card the answer cites."""

    id: str
    """Card id."""
    title: str
    """Card title (shown on citation chips)."""


class RetrievedCard(BaseModel):
    """A card the retriever returned, with the passage that matched."""

    id: str
    """Card id."""
    title: str
    """Card title."""
    rank: int = 0
    """1 for the card the retriever ranked first, then 2, 3, ..."""
    score: float
    """Best child similarity (cosine): what the similarity gate applies to."""
    ordering_score: float | None = None
    """The score that ordered the cards (reciprocal rank fusion), where rankings were fused."""
    answerability: float | None = None
    """How far grading's calibrated score for this card is above (+) or below (-) its threshold
    (None where it was not computed)."""
    matched_child_id: str
    """Id of the child chunk that matched."""
    matched_passage: str
    """The child's own text in the card (no title prefix, no overlap)."""
    matched_start_index: int | None = None
    """Where that passage starts in the card text."""
    matched_end_index: int | None = None
    """Where it ends (exclusive)."""
    window_start_index: int | None = None
    """Sentence-window chunker only: where the window the model read starts in the card."""
    window_end_index: int | None = None
    """Where that window ends (exclusive)."""


class Reply(BaseModel):
    """The answer to one question, JSON-serialisable."""

    question: str
    """The question as asked."""
    answer: str
    """Answer text with ``[cite:card-X]`` markers (only verified ones remain)."""
    citations: list[CitedCard] = Field(default_factory=list)
    """Cards cited, each among the retrieved ones, in order of first citation."""
    retrieved: list[RetrievedCard] = Field(default_factory=list)
    """Cards retrieved, best first."""
    rejected_citations: list[str] = Field(default_factory=list)
    """Ids the draft cited that were not retrieved (or do not exist), or whose marker follows
    words the card does not hold (a chat model's draft); those markers are removed."""
    uncited: bool = False
    """True when cards were retrieved but the answer cites none of them."""
    refused: bool = False
    """True when no card can answer: none passed the similarity gate or grading."""
    not_covered: list[str] = Field(default_factory=list)
    """What a part of the question asked that the cards answering its other parts never
    mention ("pregnancy or breastfeeding"); the answer ends by saying so."""
    refusal_reason: str | None = None
    """Why the question was refused, in plain words ("No card mentions clopidogrel.")."""
    closest: CitedCard | None = None
    """A refusal after grading: the card that came closest (the retriever's first)."""
    closest_lacks: list[str] = Field(default_factory=list)
    """What of the question that card does not say: the names it never mentions and the
    aspects it says nothing about ("how to store it"); empty when it only scored too low."""
