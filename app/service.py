"""The server's state: the loaded model and the index generation it serves, reopened on a swap.

Each request asks :meth:`Service.current` for the index to answer from: one read of the store's
pointer, and, after a re-ingest moved it, the new generation opened before answering. The
generation being replaced is kept open (and leased, so no re-ingest collects it) for requests
still running on it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from cardrag.app.context import Context, question_embeddings
from cardrag.app.leases import Leases
from cardrag.ingest.index import (
    Index,
    ModelMismatchError,
    StoreMissingError,
    current_generation,
    open_current,
)
from cardrag.ingest.index.reader import generations_of
from cardrag.ingest.settings import Settings

logger = logging.getLogger(__name__)


class DegradedError(RuntimeError):
    """The index served cannot answer (its generation is gone) and no other can be opened."""


NOT_SERVABLE = (StoreMissingError, ModelMismatchError, DegradedError)
"""What leaves the server up with nothing to answer from: no index yet, or one built with
another embedding model (re-ingest, or start with that model). Each route says so with a 503
and the reason; the server does not exit."""
"""The same answer for an unknown card and a restricted one, so neither is revealed."""


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
