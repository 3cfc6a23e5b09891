from __future__ import annotations

from cardrag.app.terms import (
    aspect_coverage,
    coverage,
    fold,
    medical,
    medicine_names,
    mentions,
    missing_medical,
    name_key,
    named,
    question_language,
    salient_terms,
    vocabulary,
)


def test_salient_terms_are_the_names_rare_in_every_language() -> None:
    assert salient_terms("Can I take clopidogrel and aspirin together every day?") == [
        "clopidogrel"
    ]
    assert salient_terms("¿Es segura la apendicectomía laparoscópica en el embarazo?") == [
        "apendicectomía",
        "laparoscópica",
    ]
    assert salient_terms("How should I store insulin when I travel?") == []  # all common
    assert salient_terms("What does an HbA1c of 58 mean?") == ["hba1c"]


def test_spelling_across_languages_still_matches() -> None:
    vocab = vocabulary("Levothyroxine and metronidazole; progestogen-only pills.")
    for term in ("levotiroxina", "metronidazol", "metronidazolo", "progestogen"):
        assert mentions(term, vocab), term
    assert not mentions("rosuvastatina", vocabulary("simvastatin and atorvastatin"))
    assert fold("Ibuprofène") == "ibuprofene"
    assert mentions("varfarina", vocabulary("Warfarin and vitamin K"))  # w and v fold together


def test_across_languages_only_names_veto_a_card() -> None:
    vocab = vocabulary("Rinse your mouth after the preventer inhaler. Warfarin: vitamin K.")
    terms = ["bochechar", "inalador", "clopidogrel", "varfarina"]
    assert [t for t in terms if medical(t)] == terms  # every one is rare in all four languages
    assert [t for t in terms if named(t)] == ["clopidogrel", "varfarina"]
    # the same question against an English card: rare Portuguese words are no names
    assert missing_medical(terms, vocab, same_language=False) == ("clopidogrel",)
    assert missing_medical(terms, vocab) == ("bochechar", "inalador", "clopidogrel")


def test_only_medicine_and_procedure_shaped_words_can_veto_a_card() -> None:
    assert [w for w in ("apixaban", "gliclazide", "colonoscopy", "hba1c") if medical(w)] == [
        "apixaban",
        "gliclazide",
        "colonoscopy",
        "hba1c",
    ]
    # colloquial rare words and conditions a card may address without naming them
    assert [w for w in ("woozy", "jittery", "puffer", "anaemia") if medical(w)] == []


def test_medicine_names_without_an_inn_ending_veto_in_every_language() -> None:
    # no INN stem: the medicine-name dictionary is what knows them
    names = ["melatonin", "dipirona", "metamizol", "paracetamolo", "insulina", "alendronato"]
    assert [n for n in names if named(n)] == names
    assert name_key("Dipirona") == name_key("dipyrone") == "dipiron"
    assert name_key("paracetamolo") == name_key("paracetamol") == "paracetamol"
    assert "ibuprofen" in medicine_names()
    # rare words of our languages that an English card says in its own words are no names
    ordinary = ["bochechar", "inalatore", "amamentação", "lactancia", "portapillole", "woozy"]
    assert [w for w in ordinary if named(w)] == []
    vocab = vocabulary("Ibuprofen is best taken with food.")
    assert missing_medical(["dipirona"], vocab, same_language=False) == ("dipirona",)
    assert missing_medical(["ibuprofeno"], vocab, same_language=False) == ()


def test_coverage_weighs_rare_words_more() -> None:
    vocab = vocabulary("Statins lower cholesterol and reduce the risk of heart attacks.")
    full = coverage("Do statins reduce the risk of heart attacks?", vocab, "en")
    cancer = coverage("Do statins reduce the risk of cancer in elderly patients?", vocab, "en")
    assert full == 1.0
    assert 0.3 < cancer < 0.8
    terms = salient_terms("Can levothyroxine cause hair loss?")
    assert aspect_coverage("Can levothyroxine cause hair loss?", terms, vocab, "en") == 0.0


def test_question_language() -> None:
    assert [
        question_language(q)
        for q in (
            "Can I drink alcohol with metronidazole?",
            "Posso beber álcool com metronidazol?",
            "¿Puedo beber alcohol con metronidazol?",
            "Posso bere alcol con il metronidazolo?",
        )
    ] == ["en", "pt", "es", "it"]


def test_without_terms_takes_every_spelling_of_a_term_out() -> None:
    from cardrag.app.terms import without_terms

    assert without_terms("Ibuprofeno o ibuprofeno gel?", ["ibuprofeno"]) == " o  gel?"
    assert without_terms("No names here.", []) == "No names here."
