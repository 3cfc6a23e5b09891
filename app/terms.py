"""The question's words against a card's words: salience, spelling across languages, coverage.

Pure functions over text, used by grading (``app.grading``) and the extractive answerer.
A word that is rare in general language in every language we serve (``wordfreq`` Zipf
frequency below :data:`SALIENT_ZIPF` in English, Portuguese, Spanish and Italian) names a
medicine, a condition, a test or a procedure. Words are compared in a folded spelling (accents
off, ph/th/y/k merged) and with ``rapidfuzz`` at :data:`FUZZY_RATIO`, so metronidazol and
metronidazole, levotiroxina and levothyroxine are the same word.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Sequence

from cardrag.app.classes import class_covers, medicine_dictionary

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
_SPELLING = (
    ("ph", "f"),
    ("th", "t"),
    ("y", "i"),
    ("k", "c"),
    ("qu", "c"),
    ("z", "s"),
    ("w", "v"),
)


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
        >>> fold("Levotiroxina"), fold("levothyroxine"), fold("Metronidazolo"), fold("warfarin")
        ('levotiroxina', 'levotiroxine', 'metronidasolo', 'varfarin')
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
    return salience(term) < RARE_ZIPF or named(term)


def named(term: str) -> bool:
    """Whether a word is a medicine, test or procedure name in every language.

    A digit, an INN / procedure ending (:data:`MEDICAL_SHAPE`), or a medicine name of
    :func:`medicine_names`. Rarity alone is not enough across languages: "bochechar" (to
    rinse) and "inalatore" (inhaler) are rare words that an English card says in its own words.

    Example:
        >>> [named(w) for w in ("varfarina", "colonoscopia", "hba1c", "dipirona", "melatonin")]
        [True, True, True, True, True]
        >>> [named(w) for w in ("bochechar", "inalatore", "amamentação")]
        [False, False, False]
    """
    return (
        any(c.isdigit() for c in term)
        or MEDICAL_SHAPE.search(fold(term)) is not None
        or name_key(term) in medicine_names()
    )


def name_key(word: str) -> str:
    """A medicine name's spelling-neutral form: :func:`fold`, without a final -a, -e or -o.

    Example:
        >>> name_key("Levotiroxina"), name_key("levothyroxine"), name_key("dipyrone")
        ('levotiroxin', 'levotiroxin', 'dipiron')
    """
    folded = fold(word)
    return folded[:-1] if len(folded) > MIN_LENGTH + 1 and folded[-1] in "aeo" else folded


@functools.cache
def medicine_names() -> frozenset[str]:
    """One-word medicine names, generic and brand, as :func:`name_key` forms (about 23,000).

    From the dictionary inside the ``drug-named-entity-recognition`` wheel (DrugBank, MeSH and
    Wikipedia names, with some Spanish and Portuguese spellings: ibuprofeno, warfarina,
    metamizol); the key's folding matches others (dipirona and dipyrone, paracetamolo and
    paracetamol). Read once a process (about 0.7 s), without importing the package, which loads
    more than this needs. A name only counts when it is also rare in general language
    (:func:`salient_terms`), so the few brand names that are ordinary words ("dona", "calcio")
    never do.
    """
    variants = medicine_variants()
    return frozenset(name_key(v) for v in variants if v.isalpha() and len(v) >= MIN_LENGTH)


def medicine_variants() -> dict[str, list[str]]:
    """The dictionary's every name (generic, brand, spelling), lower-cased, to its medicines."""
    variants: dict[str, list[str]] = medicine_dictionary()["drug_variant_to_canonical"]
    return variants


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


def coverage(
    question: str, vocab: frozenset[str], language: str, excluding: Iterable[str] = ()
) -> float:
    """Share of the question's content words the card uses, each weighted by its rarity.

    Weight of a word: ``COMMON_ZIPF - zipf`` in ``language`` (0 for very common words), so a
    card that leaves "cancer" out loses more than one that leaves "day" out. Words in
    ``excluding`` are not counted. 1.0 for a question without content words.

    Example:
        >>> round(coverage("insulin fridge", vocabulary("Keep insulin cold."), "en"), 1)
        0.5
    """
    skip = set(excluding)
    total = covered = 0.0
    for raw in words(question):
        word = _stem(raw)
        if len(word) < 3 or word in stop_words() or word in skip:
            continue
        weight = max(0.0, COMMON_ZIPF - zipf(word, language))
        total += weight
        covered += weight if mentions(word, vocab) else 0.0
    return covered / total if total else 1.0


def missing_medical(
    terms: Iterable[str], vocab: frozenset[str], same_language: bool = True
) -> tuple[str, ...]:
    """The medicine, test or procedure names among ``terms`` that a vocabulary lacks (the veto).

    Between a question and a card in different languages only :func:`named` terms count: a
    rare word of the question's language is no name, and the card may say it in its own.

    Example:
        >>> vocab = vocabulary("Rinse your mouth after the inhaler.")
        >>> missing_medical(["bochechar", "clopidogrel"], vocab, same_language=False)
        ('clopidogrel',)
        >>> missing_medical(["bochechar", "clopidogrel"], vocab)
        ('bochechar', 'clopidogrel')
    """
    is_name = medical if same_language else named
    return tuple(t for t in missing_terms(terms, vocab) if is_name(t))


def missing_terms(terms: Iterable[str], vocab: frozenset[str]) -> tuple[str, ...]:
    """The terms a vocabulary does not mention, nor a class of (:func:`covers`), in order."""
    return tuple(t for t in terms if not covers(t, vocab))


def covers(term: str, vocab: frozenset[str]) -> bool:
    """Whether a card mentions the term, or a class of it that the card speaks of as a class.

    Example:
        >>> covers("ciprofloxacin", vocabulary("Antibiotics in the fluoroquinolone family"))
        True
    """
    return mentions(term, vocab) or class_covers(fold(term), vocab)


def aspect_coverage(
    question: str, terms: Sequence[str], vocab: frozenset[str], language: str
) -> float:
    """:func:`coverage` of the question's words other than its salient terms.

    What the question asks about the medicine it names ("hair loss", "breastfeeding"), which
    a card about that medicine may well not cover. 1.0 when there is no such word.
    """
    return coverage(question, vocab, language, excluding=terms)


def without_names(question: str, terms: Iterable[str]) -> str | None:
    """The question without the :func:`named` ones of its terms (None when it names none).

    Across languages grading compares it with a card that has those names (a card without one
    is vetoed), so it is known before retrieval and can be embedded beside the question.

    Example:
        >>> without_names("¿Puedo tomar ibuprofeno con leche?", ["ibuprofeno", "leche"])
        '¿Puedo tomar  con leche?'
    """
    names = [t for t in terms if named(t)]
    return without_terms(question, names) if names else None


def without_terms(question: str, terms: Iterable[str]) -> str:
    """The question with some of its terms taken out: what it asks about them.

    Example:
        >>> without_terms("¿Es seguro tomar ibuprofeno durante la lactancia?", ["ibuprofeno"])
        '¿Es seguro tomar  durante la lactancia?'
    """
    for term in terms:
        question = re.sub(re.escape(term), "", question, flags=re.IGNORECASE)
    return question
