"""The graph's typed run context: which retriever, k, grader, chat model and prompt budget.

The similarity gate belongs to the retriever (``min_similarity``, set from the settings by
``ScoredParentDocumentRetriever.from_index``); the graph never passes it per call, so any
LangChain retriever can be the context's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.retrievers import BaseRetriever

from cardrag.app.calibration import load_calibrations
from cardrag.app.extractive import ExtractiveAnswerer
from cardrag.app.glossary import Glossary, glossary_for
from cardrag.app.grading import Grader
from cardrag.app.names import Names
from cardrag.app.vectors import QuestionCache, Vectors
from cardrag.ingest.embeddings import load_embeddings
from cardrag.ingest.index import Index, current_generation, open_current
from cardrag.ingest.settings import Settings, default
from cardrag.retrievers.parent import ScoredParentDocumentRetriever


@dataclass(kw_only=True)
class Context:
    """Configuration of one run of the answering graph (its ``context_schema``).

    Example:
        >>> ctx = Context.from_settings(Settings())  # doctest: +SKIP
        >>> graph.invoke({"question": "Can I drink alcohol?"}, context=ctx)  # doctest: +SKIP
    """

    retriever: BaseRetriever = field(
        metadata={"description": "Returns scored parent cards (its own gate applies)."}
    )
    k: int = field(default=default("k"), metadata={"description": "Cards retrieved per question."})
    chat_model: str | BaseChatModel | None = field(
        default=None,
        metadata={
            "description": "provider:model for init_chat_model, a chat model, or None (offline)."
        },
    )
    prompt_budget: int = field(
        default=default("prompt_budget"),
        metadata={"description": "Characters of each card in the prompt."},
    )
    answerer: ExtractiveAnswerer | None = field(
        default=None, metadata={"description": "The offline answerer used when chat_model is None."}
    )
    grader: Grader | None = field(
        default=None,
        metadata={"description": "Decides which retrieved cards can answer; None keeps them all."},
    )
    across_min_similarity: float | None = field(
        default=None,
        metadata={
            "description": "The similarity gate for a card in another language than the "
            "question, where grading's calibration chose one; None: the retriever's gate."
        },
    )
    names: Names | None = field(
        default=None,
        metadata={
            "description": "The cards' medicine names: a question's brand names are read as "
            "those (retrieval, grading, answer); None reads questions as written."
        },
    )
    glossary: Glossary | None = field(
        default=None,
        metadata={
            "description": "A question in another language than the cards gets the English of "
            "its medication words appended (retrieval, grading, answer); None glosses nothing."
        },
    )
    index_problem: Callable[[], str | None] | None = field(
        default=None,
        metadata={
            "description": "Why the index cannot answer now (an empty or wrong parent store, a "
            "server away), checked when nothing is found: a set-up fault, not a refusal."
        },
    )

    def read(self, question: str) -> str:
        """The question as the nodes read it: :func:`read_as` with this context's parts."""
        return read_as(question, self.names, self.glossary)

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> Context:
        """Open the current index and build the offline defaults from ``settings``."""
        current_generation(settings)  # a missing store is reported before the model loads
        embeddings = question_embeddings(settings)
        index = open_current(settings, embeddings)
        return cls.from_index(index, settings, embeddings, **overrides)

    @classmethod
    def from_index(
        cls, index: Index, settings: Settings, embeddings: Embeddings, **overrides: Any
    ) -> Context:
        """The context over an opened index, configured from ``settings``."""
        retriever = ScoredParentDocumentRetriever.from_index(index, settings)  # gate: settings'
        vectors = Vectors(embeddings)
        values: dict[str, Any] = {
            "retriever": retriever,
            "k": settings.k,
            "chat_model": settings.chat_model,
            "prompt_budget": settings.prompt_budget,
            "answerer": ExtractiveAnswerer(
                embeddings, vectors=vectors, shipped_judge=settings.answer_judge
            ),
            "grader": (grader := grader_for(settings, vectors)),
            "across_min_similarity": across_gate(settings, grader),
            "names": names_of(retriever, index.manifest.get("aliases")),
            "glossary": glossary_of(retriever),
            "index_problem": index.problem,
        }
        values.update(overrides)
        return cls(**values)


class StaffAccessError(PermissionError):
    """Staff access was asked of a deployment that does not allow it."""


def check_staff_access(settings: Settings) -> None:
    """Refuse staff access where the settings do not allow it.

    Raises:
        StaffAccessError: when ``settings.staff_access`` is off.
    """
    if not settings.staff_access:
        msg = "staff access is not enabled here (set CARDRAG_STAFF_ACCESS=true to allow it)"
        raise StaffAccessError(msg)


def for_staff(context: Context, settings: Settings) -> Context:
    """The context a staff request runs with: ``internal`` cards may be retrieved too.

    Raises:
        StaffAccessError: when ``settings.staff_access`` is off.
    """
    check_staff_access(settings)
    retriever = context.retriever
    if isinstance(retriever, ScoredParentDocumentRetriever):
        retriever = retriever.model_copy(update={"allow_internal": True})
    return replace(context, retriever=retriever)


def resolve_chat_model(spec: str | BaseChatModel) -> BaseChatModel:
    """A chat model from a ``provider:model`` string (its provider package must be installed)."""
    if isinstance(spec, BaseChatModel):
        return spec
    from langchain.chat_models import init_chat_model

    return init_chat_model(spec)


def names_of(retriever: BaseRetriever, aliases: dict[str, str] | None = None) -> Names | None:
    """The medicine names the retriever's cards use, from its BM25 vocabulary (None without).

    Args:
        retriever: The retriever over the cards.
        aliases: The cards' aliases (an index manifest's ``aliases``).
    """
    bm25 = getattr(retriever, "bm25", None)
    if bm25 is None or bm25.model is None:
        return None
    return Names.of_words(bm25.model.vocab_dict, aliases)


def question_embeddings(settings: Settings) -> QuestionCache:
    """The settings' model behind one question cache, for the retriever and grading alike.

    Shared, a question is embedded once per answer (the retriever's query, grading's and the
    answerer's are the same vector).
    """
    return QuestionCache(load_embeddings(settings.embedding_model, settings.threads))


def glossary_of(retriever: BaseRetriever) -> Glossary | None:
    """The glossary for the retriever's cards, by the languages its BM25 index found in them."""
    bm25 = getattr(retriever, "bm25", None)
    return glossary_for(bm25.languages) if bm25 is not None else None


def read_as(question: str, names: Names | None, glossary: Glossary | None) -> str:
    """The question in the cards' words: medicine names resolved, then glossed.

    Example:
        >>> from cardrag.app.glossary import Glossary
        >>> names = Names.of_words(["diuretics"], {"water tablet": "diuretics"})
        >>> glossary = Glossary.of({"night": {"pt": ["noite"]}})
        >>> read_as("Posso tomar water tablets à noite?", names, glossary)
        'Posso tomar diuretics à noite? (en: night)'
    """
    read = names.rewrite(question) if names is not None else question
    return glossary.gloss(read) if glossary is not None else read


def across_gate(settings: Settings, grader: Grader | None) -> float | None:
    """The gate for a card in another language than the question: the calibration's.

    None (the retriever's gate for every card) when the settings set ``min_similarity``
    themselves, or grading is off or uncalibrated: the lower gate is safe only because grading
    refuses what it lets through.
    """
    if settings.min_similarity is not None or grader is None or grader.calibrations is None:
        return None
    return grader.calibrations.across_languages.min_similarity


def grader_for(settings: Settings, vectors: Vectors) -> Grader | None:
    """The grading step the settings ask for (``grading``), calibrated for their model."""
    if not settings.grading:
        return None
    return Grader(vectors, load_calibrations(settings.embedding_model))
