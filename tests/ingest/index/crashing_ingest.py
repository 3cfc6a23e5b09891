"""``cardrag ingest`` that kills itself (SIGKILL, as ``kill -9``) right after one step.

Run by :mod:`tests.ingest.index.test_record`::

    python -m tests.ingest.index.crashing_ingest STEP N

``STEP`` names what has just happened when the process dies, ``N`` which time it happens:
``record`` (the new generation's record written), ``rows`` (its rows and parents written),
``files`` (BM25's files stored), ``pointer`` (the pointer swapped to it) and ``piece`` (the
``N``-th piece of the old generation the collection removes). The configuration comes from the
environment, as for ``cardrag ingest``.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from cardrag.app.cli import main
from cardrag.ingest.index import builder
from cardrag.ingest.index.remote import RemoteGenerations

STEPS: dict[str, tuple[Any, str]] = {
    "record": (RemoteGenerations, "new"),
    "rows": (builder, "upsert_documents"),
    "files": (RemoteGenerations, "complete"),
    "pointer": (RemoteGenerations, "swap"),
    "piece": (RemoteGenerations, "_remove"),
}


def die_after(owner: Any, name: str, nth: int) -> None:
    """Replace ``owner.name`` with a call that kills the process after its ``nth`` return."""
    original = getattr(owner, name)
    calls = 0

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        result = original(*args, **kwargs)
        calls += 1
        if calls == nth:
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(owner, name, wrapped)


if __name__ == "__main__":
    step, nth = sys.argv[1], int(sys.argv[2])
    die_after(*STEPS[step], nth)
    sys.exit(main(["ingest"]))
