"""The answerability questions, and their tuning / held-out split."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cardrag.app.terms import question_language
from cardrag.evals.cases import (
    GOLDEN,
    load_golden_cases,
    load_names,
    load_translated,
    load_uncovered,
)
from cardrag.evals.split import split
from cardrag.ingest.settings import PROJECT_ROOT

PUBMEDQA = PROJECT_ROOT.parent / "shared" / "datasets" / "pubmedqa-pqal"
PUBMED_SAMPLE = 200
"""PubMedQA questions sampled (seeded) for the uncovered side."""
SEED = 7


@dataclass
class Question:
    """One question of the answerability set."""

    qid: str
    """Unique id (``golden:g001``, ``uncovered:u001``, ``pubmedqa:...``)."""
    text: str
    """The question."""
    answerable: bool
    """Whether a shipped card answers it."""
    source: str
    """``golden``, ``uncovered`` or ``pubmedqa``."""
    language: str
    """Its language (golden: detected)."""
    kind: str
    """Its kind within the source."""
    answers: list[str] = field(default_factory=list)
    """Cards that answer it (golden only)."""


def questions(pubmed: Path | None = PUBMEDQA, sample: int = PUBMED_SAMPLE) -> list[Question]:
    """Golden, uncovered and (when the folder exists) sampled PubMedQA questions."""
    out = [
        Question(
            f"golden:{c.query_id}",
            c.query,
            True,
            "golden",
            question_language(c.query),
            c.kind,
            c.must_cite_one_of,
        )
        for c in load_golden_cases(GOLDEN)
    ]
    out += [
        Question(
            f"translated:{t.query_id}",
            t.query,
            True,
            "translated",
            t.language,
            t.kind,
            t.must_cite_one_of,
        )
        for t in load_translated()
    ]
    out += [
        Question(f"uncovered:{u.query_id}", u.query, False, "uncovered", u.language, u.kind)
        for u in load_uncovered()
    ]
    out += [
        Question(
            f"names:{n.query_id}", n.query, True, "names", n.language, n.kind, n.must_cite_one_of
        )
        for n in load_names()
    ]
    if pubmed is not None and (pubmed / "queries.jsonl").is_file():
        rows = [json.loads(line) for line in (pubmed / "queries.jsonl").open(encoding="utf-8")]
        random.Random(SEED).shuffle(rows)
        out += [
            Question(f"pubmedqa:{r['_id']}", r["text"], False, "pubmedqa", "en", "research")
            for r in rows[:sample]
        ]
    return out


SPLIT_GROUPS = (("golden", "pubmedqa", "uncovered"), ("translated",), ("names",))
"""Sources split together, each group with its own seeded shuffle. A source added later is a
group of its own, so the questions already split keep their parts (one shuffle over every
stratum would move them all)."""
BY_LANGUAGE = frozenset({"names"})
"""Groups split by language alone, as their own evaluation splits them
(:func:`cardrag.evals.names.answer_checks`), so a question is in the same part for both."""


def held_out_ids(qs: Sequence[Question]) -> set[str]:
    """The held-out part's ids: :func:`cardrag.evals.split.split` by source, language, kind."""
    held: set[str] = set()
    for group in SPLIT_GROUPS:
        members = [q for q in qs if q.source in group]
        strata = {
            q.qid: q.language if BY_LANGUAGE & set(group) else f"{q.source}|{q.language}|{q.kind}"
            for q in members
        }
        held.update(split([q.qid for q in members], strata)[1])
    return held
