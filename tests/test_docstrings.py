"""Every example in a docstring of the package runs and prints what it shows.

Examples that need a built store or a real model are marked ``# doctest: +SKIP`` line by line;
the rest run here, so an example cannot drift from the code it documents.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import cardrag

PACKAGES = ("app", "ingest", "retrievers", "evals")
MODULES = sorted(
    info.name
    for package in PACKAGES
    for info in pkgutil.walk_packages(
        importlib.import_module(f"cardrag.{package}").__path__, f"cardrag.{package}."
    )
)


def test_every_package_is_walked() -> None:
    assert cardrag.__path__  # the namespace package the project installs
    assert {"cardrag.ingest.lexical", "cardrag.retrievers.parent", "cardrag.app.terms"} <= set(
        MODULES
    )


@pytest.mark.parametrize("name", MODULES)
def test_the_examples_of_a_module_run(name: str) -> None:
    module = importlib.import_module(name)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testmod(module, optionflags=flags, verbose=False, report=False)
    assert result.failed == 0, f"{result.failed} failing example(s) in {name}; run it for the diff"
