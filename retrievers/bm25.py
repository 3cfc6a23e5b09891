"""BM25 search over the index ingest wrote (:class:`~cardrag.ingest.lexical.BM25Index`).

Ingest analyses and indexes the children (:mod:`cardrag.ingest.lexical`); a question is read
here: analysed in each language the index holds (:func:`question_tokens`), skipped when it is
surely in a language no card is written in (:func:`reads`), and scored by reading at most
:data:`POSTINGS_PER_TOKEN` postings per token (:func:`top_rows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cardrag.ingest.analysis import analyse
from cardrag.ingest.language import ANALYSED, SURE, detect_with_probability
from cardrag.ingest.lexical import BM25Index

__all__ = [
    "POSTINGS_PER_TOKEN",
    "analyses",
    "known_share",
    "question_tokens",
    "reads",
    "rows_of",
    "search",
    "top_rows",
]

POSTINGS_PER_TOKEN = 10_000
"""Postings a search reads per question token, highest BM25 contribution first.

BM25's cost would otherwise grow with every child that shares a word with the question (a
common word occurs in a large share of 500,000 children). The postings of each token are
stored in impact order (:func:`impact_ordered`), so a search reads at most this many per
token and never touches the rest. It is exact whenever no question token occurs in more
children than this (every evaluation set here: at most 7,200 children); beyond, what is left
out is a common word's lowest contributions (its IDF is low, and its highest-tf rows were
read)."""


def analyses(index: BM25Index, query: str) -> dict[str, list[str]]:
    """The question's tokens in each language of the rows, analysed as those rows were.

    Example:
        >>> index = BM25Index([], [], None, languages=("en", "pt"), stemmed=("pt",))
        >>> analyses(index, "tomando leite")
        {'en': ['tomando', 'leite'], 'pt': ['tom', 'leit']}
    """
    return {
        language: analyse(query, language, stem=language in index.stemmed)
        for language in index.languages
    }


def question_tokens(index: BM25Index, query: str) -> list[str]:
    """The question's tokens: its analysis in each language of the rows, pooled.

    Example:
        >>> index = BM25Index([], [], None, languages=("en", "pt"), stemmed=("pt",))
        >>> question_tokens(index, "tomando leite")
        ['tomando', 'leite', 'tom', 'leit']
    """
    pooled: dict[str, None] = {}
    for tokens in analyses(index, query).values():
        pooled.update(dict.fromkeys(tokens))
    return list(pooled)


def known_share(index: BM25Index, query: str) -> float:
    """The share of the question's words BM25 can judge: those the indexed rows hold.

    Per language the index holds, the question's distinct tokens (analysed as the rows were)
    found in the vocabulary, over all of them; the best language's share. BM25 ranks a
    question only by the words it knows, so a question worded unlike the cards (a patient's
    "water tablet" for "diuretic") gets its ranking from the few words it shares with them;
    the fusion weighs BM25's vote by this share (:func:`cardrag.retrievers.fusion.lexical_weight`).
    0 for an empty index or a question with no token.

    Example:
        >>> index = BM25Index.build(["a::00"], ["a"], ["Keep insulin in the fridge."])
        >>> known_share(index, "insulin fridge"), known_share(index, "insulin in the car")
        (1.0, 0.5)
    """
    if index.model is None:
        return 0.0
    known = index.model.vocab_dict
    distinct = [set(tokens) for tokens in analyses(index, query).values()]
    shares = [len(words & known.keys()) / len(words) for words in distinct if words]
    return max(shares, default=0.0)


def reads(index: BM25Index, query: str) -> bool:
    """Whether BM25 can judge the question: False when it is surely in another language.

    A question in a language no card is written in shares only names and numbers with
    the cards; its BM25 ranking then outvotes the multilingual dense one (measured on
    XQuAD, Spanish questions over the English cards: ours recall@1 0.741 with BM25's
    vote, 0.882 without, tuning part). The question's language is detected among
    :data:`~cardrag.ingest.language.ANALYSED`; below
    :data:`~cardrag.ingest.language.SURE` probability, or where a card's language cannot
    be detected, BM25 keeps its vote.

    Example:
        >>> english = BM25Index([], [], None, languages=("en",))
        >>> reads(english, "Posso tomar o comprimido com leite?"), reads(english, "Milk?")
        (False, True)
    """
    if not set(index.languages) <= set(ANALYSED):
        return True
    language, probability = detect_with_probability(query)
    return language in index.languages or probability < SURE


def search(
    index: BM25Index, query: str, n: int, *, allow_restricted: bool = False
) -> list[tuple[str, str, float]]:
    """The ``n`` best-scoring children ``(child_id, parent_id, score)``, score > 0, best first.

    Restricted rows are skipped unless allowed; nothing for a question BM25 cannot judge
    (:func:`reads`).

    Example:
        >>> index = BM25Index.build(["a::00"], ["a"], ["Keep insulin in the fridge."])
        >>> [(child, parent) for child, parent, _ in search(index, "insulin fridge", 5)]
        [('a::00', 'a')]
    """
    if index.model is None or n <= 0 or not reads(index, query):
        return []
    known = index.model.vocab_dict
    tokens = [t for t in question_tokens(index, query) if t in known]
    if not tokens:
        return []
    mask = None if allow_restricted else index.public_mask
    rows, scores = top_rows(
        index.model.scores, [known[t] for t in tokens], n, POSTINGS_PER_TOKEN, mask
    )
    return [
        (index.child_ids[i], index.parent_ids[i], float(s))
        for i, s in zip(rows.tolist(), scores.tolist(), strict=True)
    ]


def rows_of(index: BM25Index, parent_ids: Sequence[str]) -> list[str]:
    """The ids of every child row of the given parents (restricted ones included).

    Example:
        >>> rows_of(BM25Index(["a::00", "b::00", "a::01"], ["a", "b", "a"], None), ["a"])
        ['a::00', 'a::01']
    """
    return [index.child_ids[i] for p in parent_ids for i in index.rows_by_parent.get(p, ())]


def top_rows(
    scores: dict[str, Any],
    token_ids: Sequence[int],
    n: int,
    depth: int,
    mask: Any = None,
) -> tuple[Any, Any]:
    """The ``n`` best rows for the tokens, reading at most ``depth`` postings per token.

    Reads each token's first ``depth`` postings of an :func:`impact_ordered` matrix, sums
    them per row, weights them by ``mask`` (0 drops a row), and keeps rows scoring above 0.

    Returns:
        Row numbers and their scores, best first (ties: lower row first).

    Example:
        >>> import numpy as np
        >>> m = {"data": np.array([0.5, 0.3, 0.1, 0.4], dtype=np.float32),
        ...      "indices": np.array([1, 2, 0, 2]), "indptr": np.array([0, 3, 4]), "num_docs": 3}
        >>> rows, values = top_rows(m, [0, 1], 2, depth=2)
        >>> rows.tolist(), [round(v, 2) for v in values.tolist()]
        ([2, 1], [0.7, 0.5])
    """
    import numpy as np

    data, indices, indptr = scores["data"], scores["indices"], scores["indptr"]
    spans = [(int(indptr[t]), min(int(indptr[t + 1]), int(indptr[t]) + depth)) for t in token_ids]
    rows = np.concatenate([indices[a:b] for a, b in spans] or [np.empty(0, dtype=np.int64)])
    values = np.concatenate([data[a:b] for a, b in spans] or [np.empty(0)])
    # summed per row over a scratch array of every row (linear; sorting the postings costs 20
    # times more at 500,000 rows), then read back at the postings: a row read for several
    # tokens repeats, at most once per token, so the best n x tokens postings hold the n best
    # rows, and only those are deduplicated
    every = np.bincount(rows, weights=values, minlength=int(scores["num_docs"]))
    sums = every[rows] if mask is None else every[rows] * mask[rows]
    kept = sums > 0
    rows, sums = rows[kept], sums[kept]
    enough = n * max(1, len(spans))
    if len(sums) > enough:
        nth = np.partition(sums, len(sums) - enough)[len(sums) - enough]
        rows, sums = rows[sums >= nth], sums[sums >= nth]
    unique, first = np.unique(rows, return_index=True)
    sums = sums[first]
    order = np.lexsort((unique, -sums))[:n]  # at most n x tokens rows: sorting them is cheap
    return unique[order], sums[order]
