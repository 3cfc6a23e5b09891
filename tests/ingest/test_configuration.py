from __future__ import annotations

import os
from pathlib import Path

import pytest

from cardrag.app.cli import main as cardrag
from cardrag.ingest.__main__ import main as ingest
from cardrag.ingest.configuration import load_settings
from cardrag.ingest.settings import ConfigurationError, Settings, SettingsFileError


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No CARDRAG_* variable from the shell, an empty store folder, no tuned settings file."""
    for name in list(os.environ):
        if name.startswith("CARDRAG_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no cardrag.toml here
    monkeypatch.setenv("CARDRAG_STORE_DIR", str(tmp_path / "store"))
    return monkeypatch


def _file(tmp_path: Path, data: bytes) -> str:
    path = tmp_path / "settings.toml"
    path.write_bytes(data)
    return str(path)


# each row of issue 50's "Why" that reached a traceback or passed silently
ROWS = [
    ("CARDRAG_SETTINGS_FILE", b'k = "\xff\xfe"\n', "not UTF-8 text (byte 5), expected a TOML file"),
    ("CARDRAG_SETTINGS_FILE", bytes(range(256)), "not UTF-8 text (byte 128), expected a TOML file"),
    ("CARDRAG_SETTINGS_FILE", b"k = [\n", "not TOML"),
    (
        "CARDRAG_SETTINGS_FILE",
        b'embeding_model = "x"\n',
        "embeding_model is not a setting (did you mean embedding_model?)",
    ),
    ("CARDRAG_K", "201", "CARDRAG_K=201: expected at most CARDRAG_MAX_FETCH (200)"),
    ("CARDRAG_THREADS", "9" * 20, f"CARDRAG_THREADS={'9' * 20}: Input should be less than"),
    ("CARDRAG_INGEST_THREADS", "9" * 20, "CARDRAG_INGEST_THREADS=" + "9" * 20),
    ("CARDRAG_CHAT_MODEL", "openai-gpt-4o", "CARDRAG_CHAT_MODEL=openai-gpt-4o: expected provider"),
    ("CARDRAG_CHAT_MODEL", "nosuch:model", "CARDRAG_CHAT_MODEL=nosuch:model: unknown provider"),
    ("CARDRAG_STORE_DIR", "/etc/passwd", "CARDRAG_STORE_DIR=/etc/passwd is a file, not a folder"),
    (
        "CARDRAG_PARENT_STORE",
        "redis:/127.0.0.1:6379/0",
        "CARDRAG_PARENT_STORE=redis:/127.0.0.1:6379/0: expected redis://host:port/db",
    ),
    ("CARDRAG_LOCK_LEASE_SECONDS", "inf", "CARDRAG_LOCK_LEASE_SECONDS=inf: Input should be"),
    ("CARDRAG_LOCK_LEASE_SECONDS", "nan", "CARDRAG_LOCK_LEASE_SECONDS=nan: Input should be"),
    # issue 72: a malformed or bare Chroma URL crashed serve in uvicorn
    (
        "CARDRAG_CHROMA_URL",
        "http:/host",
        "CARDRAG_CHROMA_URL=http:/host: expected http://host:port",
    ),
    ("CARDRAG_CHROMA_URL", "http://[::1", "CARDRAG_CHROMA_URL=http://[::1: expected http://host"),
    ("CARDRAG_CHROMA_URL", "localhost:8000", "CARDRAG_CHROMA_URL=localhost:8000: expected http:"),
    ("CARDRAG_CHROMA_URL", "http://h:port", "CARDRAG_CHROMA_URL=http://h:port: expected http://"),
    # issue 72: a weight of inf made every fused score nan and refused covered questions
    ("CARDRAG_DENSE_WEIGHT", "inf", "CARDRAG_DENSE_WEIGHT=inf: Input should be a finite number"),
    ("CARDRAG_BM25_WEIGHT", "1e309", "CARDRAG_BM25_WEIGHT=1e309: Input should be a finite number"),
]


@pytest.mark.parametrize(("variable", "value", "expected"), ROWS)
@pytest.mark.parametrize("command", ["retrieve", "ingest --dry-run", "serve"])
def test_a_bad_setting_is_one_line_and_exit_2_before_anything_opens(
    clean_env: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    variable: str,
    value: str | bytes,
    expected: str,
    command: str,
) -> None:
    clean_env.setenv(variable, _file(tmp_path, value) if isinstance(value, bytes) else value)
    if command == "retrieve":
        code = cardrag(["retrieve", "Can I take ibuprofen with food?"])
    elif command == "serve":  # before the server starts: it would block here
        code = cardrag(["serve", "--port", "1"])
    else:
        code = ingest(["--dry-run"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert expected in err
    assert "Traceback" not in err
    assert not (tmp_path / "store").exists()  # nothing opened, nothing made


def test_a_settings_file_that_is_a_folder_is_named(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clean_env.setenv("CARDRAG_SETTINGS_FILE", str(tmp_path))
    with pytest.raises(ConfigurationError, match=r"is a folder, expected a TOML file$"):
        load_settings()


HOSTILE = ["", "-1", "0", "9" * 30, "inf", "-inf", "nan", "x", "é☃\u202e", "/", "/etc/passwd", "[]"]
"""Values every setting is fed: empty, negative, zero, huge, infinite, not a number, a word,
unicode with a direction override, a folder, a file, a list."""


def _commands(variable: str, capsys: pytest.CaptureFixture[str]) -> list[tuple[int, str]]:
    """``retrieve``, ``ingest --dry-run`` and ``serve`` with what the environment holds."""
    runs = []
    for argv in (["retrieve", "q"], ["ingest", "--dry-run"], ["serve", "--port", "1"]):
        runs.append((cardrag(argv), capsys.readouterr().err))
    return runs


@pytest.mark.parametrize("value", HOSTILE)
def test_every_setting_takes_a_hostile_value_or_names_it_in_one_line(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    tried, refused = 0, set()
    for field in Settings.model_fields:
        variable = f"CARDRAG_{field.upper()}"
        clean_env.setenv(variable, value)
        try:
            load_settings()
        except (ConfigurationError, SettingsFileError) as exc:
            message = str(exc)
            assert "\n" not in message, (variable, message)
            assert variable in message or "settings" in message, (variable, message)
            refused.add(variable)
            # through the CLI: each command exits 2 with that one line, before anything opens
            for code, err in _commands(variable, capsys):
                assert (code, err) == (2, f"cardrag: {message}\n"), (variable, value, err)
        else:  # accepted: a command that runs still ends in one line at worst, no traceback
            code = cardrag(["retrieve", "q"])
            err = capsys.readouterr().err
            assert code in (0, 2), (variable, value, err)
            assert "Traceback" not in err, (variable, value)
            assert err.count("\n") <= 1 + err.count("warning"), (variable, value, err)
        clean_env.delenv(variable)
        tried += 1
    assert tried == 38  # every setting
    if value in ("-1", "0", "x"):
        assert {"CARDRAG_K", "CARDRAG_THREADS", "CARDRAG_CHUNK_SIZE"} <= refused
    if value == "9" * 30:
        assert {"CARDRAG_K", "CARDRAG_THREADS", "CARDRAG_INGEST_THREADS"} <= refused
    if value in ("inf", "-inf", "nan"):  # every number setting: the four weights too
        floats = {
            f"CARDRAG_{n.upper()}"
            for n, f in Settings.model_fields.items()
            if f.annotation in (float, float | None)
        }
        assert {"CARDRAG_LOCK_LEASE_SECONDS", "CARDRAG_K", "CARDRAG_DENSE_WEIGHT"} <= refused
        assert floats <= refused


def test_good_values_still_load(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("CARDRAG_PARENT_STORE", "redis://127.0.0.1:6379/0")
    clean_env.setenv("CARDRAG_K", "200")
    settings = load_settings()
    assert (settings.parent_store, settings.k) == ("redis://127.0.0.1:6379/0", 200)
    clean_env.setenv("CARDRAG_PARENT_STORE", "memory")
    assert load_settings().parent_store == "memory"


@pytest.mark.parametrize("model", ["nope", "", "/etc"])
def test_a_wrong_model_stops_serve_and_a_dry_run_in_one_line(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], model: str
) -> None:
    """Issue 72: ``serve`` crashed in uvicorn, ``--dry-run`` claimed it embedded every text."""
    clean_env.setenv("CARDRAG_EMBEDDING_MODEL", model)
    said = []
    for argv in (["ingest", "--dry-run"], ["serve", "--port", "1"]):
        code, err = cardrag(argv), capsys.readouterr().err
        assert code == 2, (argv, err)
        assert err.count("\n") == 1, (argv, err)
        assert "Traceback" not in err
        said.append(err[err.index("CARDRAG_EMBEDDING_MODEL=") :])
    assert said[0] == said[1]  # the dry run and serve name the setting alike
    assert not (clean_env_store := Path(os.environ["CARDRAG_STORE_DIR"])).exists(), clean_env_store
