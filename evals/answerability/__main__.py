"""``python -m cardrag.evals.answerability``: fit, report and (``--write``) store a calibration."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cardrag.app.calibration import FEATURES
from cardrag.evals.answerability.fitting import calibrate, write_calibration
from cardrag.evals.answerability.questions import questions
from cardrag.ingest.models import MODELS_FILE


def main(argv: list[str] | None = None) -> int:
    """Fit, report and (with ``--write``) store the calibration for the configured model."""
    import tempfile

    from cardrag.app.context import glossary_of, names_of, read_as
    from cardrag.evals.systems import build, cached
    from cardrag.ingest.corpus import card_aliases, load_cards
    from cardrag.ingest.embeddings import load_embeddings
    from cardrag.ingest.settings import Settings

    prog = "python -m cardrag.evals.answerability"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("--write", action="store_true", help=f"store it in {MODELS_FILE}")
    parser.add_argument(
        "--only",
        choices=list(FEATURES),
        help="refit this calibration only; the other stays as stored",
    )
    args = parser.parse_args(argv)
    settings = Settings()
    embeddings = cached(
        load_embeddings(settings.embedding_model, settings.threads), settings.embedding_model
    )
    with tempfile.TemporaryDirectory(prefix="cardrag-answerability-") as tmp:
        shipped = load_cards(settings.cards_dir)
        retriever = build([c.to_document() for c in shipped], embeddings, settings, Path(tmp))
        names = names_of(retriever, card_aliases(shipped))
        glossary = glossary_of(retriever)
        calibrations, report = calibrate(
            questions(),
            retriever,
            embeddings,
            settings.embedding_model,
            settings.k,
            lambda text: read_as(text, names, glossary),
            [args.only] if args.only else list(FEATURES),
        )
    print(json.dumps(report, indent=2))
    if args.write:
        write_calibration(calibrations)
        print(f"calibrations for {settings.embedding_model} written to {MODELS_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
