"""Frozen token states of every distinct text, computed once and kept on disk.

The judge's lower layers are e5's own and never train, so each question and each sentence
goes through them once (numpy, :class:`~cardrag.retrievers.judge.encoder.Encoder`: the very
code that serves), however many pairs and epochs use it. The states of each requested layer
are stored in fp16, texts one after another, with their offsets.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from cardrag.retrievers.judge.encoder import Encoder, pad
from cardrag.retrievers.judge.tokenizer import Tokenizer

logger = logging.getLogger(__name__)

BATCH_TOKENS = 4096
"""Tokens per numpy forward pass (texts sorted by length, so little padding)."""


@dataclass(frozen=True)
class States:
    """Token states of many texts at some layers: ``layer -> (tokens, hidden)`` fp16."""

    offsets: np.ndarray
    """Text ``i``'s tokens are rows ``offsets[i]:offsets[i + 1]``."""
    layers: dict[int, np.ndarray]
    """Stacked token states per layer."""

    def of(self, layer: int, i: int) -> np.ndarray:
        """Text ``i``'s token states at ``layer``."""
        return self.layers[layer][self.offsets[i] : self.offsets[i + 1]]

    def embedding(self, i: int) -> np.ndarray:
        """Text ``i``'s e5 embedding: its last layer's states, mean-pooled and normalised."""
        pooled = self.of(max(self.layers), i).astype(np.float32).mean(0)
        out: np.ndarray = pooled / np.linalg.norm(pooled)
        return out


def _key(texts: Sequence[str], layers: Sequence[int], limit: int) -> str:
    digest = hashlib.sha256(f"{list(layers)}|{limit}".encode())
    for text in texts:
        digest.update(text.encode("utf-8") + b"\0")
    return digest.hexdigest()[:16]


def compute(
    texts: Sequence[str], layers: Sequence[int], limit: int, encoder: Encoder | None = None
) -> States:
    """Token states of ``texts`` (already prefixed) after each of ``layers``, cut to ``limit``."""
    encoder = encoder or Encoder.shipped()
    tokenizer = Tokenizer(encoder.model.vocabulary)
    ids = [tokenizer.encode(t, limit) for t in texts]
    offsets = np.concatenate([[0], np.cumsum([len(i) for i in ids])]).astype(np.int64)
    out = {layer: np.zeros((int(offsets[-1]), encoder.hidden), np.float16) for layer in layers}
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    batches: list[list[int]] = [[]]
    for i in order:
        if batches[-1] and len(ids[i]) * (len(batches[-1]) + 1) > BATCH_TOKENS:
            batches.append([])
        batches[-1].append(i)
    for batch in tqdm(batches, desc="frozen states", unit="batch", mininterval=10):
        tokens, mask = pad([ids[i] for i in batch])
        x, done = encoder.embed(tokens), 0
        for layer in sorted(layers):
            x = encoder.states(tokens, mask, upto=layer, start=done, x=x)
            done = layer
            for row, i in enumerate(batch):
                out[layer][offsets[i] : offsets[i + 1]] = x[row, : len(ids[i])]
    return States(offsets, out)


def cached(texts: Sequence[str], layers: Sequence[int], limit: int, folder: Path) -> States:
    """:func:`compute`, read from ``folder`` when the same texts were computed before."""
    path = folder / f"states-{_key(texts, layers, limit)}.npz"
    if path.exists():
        with np.load(path) as saved:
            return States(saved["offsets"], {layer: saved[f"layer{layer}"] for layer in layers})
    states = compute(texts, layers, limit)
    folder.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial.npz")
    arrays = {f"layer{n}": a for n, a in states.layers.items()}
    np.savez(partial, offsets=states.offsets, **arrays)  # type: ignore[arg-type]
    partial.replace(path)
    logger.info("frozen states of %d texts saved to %s", len(texts), path)
    return states
