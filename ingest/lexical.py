"""BM25 over the same children as the vector store (bm25s), persisted beside Chroma.

Why bm25s rather than LangChain's ``BM25Retriever``: bm25s scores with sparse matrices in
numpy and saves its index to plain files; ``BM25Retriever`` wraps ``rank_bm25``, which scores
every document in Python on each query and is pickled rather than saved.

Each child is analysed in its card's language (metadata ``language``; detected from the text
when a row has none): lower-cased words of two or more characters (bm25s's pattern), that
language's stop words dropped (one list per card, never a mixed one: a mixed list removes
English content words such as "come" or "con" and cost 2 points of recall@1 on the golden
set) and, for the languages in ``stemmed``, Snowball stemming (PyStemmer), so "tomar",
"tomo" and "tomando" meet. A question is analysed in each language the index holds, and its
tokens pooled.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cardrag.ingest import metadata as md
from cardrag.ingest.language import ANALYSED, SURE, detect, detect_with_probability

logger = logging.getLogger(__name__)

CHILD_IDS = "child_ids.json"
READ_PAGE = 5000
"""Rows per Chroma ``get`` when rebuilding from a collection."""


TOKEN = re.compile(r"(?u)\b\w\w+\b")
"""A token: a word of two or more characters (bm25s's and scikit-learn's pattern)."""
STEMMERS = {
    "en": "english",
    "es": "spanish",
    "pt": "portuguese",
    "it": "italian",
    "fr": "french",
    "de": "german",
}
"""Snowball stemmers (PyStemmer's names), by ISO 639-1 code."""
STOPWORD_LISTS = {
    "en": "STOPWORDS_EN",
    "es": "STOPWORDS_SPANISH",
    "pt": "STOPWORDS_PORTUGUESE",
    "it": "STOPWORDS_ITALIAN",
    "fr": "STOPWORDS_FRENCH",
    "de": "STOPWORDS_GERMAN",
}
"""Languages with a stop-word list, by ISO 639-1 code."""


def analyse(text: str, language: str, *, stem: bool) -> list[str]:
    """The BM25 tokens of ``text`` read as ``language``.

    A language without a stop-word list or a stemmer keeps every word as it is.

    Example:
        >>> analyse("Tomando o comprimido", "pt", stem=True)
        ['tom', 'comprim']
        >>> analyse("Taking the tablet", "en", stem=False)
        ['taking', 'tablet']
    """
    stop = _stopwords(language)
    tokens = [t for t in TOKEN.findall(text.lower()) if t not in stop]
    if stem and language in STEMMERS:
        return list(_stemmer(language).stemWords(tokens))
    return tokens


@functools.cache
def _stopwords(language: str) -> frozenset[str]:
    """The stop words of ``language`` (none for a language without a list)."""
    from bm25s import stopwords as sw

    name = STOPWORD_LISTS.get(language)
    return frozenset(getattr(sw, name) if name else ())


@functools.cache
def _stemmer(language: str) -> Any:
    import Stemmer

    return Stemmer.Stemmer(STEMMERS[language])


@dataclass
class BM25Index:
    """A BM25 index of child chunks; ``search`` returns ``(child_id, parent_id, score)``.

    Example:
        >>> index = BM25Index.build(["a::00"], ["a"], ["Keep insulin in the fridge."])
        >>> [(child, parent) for child, parent, _ in index.search("insulin fridge", 5)]
        [('a::00', 'a')]
    """

    child_ids: list[str]
    """Child id of every indexed row, in index order."""
    parent_ids: list[str]
    """Parent id of every indexed row."""
    model: Any
    """The ``bm25s.BM25`` index (None when there are no rows)."""
    restricted: list[bool] = field(default_factory=list)
    """Whether each row belongs to a restricted card (skipped unless allowed)."""
    languages: tuple[str, ...] = ("en",)
    """The languages the rows are written in (a question is analysed in each)."""
    stemmed: tuple[str, ...] = ()
    """Languages whose tokens are stemmed (at indexing and at search alike)."""

    @classmethod
    def build(
        cls,
        child_ids: Sequence[str],
        parent_ids: Sequence[str],
        texts: Sequence[str],
        restricted: Sequence[bool] | None = None,
        row_languages: Sequence[str] | None = None,
        *,
        stemmed: Sequence[str] = (),
    ) -> BM25Index:
        """Index child texts, each analysed in its language (English without ``row_languages``).

        ``restricted`` flags rows of restricted cards.
        """
        import bm25s

        langs = list(row_languages) if row_languages is not None else ["en"] * len(texts)
        model = None
        if texts:
            model = bm25s.BM25()
            corpus = [
                analyse(t, lang, stem=lang in stemmed) for t, lang in zip(texts, langs, strict=True)
            ]
            model.index(corpus, show_progress=False)
        flags = list(restricted) if restricted is not None else [False] * len(child_ids)
        languages = tuple(sorted(set(langs))) or ("en",)
        return cls(list(child_ids), list(parent_ids), model, flags, languages, tuple(stemmed))

    def tokens(self, query: str) -> list[str]:
        """The question's tokens: its analysis in each language of the rows, pooled.

        Example:
            >>> index = BM25Index([], [], None, languages=("en", "pt"), stemmed=("pt",))
            >>> index.tokens("tomando leite")
            ['tomando', 'leite', 'tom', 'leit']
        """
        pooled: dict[str, None] = {}
        for language in self.languages:
            stem = language in self.stemmed
            pooled.update(dict.fromkeys(analyse(query, language, stem=stem)))
        return list(pooled)

    def reads(self, query: str) -> bool:
        """Whether BM25 can judge the question: False when it is surely in another language.

        A question in a language no card is written in shares only names and numbers with
        the cards; its BM25 ranking then outvotes the multilingual dense one (measured on
        XQuAD, Spanish questions over the English cards: ours recall@1 0.741 with BM25's
        vote, 0.882 without, tuning part). The question's language is detected among
        :data:`ANALYSED`; below :data:`SURE` probability, or where a card's language cannot
        be detected, BM25 keeps its vote.

        Example:
            >>> english = BM25Index([], [], None, languages=("en",))
            >>> english.reads("Posso tomar o comprimido com leite?"), english.reads("Milk?")
            (False, True)
        """
        if not set(self.languages) <= set(ANALYSED):
            return True
        language, probability = detect_with_probability(query)
        return language in self.languages or probability < SURE

    def search(
        self, query: str, n: int, *, allow_restricted: bool = False
    ) -> list[tuple[str, str, float]]:
        """The ``n`` best-scoring children (score > 0), best first; restricted rows skipped.

        Nothing for a question BM25 cannot judge (:meth:`reads`).
        """
        if self.model is None or n <= 0 or not self.reads(query):
            return []
        known = self.model.vocab_dict
        tokens = [t for t in self.tokens(query) if t in known]
        if not tokens:
            return []
        mask = None if allow_restricted else self._public_mask
        docs, scores = self.model.retrieve(
            [tokens],
            k=min(n, len(self.child_ids)),
            show_progress=False,
            n_threads=1,  # one question per call: bm25s threads split batches of queries only
            weight_mask=mask,
        )
        return [
            (self.child_ids[i], self.parent_ids[i], float(s))
            for i, s in zip(docs[0], scores[0], strict=True)
            if s > 0
        ]

    @functools.cached_property
    def _public_mask(self) -> Any:
        """1 for rows of cards that are not restricted, 0 for the others (None: no row is)."""
        if not any(self.restricted):
            return None
        import numpy as np

        return np.array([not r for r in self.restricted], dtype=np.float32)

    def save(self, folder: Path) -> None:
        """Write the index files and the row ids into ``folder``."""
        folder.mkdir(parents=True, exist_ok=True)
        if self.model is not None:
            self.model.save(str(folder), show_progress=False)
        rows = {
            "child_ids": self.child_ids,
            "parent_ids": self.parent_ids,
            "restricted": self.restricted,
            "languages": list(self.languages),
            "stemmed": list(self.stemmed),
        }
        (folder / CHILD_IDS).write_text(json.dumps(rows), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path) -> BM25Index:
        """Read an index written by :meth:`save`."""
        import bm25s

        rows = json.loads((folder / CHILD_IDS).read_text(encoding="utf-8"))
        model = bm25s.BM25.load(str(folder), show_progress=False) if rows["child_ids"] else None
        restricted = rows.get("restricted") or [False] * len(rows["child_ids"])
        languages = tuple(rows.get("languages") or ["en"])
        stemmed = tuple(rows.get("stemmed") or ())
        return cls(rows["child_ids"], rows["parent_ids"], model, restricted, languages, stemmed)

    @classmethod
    def from_rows(
        cls, rows: Iterable[tuple[str, str, dict[str, Any]]], *, stemmed: Sequence[str] = ()
    ) -> BM25Index:
        """Index ``(child id, text, metadata)`` rows, in order (card rows are left out).

        Each row is analysed in its metadata's ``language``, detected from its text when it
        has none. Ingest passes the rows it has just written, so it never reads them back.
        """
        kept = [(i, text, meta or {}) for i, text, meta in rows]
        kept = [row for row in kept if row[2].get(md.CHUNK_INDEX) != md.CARD_ROW]
        return cls.build(
            [i for i, _, _ in kept],
            [str(meta.get(md.PARENT_ID, "")) for _, _, meta in kept],
            [text for _, text, _ in kept],
            [meta.get(md.SENSITIVITY) == "restricted" for _, _, meta in kept],
            [str(meta.get(md.LANGUAGE) or detect(text)) for _, text, meta in kept],
            stemmed=stemmed,
        )

    @classmethod
    def from_collections(
        cls, collections: Sequence[Any], *, stemmed: Sequence[str] = ()
    ) -> BM25Index:
        """Rebuild from the child rows of Chroma collections (after a write to an open index).

        Rows are read a page at a time, unfiltered: one filtered ``get`` of a whole large
        collection fails inside Chroma ("too many SQL variables", seen at 10,000 cards).
        """
        rows: list[tuple[str, str, dict[str, Any]]] = []
        for collection in collections:
            read = 0
            while True:
                page = collection.get(
                    include=["documents", "metadatas"], limit=READ_PAGE, offset=read
                )
                read += len(page["ids"])
                rows += zip(page["ids"], page["documents"], page["metadatas"], strict=True)
                if len(page["ids"]) < READ_PAGE:
                    break
        return cls.from_rows(rows, stemmed=stemmed)
