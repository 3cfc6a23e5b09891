"""Questions in two parts, a card answering one: answered from that card, the other part named.

``cases/partial.jsonl``: ten questions in each of English, Portuguese, Spanish and Italian
("Should I take ibuprofen with food, and is it safe while breastfeeding?"), each with the card
that answers one part, that part, and the part no card answers; split tuning / held-out by
language with the evaluation's seed. ``make eval`` asks each through the app and counts, per
part and language, the questions refused (a refusal fails the patient: a card answers a part),
answered citing the right card, and answered saying what the cards do not cover
(:attr:`cardrag.app.reply.Reply.not_covered`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cardrag.app.reply import Reply
from cardrag.evals.cases import load_partial
from cardrag.evals.names import answer_checks


def partial_checks(ask: Callable[[str], Reply]) -> dict[str, dict[str, dict[str, Any]]]:
    """Refused, answered-right and said-not-covered counts per part (held-out, all) and language."""
    return answer_checks(
        load_partial(),
        ask,
        lambda c: ["partial", f"partial {c.language}"],
        said=lambda reply: bool(reply.not_covered),
    )
