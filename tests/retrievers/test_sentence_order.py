from cardrag.ingest.language import language_of
from cardrag.ingest.sentences import sentences
from cardrag.retrievers.sentence_order import by_question

TEXT = (
    "Rice is a grain. It grows in flooded fields. Tea is a drink. "
    "Tea bushes grow on the hills of Assam.\nThe leaves are picked by hand."
)


def spans_of(*parts: str) -> list[tuple[int, int]]:
    return [(TEXT.index(p), TEXT.index(p) + len(p)) for p in parts]


def test_the_sentences_holding_the_questions_rarer_words_come_first() -> None:
    children = spans_of("Rice is a grain. It grows", "Tea is a drink. Tea bushes grow on the hills")
    order = [TEXT[a:b] for a, b in by_question(TEXT, children, "Where do tea bushes grow?", "en")]
    assert order == [
        "Tea bushes grow on the hills of Assam.",  # tea, bush and grow: the child ranked second
        "It grows in flooded fields.",  # grow, and the first child
        "Tea is a drink.",
        "Rice is a grain.",
    ]  # "The leaves ..." is in no matched child


def test_without_the_questions_words_the_childrens_order_then_the_texts_is_kept() -> None:
    children = spans_of("The leaves", "Rice is a grain. It grows")
    order = [TEXT[a:b] for a, b in by_question(TEXT, children, "Is it organic?", "en")]
    assert order == [
        "The leaves are picked by hand.",
        "Rice is a grain.",
        "It grows in flooded fields.",
    ]


def test_a_sentence_two_children_touch_takes_the_better_rank() -> None:
    children = spans_of("a drink.", "Tea is")  # both inside "Tea is a drink."
    assert by_question(TEXT, children, "coffee?", "en") == spans_of("Tea is a drink.")
    assert by_question(TEXT, [], "tea", "en") == []


def test_words_meet_through_their_stems_in_the_parents_language() -> None:
    text = "O chá é uma bebida. Tomando o comprimido com chá, espere uma hora."
    children = [(0, len(text))]
    first, second = by_question(text, children, "Posso tomar o comprimido?", "pt")
    assert text[first[0] : first[1]] == "Tomando o comprimido com chá, espere uma hora."
    assert [first, second] == sorted(sentences(text), reverse=True)
    assert language_of({}, text) == "pt"
