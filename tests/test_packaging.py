"""The distribution: one importable package, ``cardrag``, and nothing generic beside it."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from cardrag.ingest.settings import PROJECT_ROOT

FOLDERS = ("app", "ingest", "retrievers", "evals")


def _python_packages() -> list[str]:
    """Every folder of the four that holds Python modules, by its installed name."""
    return sorted(
        "cardrag." + ".".join(init.parent.relative_to(PROJECT_ROOT).parts)
        for folder in FOLDERS
        for init in (PROJECT_ROOT / folder).rglob("__init__.py")
    )


def test_cardrag_imports_beside_a_project_with_its_own_app_package(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("MINE = 'theirs'\n")
    code = (
        "import app, cardrag.app.cli, cardrag.retrievers.parent as p;"
        "print(app.MINE, p.ScoredParentDocumentRetriever.__name__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout) == (0, "theirs ScoredParentDocumentRetriever\n")


@pytest.mark.real
def test_the_wheel_holds_every_package_under_cardrag_and_nothing_else(tmp_path: Path) -> None:
    # ingest/index was once missing from the package list: an installed wheel could not import
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(PROJECT_ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("cardrag-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    packaged = sorted(
        n.removesuffix("/__init__.py").replace("/", ".") for n in names if n.endswith("__init__.py")
    )
    assert top == {"cardrag"}
    assert packaged == _python_packages()
    assert {"cardrag/app/static/index.html", "cardrag/evals/cases/golden.jsonl"} <= set(names)
