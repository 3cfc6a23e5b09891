"""What a generation's manifest says: its rows by kind, and the rankings its corpus supports."""

from __future__ import annotations

from pathlib import Path

from cardrag.evals.bench.synthetic import synthetic_cards
from cardrag.ingest.index import build_index
from cardrag.ingest.settings import Settings
from cardrag.ingest.splitter import CardSplitter
from cardrag.retrievers.parent import ScoredParentDocumentRetriever
from tests.conftest import FakeEmbeddings


def test_two_corpora_get_the_card_row_ranking_or_not_from_their_own_rows(tmp_path: Path) -> None:
    """Short cards support the whole-card rows' ranking; long articles, of which few are short
    enough for a row, do not (the measured reason is in ``corpus_rankings``)."""
    splitter = CardSplitter(card_rows=True, sentence_rows=True)
    cards = list(synthetic_cards(6))
    articles = [
        *synthetic_cards(5, seed=1, chars=6000),  # too long for a card row
        *(c.model_copy(update={"id": f"card-short-{c.id}"}) for c in synthetic_cards(1, seed=2)),
    ]
    short = build_index(cards, tmp_path / "cards", FakeEmbeddings(), splitter, progress=False)
    long = build_index(articles, tmp_path / "articles", FakeEmbeddings(), splitter, progress=False)
    assert short.manifest["rows"]["card"] == 6
    assert long.manifest["rows"]["card"] == 1
    assert short.manifest["fusion"]["card_rows"] == {
        "on": True,
        "why": "6 of 6 parents have a whole-card row",
    }
    assert long.manifest["fusion"]["card_rows"] == {
        "on": False,
        "why": "1 of 6 parents have a whole-card row "
        "(fewer than half: the rest are too long for one)",
    }
    sentences = long.manifest["rows"]["sentence"]
    assert sentences > 5 * 6000 // 400  # a long article has many more sentences than children
    assert long.manifest["fusion"]["sentence_rows"] == {
        "on": True,
        "why": f"{sentences} sentence rows",
    }
    default = Settings()
    assert ScoredParentDocumentRetriever.from_index(short, default).card_rows
    assert not ScoredParentDocumentRetriever.from_index(long, default).card_rows
    assert ScoredParentDocumentRetriever.from_index(long, default).sentence_rows
    # a switch the user sets wins over the corpus
    asked = Settings(card_rows=True)
    assert ScoredParentDocumentRetriever.from_index(long, asked).card_rows
    off = Settings(sentence_rows=False)
    assert not ScoredParentDocumentRetriever.from_index(short, off).sentence_rows
    # an index built before the manifest said so ranks as the settings say
    older = {k: v for k, v in long.manifest.items() if k != "fusion"}
    long.manifest = older
    assert ScoredParentDocumentRetriever.from_index(long, default).card_rows
