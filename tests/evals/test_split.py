from __future__ import annotations

from cardrag.evals.cases import GOLDEN
from cardrag.evals.datasets import load_golden
from cardrag.evals.split import split
from cardrag.ingest.settings import PROJECT_ROOT


def test_split_is_stratified_disjoint_and_reproducible() -> None:
    golden = load_golden(GOLDEN, PROJECT_ROOT / "data" / "cards")
    tuning, held_out = split(list(golden.queries), golden.kinds)
    assert (len(tuning), len(held_out)) == (61, 27)
    assert set(tuning) | set(held_out) == set(golden.queries)
    assert not set(tuning) & set(held_out)
    per_kind = {
        kind: sum(golden.kinds[q] == kind for q in held_out)
        for kind in sorted(set(golden.kinds.values()))
    }
    assert per_kind == {"broad": 3, "multi": 2, "multilingual": 2, "narrow": 17, "paraphrase": 3}
    assert split(list(reversed(list(golden.queries))), golden.kinds) == (tuning, held_out)
    assert split(list(golden.queries), golden.kinds, seed=14) != (tuning, held_out)
