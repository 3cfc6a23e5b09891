"""The tuning and held-out parts of a question set: choose on one, report on the other.

``cardrag tune`` and the answerability calibration both split their questions here, with one
seed, so a question is in the same part for both and nothing is chosen on the held-out part.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from cardrag.evals.datasets import Dataset

HELD_OUT_FRACTION = 0.3
"""Share of each stratum held out."""
SEED = 13
"""The shuffle's seed: the parts are the same on every run and machine."""


def split(
    qids: Sequence[str],
    kinds: Mapping[str, str],
    held_out_fraction: float = HELD_OUT_FRACTION,
    seed: int = SEED,
) -> tuple[list[str], list[str]]:
    """Question ids split into (tuning, held-out), stratified by kind, reproducibly.

    Each kind contributes ``round(n * fraction)`` held-out questions (at least one when it has
    two or more), drawn with a seeded shuffle of the sorted ids.

    Example:
        >>> split(["a", "b", "c", "d"], {}, 0.5, seed=1)
        (['b', 'c'], ['a', 'd'])
    """
    by_kind: dict[str, list[str]] = defaultdict(list)
    for qid in sorted(qids):
        by_kind[kinds.get(qid, "")].append(qid)
    tuning: list[str] = []
    held_out: list[str] = []
    rng = random.Random(seed)
    for kind in sorted(by_kind):
        ids = by_kind[kind]
        rng.shuffle(ids)
        n = round(len(ids) * held_out_fraction)
        n = max(n, 1) if len(ids) >= 2 else n
        held_out += ids[:n]
        tuning += ids[n:]
    return sorted(tuning), sorted(held_out)


def part(dataset: Dataset, qids: Iterable[str], name: str) -> Dataset:
    """The dataset restricted to some questions (same cards)."""
    keep = list(qids)
    return replace(
        dataset,
        name=f"{dataset.name} ({name})",
        queries={q: dataset.queries[q] for q in keep},
        qrels={q: dataset.qrels[q] for q in keep},
        kinds={q: dataset.kinds.get(q, "") for q in keep},
    )
