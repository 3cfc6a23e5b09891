from cardrag.ingest.analysis import analyse, analyse_each


def test_each_text_is_analysed_as_analyse_does_it() -> None:
    texts = ["Tomando o comprimido", "tomar com leite", "", "o e a"]
    assert analyse_each(texts, "pt", stem=True) == [set(analyse(t, "pt", stem=True)) for t in texts]
    assert analyse_each(["Taking the tablets"], "en", stem=False) == [{"taking", "tablets"}]
    assert analyse_each(["Taking the tablets"], "en", stem=True) == [{"take", "tablet"}]
    assert analyse_each(["To and fro words"], "el", stem=True) == [{"to", "and", "fro", "words"}]
