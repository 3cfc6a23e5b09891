"""``make bench``: latency, API, ingest throughput and growth in one run → ``evals/bench.md``.

Not a test and not run in CI: timings depend on the machine and on what else runs on it.
Every ratio is against a baseline measured in the same run. ``--quick`` skips the 100k growth
point and repeats less (for trying the script, not for the report).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from cardrag.evals.bench.api import grading_cost
from cardrag.evals.bench.dropin import dropin, dropin_section
from cardrag.evals.bench.growth import LENGTHS, run_sizes
from cardrag.evals.bench.ingest import cold, thousand, throughput
from cardrag.evals.bench.instruction_sets import isa_table, keep_by_isa
from cardrag.evals.bench.judge import judge_cost, judge_section
from cardrag.evals.bench.latency import latency
from cardrag.evals.cases import load_golden_cases, load_translated
from cardrag.evals.report import machine
from cardrag.ingest.corpus import load_cards
from cardrag.ingest.embeddings import load_embeddings
from cardrag.ingest.index import ingest_folder
from cardrag.ingest.settings import Settings

OUT = Path(__file__).resolve().parent.parent / "bench.md"
RAW = Path(__file__).resolve().parent.parent / "bench.json"
"""The measurements behind bench.md (each section kept until it is re-run)."""
SECTIONS = ("latency", "api", "ingest", "reingest", "growth", "lengths", "dropin")


def render(header: dict[str, Any], sections: dict[str, Any]) -> str:
    """The Markdown report."""
    lines = [
        *latency_section(header, sections),
        *api_section(sections.get("api", {})),
        *judge_section(sections.get("api", {})),
        *ingest_section(sections.get("ingest", {}), sections.get("reingest", {})),
        *growth_section(sections.get("growth", [])),
        *lengths_table(sections.get("lengths", [])),
        *dropin_section(sections.get("dropin", {})),
        *isa_table(sections.get("by_isa", {})),
    ]
    return "\n".join(lines) + "\n"


def latency_section(header: dict[str, Any], sections: dict[str, Any]) -> list[str]:
    """The title, where each figure was measured, and retrieval latency against the floor."""
    asked = sections.get("latency_asked", header)
    lines = [
        "# Benchmarks (`make bench`)",
        "",
        f"Run {header['run_at']} on {header['machine']}; model `{header['model']}`, "
        f"{header['threads']} thread(s); medians after a warm-up; each ratio is against a "
        "baseline measured in the same run.",
        "",
        *where_measured(sections.get("measured", {})),
        "## Retrieval latency, warm `invoke`, shipped corpus",
        "",
        # the questions and rounds of the run that measured latency, not of this run
        f"{asked['questions']} golden questions x {asked['rounds']} rounds, k=4.",
        "",
        "| system | p50 ms | p95 ms | p50 / floor |",
        "|---|---|---|---|",
    ]
    rows = sections.get("latency", [])
    return lines + [
        f"| {r['system']} | {r['p50_ms']} | {r['p95_ms']} | {r['ratio']}x |" for r in rows
    ]


def api_section(api: dict[str, Any]) -> list[str]:
    """``POST /ask`` over HTTP, grading off and on."""
    lines = [
        "",
        "## Web API, `POST /ask` over HTTP (retrieve, grade, answer, verify; offline answerer)",
        "",
        "One sequential request per question after a warm-up over both sets (the cards' "
        "sentences are embedded), with the server's question vectors then forgotten, so each "
        "question is embedded as a new one; grading off, on, and on with the answer judge off "
        "(sentences ranked by similarity alone), in the same run, on the same index. `golden`: "
        "the 88 golden questions (84 in English, as the cards); `translated`: the 130 asked in "
        "Portuguese, Spanish and Italian (grading embeds them again without the medicine's name).",
        "",
        "| questions | grading | requests | p50 ms | p95 ms |",
        "|---|---|---|---|---|",
    ]
    for name in ("golden", "translated"):
        part = api.get(name, {})
        lines += [
            f"| {name} | {mode} | {part[mode]['requests']} | {part[mode]['p50_ms']} | "
            f"{part[mode]['p95_ms']} |"
            for mode in ("off", "on", "judge off")
            if mode in part
        ]
    added = {n: api[n]["added_p50_ms"] for n in ("golden", "translated") if n in api}
    if added:
        lines += [
            "",
            "Grading adds "
            + ", ".join(f"{ms} ms ({n})" for n, ms in added.items())
            + " to the median `/ask`.",
        ]
    return lines


def ingest_section(ing: dict[str, Any], big: dict[str, Any]) -> list[str]:
    """Ingest throughput, cold ingests and re-ingests."""
    lines = [
        "",
        "## Ingest",
        "",
        "| rows embedded | raw `embed_documents` rows/s | whole ingest rows/s | ratio | "
        "cold `python -m cardrag.ingest`, 38 cards |",
        "|---|---|---|---|---|",
        f"| {ing.get('rows')} | {ing.get('embed_rows_per_s')} | {ing.get('ingest_rows_per_s')} "
        f"| {ing.get('ratio')}x | {ing.get('cold_ingest_s')} s |",
    ]
    if "reingest_unchanged_s" in ing:
        lines += [
            "",
            "Cold `python -m cardrag.ingest` of the 38 shipped cards, each a fresh process, "
            "same run: "
            "first ingest with one model thread and with every core, then re-ingests of the "
            "one-thread store (texts come from the embedding cache; unchanged, the model is not "
            "loaded).",
            "",
            "| first, 1 thread | first, all cores | re-ingest unchanged (texts embedded) "
            "| re-ingest after editing one card (texts embedded) |",
            "|---|---|---|---|",
            f"| {ing['cold_ingest_s']} s | {ing['cold_ingest_all_cores_s']} s "
            f"({ing['cores']} cores) | {ing['reingest_unchanged_s']} s "
            f"({ing['reingest_unchanged_embedded']}) | {ing['reingest_one_edit_s']} s "
            f"({ing['reingest_one_edit_embedded']}) |",
        ]
    if big:
        lines += [
            "",
            f"Re-ingest of a larger knowledge base ({big['cards']} PubMedQA abstracts from "
            f"../shared, every core, one process): first ingest {big['first_s']} s "
            f"({big['first_embedded']} texts embedded); after editing {big['edited']} cards "
            f"{big['reingest_s']} s ({big['reingest_embedded']} embedded), "
            f"{100 * big['ratio']:.1f} % of the first.",
        ]
    return lines


def growth_section(growth: list[dict[str, Any]]) -> list[str]:
    """Latency and memory as the store grows."""
    lines = [
        "",
        "## Growth (synthetic card-like cards, hashed 384-d embedding, 100 questions timed after "
        "a warm-up pass, each size served by a fresh worker process; see growth.py)",
        "",
        "| cards | rows | build s | worker open s | ready s | worker RSS MB | floor p50 "
        "| card-atomic p50 | vanilla p50 | ours p50 | ours p95 | ours / floor |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for g in growth:
        p50 = g["p50_ms"]
        lines.append(
            f"| {g['cards']:,} | {rows_cell(g)} | {g['build_s']} | {g['open_s']} | {g['ready_s']} "
            f"| {g['worker_rss_mb']} | {p50['floor']} | {p50['card-atomic']} "
            f"| {p50['vanilla-pdr']} | {p50['ours']} | {g['p95_ms']['ours']} "
            f"| {p50['ours'] / p50['floor']:.1f}x |"
        )
    if growth:
        lines += ["", GROWTH_NOTE, "", held_line(growth)]
    return lines


def rows_cell(g: dict[str, Any]) -> str:
    """A store's row count, marked when the store was reused rather than built in this run."""
    return f"{g['rows']:,}" + (" (reused)" if g.get("reused") else "")


def held_line(stores: list[dict[str, Any]]) -> str:
    """What the stores of a table hold (growth.holds), so a reused one says what it measured."""
    held = {json.dumps(g.get("holds"), sort_keys=True) for g in stores}
    if held == {"null"}:
        return "Stores: built before the bench recorded what they hold."
    return "Stores hold (built with): " + "; ".join(sorted(held))


LENGTH_SYSTEMS = ("floor", "vanilla-pdr", "children", "hybrid", "ours", "sentence-window")
"""The systems side by side on long parents (issue 33)."""


def lengths_table(rows: list[dict[str, Any]]) -> list[str]:
    """The parent-length dimension: p50 per system, and ours against the floor, same run."""
    if not rows:
        return []
    head = " | ".join(f"{s} p50" for s in LENGTH_SYSTEMS)
    lines = [
        "",
        "## Long parents (synthetic parents of a given length, hashed 384-d embedding, 100 "
        "questions after a warm-up pass, a fresh worker per store; growth.py `--chars`)",
        "",
        f"| parent chars | parents | rows | {head} | ours / floor | ours p95 |",
        "|---|---|---|" + "---|" * len(LENGTH_SYSTEMS) + "---|---|",
    ]
    for g in rows:
        p50 = g["p50_ms"]
        cells = " | ".join(str(p50.get(s, "")) for s in LENGTH_SYSTEMS)
        lines.append(
            f"| {g['chars']:,} | {g['cards']:,} | {rows_cell(g)} | {cells} "
            f"| {p50['ours'] / p50['floor']:.1f}x | {g['p95_ms']['ours']} |"
        )
    return [*lines, "", held_line(rows)]


def where_measured(measured: dict[str, str]) -> list[str]:
    """One line per section saying when and where it was last measured (``--only`` re-runs)."""
    if not measured:
        return []
    return ["Sections measured: " + "; ".join(f"{k} {v}" for k, v in measured.items()) + ".", ""]


GROWTH_NOTE = """\
The floor is LangChain's standard call: one unfiltered HNSW query of the first window, with
the rows' text and metadata. Ours makes two vector queries (children and card rows, separate
collections, so neither needs a metadata filter) that ask Chroma for ids and distances only,
scores BM25 over at most 10,000 postings per question token (impact order), reads the rows of
the parents only BM25 found by id (their vectors only), checks by id which candidates have a
card row, and reads text and metadata for the rows it returns and nothing else: reading
metadata costs Chroma more than the vector search. Worker open: the index as a server worker
opens it (Chroma client, parent store, BM25 files); ready: open plus the first question, when
Chroma loads the HNSW segments. Worker RSS: the worker's resident memory once ready, before
anything else is opened in it; the build's peak is in the JSON (`evals/bench.json`)."""


def arguments() -> argparse.ArgumentParser:
    """The benchmark's options."""
    parser = argparse.ArgumentParser(prog="python -m cardrag.evals.bench", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--growth-stores",
        type=Path,
        default=None,
        help="keep the growth stores here and reuse them (building 100k cards takes ~20 min)",
    )
    parser.add_argument(
        "--only", nargs="*", choices=SECTIONS, default=None, help="re-run these sections only"
    )
    return parser


def api_costs(
    settings: Settings, store: Path, questions: list[str], *, quick: bool
) -> tuple[dict[str, Any], list[str]]:
    """``POST /ask`` with grading off and on, golden and translated; the golden questions used."""
    api_settings = settings.model_copy(update={"store_dir": store})
    ingest_folder(api_settings)
    translated = [c.query for c in load_translated()]
    if quick:
        questions, translated = questions[:30], translated[:30]
    warm = questions + translated  # every card's sentences; then questions are new
    golden = load_golden_cases()[: len(questions)]
    value = {
        "golden": grading_cost(api_settings, warm, questions),
        "translated": grading_cost(api_settings, warm, translated),
        "judge": judge_cost(
            [(c.query, c.must_cite_one_of) for c in golden], load_cards(settings.cards_dir)
        ),
    }
    return value, questions


def measured_now() -> str:
    """Today's date and this machine, said beside a section measured now."""
    return f"{dt.datetime.now(dt.UTC):%Y-%m-%d} on {machine()}"


def main(argv: list[str] | None = None) -> int:
    """Run every benchmark and write ``evals/bench.md``."""
    args = arguments().parse_args(argv)
    todo = set(args.only or SECTIONS)
    os.environ.setdefault("TQDM_DISABLE", "1")
    settings = Settings()
    rounds = 1 if args.quick else args.rounds
    embeddings = load_embeddings(settings.embedding_model, settings.threads)
    cards = load_cards(settings.cards_dir)
    questions = [c.query for c in load_golden_cases()]
    # each section is saved as soon as it is measured, so a failure later keeps it
    sections: dict[str, Any] = json.loads(RAW.read_text()) if RAW.exists() else {}

    def save(name: str, value: Any) -> None:
        sections[name] = value
        # sections re-run at different times can come from different machines: each says where
        sections.setdefault("measured", {})[name] = measured_now()
        keep_by_isa(sections, name, value)
        RAW.write_text(json.dumps(sections, indent=2), encoding="utf-8")

    with tempfile.TemporaryDirectory(prefix="cardrag-bench-") as tmp:
        work = Path(tmp)
        if "latency" in todo:
            print("latency ...", flush=True)
            sections["latency_asked"] = {"questions": len(questions), "rounds": rounds}
            save("latency", latency(cards, questions, embeddings, settings, work / "l", rounds))
        if "api" in todo:
            print("api ...", flush=True)
            value, questions = api_costs(settings, work / "api", questions, quick=args.quick)
            save("api", value)
        if "ingest" in todo:
            print("ingest ...", flush=True)
            repeats = 1 if args.quick else 3
            save(
                "ingest",
                {
                    **throughput(cards, embeddings, settings, work / "i", repeats),
                    **cold(work, settings),
                },
            )
        if "reingest" in todo:
            print("reingest (1,000 PubMedQA abstracts, when ../shared is present) ...", flush=True)
            save("reingest", thousand(work, settings))
        if "growth" in todo:
            print("growth ...", flush=True)
            sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
            save("growth", run_sizes(sizes, 1, args.growth_stores))  # warm-up, one timed pass
        if "lengths" in todo:
            print("lengths ...", flush=True)
            lengths = [s for s in LENGTHS if not args.quick or s[1] <= 1_000]
            save("lengths", run_sizes(lengths, 1, args.growth_stores))
        if "dropin" in todo:
            print("dropin ...", flush=True)
            save("dropin", dropin(rounds))
    header = {
        "run_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "model": settings.embedding_model,
        "threads": settings.threads,
        "questions": len(questions),
        "rounds": rounds,
    }
    text = render(header, sections)
    OUT.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
