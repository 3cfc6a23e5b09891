"""The layers point one way: ingest writes, retrievers read, the app and evals sit on top.

Read from the code's own imports (``ast``), so a new import that crosses a layer fails here
before a reader meets it.
"""

from __future__ import annotations

import ast

import pytest

from cardrag.ingest.settings import PROJECT_ROOT

FOLDERS = ("ingest", "retrievers", "app", "evals")
ALLOWED_FROM_INGEST = frozenset(
    {
        "cardrag.ingest.documents",  # the write path: a user's documents into parents
        "cardrag.ingest.splitter",
        "cardrag.ingest.index",  # opening a generation
        "cardrag.ingest.index.rows",  # the write path
        "cardrag.ingest.index.collections",  # the row plan both sides share
        "cardrag.ingest.index.layout",  # the kinds of row and their filters (no Chroma)
        "cardrag.ingest.index.vectors",  # the saved vectors' format
        "cardrag.ingest.index.manifest",  # what a generation says of itself: its rankings
        "cardrag.ingest.lexical",  # BM25's index format
        "cardrag.ingest.analysis",  # a question is analysed as the rows were
        "cardrag.ingest.language",
        "cardrag.ingest.sentences",  # a parent's sentences, cut as the sentence rows are
        "cardrag.ingest.metadata",  # the contracts
        "cardrag.ingest.settings",
    }
)
"""What ``retrievers/`` may import from ``ingest/``: the write path and the contracts."""


def imports(folder: str) -> dict[str, set[str]]:
    """Each module file of a folder, and the ``cardrag`` modules it imports."""
    out: dict[str, set[str]] = {}
    for path in sorted((PROJECT_ROOT / folder).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
        out[str(path.relative_to(PROJECT_ROOT))] = {n for n in names if n.startswith("cardrag.")}
    return out


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")


@pytest.mark.parametrize("upper", ["retrievers", "app", "evals"])
def test_ingest_imports_no_layer_above_it(upper: str) -> None:
    crossing = {
        path: sorted(n for n in names if _under(n, f"cardrag.{upper}"))
        for path, names in imports("ingest").items()
    }
    assert {path: names for path, names in crossing.items() if names} == {}


def test_retrievers_take_from_ingest_only_the_write_path_and_the_contracts() -> None:
    taken = {
        path: sorted(
            n
            for n in names
            if _under(n, "cardrag.ingest")
            and n not in ALLOWED_FROM_INGEST
            and n.rpartition(".")[0] not in ALLOWED_FROM_INGEST
        )
        for path, names in imports("retrievers").items()
    }
    assert {path: names for path, names in taken.items() if names} == {}


@pytest.mark.parametrize("folder", ["ingest", "retrievers", "app"])
def test_the_product_never_imports_the_evaluation(folder: str) -> None:
    reaching = [
        path
        for path, names in imports(folder).items()
        if any(_under(n, "cardrag.evals") for n in names)
    ]
    assert reaching == []
