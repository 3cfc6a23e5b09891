"""Training the judge: pairs from groups, batches from frozen states, checkpoints to resume.

Two stages, seeded:

1. **reading** (:data:`READING`): SQuAD 2.0 in Portuguese and Spanish and their crossings;
   each question with its answering sentence and :attr:`Stage.negatives` others of its
   paragraph, shuffled into batches of pairs; binary cross-entropy.
2. **cards** (:data:`CARDS`): the matrix's tuning cards; each question with every sentence of
   its card, a few questions a step; binary cross-entropy plus, for an answered question, a
   softmax over its card's sentences that the answering one should win (the judge must pick
   the sentence, not only sense that one is there).

A checkpoint (network, optimiser, stage, step, and the data's order, drawn from the seed) is
written every :attr:`Stage.checkpoint_every` steps and at the end of each stage; a run started
again with the same settings carries on from it.
"""

from __future__ import annotations

import hashlib
import logging
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from cardrag.evals.judge.data import Group
from cardrag.evals.judge.network import JudgeNetwork
from cardrag.evals.judge.states import States
from cardrag.retrievers.judge.model import LAYERS, QUESTION_PREFIX, SENTENCE_PREFIX

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stage:
    """One stage's settings."""

    name: str
    """``reading`` or ``cards``."""
    epochs: int
    """Passes over the stage's groups."""
    learning_rate: float
    """AdamW's rate (weight decay 0.01), constant."""
    batch: int
    """Pairs per step (``reading``) or questions per step (``cards``)."""
    negatives: int = 4
    """``reading``: sentences that do not answer, drawn per question and epoch."""
    listwise: float = 0.0
    """``cards``: the weight of the softmax over an answered question's sentences."""
    checkpoint_every: int = 500
    """Steps between checkpoints."""


READING = Stage("reading", epochs=1, learning_rate=1e-3, batch=64)
CARDS = Stage("cards", epochs=5, learning_rate=3e-4, batch=4, listwise=1.0)


@dataclass(frozen=True)
class Pairs:
    """Pairs as rows of a :class:`~.states.States`, with their labels."""

    question: np.ndarray
    sentence: np.ndarray
    label: np.ndarray


def texts_of(groups: Sequence[Group]) -> list[str]:
    """Every distinct prefixed text the groups need states for, sorted."""
    questions = {QUESTION_PREFIX + g.question for g in groups}
    sentences = {SENTENCE_PREFIX + s for g in groups for s in g.sentences}
    return sorted(questions | sentences)


def draw(
    groups: Sequence[Group], index: dict[str, int], negatives: int, rng: random.Random
) -> Pairs:
    """One epoch of the reading stage: every answering sentence and some others, shuffled."""
    q: list[int] = []
    s: list[int] = []
    y: list[float] = []
    for group in groups:
        pairs = list(zip(group.sentences, group.answers, strict=True))
        positive = [t for t, a in pairs if a]
        negative = [t for t, a in pairs if not a]
        for text in positive + rng.sample(negative, min(negatives + (not positive), len(negative))):
            q.append(index[QUESTION_PREFIX + group.question])
            s.append(index[SENTENCE_PREFIX + text])
            y.append(float(text in positive))
    order = list(range(len(q)))
    rng.shuffle(order)
    return Pairs(np.array(q)[order], np.array(s)[order], np.array(y, np.float32)[order])


def padded(states: States, rows: Sequence[int] | np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Some texts' token states at :data:`LAYERS`, side by side and padded, with their mask."""
    pieces = [np.concatenate([states.of(layer, int(i)) for layer in LAYERS], -1) for i in rows]
    width = max(len(p) for p in pieces)
    x = np.zeros((len(pieces), width, pieces[0].shape[1]), np.float32)
    mask = np.zeros((len(pieces), width), bool)
    for row, piece in enumerate(pieces):
        x[row, : len(piece)] = piece
        mask[row, : len(piece)] = True
    return torch.from_numpy(x), torch.from_numpy(mask)


def logits(
    network: JudgeNetwork,
    states: States,
    q: Sequence[int] | np.ndarray,
    s: Sequence[int] | np.ndarray,
) -> torch.Tensor:
    """The network's logits for pairs of rows."""
    out: torch.Tensor = network(*padded(states, q), *padded(states, s))
    return out


def score_groups(
    network: JudgeNetwork, states: States, index: dict[str, int], groups: Sequence[Group]
) -> list[np.ndarray]:
    """Every sentence of every group scored, without gradients: one array per group."""
    network.eval()
    out = []
    with torch.no_grad():
        for group in groups:
            q = [index[QUESTION_PREFIX + group.question]] * len(group.sentences)
            s = [index[SENTENCE_PREFIX + t] for t in group.sentences]
            out.append(logits(network, states, q, s).numpy())
    return out


def _reading_steps(
    stage: Stage, groups: Sequence[Group], index: dict[str, int], seed: int
) -> list[tuple[Pairs, slice]]:
    steps = []
    for epoch in range(stage.epochs):
        pairs = draw(groups, index, stage.negatives, random.Random(seed * 1000 + epoch))
        steps += [
            (pairs, slice(at, at + stage.batch)) for at in range(0, len(pairs.label), stage.batch)
        ]
    return steps


def _cards_loss(
    network: JudgeNetwork,
    states: States,
    index: dict[str, int],
    groups: Sequence[Group],
    stage: Stage,
) -> torch.Tensor:
    """The cards stage's loss over a batch of groups.

    Binary cross-entropy on labelled sentences, the listwise term on answered questions, and
    for a question labelled by card only, cross-entropy on its card's soft-maximum sentence.
    """
    q = [index[QUESTION_PREFIX + g.question] for g in groups for _ in g.sentences]
    s = [index[SENTENCE_PREFIX + t] for g in groups for t in g.sentences]
    out = logits(network, states, q, s)
    labelled, labels, extra, at = [], [], torch.zeros(()), 0
    for group in groups:
        mine = out[at : at + len(group.sentences)]
        at += len(group.sentences)
        if group.weak and group.answerable:  # some sentence answers: the card's soft maximum
            soft = torch.logsumexp(mine, 0)[None]
            extra = extra + nn.functional.binary_cross_entropy_with_logits(soft, torch.ones(1))
            continue
        labelled.append(mine)
        labels += [float(a) for a in group.answers]
        if group.answerable and stage.listwise:
            target = torch.tensor([group.answers.index(True)])
            extra = extra + stage.listwise * nn.functional.cross_entropy(mine[None], target)
    loss = extra / len(groups)
    if labelled:
        loss = loss + nn.functional.binary_cross_entropy_with_logits(
            torch.cat(labelled), torch.tensor(labels)
        )
    return loss


def _digest(groups: Sequence[Group]) -> str:
    """What a checkpoint was trained on: the groups' questions, sentences and labels."""
    digest = hashlib.sha256()
    for g in groups:
        digest.update(repr((g.question, g.sentences, g.answers, g.weak)).encode("utf-8"))
    return digest.hexdigest()[:16]


def _resumable(saved: dict[str, Any], settings: dict[str, Any]) -> bool:
    """Whether a checkpoint's training so far is what these settings would do."""
    upto = saved["stage"] + (1 if saved["step"] else 0)
    was = saved["settings"]
    return bool(
        was["seed"] == settings["seed"] and was["stages"][:upto] == settings["stages"][:upto]
    )


def train(
    stages: Sequence[tuple[Stage, Sequence[Group]]],
    states: States,
    index: dict[str, int],
    checkpoint: Path,
    seed: int = 13,
    network: JudgeNetwork | None = None,
) -> JudgeNetwork:
    """Train a judge network (a new one unless given) through the stages.

    Resumes from ``checkpoint`` when the stages it went through (and the one it stopped in)
    had the same settings and groups: a changed last stage starts again after the first.
    """
    torch.manual_seed(seed)
    network = network or JudgeNetwork()
    settings: dict[str, Any] = {
        "seed": seed,
        "stages": [(asdict(st), _digest(g)) for st, g in stages],
    }
    done_stage, done_step, saved = 0, 0, None
    if checkpoint.exists():
        saved = torch.load(checkpoint, weights_only=False)
        if _resumable(saved, settings):
            network.load_state_dict(saved["network"])
            done_stage, done_step = saved["stage"], saved["step"]
            logger.info("resuming %s at stage %d, step %d", checkpoint, done_stage, done_step)
        else:
            saved = None
    for number, (stage, groups) in enumerate(stages):
        if number < done_stage:
            continue
        optimiser = torch.optim.AdamW(
            network.parameters(), lr=stage.learning_rate, weight_decay=0.01
        )
        if saved is not None and number == done_stage and done_step:  # mid-stage: its optimiser
            optimiser.load_state_dict(saved["optimiser"])
        if stage.name == "reading":
            steps: list[object] = list(_reading_steps(stage, groups, index, seed))
        else:
            steps = []
            for epoch in range(stage.epochs):
                order = list(groups)
                random.Random(seed * 1000 + epoch).shuffle(order)
                steps += [order[at : at + stage.batch] for at in range(0, len(order), stage.batch)]
        start = done_step if number == done_stage else 0
        recent: list[float] = []
        for step in tqdm(
            range(start, len(steps)), desc=f"judge: {stage.name}", unit="step", mininterval=30
        ):
            network.train()
            batch = steps[step]
            if isinstance(batch, tuple):
                pairs, rows = batch
                out = logits(network, states, pairs.question[rows], pairs.sentence[rows])
                loss = nn.functional.binary_cross_entropy_with_logits(
                    out, torch.from_numpy(pairs.label[rows])
                )
            else:
                loss = _cards_loss(network, states, index, batch, stage)
            optimiser.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            optimiser.step()
            recent = [*recent[-199:], float(loss.detach())]
            last = step + 1 == len(steps)
            if (step + 1) % stage.checkpoint_every == 0 or last:
                logger.info(
                    "%s step %d/%d loss %.4f", stage.name, step + 1, len(steps), np.mean(recent)
                )
                after = (number + 1, 0) if last else (number, step + 1)
                _save(checkpoint, settings, network, optimiser, *after)
    return network


def _save(
    path: Path,
    settings: dict[str, object],
    network: JudgeNetwork,
    optimiser: torch.optim.Optimizer,
    stage: int,
    step: int,
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    torch.save(
        {
            "settings": settings,
            "network": network.state_dict(),
            "optimiser": optimiser.state_dict(),
            "stage": stage,
            "step": step,
        },
        partial,
    )
    partial.replace(path)
