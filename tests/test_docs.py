"""The README and docs/ stay true: their links, commands and code run as written."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from cardrag.ingest.settings import PROJECT_ROOT

README = PROJECT_ROOT / "README.md"
DOCS = sorted((PROJECT_ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
README_MAX_LINES = 150
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\[[^\]]+\]\(([^)]+)\)")
HOWTO = PROJECT_ROOT / "tests" / "data" / "howto"


def blocks(page: Path, language: str) -> list[str]:
    """The code blocks of one language in a page, in order."""
    return [body for lang, body in BLOCK.findall(page.read_text()) if lang == language]


def commands(page: Path) -> list[list[str]]:
    """The commands of a page's bash blocks, each as words (comments and continuations off)."""
    out = []
    for body in blocks(page, "bash"):
        for line in body.splitlines():
            line = line.split(" #")[0].strip().rstrip("&").strip()
            if line and not line.startswith("#"):
                out.append(shlex.split(line))
    return out


def make_targets() -> set[str]:
    makefile = (PROJECT_ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-z][\w-]*):", makefile, re.MULTILINE))


def test_the_readme_is_short_and_its_first_screen_gives_the_two_set_up_commands() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES
    first = blocks(README, "bash")[0]
    assert [line.split("#")[0].strip() for line in first.splitlines()] == ["make demo", "make test"]
    assert README.read_text().index("make demo") < README.read_text().index("## ")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_is_a_file_in_the_repository(page: Path) -> None:
    for target in LINK.findall(page.read_text()):
        path = target.split("#")[0]
        assert not re.match(r"\w+:", path), f"{page.name}: {target} leaves the repository"
        resolved = (page.parent / path).resolve()
        assert resolved.is_relative_to(PROJECT_ROOT), f"{page.name}: {target} is outside"
        assert resolved.exists(), f"{page.name}: {target} does not exist"


def test_the_readme_links_every_page_of_the_docs() -> None:
    text = README.read_text()
    assert DOCS  # the folder is there
    for page in DOCS:
        assert f"(docs/{page.name})" in text, f"README does not link docs/{page.name}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_make_target_named_exists(page: Path) -> None:
    targets = make_targets()
    for words in commands(page):
        make = [w for w in words if "=" not in w]  # VAR=value before or after the target
        if make and make[0] == "make":
            assert make[1] in targets, f"{page.name}: make {make[1]} is no Makefile target"


def _cardrag_calls() -> dict[str, set[str]]:
    """Each ``cardrag`` subcommand the pages run, with the options they give it."""
    calls: dict[str, set[str]] = {}
    for page in PAGES:
        for words in commands(page):
            words = [w for w in words if "=" not in w or w.startswith("--")]
            if words and words[0].endswith("bin/cardrag"):
                calls.setdefault(words[1], set()).update(
                    w.split("=")[0] for w in words[2:] if w.startswith("--")
                )
    return calls


@pytest.mark.parametrize("sub", sorted(_cardrag_calls()))
def test_every_cardrag_command_named_takes_the_options_given(sub: str) -> None:
    cardrag = Path(sys.executable).with_name("cardrag")
    done = subprocess.run(
        [str(cardrag), sub, "--help"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr
    for option in _cardrag_calls()[sub]:
        assert option in done.stdout, f"cardrag {sub} has no {option}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_python_block_compiles(page: Path) -> None:
    for i, body in enumerate(blocks(page, "python")):
        compile(body, f"{page.name} block {i + 1}", "exec")


def test_the_readmes_langchain_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The how-to's code exactly as the README prints it (its embeddings are LangChain's fake)."""
    example = blocks(README, "python")[0]
    speech = next(HOWTO.glob("*.txt")).read_text(encoding="utf-8")
    (tmp_path / "state_of_the_union.txt").write_text(speech, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 1  # one document, so one parent however many children match
