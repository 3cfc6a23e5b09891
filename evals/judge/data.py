"""The answer judge's training and evaluation groups: a question, sentences, which answer it.

Two sources (``../shared/README.md`` says which sets may train):

* **SQuAD 2.0 translated** (``squad2-pt``, ``squad2-es``): each question against the sentences
  of its paragraph. The sentence holding the answer answers it; the others do not; an
  unanswerable question (written to look answerable from its paragraph) is answered by none.
  The two translations share question ids, so each question is also asked of the other
  language's paragraph: cross-lingual pairs, as patients ask English cards in their language.
  Machine translation moved some answer offsets: the answer text is looked for near its offset
  and a question whose answer is not there is dropped.
* **The question-type matrix** (``evals/cases/matrix.jsonl``) on the cards it may read: an
  answered question against its card's sentences (the labelled one answers), a not-covered one
  against its card's sentences (none answers). Only the tuning cards ever train; the held-out
  cards are measured.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from cardrag.evals.cases import MatrixCase
from cardrag.ingest.cards import Card
from cardrag.ingest.sentences import sentences
from cardrag.retrievers.judge.cross_encoder import text_sentences

ANSWER_SLACK = 100
"""How far from its recorded offset an answer may be found (translation moves offsets)."""


@dataclass(frozen=True)
class Group:
    """A question and the sentences it is judged against, with which of them answer it."""

    question: str
    """The question as asked."""
    sentences: tuple[str, ...]
    """The paragraph's or card's sentences, in order."""
    answers: tuple[bool, ...]
    """For each sentence, whether it answers the question (all False: none does)."""
    source: str
    """Where the group comes from: ``squad2-pt``, ``squad2-es>pt`` (Spanish question,
    Portuguese paragraph), ``matrix``."""
    language: str
    """The question's language (ISO 639-1)."""
    key: str = ""
    """The question's id in its source."""
    card: str = ""
    """For a matrix group, the card it is about (the split is by card)."""
    weak: bool = False
    """Only the card's answer is known: some sentence answers (which one is not labelled,
    ``answers`` all True) or none does."""

    @property
    def answerable(self) -> bool:
        """Whether some sentence answers the question."""
        return any(self.answers)


def split_sentences(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, sentence)`` of each sentence of a text, as sentence rows cut them."""
    return [(s, e, text[s:e]) for s, e in sentences(text)]


def _answer_at(context: str, answer: dict[str, object]) -> int | None:
    text, start = str(answer["text"]).strip(), int(str(answer["answer_start"]))
    found = context.find(text, max(0, start - ANSWER_SLACK))
    return found if text and found >= 0 and abs(found - start) <= ANSWER_SLACK else None


def _paragraph_questions(path: Path) -> dict[str, tuple[str, str, int | None, bool]]:
    """Each question id: (question, its paragraph, its answer's offset, answerable)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    out: dict[str, tuple[str, str, int | None, bool]] = {}
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"].lstrip("\ufeff")
            for qa in paragraph["qas"]:
                impossible = bool(qa.get("is_impossible"))
                at = None if impossible else _answer_at(context, qa["answers"][0])
                out[qa["id"]] = (qa["question"].strip(), context, at, not impossible)
    return out


def _group(
    question: str, context: str, at: int | None, answerable: bool
) -> tuple[tuple[str, ...], tuple[bool, ...]] | None:
    parts = split_sentences(context)
    if not answerable:
        return tuple(p[2] for p in parts), tuple(False for _ in parts)
    if at is None:
        return None
    labels = tuple(start <= at < end for start, end, _ in parts)
    return (tuple(p[2] for p in parts), labels) if any(labels) else None


def squad_groups(folders: dict[str, Path]) -> list[Group]:
    """Groups from SQuAD 2.0 translations: each language's own, then every crossing.

    Args:
        folders: Language code to a folder holding ``dev-v2.0.json``.
    """
    read = {lang: _paragraph_questions(f / "dev-v2.0.json") for lang, f in sorted(folders.items())}
    groups: list[Group] = []
    for asked, questions in read.items():
        for paragraph_lang, paragraphs in read.items():
            for qid in sorted(questions.keys() & paragraphs.keys()):
                question = questions[qid][0]
                _, context, at, answerable = paragraphs[qid]
                if answerable != questions[qid][3]:
                    continue
                made = _group(question, context, at, answerable)
                if made is None:
                    continue
                source = f"squad2-{asked}" + (
                    "" if asked == paragraph_lang else f">{paragraph_lang}"
                )
                groups.append(Group(question, made[0], made[1], source, asked, qid))
    return groups


def card_sentences(card: Card) -> tuple[str, ...]:
    """A card's sentences, as the served judge reads a text (:func:`text_sentences`)."""
    return tuple(text_sentences(card.body))


def matrix_groups(cases: Iterable[MatrixCase], cards: Sequence[Card]) -> list[Group]:
    """Groups from matrix questions: each against its own card's sentences.

    A question another card answers is left out (its own card neither answers nor fails to).
    """
    by_id = {card.id: card for card in cards}
    groups: list[Group] = []
    for case in cases:
        if case.label == "other_card" or case.card not in by_id:
            continue
        texts = card_sentences(by_id[case.card])
        wanted = " ".join((case.answer_sentence or "").split())
        labels = tuple(bool(wanted) and wanted in " ".join(t.split()) for t in texts)
        if case.label == "answered" and not any(labels):
            msg = f"matrix {case.query_id}: no sentence of {case.card} holds {wanted!r}"
            raise ValueError(msg)
        groups.append(
            Group(case.query, texts, labels, "matrix", case.language, case.query_id, case.card)
        )
    return groups


def weak_groups(
    asked: Iterable[tuple[str, str, str, Sequence[str]]],
    cards: Sequence[Card],
    nearest: Callable[[str, Sequence[Card]], Card],
) -> list[Group]:
    """Groups from questions labelled by card only.

    An answered question gets its answering card's sentences; a question no card covers gets
    the nearest card's, none of which answers it.

    Args:
        asked: ``(id, question, language, answering cards)``; no answering card: not covered.
        cards: The cards a group may be built on (the tuning cards).
        nearest: The card a not-covered question is asked of.
    """
    by_id = {card.id: card for card in cards}
    groups: list[Group] = []
    for key, question, language, answering in asked:
        if answering and answering[0] not in by_id:
            continue
        card = by_id[answering[0]] if answering else nearest(question, cards)
        texts = card_sentences(card)
        labels = tuple(bool(answering) for _ in texts)
        groups.append(Group(question, texts, labels, "cards", language, key, card.id, weak=True))
    return groups


def pairs(groups: Iterable[Group]) -> Iterator[tuple[str, str, bool]]:
    """Every (question, sentence, answers) pair of some groups."""
    for group in groups:
        for sentence, answers in zip(group.sentences, group.answers, strict=True):
            yield group.question, sentence, answers
