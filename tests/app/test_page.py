"""The page in a real browser: Playwright driving Debian's Chromium (never a downloaded one).

The set-up installs Debian's ``chromium`` package when it is missing (CI runs as root). Where
that is impossible the tests skip, unless ``CARDRAG_CI=1`` (set by ``.ci/run``), where they
fail instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from cardrag.app.server import running as live_server
from cardrag.ingest.cards import Card
from cardrag.ingest.settings import Settings
from tests.conftest import REAL_MODEL, system_package

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
NARROW = "How long can an insulin pen stay out of the fridge?"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    path = system_package("chromium", "chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def base_url(shipped_index_dir: Path) -> Iterator[str]:
    settings = Settings(store_dir=shipped_index_dir, embedding_model=REAL_MODEL, card_rows=False)
    with live_server(settings) as base:
        yield base


@pytest.fixture
def page(browser: Browser, base_url: str) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 390, "height": 844})  # a phone
    page = context.new_page()
    page.goto(base_url)
    yield page
    context.close()


def ask(page: Page, question: str) -> None:
    page.fill("#question", question)
    page.click("#ask")


def test_a_cited_chip_opens_the_card_with_the_matched_passage_marked(
    page: Page, base_url: str, shipped_cards: list[Card]
) -> None:
    ask(page, NARROW)
    chip = page.locator("#answer .chip")
    expect(chip).to_have_count(1)
    expect(chip).to_have_text("Insulin: storing pens and vials")
    expect(page.locator("#answer")).to_contain_text("for about four weeks.")
    chip.click()
    expect(page.locator("#card-title")).to_have_text("Insulin: storing pens and vials")
    card = next(c for c in shipped_cards if c.id == "card-insulin-storage")
    expect(page.locator("#card-body mark")).to_have_text(card.body[424:802])
    expect(page.locator("#card-body")).to_have_text(card.body)
    # the retrieved cards grading kept, with their scores (the server test names them)
    expect(page.locator("#retrieved li")).to_have_count(3)
    # the page shows the API's own score for each card, to 3 decimals (same server, same run)
    reply = httpx.post(f"{base_url}/ask", json={"question": NARROW}, timeout=60).json()
    shown = page.locator("#retrieved li .score").all_inner_texts()
    assert [s.strip() for s in shown] == [f"{c['score']:.3f}" for c in reply["retrieved"]]
    ranks = page.locator("#retrieved li .rank").all_inner_texts()
    assert [r.strip() for r in ranks] == [f"#{c['rank']}" for c in reply["retrieved"]]
    # what a patient sees: the marked passage is on screen and stands out from the card text
    marked = page.locator("#card-body mark")
    expect(marked).to_be_in_viewport()
    colours = page.evaluate(
        """() => [document.querySelector('#card-body mark'), document.querySelector('#card-body')]
              .map(e => getComputedStyle(e).backgroundColor)"""
    )
    assert colours[0] == "rgb(255, 229, 138)"
    assert colours[0] != colours[1]
    # phone width: nothing overflows sideways
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_a_refused_question_says_so(page: Page) -> None:
    ask(page, "Who won the football world cup in 1966?")
    expect(page.locator("#refusal")).to_be_visible()
    expect(page.locator("#refusal")).to_have_text(
        "The cards do not cover this question, so no answer is given from them. "
        "No card is close enough to this question."
    )
    expect(page.locator("#status")).to_have_text("No card covers this question.")
    expect(page.locator("#answer .chip")).to_have_count(0)
    expect(page.locator("#retrieved-section")).to_be_hidden()


def test_a_blank_question_shows_the_servers_message(page: Page) -> None:
    ask(page, "   ")
    expect(page.locator("#status")).to_have_text(
        "Cannot answer: Value error, the question is empty"
    )
    expect(page.locator("#answer-section")).to_be_hidden()


def test_a_question_about_a_medicine_no_card_mentions_says_which(page: Page) -> None:
    ask(page, "Can I take clopidogrel and aspirin together every day?")
    expect(page.locator("#refusal")).to_have_text(
        "The cards do not cover this question, so no answer is given from them. "
        "No card mentions clopidogrel."
    )
    expect(page.locator("#answer .chip")).to_have_count(0)
