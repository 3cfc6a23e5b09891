"""A server's leases on the generations it serves, so a re-ingest never collects them.

Garbage collection after an ingest keeps the new generation and the one before it; a server
that could not open the newest (built with another model) still answers from an older one,
which a second re-ingest used to remove under it. The server leases every generation it holds
open (:meth:`cardrag.ingest.index.generations.Generations.lease`) and renews the leases every
third of their length from a daemon thread; collection skips leased generations. A server that
dies stops renewing, and its leases expire.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid

from cardrag.ingest.index.generations import Generations

logger = logging.getLogger(__name__)


class Leases:
    """The generations one server holds, leased and renewed until released."""

    def __init__(self, generations: Generations, seconds: float) -> None:
        self.generations = generations
        self.seconds = seconds
        self.holder = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        """Who holds the leases: this process."""
        self.held: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, daemon=True, name="cardrag-leases")
        self._thread.start()

    def hold(self, generation: str) -> None:
        """Lease a generation now (and keep renewing it)."""
        self.generations.lease(generation, self.holder, self.seconds)
        self.held.add(generation)

    def release(self, generation: str) -> None:
        """Stop holding a generation."""
        self.held.discard(generation)
        try:
            self.generations.release(generation, self.holder)
        except Exception:  # the lease expires by itself
            logger.warning("could not release the lease on %s", generation, exc_info=True)

    def close(self) -> None:
        """Stop renewing and release every lease."""
        self._stop.set()
        for generation in list(self.held):
            self.release(generation)

    def _renew(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            for generation in list(self.held):
                try:
                    self.generations.lease(generation, self.holder, self.seconds)
                except Exception:  # a store away for a moment: the next round tries again
                    logger.warning("could not renew the lease on %s", generation, exc_info=True)
