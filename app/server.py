"""The web API and page: ``POST /ask``, ``GET /cards/{id}``, ``GET /healthz`` and ``/``.

``cardrag serve`` (or ``make serve``) runs it with uvicorn. The embedding model loads once at
start-up. The index is whatever the store's pointer names (the ``current`` link, or the
pointer collection on a Chroma server): each request reads it (one ``readlink`` or one Chroma
call) and, after a re-ingest moved it, opens the new generation before answering. The
generation being replaced is kept (see :mod:`cardrag.ingest.index.generations`), so a request
already running on it finishes normally.

Requests are answered one at a time (a lock around the graph): the model runs one thread by
design, the local Chroma client and the model's C engine are not documented as thread-safe,
and two cores gain nothing from running two embeddings at once. Requests queue; none fails.

A missing store is not a crash: the server starts, ``/healthz`` answers 503 with
``loaded: false`` and the reason, ``/ask`` answers 503 with the command that builds the store,
and the first request after ``cardrag ingest`` finds the new index and answers.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, field_validator

try:  # the Redis parent store is optional (the ``distributed`` extra)
    from redis.exceptions import ConnectionError as RedisConnectionError
except ImportError:  # pragma: no cover - depends on the environment

    class RedisConnectionError(ConnectionError):  # type: ignore[no-redef]
        """Stands in when redis is not installed (never raised)."""


from cardrag.app.context import (
    Context,
    StaffAccessError,
    check_staff_access,
    for_staff,
    question_embeddings,
)
from cardrag.app.graph import answer, check_question
from cardrag.app.guard import Guard
from cardrag.app.leases import Leases
from cardrag.app.reply import Reply
from cardrag.ingest import metadata as md
from cardrag.ingest.cards import valid_card_id
from cardrag.ingest.index import (
    Index,
    ModelMismatchError,
    StoreMissingError,
    StoreUnavailableError,
    current_generation,
    open_current,
)
from cardrag.ingest.index.reader import generations_of
from cardrag.ingest.settings import Settings
from cardrag.retrievers.expansion import visible

logger = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent / "static"
"""The page: plain HTML, CSS and JavaScript, no build step."""
NOT_FOUND = "card not found"


class DegradedError(RuntimeError):
    """The index served cannot answer (its generation is gone) and no other can be opened."""


NOT_SERVABLE = (StoreMissingError, ModelMismatchError, DegradedError)
"""What leaves the server up with nothing to answer from: no index yet, or one built with
another embedding model (re-ingest, or start with that model). Each route says so with a 503
and the reason; the server does not exit."""
"""The same answer for an unknown card and a restricted one, so neither is revealed."""


class Question(BaseModel):
    """The body of ``POST /ask``; any other field is refused (422), not silently ignored."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(description="The question, 1 to 2,000 characters after trimming.")
    k: int | None = Field(default=None, ge=1, le=20, description="Cards to retrieve.")
    staff: bool = Field(
        default=False,
        description="Staff access: internal cards too (403 unless the server allows it).",
    )

    @field_validator("question")
    @classmethod
    def _checked(cls, value: str) -> str:
        return check_question(value)


class CardView(BaseModel):
    """A card as ``GET /cards/{id}`` serves it."""

    id: str
    """Card id."""
    title: str
    """Card title."""
    body: str
    """The card text (the offsets in a reply's ``retrieved`` entries index into it)."""
    topics: list[str]
    """Topic tags."""
    license: str
    """Licence of the text."""
    accessed_at: str
    """When the content was last checked."""


class Health(BaseModel):
    """What ``GET /healthz`` reports."""

    loaded: bool
    """Whether an index is open and answering."""
    index: str | None = None
    """The index folder in use."""
    embedding_model: str
    """The model questions are embedded with."""
    cards: int = 0
    """Parent cards in the index."""
    children: int = 0
    """Rows in the children collection (chunks, plus whole-card rows where enabled)."""
    stale: bool = False
    """A newer index exists but cannot be opened; the one in ``index`` is still answering."""
    degraded: bool = False
    """The index served cannot answer now (its stores do not answer, or hold nothing): 503."""
    detail: str | None = None
    """Why nothing is loaded, or why the newer index cannot be served."""


@dataclass
class Served:
    """The open index and the graph context built on it."""

    index: Index
    """The index generation the pointer named when it was opened."""
    context: Context
    """The graph's run context over that index."""


class Service:
    """The server's state: settings, the loaded model, and the index currently served."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.embeddings = question_embeddings(settings)
        self.served: Served | None = None
        self.retired: Served | None = None
        """The generation served before ``served``: kept open for requests still on it."""
        self.stale: str | None = None
        """Why the newest index is not the one served (None: it is)."""
        self._reload = threading.Lock()
        self.answering = threading.Lock()
        self.leases = Leases(generations_of(settings), settings.lock_lease_seconds)
        """The generations this server holds open, leased so no re-ingest collects them."""

    def current(self) -> Served:
        """The index to answer from, reopened when a re-ingest has moved the pointer.

        When the newer index cannot be opened (built with another embedding model, a corrupt
        manifest) while one is being served, the server keeps answering from the one it has
        and :attr:`stale` says why; it tries the newer one again on the next request.

        Raises:
            StoreMissingError: when the store holds no index.
            ModelMismatchError: when the only index there is was built with another model.
        """
        served = self.served
        try:
            generation = current_generation(self.settings)
        except StoreMissingError as exc:
            if served is None or not gone(served):
                raise
            msg = f"degraded: the index it served, {served.index.generation}, is gone, and {exc}"
            raise DegradedError(msg) from exc
        if served is not None and served.index.generation == generation and not gone(served):
            return served
        with self._reload:
            if self.served is None or self.served.index.generation != generation:
                try:
                    opened = self._open()
                    # the generation replaced now may still have a request waiting on it; the
                    # one replaced before it cannot (its folder is gone too): release that one
                    self.leases.hold(opened.index.generation)
                    if self.retired is not None:
                        self.leases.release(self.retired.index.generation)
                        self.retired.index.close()
                    self.retired, self.served = self.served, opened
                    self.stale = None
                    logger.info("serving index %s", self.served.index.generation)
                except (ValueError, OSError) as exc:  # mismatch, corrupt or missing manifest
                    if self.served is None:
                        raise
                    self.stale = f"{generation} cannot be served: {exc}"
                    logger.warning("still serving %s: %s", self.served.index.generation, exc)
            if gone(self.served):
                msg = (
                    f"degraded: the index it served, {self.served.index.generation}, is gone, "
                    f"and {self.stale or 'the current one names it'}"
                )
                raise DegradedError(msg)
            return self.served

    def _open(self) -> Served:
        index = open_current(self.settings, self.embeddings)
        context = Context.from_index(index, self.settings, self.embeddings)
        return Served(index=index, context=context)


def gone(served: Served) -> bool:
    """Whether a served generation's folder has disappeared under the server."""
    return served.index.client is not None and not served.index.path.exists()


def allow_staff(settings: Settings) -> None:
    """A 403 with the reason unless the server allows staff access (``staff_access``)."""
    try:
        check_staff_access(settings)
    except StaffAccessError as exc:
        raise HTTPException(status_code=403, detail=str(exc)) from exc


def create_app(settings: Settings | None = None) -> FastAPI:
    """The FastAPI application; the model loads when it starts (lifespan)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service = Service(settings or Settings())
        app.state.service = service
        try:
            service.current()
        except NOT_SERVABLE as exc:
            logger.warning("%s", exc)
        yield
        service.leases.close()

    app = FastAPI(title="cardrag", summary="Answers from cards, with citations.", lifespan=lifespan)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        """422 with where and why, never the input itself (it may be huge, or not text)."""
        detail = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        return JSONResponse({"detail": detail}, status_code=422)

    @app.exception_handler(StoreUnavailableError)
    @app.exception_handler(httpx.TransportError)
    @app.exception_handler(RedisConnectionError)
    async def unavailable(request: Request, exc: Exception) -> JSONResponse:
        """A store server that does not answer is a 503 to retry, not a crash."""
        logger.warning("store unavailable: %s: %s", type(exc).__name__, exc)
        return JSONResponse(
            {"detail": "the knowledge base's servers do not answer; retry shortly"},
            status_code=503,
            headers={"Retry-After": "1"},
        )

    def service_of() -> Service:
        service: Service = app.state.service
        return service

    @app.get("/healthz", response_model=Health)
    def healthz() -> Any:
        service = service_of()
        model = service.settings.embedding_model
        try:
            served = service.current()
        except NOT_SERVABLE as exc:
            degraded = isinstance(exc, DegradedError)
            body = Health(loaded=False, embedding_model=model, detail=str(exc), degraded=degraded)
            return JSONResponse(body.model_dump(), status_code=503)
        problem = served.index.problem()
        if problem is not None:
            body = Health(
                loaded=True,
                index=served.index.generation,
                embedding_model=model,
                degraded=True,
                detail=f"degraded: {problem}",
            )
            return JSONResponse(body.model_dump(), status_code=503)
        return Health(
            loaded=True,
            index=served.index.generation,
            embedding_model=model,
            cards=int(served.index.manifest.get("cards", 0)),
            children=int(served.index.manifest.get("children", 0)),
            stale=service.stale is not None,
            detail=service.stale,
        )

    @app.post("/ask", response_model=Reply)
    def ask(body: Question) -> Reply:
        service = service_of()
        try:
            served = service.current()
        except NOT_SERVABLE as exc:
            raise HTTPException(status_code=503, detail=str(exc)) from exc
        context = served.context
        if body.staff:
            allow_staff(service.settings)
            context = for_staff(context, service.settings)
        if body.k is not None:
            context = replace(context, k=body.k)
        with service.answering:
            reply = answer(body.question, context)
        if reply.refused:  # a refusal: is it the question, or an index that cannot serve?
            problem = served.index.problem()
            if problem is not None:
                raise HTTPException(status_code=503, detail=f"degraded: {problem}")
        return reply

    @app.get("/cards/{card_id}", response_model=CardView)
    def card(card_id: str, staff: bool = False) -> CardView:
        service = service_of()
        if staff:
            allow_staff(service.settings)
        if not valid_card_id(card_id):  # also keeps over-long names away from the file store
            raise HTTPException(status_code=404, detail=NOT_FOUND)
        try:
            served = service.current()
        except NOT_SERVABLE as exc:
            raise HTTPException(status_code=503, detail=str(exc)) from exc
        [doc] = served.index.docstore.mget([card_id])
        sensitivity = str(doc.metadata.get(md.SENSITIVITY, "public")) if doc else ""
        if doc is None or not visible(sensitivity, allow_internal=staff, allow_restricted=False):
            raise HTTPException(status_code=404, detail=NOT_FOUND)
        meta = doc.metadata
        return CardView(
            id=card_id,
            title=str(meta.get(md.TITLE, "")),
            body=doc.page_content,
            topics=list(meta.get(md.TOPICS, [])),
            license=str(meta.get(md.LICENSE, "")),
            accessed_at=str(meta.get(md.ACCESSED_AT, "")),
        )

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_middleware(Guard)
    return app


@contextmanager
def running(settings: Settings, port: int = 0, app: FastAPI | None = None) -> Iterator[str]:
    """Serve on loopback in a background thread for the block (tests, benchmarks).

    Args:
        settings: The server's settings.
        port: The port; 0 picks a free one.
        app: The application to serve (its ``state.service`` is reachable from the caller);
            None makes one from ``settings``.

    Yields:
        The base URL, e.g. ``http://127.0.0.1:43121``.
    """
    import uvicorn

    if port == 0:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
    app = create_app(settings) if app is None else app
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            msg = "the server did not start"
            raise RuntimeError(msg)
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run the API and page with uvicorn until interrupted."""
    import uvicorn

    uvicorn.run(create_app(settings), host=host, port=port, log_level="info")
