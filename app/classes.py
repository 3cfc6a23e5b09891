"""Medicine classes: a card that speaks of a class speaks of its members.

"Can ciprofloxacin hurt my tendons when I run?" is answered by the exercise card's "Some
antibiotics in the fluoroquinolone family can rarely damage tendons", although the card never
names ciprofloxacin. The medicine dictionary inside the ``drug-named-entity-recognition`` wheel
gives each name its MeSH tree numbers (looked up in the folded spelling card vocabularies use,
"fluorocinolone"); ciprofloxacin's (D03.633.100.810.835.830.250.186) lie
under the fluoroquinolones' (D03.633.100.810.835.830.250), so a card that names the class
covers the member (:func:`class_covers`).

A card that names members of the class itself speaks of those members, not of the class: the
amoxicillin card calls amoxicillin "a penicillin antibiotic", and its advice (with or without
food) is not flucloxacillin's. Such a card covers no other member. MeSH files most medicines
under their chemical structure only, so pharmacological classes (statins, NSAIDs, diuretics)
name no members this way and cover none: a card's aliases (``ingest/aliases.py``) say those.
"""

from __future__ import annotations

import bz2
import functools
import importlib.util
import pickle
from pathlib import Path
from typing import Any


@functools.cache
def medicine_dictionary() -> dict[str, Any]:
    """``drug-named-entity-recognition``'s own data, read from its pinned wheel once a process.

    Raises:
        ModuleNotFoundError: when the wheel is not installed (the app extra brings it).
    """
    spec = importlib.util.find_spec("drug_named_entity_recognition")
    if spec is None or not spec.submodule_search_locations:
        msg = "grading needs its medicine names: pip install drug-named-entity-recognition"
        raise ModuleNotFoundError(msg)
    path = Path(next(iter(spec.submodule_search_locations))) / "drug_ner_dictionary.pkl.bz2"
    with bz2.open(path, "rb") as f:
        data: dict[str, Any] = pickle.load(f)
    return data


@functools.cache
def _trees_by_word() -> dict[str, tuple[str, ...]]:
    """Each one-word medicine name, in the folded spelling of card vocabularies, to its trees."""
    from cardrag.app.terms import fold  # terms asks this module, at call time only

    data = medicine_dictionary()
    canonical = data["drug_canonical_to_data"]
    trees: dict[str, set[str]] = {}
    for name, medicines in data["drug_variant_to_canonical"].items():
        found = [t for m in medicines for t in canonical.get(m, {}).get("mesh_tree") or ()]
        if found and name.isalpha():
            trees.setdefault(fold(name), set()).update(found)
    return {word: tuple(sorted(numbers)) for word, numbers in trees.items()}


def tree_numbers(word: str) -> tuple[str, ...]:
    """The MeSH tree numbers of the medicines a folded word names; () for none.

    Read once a process (about 1 s: :meth:`cardrag.app.grading.Grader.__post_init__` does it
    before the first question).

    Example:
        >>> "D03.633.100.810.835.830.250" in tree_numbers("fluorocinolone")
        True
        >>> tree_numbers("spinach")
        ()
    """
    return _trees_by_word().get(word, ())


def _under(trees: tuple[str, ...], classes: tuple[str, ...]) -> bool:
    return any(t.startswith(c + ".") for t in trees for c in classes)


@functools.lru_cache(maxsize=4096)
def class_covers(term: str, vocab: frozenset[str]) -> bool:
    """Whether a card vocabulary names a class of the medicine ``term``, and no member of it.

    Example:
        >>> from cardrag.app.terms import vocabulary
        >>> class_covers("ciprofloxacin", vocabulary("Antibiotics in the fluoroquinolone family"))
        True
        >>> class_covers("flucloxacillin", vocabulary("Amoxicillin is a penicillin antibiotic"))
        False
    """
    trees = tree_numbers(term)
    if not trees:
        return False
    for word in vocab:
        classes = tree_numbers(word)
        if word == term or not classes or not _under(trees, classes):
            continue
        if not any(_under(tree_numbers(other), classes) for other in vocab if other != word):
            return True
    return False
