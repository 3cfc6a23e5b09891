"""The judge as a torch network, for training: compare and aggregate over e5's token states.

e5's layers stay frozen; what trains reads their token states (layers 8, 10 and 12, side by
side: lower layers keep more of the words, the top one more of the meaning) for the question
and for the sentence, and:

1. projects each token to ``width`` dimensions (one projection for both sides);
2. aligns each question token with the sentence: a softmax over its cosines to the sentence's
   tokens, sharpened by a learned temperature, gives the sentence's matching content;
3. compares the two (both, their product, their difference) through a small GELU network;
4. aggregates over the question's tokens: a weighted mean (each token's weight learned from
   its state: the words a sentence must cover count most) and a maximum;
5. reads a logit off that, the weighted best cosine of each question token (late interaction)
   and the cosine of e5's own sentence embeddings.

Cheap to train (a few minutes an epoch on two cores) and to serve (the sentence's side is a
function of the sentence alone). :mod:`cardrag.retrievers.judge.model` runs the same
arithmetic in numpy.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from cardrag.retrievers.judge.encoder import Encoder
from cardrag.retrievers.judge.model import LAYERS, WIDTH, Learned
from cardrag.retrievers.judge.torch_encoder import TorchLayer

HIDDEN = 384
"""e5-small's hidden size."""


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)


class JudgeNetwork(nn.Module):
    """A logit per (question, sentence) from their frozen token states."""

    def __init__(self, width: int = WIDTH, tuned: int = 0, encoder: Encoder | None = None) -> None:
        """An untrained network (the temperature starts at 10, the readout's scales at 10).

        Args:
            width: The width tokens are projected to.
            tuned: e5's top layers trained too (copies of ``encoder``'s), each applied to the
                question and the sentence apart, so a sentence's states still depend on the
                sentence alone; 0 keeps every layer frozen.
            encoder: Where the tuned layers start from (the shipped encoder by default).
        """
        super().__init__()
        layers = (encoder or Encoder.shipped()).layers if tuned else []
        source = encoder or (Encoder.shipped() if tuned else None)
        self.top = nn.ModuleList(
            TorchLayer.from_layer(layer, source.heads, source.eps)  # type: ignore[union-attr]
            for layer in layers[len(layers) - tuned :]
        )
        self.project = nn.Linear(HIDDEN * len(LAYERS), width)
        self.compare = nn.Sequential(
            nn.Linear(4 * width, width),
            nn.GELU(approximate="tanh"),
            nn.Linear(width, width),
            nn.GELU(approximate="tanh"),
        )
        self.importance = nn.Linear(HIDDEN, 1)
        self.temperature = nn.Parameter(torch.tensor(10.0))
        self.late_scale = nn.Parameter(torch.tensor(10.0))
        self.readout = nn.Linear(2 * width + 2, 1)

    def forward(
        self,
        question: torch.Tensor,
        question_mask: torch.Tensor,
        sentence: torch.Tensor,
        sentence_mask: torch.Tensor,
    ) -> torch.Tensor:
        """Logits ``(B,)`` from token states ``(B, L, 3 * 384)`` and their masks ``(B, L)``."""
        question, sentence = self.tune(question, question_mask), self.tune(sentence, sentence_mask)
        q, s = self.project(question), self.project(sentence)
        cosines = nn.functional.normalize(q, dim=-1) @ nn.functional.normalize(s, dim=-1).transpose(
            1, 2
        )
        cosines = cosines.masked_fill(~sentence_mask[:, None, :], -1e4)
        aligned = (cosines * self.temperature).softmax(-1) @ s
        compared = self.compare(torch.cat([q, aligned, q * aligned, (q - aligned).abs()], -1))
        top = question[..., -HIDDEN:]
        weights = self.importance(top).squeeze(-1).masked_fill(~question_mask, -1e4).softmax(-1)
        mean = (weights[..., None] * compared).sum(1)
        peak = compared.masked_fill(~question_mask[..., None], -1e4).max(1).values
        late = (weights * cosines.max(-1).values).sum(-1)
        pooled_q = _masked_mean(top, question_mask)
        pooled_s = _masked_mean(sentence[..., -HIDDEN:], sentence_mask)
        cosine = nn.functional.cosine_similarity(pooled_q, pooled_s, dim=-1)
        features = torch.cat(
            [mean, peak, (late * self.late_scale)[:, None], (cosine * 10)[:, None]], -1
        )
        logits: torch.Tensor = self.readout(features).squeeze(-1)
        return logits

    def tune(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The frozen states with the tuned layers' outputs in place of the frozen ones."""
        if not len(self.top):
            return states
        first = LAYERS[-1] - len(self.top)
        slices = list(torch.split(states, HIDDEN, -1))
        x = slices[LAYERS.index(first)]
        for depth, layer in enumerate(self.top, start=first + 1):
            x = layer(x, mask)
            if depth in LAYERS:
                slices[LAYERS.index(depth)] = x
        return torch.cat(slices, -1)

    def learned(self) -> Learned:
        """The trained weights as the served judge reads them (numpy, ``(in, out)``)."""
        state = {k: v.detach().float().numpy() for k, v in self.state_dict().items()}

        def matrix(name: str) -> np.ndarray:
            return np.ascontiguousarray(state[f"{name}.weight"].T)

        return Learned(
            project=matrix("project"),
            project_bias=state["project.bias"],
            compare_in=matrix("compare.0"),
            compare_in_bias=state["compare.0.bias"],
            compare_out=matrix("compare.2"),
            compare_out_bias=state["compare.2.bias"],
            importance=matrix("importance"),
            importance_bias=state["importance.bias"],
            readout=matrix("readout"),
            readout_bias=state["readout.bias"],
            scalars=np.array([state["temperature"], state["late_scale"]], np.float32),
            top=tuple(layer.to_layer() for layer in self.top),  # type: ignore[operator]
        )
