"""A few steps of ``make judge``'s training on a tiny set: it learns, and it resumes."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from cardrag.evals.judge.data import Group
from cardrag.evals.judge.states import States, compute

torch = pytest.importorskip("torch")

from cardrag.evals.judge import training  # noqa: E402
from cardrag.evals.judge.training import CARDS, READING, score_groups, texts_of, train  # noqa: E402
from cardrag.retrievers.judge.model import LAYERS, LIMIT  # noqa: E402

pytestmark = pytest.mark.real

SENTENCES = (
    "Keep unopened insulin pens in the fridge.",
    "Insulin lowers blood sugar.",
    "Take the tablet with a full glass of water.",
    "Alcohol makes the drowsiness worse.",
)
READ = [
    Group("Where do I keep insulin?", SENTENCES, (True, False, False, False), "squad2-pt", "en"),
    Group("How do I take the tablet?", SENTENCES, (False, False, True, False), "squad2-pt", "en"),
    Group("Can I drink wine with it?", SENTENCES, (False, False, False, True), "squad2-es", "en"),
    Group("Who invented insulin?", SENTENCES, (False, False, False, False), "squad2-es", "en"),
]
CARD = [
    Group(
        "Onde guardo a insulina?",
        SENTENCES,
        (True, False, False, False),
        "matrix",
        "pt",
        card="card-a",
    ),
    Group("¿Cuánto cuesta la insulina?", SENTENCES, (False,) * 4, "matrix", "es", card="card-a"),
]
TINY = [
    (replace(READING, epochs=8, batch=4, checkpoint_every=3), READ),
    (replace(CARDS, epochs=6, batch=2), CARD),
]


@pytest.fixture(scope="module")
def states() -> tuple[States, dict[str, int]]:
    texts = texts_of(READ + CARD)
    return compute(texts, LAYERS, LIMIT), {t: i for i, t in enumerate(texts)}


def _loss(scores: list[np.ndarray], groups: list[Group]) -> float:
    logits = torch.from_numpy(np.concatenate(scores))
    labels = torch.tensor([float(a) for g in groups for a in g.answers])
    return float(torch.nn.functional.binary_cross_entropy_with_logits(logits, labels))


def _best(scores: list[np.ndarray], groups: list[Group]) -> list[bool]:
    return [
        g.answers[int(np.argmax(s))] for g, s in zip(groups, scores, strict=True) if g.answerable
    ]


def test_a_few_steps_learn_the_tiny_set(
    tmp_path: Path, states: tuple[States, dict[str, int]]
) -> None:
    st, index = states
    untrained = train([], st, index, tmp_path / "none.pt")
    trained = train(TINY, st, index, tmp_path / "tiny.pt")
    before, after = score_groups(untrained, st, index, READ), score_groups(trained, st, index, READ)
    assert _loss(after, READ) < _loss(before, READ) / 4
    assert _best(after, READ) == [True, True, True]
    assert max(s.max() for s in after[3:]) < min(s.max() for s in after[:3])  # the unanswerable one


@pytest.mark.parametrize(("broken_at", "saved_at"), [(5, (0, 3)), (33, (1, 0))])
def test_an_interrupted_run_resumes_to_the_same_weights(
    broken_at: int,
    saved_at: tuple[int, int],
    tmp_path: Path,
    states: tuple[States, dict[str, int]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Broken mid-way through reading (saved at step 3) or on the first cards step."""
    st, index = states
    whole = train(TINY, st, index, tmp_path / "whole.pt")
    broken = tmp_path / "broken.pt"
    real_logits, calls = training.logits, []

    def breaking(*args: object) -> object:
        calls.append(1)
        if len(calls) == broken_at:
            raise KeyboardInterrupt
        return real_logits(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(training, "logits", breaking)
    with pytest.raises(KeyboardInterrupt):
        train(TINY, st, index, broken)
    saved = torch.load(broken, weights_only=False)
    assert (saved["stage"], saved["step"]) == saved_at
    monkeypatch.setattr(training, "logits", real_logits)
    resumed = train(TINY, st, index, broken)
    for (name, a), b in zip(whole.state_dict().items(), resumed.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_a_changed_cards_stage_keeps_the_reading_stage_and_a_changed_reading_does_not(
    tmp_path: Path, states: tuple[States, dict[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    st, index = states
    checkpoint = tmp_path / "judge.pt"
    train(TINY[:1], st, index, checkpoint)  # saved "after reading"
    after_reading = torch.load(checkpoint, weights_only=False)
    assert (after_reading["stage"], after_reading["step"]) == (1, 0)
    readings, real_steps = [], training._reading_steps

    def counting(*args: object) -> object:
        readings.append(1)
        return real_steps(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(training, "_reading_steps", counting)
    resumed = train(TINY, st, index, checkpoint)
    assert readings == []  # the cards stage is new: reading was not run again
    _same(resumed, train(TINY, st, index, tmp_path / "fresh.pt"))
    assert readings == [1]
    other = [(replace(TINY[0][0], epochs=7), READ), TINY[1]]
    again = train(other, st, index, checkpoint)  # reading changed: from the start
    assert readings == [1, 1]
    _same(again, train(other, st, index, tmp_path / "other.pt"))


def _same(a: torch.nn.Module, b: torch.nn.Module) -> None:
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(x, y), name
