"""The drop-in on every store: LangChain's how-to, ours against the store's own search and PDR.

The how-to's construction (whole documents as parents, ``RecursiveCharacterTextSplitter(
chunk_size=400)`` children, ``InMemoryStore``) on ``InMemoryVectorStore``, FAISS and Chroma,
over the shared XQuAD-en articles where ``../shared`` is present (else the how-to documents the
tests use). Per store, interleaved per question: the store's own
``similarity_search_with_score`` for the window ours fetches first, the least a retriever
can do with that search (:class:`Skeleton`), plain ``ParentDocumentRetriever`` over the same
store and docstore, and ours (k=4). The question's embedding is excluded: every question is
embedded once and served from a cache after.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from typing import Any

from langchain_chroma import Chroma
from langchain_classic.retrievers import ParentDocumentRetriever
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.stores import BaseStore, InMemoryStore
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore
from langchain_text_splitters import RecursiveCharacterTextSplitter

from cardrag.evals.bench.growth import HashedEmbeddings
from cardrag.evals.bench.latency import interleaved_timings
from cardrag.ingest.settings import PROJECT_ROOT, Settings
from cardrag.retrievers.parent import ScoredParentDocumentRetriever

XQUAD = PROJECT_ROOT.parent / "shared" / "datasets" / "xquad-en"
"""The articles measured where ``../shared`` is present."""
HOWTO = PROJECT_ROOT / "tests" / "data" / "howto"
"""The how-to documents the tests use, measured otherwise."""
STORES = ("InMemoryVectorStore", "FAISS", "Chroma")
"""The stores measured, in the table's order."""


class QuestionCache(Embeddings):
    """An embedding whose questions are embedded once: the timed calls exclude embedding."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.seen: dict[str, list[float]] = {}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """The inner model's vectors."""
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        """The question's vector, embedded on first sight only."""
        if text not in self.seen:
            self.seen[text] = self.inner.embed_query(text)
        return self.seen[text]


class Skeleton(BaseRetriever):
    """The least a parent-document retriever does with the store's search of the window.

    One ``similarity_search_with_score`` of ``window`` children, the first ``k`` distinct
    parents, one docstore read: no score, gate, fusion or budget. What ours costs above it is
    ours; what it costs above the store's search is LangChain's ``invoke`` and the docstore.
    """

    vectorstore: VectorStore
    """The children's store."""
    docstore: BaseStore[str, Document]
    """The parents' store."""
    window: int
    """Children searched."""
    k: int = 4
    """Parents returned."""
    id_key: str = "doc_id"
    """Child metadata key holding the parent's id (the how-to's)."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        """The first ``k`` distinct parents of the window's children."""
        parents: dict[str, None] = {}
        for doc, _ in self.vectorstore.similarity_search_with_score(query, k=self.window):
            if (parent := doc.metadata.get(self.id_key)) is not None:
                parents[str(parent)] = None
        return [d for d in self.docstore.mget(list(parents)[: self.k]) if d is not None]


def corpus() -> tuple[str, list[Document], list[str]]:
    """The documents and questions measured, and what they are."""
    if (XQUAD / "parents.jsonl").is_file():
        with (XQUAD / "parents.jsonl").open(encoding="utf-8") as handle:
            rows = [json.loads(line) for line in handle if line.strip()]
        with (XQUAD / "queries.jsonl").open(encoding="utf-8") as handle:
            questions = [json.loads(line)["text"] for line in handle if line.strip()]
        docs = [Document(id=r["_id"], page_content=r["text"]) for r in rows]
        return f"{len(docs)} XQuAD-en articles", docs, questions[:100]
    docs = [Document(p.read_text(encoding="utf-8"), id=p.stem) for p in sorted(HOWTO.glob("*.txt"))]
    with (HOWTO / "questions.jsonl").open(encoding="utf-8") as handle:
        questions = [json.loads(line)["question"] for line in handle if line.strip()]
    return f"{len(docs)} how-to documents", docs, questions


def new_store(kind: str, embeddings: Embeddings) -> VectorStore:
    """An empty store of one kind, as its LangChain docs make one."""
    if kind == "InMemoryVectorStore":
        return InMemoryVectorStore(embeddings)
    if kind == "Chroma":
        return Chroma(
            collection_name=f"dropin-bench-{id(embeddings)}", embedding_function=embeddings
        )
    import faiss  # the test extra
    from langchain_community.docstore.in_memory import InMemoryDocstore
    from langchain_community.vectorstores import FAISS

    size = len(embeddings.embed_query("size"))
    return FAISS(embeddings, faiss.IndexFlatL2(size), InMemoryDocstore(), {})


def systems(kind: str, docs: list[Document]) -> tuple[dict[str, Callable[[str], object]], int]:
    """The three calls on one store (the how-to's construction), and the children written."""
    store = new_store(kind, QuestionCache(HashedEmbeddings()))
    docstore = InMemoryStore()
    splitter = RecursiveCharacterTextSplitter(chunk_size=400)
    ours = ScoredParentDocumentRetriever(
        vectorstore=store, docstore=docstore, child_splitter=splitter
    )
    ours.add_documents(docs, ids=[str(d.id) for d in docs])
    plain = ParentDocumentRetriever(vectorstore=store, docstore=docstore, child_splitter=splitter)
    settings = Settings()
    window = max(4, settings.candidate_parents) * settings.fetch_multiplier
    children = len(store.similarity_search("size", k=100_000))
    calls: dict[str, Callable[[str], object]] = {
        "store": lambda q: store.similarity_search_with_score(q, k=window),
        "skeleton": Skeleton(vectorstore=store, docstore=docstore, window=window).invoke,
        "plain PDR": plain.invoke,
        "ours": ours.invoke,
    }
    return calls, children


def dropin(rounds: int) -> dict[str, Any]:
    """p50 milliseconds of each call on each store, and ours' ratios, same run."""
    what, docs, questions = corpus()
    rows = []
    for kind in STORES:
        calls, children = systems(kind, docs)
        times = interleaved_timings(calls, questions, rounds)
        p50 = {name: round(1000 * statistics.median(t), 2) for name, t in times.items()}
        rows.append({"store": kind, "children": children, "p50_ms": p50})
    return {"corpus": what, "questions": len(questions), "rows": rows}


def dropin_section(dropped: dict[str, Any]) -> list[str]:
    """The drop-in table for ``evals/bench.md``."""
    if not dropped:
        return []
    lines = [
        "",
        f"## Drop-in: the how-to on each store ({dropped['corpus']}, "
        f"{dropped['questions']} questions, k=4, question embedding excluded; dropin.py)",
        "",
        "| store | children | store's own search p50 ms | skeleton | plain PDR | ours "
        "| skeleton / store | ours / store | ours / PDR |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in dropped["rows"]:
        p50 = row["p50_ms"]
        skeleton = p50.get("skeleton")  # runs before it was measured have none
        over = f"{skeleton / p50['store']:.1f}x" if skeleton else ""
        lines.append(
            f"| {row['store']} | {row['children']:,} | {p50['store']} | {skeleton or ''} "
            f"| {p50['plain PDR']} | {p50['ours']} | {over} "
            f"| {p50['ours'] / p50['store']:.1f}x | {p50['ours'] / p50['plain PDR']:.1f}x |"
        )
    lines += [
        "",
        "Skeleton: the least a retriever can do with the store's search of the same window "
        "(the first 4 distinct parents, one docstore read, through LangChain's `invoke`; "
        "`Skeleton` in dropin.py); what it costs above the store's own search is LangChain's "
        "and the docstore's, not ours.",
    ]
    return lines
