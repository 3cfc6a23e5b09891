"""Cards: Markdown files with YAML front matter, loaded into a typed, validated ``Card``.

A card file looks like this::

    ---
    id: card-levothyroxine-routine
    title: "Levothyroxine: building a daily routine"
    license: CC-BY-4.0
    topics: [food-timing, routines]
    accessed_at: 2026-11-20
    sensitivity: public
    ---

    First paragraph of the body...

A long Markdown document (a handbook chapter) has the same front matter plus
``kind: document``; it is cut at its headings into sections, each loaded as a card of its own
(see :mod:`cardrag.ingest.sections` and :mod:`cardrag.ingest.corpus`).

``language`` (optional) declares the text's ISO 639-1 code; without it the language is detected
from the title and body (:mod:`cardrag.ingest.language`). Either way it is recorded in the
parent record and every child's metadata, and BM25 analyses the card in it.

A bad card fails the whole load with a :class:`CardError` naming the file and the field, so a
broken corpus never half-replaces a good index.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from langchain_core.documents import Document
from pydantic import BaseModel, ConfigDict

from cardrag.ingest import metadata as md
from cardrag.ingest.aliases import parse_aliases
from cardrag.ingest.language import ISO_639_1, detect
from cardrag.ingest.settings import default

logger = logging.getLogger(__name__)

Sensitivity = Literal["public", "internal", "restricted"]
SENSITIVITIES: tuple[str, ...] = get_args(Sensitivity)
Kind = Literal["card", "document"]
KINDS: tuple[str, ...] = get_args(Kind)
MAX_ID_CHARS = 120
"""Longest card id (ids become file names in the parent store)."""
CARD_ID = re.compile(r"\Acard-[a-z0-9]+(?:-[a-z0-9]+)*\Z")
"""A card id: ``card-`` and a lower-case slug (anchored with ``\\Z``: ``$`` would let an id
end in a newline)."""


def valid_card_id(value: object) -> bool:
    r"""Whether a value is a card id (the pattern, at most :data:`MAX_ID_CHARS` characters).

    Example:
        >>> [valid_card_id(v) for v in ("card-iron", "card-iron\n", "card-" + "a" * 200, 3)]
        [True, False, False, False]
    """
    return isinstance(value, str) and len(value) <= MAX_ID_CHARS and bool(CARD_ID.match(value))


REQUIRED_FIELDS = ("id", "title", "license", "topics", "accessed_at", "sensitivity")


class _FrontMatterLoader(yaml.SafeLoader):
    """SafeLoader that leaves dates as strings, so a bad date is reported by its field name."""


_FrontMatterLoader.yaml_implicit_resolvers = {
    key: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


class CardError(ValueError):
    """A card that cannot be loaded, with the file and the field at fault."""

    def __init__(self, path: Path | str, field: str, problem: str) -> None:
        self.path = Path(path)
        self.field = field
        self.problem = problem
        super().__init__(f"{self.path}: field '{field}': {problem}")


class Card(BaseModel):
    """One knowledge-base card: front matter plus a Markdown body.

    Example:
        >>> card = Card(id="card-x", title="X", license="CC0-1.0", topics=["a"],
        ...             accessed_at=dt.date(2026, 1, 1), sensitivity="public", body="Hello.")
        >>> card.to_document().metadata["parent_id"]
        'card-x'
    """

    model_config = ConfigDict(frozen=True)

    id: str
    """Stable id, ``card-<slug>``; citations and child ids are built from it."""
    title: str
    """Human title, shown on citation chips and prefixed to the first child chunk."""
    license: str
    """Licence of the card text (SPDX id where there is one)."""
    topics: list[str]
    """Free-form topic tags."""
    accessed_at: dt.date
    """When the card's content was last checked."""
    sensitivity: Sensitivity
    """``public``, ``internal`` (staff only) or ``restricted`` (never shown by default)."""
    body: str
    """The card text without front matter, stripped."""
    source: str = ""
    """The file the card was loaded from, for error messages and provenance."""
    kind: Kind = "card"
    """``card``, or ``document``: a long Markdown file to be cut into sections at headings."""
    document_id: str = ""
    """For a section of a long document: the document's id (empty for a card)."""
    language: str = ""
    """ISO 639-1 code of the card's text as its front matter declares it (empty: detected,
    see :attr:`text_language`)."""
    aliases: dict[str, str] = {}
    """Everyday names patients give the card's subject, each to the card's own word for it
    (``water tablets: diuretics``); see :mod:`cardrag.ingest.aliases`."""

    @property
    def text_language(self) -> str:
        """The declared language, or the one detected from the title and body."""
        return self.language or detect(f"{self.title}\n{self.body}")

    def to_document(self) -> Document:
        """The card as a LangChain parent ``Document`` (id = card id, text = body)."""
        return Document(id=self.id, page_content=self.body, metadata=card_metadata(self))


def card_metadata(card: Card) -> dict[str, Any]:
    """Metadata every child and the parent carry (Chroma-compatible scalar and list values)."""
    return {
        md.PARENT_ID: card.id,
        md.TITLE: card.title,
        md.LICENSE: card.license,
        md.TOPICS: list(card.topics),
        md.ACCESSED_AT: card.accessed_at.isoformat(),
        md.SENSITIVITY: card.sensitivity,
        md.SOURCE: card.source,
        md.LANGUAGE: card.text_language,
        **({md.DOCUMENT_ID: card.document_id} if card.document_id else {}),
    }


def yaml_problem(exc: yaml.YAMLError, front: str) -> tuple[str, str]:
    r"""The field and one line of reason for a front matter YAML cannot read.

    The line is the file's (the ``---`` line is line 1), where the broken value starts.

    Example:
        >>> try:
        ...     yaml.safe_load("id: [unclosed\ntitle: x")
        ... except yaml.YAMLError as exc:
        ...     print(yaml_problem(exc, "id: [unclosed\ntitle: x"))
        ('id', "line 2: malformed YAML (expected ',' or ']', but got ':')")
    """
    mark = getattr(exc, "context_mark", None) or getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return "front matter", f"malformed YAML ({problem})"
    lines = front.splitlines()
    source = lines[mark.line] if mark.line < len(lines) else ""
    key = re.match(r"\s*([\w-]+)\s*:", source)
    return (
        key.group(1) if key else "front matter"
    ), f"line {mark.line + 2}: malformed YAML ({problem})"


def parse_card(text: str, path: Path | str) -> Card:
    """Parse one card file's text.

    Args:
        text: The whole file, front matter included.
        path: Where it came from, used in error messages only.

    Returns:
        The validated card.

    Raises:
        CardError: naming the file and the field at fault.
    """
    text = text.removeprefix("\ufeff")
    match = _FRONT_MATTER.match(text)
    if match is None:
        raise CardError(path, "front matter", "missing: the file must start with a '---' block")
    try:
        front = yaml.load(match.group(1), Loader=_FrontMatterLoader)
    except yaml.YAMLError as exc:
        field, reason = yaml_problem(exc, match.group(1))
        raise CardError(path, field, reason) from exc
    except RecursionError as exc:  # "[[[[..." thousands deep
        raise CardError(path, "front matter", "nested too deeply to be a card's fields") from exc
    if not isinstance(front, dict):
        raise CardError(path, "front matter", "must be a mapping of field: value")
    for name in REQUIRED_FIELDS:
        if front.get(name) in (None, ""):
            raise CardError(path, name, "missing")
    card_id = front["id"]
    if not valid_card_id(card_id):
        problem = f"{card_id!r} is not of the form card-<lowercase-slug>"
        raise CardError(path, "id", f"{problem} of at most {MAX_ID_CHARS} characters")
    for name in ("title", "license"):
        if not isinstance(front[name], str):
            raise CardError(path, name, f"must be text, got {front[name]!r}")
    topics = front["topics"]
    if not isinstance(topics, list) or not all(isinstance(t, str) and t for t in topics):
        raise CardError(path, "topics", f"must be a list of non-empty strings, got {topics!r}")
    accessed_at = _parse_date(front["accessed_at"], path)
    if front["sensitivity"] not in SENSITIVITIES:
        allowed = ", ".join(SENSITIVITIES)
        raise CardError(path, "sensitivity", f"{front['sensitivity']!r} is not one of {allowed}")
    kind = front.get("kind", "card")
    if kind not in KINDS:
        raise CardError(path, "kind", f"{kind!r} is not one of {', '.join(KINDS)}")
    language = front.get("language", "")
    if language and not (isinstance(language, str) and ISO_639_1.match(language)):
        problem = f"{language!r} is not an ISO 639-1 code (two lower-case letters, e.g. pt)"
        raise CardError(path, "language", problem)
    body = text[match.end() :].strip()
    if not body:
        raise CardError(path, "body", "empty: a card needs text after its front matter")
    try:
        aliases = parse_aliases(front.get("aliases"), f"{front['title']}\n{body}")
    except ValueError as exc:
        raise CardError(path, "aliases", str(exc)) from exc
    return Card(
        id=card_id,
        title=front["title"].strip(),
        license=front["license"].strip(),
        topics=topics,
        accessed_at=accessed_at,
        sensitivity=front["sensitivity"],
        body=body,
        source=str(path),
        kind=kind,
        language=language or "",
        aliases=aliases,
    )


def _parse_date(value: object, path: Path | str) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise CardError(path, "accessed_at", f"{value!r} is not a date (use YYYY-MM-DD)")


MAX_CARD_CHARS: int = default("max_card_chars")
"""Default size limit of one card file (``CARDRAG_MAX_CARD_CHARS``): a hundred times the
longest shipped card, several long ``kind: document`` articles' worth. A file over it is
refused before anything is embedded (a 5 MB paste took over 15 minutes to embed)."""


def load_card(path: Path, max_chars: int = MAX_CARD_CHARS) -> Card:
    """Read and parse one card file, failing on anything that is not UTF-8 or too long."""
    if path.stat().st_size > 4 * max_chars:  # never read a huge file whole (4 bytes a char)
        raise CardError(
            path,
            "body",
            f"{path.stat().st_size:,} bytes, over the limit of "
            f"{max_chars:,} characters (CARDRAG_MAX_CARD_CHARS)",
        )
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CardError(path, "encoding", f"not UTF-8 (byte {exc.start})") from exc
    if len(text) > max_chars:
        raise CardError(
            path,
            "body",
            f"{len(text):,} characters, over the limit of {max_chars:,} (CARDRAG_MAX_CARD_CHARS)",
        )
    return parse_card(text, path)
