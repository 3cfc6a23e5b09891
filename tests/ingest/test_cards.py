from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest

from cardrag.ingest.cards import Card, CardError, load_card, parse_card
from cardrag.ingest.corpus import load_cards
from tests.conftest import CARDS_DIR

GOOD = """---
id: card-example
title: "Example: a card"
license: CC-BY-4.0
topics: [a, b]
accessed_at: 2026-11-20
sensitivity: public
---

First paragraph.

Second paragraph.
"""


def test_parse_card_reads_every_field() -> None:
    card = parse_card(GOOD, "example.md")
    assert card == Card(
        id="card-example",
        title="Example: a card",
        license="CC-BY-4.0",
        topics=["a", "b"],
        accessed_at=dt.date(2026, 11, 20),
        sensitivity="public",
        body="First paragraph.\n\nSecond paragraph.",
        source="example.md",
    )


def test_a_cards_language_is_declared_or_detected() -> None:
    declared = parse_card(
        GOOD.replace("sensitivity: public", "sensitivity: public\nlanguage: it"), "x.md"
    )
    portuguese = GOOD.replace(
        "First paragraph.", "Tome o comprimido em jejum, com um copo de água."
    )
    assert (declared.language, declared.to_document().metadata["language"]) == ("it", "it")
    assert parse_card(GOOD, "x.md").language == ""  # nothing declared: detected when needed
    assert parse_card(portuguese, "x.md").to_document().metadata["language"] == "pt"
    assert (
        parse_card(
            GOOD.replace("First paragraph.", "Take the tablet with water."), "x.md"
        ).text_language
        == "en"
    )


def test_parse_card_strips_byte_order_mark() -> None:
    assert parse_card("\ufeff" + GOOD, "x.md").id == "card-example"


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        ("no front matter\n", "front matter", "missing"),
        ("---\nid: [unclosed\n---\nbody\n", "id", "line 2: malformed YAML"),
        ("---\n- a list\n---\nbody\n", "front matter", "must be a mapping"),
        (GOOD.replace("id: card-example\n", ""), "id", "missing"),
        (GOOD.replace("card-example", "Card Example"), "id", "not of the form"),
        (GOOD.replace('title: "Example: a card"\n', ""), "title", "missing"),
        (GOOD.replace("topics: [a, b]", "topics: a"), "topics", "must be a list"),
        (GOOD.replace("2026-11-20", "last tuesday"), "accessed_at", "is not a date"),
        (GOOD.replace("2026-11-20", "2026-13-45"), "accessed_at", "is not a date"),
        (
            GOOD.replace("sensitivity: public", "sensitivity: secret"),
            "sensitivity",
            "is not one of",
        ),
        (GOOD.split("---\n\n")[0] + "---\n\n   \n", "body", "empty"),
        (
            GOOD.replace("sensitivity: public", "sensitivity: public\nlanguage: Portuguese"),
            "language",
            "is not an ISO 639-1 code",
        ),
        (
            GOOD.replace("sensitivity: public", "sensitivity: public\nlanguage: 12"),
            "language",
            "is not an ISO 639-1 code",
        ),
    ],
)
def test_parse_card_names_file_and_field(text: str, field: str, problem: str) -> None:
    with pytest.raises(CardError) as err:
        parse_card(text, "cards/bad.md")
    assert err.value.field == field
    assert str(err.value).startswith(f"cards/bad.md: field '{field}': ")
    assert problem in err.value.problem


def _aliased(aliases: str) -> str:
    return GOOD.replace("sensitivity: public", f"sensitivity: public\naliases:\n{aliases}")


def test_a_cards_aliases_are_read_in_their_key_form() -> None:
    card = parse_card(_aliased("  Second  Part: paragraph\n  premier: First"), "a.md")
    assert card.aliases == {"second part": "paragraph", "premier": "First"}
    assert parse_card(GOOD, "a.md").aliases == {}


@pytest.mark.parametrize(
    ("aliases", "problem"),
    [
        ("  - water tablets", "must be a mapping of alias: the card's word for it, got"),
        ("  water tablets: [a]", "'water tablets': ['a'] must be text: the card's word for it"),
        ("  water tablets: diuretics", "'water tablets': 'diuretics' is not in the card's title"),
        ("  b12 tablets: paragraph", "'b12 tablets' must be 1 to 60 characters of words"),
        (f"  {'very ' * 13}long: paragraph", f"'{'very ' * 13}long' must be 1 to 60 characters"),
        ("  Paragraph: paragraph", "'Paragraph' is the card's own word: no alias needed"),
        ("  graph: para", "'graph': 'para' is not in the card's title or text"),  # whole words
    ],
)
def test_a_bad_alias_names_the_file_the_field_and_the_alias(aliases: str, problem: str) -> None:
    with pytest.raises(CardError) as err:
        parse_card(_aliased(aliases), "cards/bad.md")
    assert (err.value.field, str(err.value).split(": field ")[0]) == ("aliases", "cards/bad.md")
    assert err.value.problem.startswith(problem)


def test_one_alias_meaning_two_words_in_two_cards_is_refused_naming_both(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text(_aliased("  premier: First"), encoding="utf-8")
    other = _aliased("  PREMIER: Second").replace("card-example", "card-other")
    (tmp_path / "b.md").write_text(other, encoding="utf-8")
    with pytest.raises(CardError) as err:
        load_cards(tmp_path)
    assert str(err.value) == (
        f"{tmp_path / 'b.md'}: field 'aliases': 'premier' means 'Second' here but 'First' "
        f"in {tmp_path / 'a.md'}"
    )
    (tmp_path / "b.md").write_text(other.replace("Second", "first"), encoding="utf-8")
    # the same word in another case is the same meaning
    assert [c.aliases for c in load_cards(tmp_path)] == [{"premier": "First"}, {"premier": "first"}]


def test_load_cards_rejects_non_utf8(tmp_path: Path) -> None:
    (tmp_path / "latin.md").write_bytes(GOOD.replace("First", "Fïrst").encode("latin-1"))
    with pytest.raises(CardError, match=r"latin\.md: field 'encoding': not UTF-8"):
        load_cards(tmp_path)


def test_load_cards_rejects_duplicate_ids_naming_both_files(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text(GOOD, encoding="utf-8")
    (tmp_path / "b.md").write_text(GOOD, encoding="utf-8")
    with pytest.raises(CardError) as err:
        load_cards(tmp_path)
    assert err.value.field == "id"
    assert str(err.value) == (
        f"{tmp_path / 'b.md'}: field 'id': duplicate id 'card-example', also in {tmp_path / 'a.md'}"
    )


def test_load_cards_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="cards folder not found"):
        load_cards(tmp_path / "nope")


def test_shipped_corpus_shape(shipped_cards: list[Card]) -> None:
    lengths = sorted(len(c.body) for c in shipped_cards)
    p90 = lengths[int(0.9 * len(lengths) + 0.5) - 1]  # nearest-rank 90th percentile
    assert len(shipped_cards) == 38
    assert 1000 <= statistics.median(lengths) <= 1200
    assert 1400 <= p90 <= 1600
    assert all(3 <= len(c.body.split("\n\n")) <= 6 for c in shipped_cards)
    assert sum(c.sensitivity == "restricted" for c in shipped_cards) >= 2
    assert all(c.id == "card-" + Path(c.source).stem for c in shipped_cards)


def test_front_matter_nested_thousands_deep_names_the_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "deep.md"
    path.write_text("---\nid: " + "[" * 5000 + "]" * 5000 + "\n---\nBody.\n", encoding="utf-8")
    with pytest.raises(CardError) as caught:
        load_card(path)
    assert str(caught.value) == (
        f"{path}: field 'front matter': nested too deeply to be a card's fields"
    )


def test_an_id_ending_in_a_newline_or_too_long_is_refused(tmp_path: Path) -> None:
    for name, card_id in [("nl", '"card-x\\n"'), ("long", "card-" + "a" * 200)]:
        path = tmp_path / f"{name}.md"
        front = f"id: {card_id}\ntitle: T\nlicense: CC0\ntopics: [a]\naccessed_at: 2026-01-01"
        path.write_text(f"---\n{front}\nsensitivity: public\n---\nBody.\n", encoding="utf-8")
        with pytest.raises(
            CardError, match="is not of the form card-<lowercase-slug> of at most 120"
        ):
            load_card(path)


def test_a_card_over_the_size_limit_is_refused_naming_the_file(tmp_path: Path) -> None:
    body = "Take it with food. " * 20  # 380 characters
    path = tmp_path / "card-long.md"
    path.write_text(
        "---\nid: card-long\ntitle: Long\nlicense: CC0-1.0\ntopics: [a]\n"
        f"accessed_at: 2026-01-01\nsensitivity: public\n---\n{body}\n",
        encoding="utf-8",
    )
    size = len(path.read_text(encoding="utf-8"))
    with pytest.raises(CardError) as err:
        load_cards(tmp_path, max_chars=size - 1)
    assert str(err.value) == (
        f"{path}: field 'body': {size:,} characters, over the limit of {size - 1:,} "
        "(CARDRAG_MAX_CARD_CHARS)"
    )
    with pytest.raises(CardError, match=r"bytes, over the limit of 10 characters"):
        load_cards(tmp_path, max_chars=10)  # far over: refused from its size, never read
    assert [c.id for c in load_cards(tmp_path, max_chars=size)] == ["card-long"]


def _one_card(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(CARDS_DIR / "iron-tablets.md", folder / "iron-tablets.md")
    return folder


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda p: p.mkdir(), "is a folder, not a card file"),
        (lambda p: os.mkfifo(p), "is not a regular file, not a card file"),
        (lambda p: p.symlink_to(p), "cannot be read (Too many levels of symbolic links)"),
        (
            lambda p: p.symlink_to(p.parent / "gone.md"),
            "cannot be read (No such file or directory)",
        ),
    ],
    ids=["folder", "fifo", "link-loop", "dangling-link"],
)
def test_an_entry_named_like_a_card_that_is_no_file_is_refused_naming_it(
    tmp_path: Path, make: Any, problem: str
) -> None:
    folder = _one_card(tmp_path / "cards")
    make(folder / "x.md")
    with pytest.raises(CardError, match=re.escape(f"{folder / 'x.md'}: field 'file': {problem}")):
        load_cards(folder)


def test_a_symlinked_folder_is_read_once_and_a_loop_is_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = _one_card(tmp_path / "cards")
    other = tmp_path / "more"
    other.mkdir()
    shutil.copy(CARDS_DIR / "insulin-storage.md", other / "insulin-storage.md")
    (folder / "more").symlink_to(other)  # followed
    (other / "back").symlink_to(folder)  # a loop back to the top
    with caplog.at_level("WARNING"):
        cards = load_cards(folder)
    assert sorted(c.id for c in cards) == ["card-insulin-storage", "card-iron-tablets"]
    assert f"{folder / 'more' / 'back'}: skipped, a folder already read" in caplog.text
