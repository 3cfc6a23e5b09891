from __future__ import annotations

from pathlib import Path

from langchain_core.documents import Document

from cardrag.ingest.index.parents import (
    drop_generation_files,
    drop_parent_store,
    generation_files,
    parent_store,
)


def _card() -> Document:
    return Document(id="card-a", page_content="A.", metadata={"title": "A"})


def test_a_generations_files_live_beside_its_parents_in_a_shared_folder(tmp_path: Path) -> None:
    spec = str(tmp_path / "shared")
    parent_store(spec, "index-1", tmp_path / "unused", "kb").mset([("card-a", _card())])
    generation_files(spec, "index-1", tmp_path / "unused", "kb").mset([("bm25/x.json", b"{}")])
    assert (tmp_path / "shared" / "kb" / "index-1" / "card-a").is_file()
    assert (tmp_path / "shared" / "kb" / "index-1.files" / "bm25" / "x.json").read_bytes() == b"{}"
    drop_generation_files(spec, "index-1", tmp_path / "unused", "kb")
    assert not (tmp_path / "shared" / "kb" / "index-1.files").exists()
    assert (tmp_path / "shared" / "kb" / "index-1" / "card-a").is_file()  # parents stay
    drop_parent_store(spec, "index-1", tmp_path / "unused", "kb")
    assert not (tmp_path / "shared" / "kb" / "index-1").exists()
    assert not (tmp_path / "unused").exists()


def test_without_a_parent_store_the_files_go_to_their_own_folder(tmp_path: Path) -> None:
    files = generation_files(None, "index-1", tmp_path / "files", "kb")
    files.mset([("bm25/x.json", b"1")])
    assert (tmp_path / "files" / "bm25" / "x.json").read_bytes() == b"1"
    assert list(parent_store(None, "index-1", tmp_path / "parents", "kb").yield_keys()) == []


def test_in_memory_the_files_are_kept_apart_from_the_parents_and_dropped_alone() -> None:
    parents = parent_store("memory", "index-m", Path("unused"), "kb")
    parents.mset([("card-a", _card())])
    generation_files("memory", "index-m", Path("unused"), "kb").mset([("bm25/x", b"1")])
    assert list(parents.yield_keys()) == ["card-a"]
    assert generation_files("memory", "index-m", Path("unused"), "kb").mget(["bm25/x"]) == [b"1"]
    drop_generation_files("memory", "index-m", Path("unused"), "kb")
    assert generation_files("memory", "index-m", Path("unused"), "kb").mget(["bm25/x"]) == [None]
    assert list(parent_store("memory", "index-m", Path("unused"), "kb").yield_keys()) == ["card-a"]
    drop_parent_store("memory", "index-m", Path("unused"), "kb")
