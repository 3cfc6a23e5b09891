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

import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles

try:  # the Redis parent store is optional (the ``distributed`` extra)
    from redis.exceptions import ConnectionError as RedisConnectionError
except ImportError:  # pragma: no cover - depends on the environment

    class RedisConnectionError(ConnectionError):  # type: ignore[no-redef]
        """Stands in when redis is not installed (never raised)."""


from cardrag.app.guard import Guard
from cardrag.app.routes import STATIC, router
from cardrag.app.service import NOT_SERVABLE, Service
from cardrag.ingest.index import StoreUnavailableError
from cardrag.ingest.settings import Settings

logger = logging.getLogger(__name__)


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

    app.include_router(router)
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
