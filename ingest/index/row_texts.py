"""Every saved row's text and metadata beside its vector, read a few rows at a time.

The rows a retriever returns need their text and metadata (the matched child and its offsets).
Read from Chroma, that is a ``get`` per collection per question (about 0.5 ms each on 2 cores,
three of them with card and sentence rows: issue 51). Saved with the vectors
(:class:`~cardrag.ingest.index.vectors.RowVectors`), one JSON line per row in the matrix's
order and each line's start in a NumPy file, both memory-mapped, a question reads only its own
few lines: the same text and metadata Chroma holds (JSON keeps strings, whole numbers, floats
and booleans, the only values Chroma's metadata takes).
"""

from __future__ import annotations

import contextlib
import json
import mmap
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

LINES, OFFSETS = "rows.jsonl", "rows-offsets.npy"
"""The two files of saved :class:`RowTexts`: the lines, and where each one starts."""


@dataclass(frozen=True)
class RowTexts:
    """Row texts and metadata, one JSON line each, in the order of the saved vectors.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> RowTexts.write(folder, [("one", {"n": 1}), ("two", {"n": 2, "x": True})])
        >>> RowTexts.load(folder).read(["b", "a"], {"a": 0, "b": 1})
        [('two', {'n': 2, 'x': True}), ('one', {'n': 1})]
    """

    lines: Any
    """The lines file, memory-mapped (an empty bytes object for no rows)."""
    offsets: np.ndarray
    """Where each line starts, and the end of the last (``rows + 1`` values)."""

    @staticmethod
    def write(folder: Path, rows: Iterable[tuple[str, dict[str, Any]]]) -> None:
        """Write ``(text, metadata)`` rows, in order, into ``folder``."""
        with RowTexts.writer(folder) as add:
            for text, metadata in rows:
                add(text, metadata)

    @staticmethod
    @contextlib.contextmanager
    def writer(folder: Path) -> Iterator[Callable[[str, dict[str, Any]], None]]:
        """A function that appends one row; the offsets are written when the block ends."""
        folder.mkdir(parents=True, exist_ok=True)
        starts = [0]
        with (folder / LINES).open("wb") as out:

            def add(text: str, metadata: dict[str, Any]) -> None:
                line = json.dumps([text, metadata], ensure_ascii=False).encode("utf-8") + b"\n"
                out.write(line)
                starts.append(starts[-1] + len(line))

            yield add
        np.save(folder / OFFSETS, np.asarray(starts, dtype=np.int64))

    @classmethod
    def load(cls, folder: Path) -> RowTexts | None:
        """The rows :meth:`write` saved in ``folder``, or None when it holds none."""
        if not (folder / LINES).is_file() or not (folder / OFFSETS).is_file():
            return None
        offsets = np.load(folder / OFFSETS, mmap_mode="r")
        if int(offsets[-1]) == 0:
            return cls(b"", offsets)
        with (folder / LINES).open("rb") as handle:
            lines = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        return cls(lines, offsets)

    def read(
        self, ids: Sequence[str], positions: dict[str, int]
    ) -> list[tuple[str, dict[str, Any]]]:
        """The text and metadata of the rows ``ids`` (``positions``: each id's row), in order."""
        out = []
        for row_id in ids:
            n = positions[row_id]
            text, metadata = json.loads(self.lines[int(self.offsets[n]) : int(self.offsets[n + 1])])
            out.append((str(text), dict(metadata)))
        return out
