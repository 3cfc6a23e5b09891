"""What ``ParentDocumentRetriever``'s fields mean here, and which cannot be honoured.

``search_kwargs`` keeps LangChain's keys with their meaning: ``k`` (here it counts parents),
``filter`` (in the store's own form) and ``score_threshold`` (the similarity gate, as
``search_type="similarity_score_threshold"`` applies it). Anything else is refused at
construction with the reason, never accepted and ignored (house style).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_chroma import Chroma
from langchain_classic.retrievers.multi_vector import SearchType

from cardrag.ingest.splitter import CardSplitter

if TYPE_CHECKING:
    from cardrag.retrievers.parent import ScoredParentDocumentRetriever

SEARCH_KWARGS = ("k", "filter", "score_threshold")
"""The ``search_kwargs`` keys the retriever honours (``k`` parents, ``filter``, and the gate)."""


def field_problems(retriever: ScoredParentDocumentRetriever) -> list[str]:
    """Why a field of ``ParentDocumentRetriever`` or ours cannot be honoured (empty: all can).

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> from langchain_core.stores import InMemoryStore
        >>> from langchain_core.vectorstores import InMemoryVectorStore
        >>> from cardrag import ScoredParentDocumentRetriever
        >>> store = InMemoryVectorStore(DeterministicFakeEmbedding(size=4))
        >>> try:
        ...     ScoredParentDocumentRetriever(
        ...         vectorstore=store, docstore=InMemoryStore(), search_kwargs={"fetch_k": 20})
        ... except ValueError as exc:
        ...     print(str(exc).splitlines()[1].strip()[:52])
        Value error, search_kwargs ['fetch_k'] not supported
    """
    problems: list[str] = []
    if retriever.search_type == SearchType.mmr:
        problems.append(
            "search_type='mmr' is not supported: MMR diversifies children, and this retriever "
            "already returns k distinct parents ranked by their best child; use 'similarity'"
        )
    unknown = sorted(set(retriever.search_kwargs) - set(SEARCH_KWARGS))
    if unknown:
        problems.append(
            f"search_kwargs {unknown} not supported: the retriever takes {list(SEARCH_KWARGS)} "
            "(how many children it reads is fetch_multiplier and max_fetch)"
        )
    given = retriever.model_fields_set
    for key, field in (("k", "k"), ("score_threshold", "min_similarity")):
        asked = retriever.search_kwargs.get(key)
        if key in retriever.search_kwargs and field in given and asked != getattr(retriever, field):
            problems.append(
                f"search_kwargs[{key!r}] ({asked!r}) and {field} "
                f"({getattr(retriever, field)!r}) disagree: give one"
            )
    if not isinstance(retriever.vectorstore, Chroma):
        name = type(retriever.vectorstore).__name__
        for field in ("card_rows", "card_rows_store", "restricted_store"):
            if getattr(retriever, field):
                problems.append(f"{field} needs Chroma collections; the vector store is {name}")
        splitter = retriever.child_splitter
        if isinstance(splitter, CardSplitter) and splitter.card_rows:
            problems.append(f"a CardSplitter with card_rows needs Chroma; the store is {name}")
    return problems
