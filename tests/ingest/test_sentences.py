from cardrag.ingest.sentences import pair_short, sentence_window, sentences


def test_sentence_helpers() -> None:
    text = "Take it. Then wait!\nNext line"
    assert [text[s:e] for s, e in sentences(text)] == ["Take it.", "Then wait!", "Next line"]
    assert pair_short([(0, 12), (13, 100), (101, 110)]) == [(0, 110)]
    assert pair_short([(0, 10)]) == [(0, 10)]
    bounds = [(0, 10), (11, 20), (21, 30), (31, 40)]
    assert sentence_window(bounds, 1, 20) == (0, 20)
    assert sentence_window(bounds, 1, 5) == (11, 20)  # the sentence itself, however long
    assert sentence_window(bounds, 3, 100) == (0, 40)
