"""``python -m cardrag.ingest [--cards PATH] [--clean]``: build the store from a folder of cards."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from cardrag.ingest.cards import CardError
from cardrag.ingest.configuration import load_settings
from cardrag.ingest.embeddings import UnknownModelError, check_model
from cardrag.ingest.index import (
    GenerationCountError,
    NotAStoreError,
    StoreLockedError,
    ingest_folder,
)
from cardrag.ingest.index.builder import plan_folder
from cardrag.ingest.index.cache import Changes
from cardrag.ingest.index.parents import redis_down
from cardrag.ingest.problems import disk_full
from cardrag.ingest.settings import ConfigurationError, Settings, SettingsFileError


def main(argv: list[str] | None = None) -> int:
    """Ingest and print a one-line summary; bad cards exit 2 with the file and field."""
    parser = argparse.ArgumentParser(prog="python -m cardrag.ingest", description=__doc__)
    parser.add_argument("--cards", type=Path, default=None, help="folder of cards")
    parser.add_argument(
        "--clean",
        action="store_true",
        help="keep no previous index once the new one is live (refused on a non-store folder)",
    )
    parser.add_argument("--dry-run", action="store_true", help=DRY_RUN_HELP)
    parser.add_argument("--break-lock", action="store_true", help=BREAK_LOCK_HELP)
    args = parser.parse_args(argv)
    try:
        settings = load_settings()
    except (ConfigurationError, SettingsFileError) as exc:
        print(f"ingest failed, previous index untouched: {exc}", file=sys.stderr)
        return 2
    return run(
        settings, args.cards, clean=args.clean, dry_run=args.dry_run, break_lock=args.break_lock
    )


DRY_RUN_HELP = "print what would change (cards, texts to embed) and write nothing"
BREAK_LOCK_HELP = (
    "on a Chroma server, take the writer lock even if its lease has not expired (only when you "
    "know its holder is dead)"
)


def run(
    settings: Settings,
    cards: Path | None,
    *,
    clean: bool,
    dry_run: bool = False,
    break_lock: bool = False,
) -> int:
    """Ingest with ``settings``; shared by ``python -m cardrag.ingest`` and ``cardrag ingest``."""
    started = time.perf_counter()
    try:
        if dry_run:  # the plan counts texts to embed: the model must be able to embed them
            check_model(settings.embedding_model, settings.threads)
            print(f"dry run, nothing written: {plan_folder(settings, cards).line()}")
            return 0
        index = ingest_folder(settings, cards, clean=clean, break_lock=break_lock)
    except (
        CardError,
        FileNotFoundError,
        UnknownModelError,
        NotAStoreError,
        StoreLockedError,
        GenerationCountError,
    ) as exc:
        print(f"ingest failed, previous index untouched: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        down = redis_down(exc, settings.parent_store)
        if down is not None:
            print(f"ingest failed, previous index untouched: {down}", file=sys.stderr)
            return 2
        if not disk_full(exc):
            raise
        print(
            f"ingest failed: no space left on the device holding {settings.store_dir}; "
            "the previous index is untouched",
            file=sys.stderr,
        )
        return 2
    took = time.perf_counter() - started
    print("\n".join(summary(index.manifest, index.generation, took)))
    if clean or index.removed:
        print(f"removed {len(index.removed)} old index(es): {', '.join(index.removed) or 'none'}")
    return 0


ROW_LABELS = {"card": "card rows", "sentence": "sentence rows"}
"""How the summary names the rows beside the children (and their rankings)."""


def summary(m: dict[str, Any], generation: str, took: float) -> list[str]:
    """What an ingest says it did: the rows written, what changed, the rankings they support.

    Example:
        >>> m = {"cards": 2, "children": 9, "chunk_size": 400, "chunk_overlap": 60,
        ...      "rows": {"child": 4, "card": 1, "sentence": 4},
        ...      "fusion": {"card_rows": {"on": False, "why": "1 of 2 parents have one"}},
        ...      "changes": {"added": 2, "updated": 0, "unchanged": 0, "deleted": 0,
        ...                  "embedded": 9, "reused": 0}}
        >>> for line in summary(m, "index-x", 1.23):  # doctest: +NORMALIZE_WHITESPACE
        ...     print(line)
        ingested 2 cards into 4 children, 1 card rows, 4 sentence rows (chunk 400, overlap 60)
        in 1.2 s -> index-x; cards: 2 added, 0 updated, 0 unchanged, 0 deleted; texts: 9
        embedded, 0 reused
        rankings beside the children's and BM25: card rows off (1 of 2 parents have one)
    """
    kinds = m.get("rows") or {"child": m["children"]}
    rows = f"{kinds['child']} children" + "".join(
        f", {kinds[kind]} {label}" for kind, label in ROW_LABELS.items() if kinds.get(kind)
    )
    lines = [
        f"ingested {m['cards']} cards into {rows} "
        f"(chunk {m['chunk_size']}, overlap {m['chunk_overlap']}) in {took:.1f} s "
        f"-> {generation}; {Changes(**m['changes']).line()}"
    ]
    fusion = m.get("fusion") or {}
    said = [
        f"{ROW_LABELS[kind]} {'on' if fusion[f'{kind}_rows']['on'] else 'off'} "
        f"({fusion[f'{kind}_rows']['why']})"
        for kind in ROW_LABELS
        if f"{kind}_rows" in fusion
    ]
    if said:
        lines.append("rankings beside the children's and BM25: " + "; ".join(said))
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
