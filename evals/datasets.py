"""Evaluation sets as cards + queries + qrels: BEIR-like folders and our golden cases.

A BEIR-like folder (see ``../shared/README.md``) holds ``corpus.jsonl``, ``queries.jsonl``,
``qrels.tsv`` and, where units belong to larger documents, ``parents.jsonl`` and
``qrels_parent.tsv``. It is read at one of two levels:

* ``paragraph``: every ``corpus.jsonl`` row is a card, judged by ``qrels.tsv``;
* ``article``: every ``parents.jsonl`` row is a (long) card, judged by ``qrels_parent.tsv``.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from langchain_core.documents import Document

from cardrag.ingest import metadata as md
from cardrag.ingest.corpus import load_cards
from cardrag.ingest.language import detect

Level = Literal["paragraph", "article"]

META = "meta.json"
"""A dataset folder's declaration: ``{"language": "it", "license": "CC BY-SA 4.0"}``."""


@dataclass
class Dataset:
    """Cards to index, questions, and which cards answer each question."""

    name: str
    """Folder name plus level, e.g. ``xquad-en/article``."""
    license: str
    """Licence of the data, reported beside its figures."""
    cards: list[Document]
    """Parent documents (``id`` = card id, ``title`` in metadata)."""
    queries: dict[str, str]
    """Question id -> question text."""
    qrels: dict[str, dict[str, int]]
    """Question id -> {card id: relevance}."""
    kinds: dict[str, str]
    """Question id -> kind (``narrow``, ``broad``, ...) where known."""
    language: str = "en"
    """Language of the cards (``meta.json``, else detected; also in each card's metadata)."""


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if int(row["score"]) > 0:
                qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    return qrels


def _clean(text: str) -> str:
    return text.removeprefix("\ufeff").strip()


def load_beir(folder: Path | str, level: Level = "paragraph") -> Dataset:
    """Read a BEIR-like folder at the given level.

    Raises:
        FileNotFoundError: when the folder lacks the files the level needs.
    """
    root = Path(folder)
    corpus_file, qrels_file = (
        ("corpus.jsonl", "qrels.tsv")
        if level == "paragraph"
        else ("parents.jsonl", "qrels_parent.tsv")
    )
    for name in (corpus_file, qrels_file, "queries.jsonl"):
        if not (root / name).is_file():
            msg = f"{root}: {name} not found (needed for level {level!r})"
            raise FileNotFoundError(msg)
    meta = read_meta(root)
    rows = [row for row in _jsonl(root / corpus_file) if _clean(row["text"])]
    language = str(meta.get("language") or detect(" ".join(_clean(r["text"]) for r in rows[:20])))
    cards = [
        Document(
            id=str(row["_id"]),
            page_content=_clean(row["text"]),
            metadata={
                md.PARENT_ID: str(row["_id"]),
                md.TITLE: _clean(row.get("title") or ""),
                md.SENSITIVITY: "public",
                md.LANGUAGE: language,
            },
        )
        for row in rows
    ]
    qrels = _qrels(root / qrels_file)
    queries = {
        str(row["_id"]): _clean(row["text"])
        for row in _jsonl(root / "queries.jsonl")
        if str(row["_id"]) in qrels
    }
    qrels = {q: rels for q, rels in qrels.items() if q in queries}
    return Dataset(
        name=f"{root.name}/{level}",
        license=str(meta.get("license") or "see the dataset's README"),
        cards=cards,
        queries=queries,
        qrels=qrels,
        kinds={},
        language=language,
    )


def read_meta(root: Path) -> dict[str, Any]:
    """The folder's ``meta.json`` (language, licence), or ``{}`` when it has none.

    Raises:
        ValueError: when the file is not a JSON object, naming the file.
    """
    path = root / META
    if not path.is_file():
        return {}
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        msg = f"{path}: not valid JSON ({exc})"
        raise ValueError(msg) from exc
    if not isinstance(meta, dict):
        msg = f"{path}: expected a JSON object with language and license"
        raise ValueError(msg)
    return meta


def load_golden(cases: Path | str, cards_dir: Path | str) -> Dataset:
    """Our golden cases on a card folder: ``must_cite_one_of`` becomes the qrels."""
    cards = load_cards(cards_dir)
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    kinds: dict[str, str] = {}
    for case in _jsonl(Path(cases)):
        qid = case["query_id"]
        queries[qid] = case["query"]
        qrels[qid] = {card_id: 1 for card_id in case["must_cite_one_of"]}
        kinds[qid] = case.get("kind", "")
    return Dataset(
        name=f"golden ({Path(cards_dir).name})",
        license="CC-BY-4.0 (our own cards)",
        cards=[c.to_document() for c in cards],
        queries=queries,
        qrels=qrels,
        kinds=kinds,
    )
