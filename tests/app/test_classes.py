from __future__ import annotations

import pytest

from cardrag.app.classes import class_covers, tree_numbers
from cardrag.app.terms import covers, vocabulary
from cardrag.ingest.settings import shipped_cards


def _card(name: str) -> frozenset[str]:
    return vocabulary((shipped_cards() / f"{name}.md").read_text(encoding="utf-8"))


def test_a_member_lies_under_its_class_in_the_mesh_tree() -> None:
    (fluoroquinolones,) = tree_numbers("fluorocinolone")  # the folded spelling of vocabularies
    assert fluoroquinolones == "D03.633.100.810.835.830.250"
    assert any(t.startswith(fluoroquinolones + ".") for t in tree_numbers("ciprofloxacin"))
    assert tree_numbers("spinach") == ()


@pytest.mark.parametrize(
    ("term", "card", "covered"),
    [
        ("ciprofloxacin", "exercise-and-medicines", True),  # "the fluoroquinolone family"
        ("levofloxacin", "exercise-and-medicines", True),
        ("flucloxacillin", "amoxicillin-course", False),  # names amoxicillin, a penicillin
        ("rosuvastatin", "statin-timing", False),  # names simvastatin and atorvastatin
        ("ibuprofen", "exercise-and-medicines", False),  # no class of it named
    ],
)
def test_a_card_covers_a_member_only_of_a_class_it_speaks_of_as_a_class(
    term: str, card: str, covered: bool
) -> None:
    assert class_covers(term, _card(card)) is covered
    assert covers(term, _card(card)) is covered


def test_a_card_that_names_the_medicine_covers_it_whatever_its_class() -> None:
    assert covers("amoxicillin", _card("amoxicillin-course"))
    assert not class_covers("amoxicillin", _card("amoxicillin-course"))
