"""The ``cardrag`` command line: ``ask``, ``ingest``, ``retrieve``, ``serve``, ``demo``.

Other packages add commands through the entry-point group ``cardrag.commands`` (a callable
taking the remaining arguments and returning an exit code): the evaluation package adds
``tune`` that way, so the product never imports its evaluation code.

Bad input (an empty or over-long question, a missing store, a bad card) prints one clear line
on stderr and exits 2; it never prints a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

from cardrag.app.context import Context, StaffAccessError, for_staff
from cardrag.app.graph import QuestionError, answer, check_question, retrieved_card
from cardrag.app.reply import Reply, RetrievedCard
from cardrag.ingest import __main__ as ingest_main
from cardrag.ingest.configuration import load_settings
from cardrag.ingest.embeddings import UnknownModelError, check_model
from cardrag.ingest.index import ModelMismatchError, StoreMissingError, StoreUnavailableError
from cardrag.ingest.index.collections import http_client
from cardrag.ingest.index.parents import redis_down
from cardrag.ingest.problems import disk_full
from cardrag.ingest.settings import (
    ConfigurationError,
    Settings,
    SettingsFileError,
    unknown_variables,
)

DEMO_QUESTION = "Am I supposed to take it on an empty stomach?"
PLUGIN_GROUP = "cardrag.commands"
"""Entry-point group of commands other installed packages add (``tune`` from ``evals``)."""


def plugin_commands() -> dict[str, EntryPoint]:
    """The commands installed packages add, by name."""
    return {ep.name: ep for ep in entry_points(group=PLUGIN_GROUP)}


def build_context(settings: Settings, *, staff: bool = False, **overrides: Any) -> Context:
    """The app's context over the current index; with ``staff``, one that shows internal cards."""
    context = Context.from_settings(settings, **overrides)
    return for_staff(context, settings) if staff else context


def cmd_retrieve(settings: Settings, question: str, k: int | None, *, staff: bool = False) -> int:
    """Print the top parent cards with scores and the matched child of each."""
    question = check_question(question)
    context = build_context(settings, staff=staff)
    docs = context.retriever.invoke(question, k=k)
    if not docs:
        check_index(context)
    print(f"Q: {question}")
    if not docs:
        print("no card passes the similarity gate")
    for rank, doc in enumerate(docs, 1):
        print("\n".join(card_lines(retrieved_card(doc, rank), indent="")))
    return 0


def card_lines(card: RetrievedCard, indent: str = "  ") -> list[str]:
    """A retrieved card for a terminal: its rank, the score that ordered it, its similarity.

    Cards are listed in the order of the fused score, so that is the score beside the rank;
    the dense similarity (the gate's) follows.

    Example:
        >>> card = RetrievedCard(id="card-a", title="A", rank=2, score=0.8812,
        ...     ordering_score=0.0476, matched_child_id="card-a::01", matched_passage="Take it.",
        ...     matched_start_index=0, matched_end_index=8)
        >>> card_lines(card)[0]
        '  #2 (rank score 0.0476, similarity 0.881)  card-a  A'
        >>> card_lines(card, indent="")[1]
        '       matched card-a::01 [chars 0-8]: Take it.'
    """
    passage = " ".join(card.matched_passage.split())
    order = f"rank score {card.ordering_score:.4f}, " if card.ordering_score else ""
    return [
        f"{indent}#{card.rank} ({order}similarity {card.score:.3f})  {card.id}  {card.title}",
        f"{indent}       matched {card.matched_child_id} {span(card)}: {passage[:140]}",
    ]


def span(card: RetrievedCard) -> str:
    """Where the matched passage (and its sentence window, if any) sits in the card.

    Example:
        >>> span(RetrievedCard(id="c", title="", score=1.0, matched_child_id="c::02",
        ...      matched_passage="", matched_start_index=478, matched_end_index=587,
        ...      window_start_index=220, window_end_index=751))
        '[chars 478-587, window 220-751]'
    """
    where = f"chars {card.matched_start_index}-{card.matched_end_index}"
    if card.window_start_index is not None:
        where += f", window {card.window_start_index}-{card.window_end_index}"
    return f"[{where}]"


def format_reply(reply: Reply) -> str:
    """The reply for a terminal: answer, citations, retrieved cards with scores."""
    lines = [f"Q: {reply.question}", "", reply.answer, ""]
    if reply.refused:
        lines.append(f"(refused: {reply.refusal_reason or 'no card can answer this question'})")
    if reply.citations:
        lines.append("Citations:")
        lines.extend(f"  [cite:{c.id}] {c.title}" for c in reply.citations)
    if reply.rejected_citations:
        lines.append(f"Rejected citations (not retrieved): {', '.join(reply.rejected_citations)}")
    if reply.uncited:
        lines.append("Warning: the answer cites none of the retrieved cards.")
    if reply.retrieved:
        lines.append("Retrieved:")
        for card in reply.retrieved:
            lines.extend(card_lines(card))
    return "\n".join(lines)


def cmd_ask(
    settings: Settings, question: str, k: int | None, *, as_json: bool, staff: bool = False
) -> int:
    """Answer one question with citations."""
    question = check_question(question)
    context = build_context(settings, staff=staff, **({"k": k} if k else {}))
    reply = answer(question, context)
    if reply.refused:
        check_index(context)
    print(reply.model_dump_json(indent=2) if as_json else format_reply(reply))
    return 0


def check_index(context: Context) -> None:
    """Nothing found: a set-up fault (exit 2, one line) rather than "not covered", if it is one.

    Raises:
        StoreUnavailableError: when the index cannot answer (its parent store holds no card,
            its vector store no row, or a store does not answer).
    """
    problem = context.index_problem() if context.index_problem is not None else None
    if problem is not None:
        msg = f"the index cannot answer: {problem} (check CARDRAG_PARENT_STORE and the stores)"
        raise StoreUnavailableError(msg)


STAFF_HELP = "staff access: internal cards too (needs CARDRAG_STAFF_ACCESS=true)"
MAX_K = 20
"""The most cards a question may ask for (as the web API)."""


def cards_wanted(text: str) -> int:
    """``--k``: a whole number from 1 to :data:`MAX_K` (argparse reports anything else)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_K:
        msg = f"must be a whole number from 1 to {MAX_K}, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``cardrag`` command.

    A reader that closes its end early (``cardrag retrieve ... | head -1``) ends the command
    quietly: it got what it wanted, so no traceback and exit 0.
    """
    try:
        return run(argv)
    except BrokenPipeError:
        # later writes (and the interpreter's last flush) go nowhere instead of failing again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def parser_of(plugins: dict[str, Any]) -> argparse.ArgumentParser:
    """The ``cardrag`` command's arguments (each plugin command parses its own)."""
    parser = argparse.ArgumentParser(prog="cardrag", description="Card retrieval with citations.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_ask = sub.add_parser("ask", help="answer a question with citations")
    p_ask.add_argument("question")
    p_ask.add_argument("--json", action="store_true", help="print the structured reply as JSON")
    p_ask.add_argument("--k", type=cards_wanted, default=None, help="cards to retrieve (1-20)")
    p_ask.add_argument("--staff", action="store_true", help=STAFF_HELP)
    p_ingest = sub.add_parser("ingest", help="build the store from a folder of cards")
    p_ingest.add_argument("--cards", type=Path, default=None, help="folder of cards")
    p_ingest.add_argument(
        "--clean", action="store_true", help="keep no previous index once the new one is live"
    )
    p_ingest.add_argument("--dry-run", action="store_true", help=ingest_main.DRY_RUN_HELP)
    p_ingest.add_argument("--break-lock", action="store_true", help=ingest_main.BREAK_LOCK_HELP)
    p_ret = sub.add_parser("retrieve", help="print the top cards for a question")
    p_ret.add_argument("question")
    p_ret.add_argument("--k", type=cards_wanted, default=None, help="cards to retrieve (1-20)")
    p_ret.add_argument("--staff", action="store_true", help=STAFF_HELP)
    sub.add_parser("demo", help="ingest the shipped cards if needed, then answer the demo question")
    for name, ep in sorted(plugins.items()):  # each parses its own options (`cardrag NAME -h`)
        sub.add_parser(name, help=f"from {ep.value.split(':')[0]}", add_help=False)
    p_serve = sub.add_parser("serve", help="the web page and JSON API (uvicorn)")
    p_serve.add_argument("--host", default="127.0.0.1", help="interface to listen on")
    p_serve.add_argument("--port", type=int, default=8000, help="port to listen on")
    return parser


def dispatch(args: argparse.Namespace, settings: Settings) -> int:
    """Run the command ``args`` names."""
    if args.command == "ingest":
        return ingest_main.run(
            settings, args.cards, clean=args.clean, dry_run=args.dry_run, break_lock=args.break_lock
        )
    if args.command == "ask":
        return cmd_ask(settings, args.question, args.k, as_json=args.json, staff=args.staff)
    if args.command == "retrieve":
        return cmd_retrieve(settings, args.question, args.k, staff=args.staff)
    if args.command == "serve":
        from cardrag.app.server import serve

        check_model(settings.embedding_model, settings.threads)  # one line, not uvicorn's trace
        if settings.chroma_url:  # likewise a Chroma server that does not answer
            http_client(settings.chroma_url)
        serve(settings, args.host, args.port)
        return 0
    if not (settings.store_dir / "current").exists():
        code = ingest_main.run(settings, None, clean=False)
        if code:
            return code
    return cmd_ask(settings, DEMO_QUESTION, None, as_json=False)


def run(argv: list[str] | None = None) -> int:
    """The ``cardrag`` command's work (:func:`main` adds the closed-pipe handling)."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    plugins = plugin_commands()
    parser = parser_of(plugins)
    args, rest = parser.parse_known_args(argv)
    if args.command in plugins:
        command: int = plugins[args.command].load()(rest)
        return command
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        settings = load_settings()
    except (ConfigurationError, SettingsFileError) as exc:
        print(f"cardrag: {exc}", file=sys.stderr)
        return 2
    for warning in unknown_variables():
        print(f"cardrag: warning: {warning}", file=sys.stderr)
    try:
        return dispatch(args, settings)
    except (
        StoreMissingError,
        ModelMismatchError,
        QuestionError,
        UnknownModelError,
        StaffAccessError,
        ConfigurationError,
        StoreUnavailableError,
    ) as exc:
        print(f"cardrag: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        down = redis_down(exc, settings.parent_store)
        if down is not None:
            print(f"cardrag: {down}", file=sys.stderr)
            return 2
        if not disk_full(exc):
            raise
        print(f"cardrag: no space left on the device holding {settings.store_dir}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
