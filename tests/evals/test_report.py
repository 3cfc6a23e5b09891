from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from cardrag.evals.report import machine, render, update_report

METRICS = {"recall@1": 0.5, "recall@5": 1.0, "mrr@10": 0.75, "ndcg@10": 0.8, "hit@5": 1.0}


def _entry(**extra: Any) -> dict[str, Any]:
    return {
        "cards": 2,
        "children": 3,
        "queries": 4,
        "license": "CC0",
        "run_at": "2026-11-30T00:00:00+00:00",
        "machine": "a CPU, 2 cores, Python 3.11.7",
        "embedding_model": "m",
        "threads": 1,
        "chunk_size": 400,
        "chunk_overlap": 60,
        "systems": {"ours": {**METRICS, "parents@5": 5.0, "ms/query": 12.345}},
        **extra,
    }


def test_a_dataset_renders_as_a_table_of_systems() -> None:
    text = render({"toy/paragraph": _entry()})
    assert "## toy/paragraph" in text
    assert "2 cards, 3 children, 4 questions; licence: CC0." in text
    assert (
        "| system | recall@1 | recall@5 | mrr@10 | ndcg@10 | hit@5 | parents@5 | ms/query |" in text
    )
    assert "| ours | 0.500 | 1.000 | 0.750 | 0.800 | 1.000 | 5.000 | 12.345 |" in text


def test_golden_comes_first_then_the_others_by_name() -> None:
    text = render({"zeta": _entry(), "golden": _entry(), "alpha": _entry()})
    order = [line for line in text.splitlines() if line.startswith("## ")]
    assert order == ["## golden", "## alpha", "## zeta"]


def test_app_checks_and_the_red_team_render_when_present() -> None:
    redteam = {
        "cases": 2,
        "passed": 1,
        "off_topic_refusal_rate": 1.0,
        "results": [
            {"case_id": "rt01", "kind": "off_topic", "mode": "offline", "passed": True},
            {
                "case_id": "rt02",
                "kind": "restricted",
                "mode": "offline",
                "passed": False,
                "failures": ["cites x", "retrieved y"],
            },
        ],
    }
    text = render({"golden": _entry(app={"citation_precision": 0.9}, redteam=redteam)})
    assert "- citation_precision: 0.9" in text
    assert "Red team: 1/2 passed; off-topic refusal rate 1.0." in text
    assert "| rt01 | off_topic | offline | pass |" in text
    assert "| rt02 | restricted | offline | cites x; retrieved y |" in text


def test_answerability_aurocs_render_overall_and_per_language() -> None:
    graded = {
        "held_out_auroc": {"best sentence": 0.8, "combined (grading)": 0.9},
        "held_out_auroc_by_language": {
            "en": {"best sentence": 0.75, "combined (grading)": 0.95},
            "pt": {"best sentence": float("nan"), "combined (grading)": 0.5},
        },
    }
    lines = render({"golden": _entry(answerability=graded)}).splitlines()
    start = lines.index("| signal | held-out AUROC | en | pt |")
    assert lines[start : start + 4] == [
        "| signal | held-out AUROC | en | pt |",
        "|---|---|---|---|",
        "| best sentence | 0.800 | 0.750 | n/a |",
        "| combined (grading) | 0.900 | 0.950 | 0.500 |",
    ]


def test_each_signal_s_refusal_pair_renders_with_its_threshold() -> None:
    pair = {"unanswerable": 10, "refused": 0.9, "answerable": 20, "false_refused": 0.05}
    empty = {"unanswerable": 0, "refused": None, "answerable": 0, "false_refused": None}
    graded = {"signal_pairs": {"cross-encoder": {"threshold": -2.2124, "all": pair, "pt": empty}}}
    lines = render({"golden": _entry(answerability=graded)}).splitlines()
    start = lines.index("| signal | threshold | all | pt |")
    assert lines[start + 2] == "| cross-encoder | -2.212 | 90% / 5% | n/a / n/a |"


def test_update_keeps_other_datasets_and_rewrites_the_markdown(tmp_path: Path) -> None:
    update_report(tmp_path, "a", _entry())
    update_report(tmp_path, "b", _entry(cards=9))
    update_report(tmp_path, "a", _entry(cards=7))
    stored = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert {name: e["cards"] for name, e in stored.items()} == {"a": 7, "b": 9}
    assert (tmp_path / "report.md").read_text(encoding="utf-8") == render(stored)


def test_the_markdown_is_the_same_whichever_section_ran_last(tmp_path: Path) -> None:
    # a fresh entry lists its systems in run order; the stored one lists them by name
    systems = {name: {**METRICS, "parents@5": 5.0, "ms/query": 1.0} for name in ("zz", "aa")}
    update_report(tmp_path, "golden", _entry(systems=systems))
    fresh = (tmp_path / "report.md").read_text(encoding="utf-8")
    update_report(tmp_path, "other", _entry())
    rows = [line for line in fresh.splitlines() if line.startswith(("| aa ", "| zz "))]
    assert [row[:4] for row in rows] == ["| aa", "| zz"]
    # the golden section, re-rendered from the stored report, is unchanged
    assert (tmp_path / "report.md").read_text(encoding="utf-8").startswith(fresh.rstrip("\n"))


def test_the_instruction_set_is_the_widest_the_flags_name() -> None:
    from cardrag.evals.report import instruction_set

    assert instruction_set({"sse4_2", "avx2", "avx512f", "avx512bw"}) == "AVX-512"
    assert instruction_set({"sse4_2", "avx2"}) == "AVX2"
    assert instruction_set({"sse4_2"}) == "no AVX2"
    assert instruction_set({"avx512f"}, "X86_V4 AVX512_ICL") == (
        "AVX-512 (numpy without X86_V4 AVX512_ICL)"
    )
    assert instruction_set({"avx512f"}, None, "Haswell") == "AVX-512 (OpenBLAS as Haswell)"


def test_the_machine_line_names_the_cores_and_python() -> None:
    import os
    import platform

    assert machine().endswith(f", {os.cpu_count()} cores, Python {platform.python_version()}")
    if Path("/proc/cpuinfo").exists():  # Linux: the instruction set beside the CPU's name
        assert re.search(r" \((AVX-512|AVX2|no AVX2)( \([^)]*\))?\), ", machine())


def test_a_switch_off_makes_an_avx512_machine_measure_avx2() -> None:
    from cardrag.evals.report import effective_isa, instruction_set

    assert effective_isa({"avx2", "avx512f"}) == "AVX-512"
    assert effective_isa({"avx2", "avx512f"}, "X86_V4") == "AVX2"
    assert effective_isa({"avx2", "avx512f"}, None, "Haswell") == "AVX2"
    assert effective_isa({"avx2", "avx512f"}, None, None, "avx2") == "AVX2"
    assert effective_isa({"avx2"}, "X86_V4") == "AVX2"
    assert instruction_set({"avx512f"}, None, None, "avx2") == "AVX-512 (torch as avx2)"
