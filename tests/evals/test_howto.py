import json
from pathlib import Path

import pytest

from cardrag.evals.howto import Tally, main
from tests.conftest import FakeEmbeddings

ARTICLES = {
    "tea": "Tea is a drink made from leaves. " * 70 + "Green tea is steamed, not withered.",
    "rice": "Rice is a grain grown in flooded paddies. " * 70 + "Basmati rice ages a year.",
    "salt": "Salt is mined from rock or dried from the sea. " * 70 + "Fleur de sel is raked.",
}
QUESTIONS = [  # id, text, article, answer
    ("q1", "How is green tea made?", "tea", "steamed"),
    ("q2", "How long does basmati rice age?", "rice", "a year"),
    ("q3", "How is fleur de sel collected?", "salt", "raked"),
]


def dataset(folder: Path) -> Path:
    folder.mkdir()
    (folder / "meta.json").write_text('{"language": "en", "license": "CC0"}')
    rows = [{"_id": k, "title": k, "text": v} for k, v in ARTICLES.items()]
    (folder / "parents.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    queries = [{"_id": q, "text": t, "answers": [a]} for q, t, _, a in QUESTIONS]
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(r) for r in queries))
    qrels = ["query-id\tcorpus-id\tscore", *(f"{q}\t{art}\t1" for q, _, art, _ in QUESTIONS)]
    (folder / "qrels_parent.tsv").write_text("\n".join(qrels) + "\n")
    return folder


def test_a_tally_counts_rank_characters_and_the_answer_kept() -> None:
    tally = Tally()
    tally.add(["b", "a"], ["xx", "the answer"], "a", ["answer"])
    tally.add(["c"], ["yyyy"], "a", ["answer"])
    tally.ms.extend([3.0, 5.0])
    assert tally.row() == {
        "hit@1": 0.0,
        "mrr@4": 0.25,
        "chars/call": 8,
        "answer kept": 0.5,
        "ms p50": 4.0,
    }


def test_every_system_is_measured_over_the_articles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = dataset(tmp_path / "tiny")
    out = tmp_path / "howto.json"
    assert main([str(folder), "--json", str(out)], load=lambda _m, _t: FakeEmbeddings()) == 0
    rows = json.loads(out.read_text())["tiny"]
    assert list(rows) == [
        "plain PDR",
        "ours dense",
        "ours hybrid",
        "ours, max_parent_chars=4000",
        "ours, max_parent_chars=2000",
        "ours hybrid, max_parent_chars=2000",
    ]
    figures = {name: {k: v for k, v in row.items() if k != "ms p50"} for name, row in rows.items()}
    assert figures["plain PDR"] == {  # 4 children: one parent, the wrong one for 2 of 3
        "hit@1": 0.333,
        "mrr@4": 0.333,
        "chars/call": 2667,
        "answer kept": 0.333,
    }
    whole = sum(len(v) for v in ARTICLES.values())  # k=4 parents: all three, whole
    assert figures["ours dense"] == {
        "hit@1": 0.333,
        "mrr@4": 0.667,
        "chars/call": whole,
        "answer kept": 1.0,
    }
    assert figures["ours hybrid"] == {
        "hit@1": 1.0,
        "mrr@4": 1.0,
        "chars/call": whole,
        "answer kept": 1.0,
    }
    assert figures["ours, max_parent_chars=4000"] == figures["ours dense"]  # each under 4,000
    # 2,000 characters of each parent's matched children: the order kept, the characters cut,
    # and the answers kept (a window around the best child alone kept 2 of 3 in 5,949)
    assert figures["ours, max_parent_chars=2000"] == {
        "hit@1": 0.333,
        "mrr@4": 0.667,
        "chars/call": 2439,
        "answer kept": 1.0,
    }
    assert "| tiny | plain PDR |" in capsys.readouterr().out
