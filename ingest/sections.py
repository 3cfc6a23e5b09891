"""Long Markdown documents: cut at headings into sections, each a parent card of its own.

A handbook chapter is too long to hand the model whole, and its chapters answer different
questions; its sections are the natural parents. A file with ``kind: document`` in its front
matter is cut at every heading of levels 1 to 3 (``#`` to ``###``, outside code fences). Each
section with text becomes a :class:`~cardrag.ingest.cards.Card` that inherits the front
matter (:func:`cardrag.ingest.corpus.split_sections`; this module only reads the text), with

* id ``{document id}-{NN}`` (NN from 01, in order), so citations stay ``[cite:card-...]``;
* title ``{document title}: {heading trail}``, e.g. ``Handbook: Travel / Time zones``;
* ``document_id`` set to the document's id.

Sections are then split into children like any card. A heading with no text of its own
before the next heading only contributes to the trail of the sections under it.
"""

from __future__ import annotations

import re

HEADING = re.compile(r"^(#{1,3})[ \t]+(.+?)[ \t]*#*[ \t]*$")
"""An ATX heading of level 1 to 3; the text without closing hashes."""
FENCE = re.compile(r"^\s*(```|~~~)")


def sections_of(text: str) -> list[tuple[list[str], str]]:
    r"""``(heading trail, section text)`` for each part of a Markdown text that has text.

    Example:
        >>> sections_of("# A\n\nOne.\n\n## B\n\nTwo.\n\n# C\n\nThree.")
        [(['A'], 'One.'), (['A', 'B'], 'Two.'), (['C'], 'Three.')]
    """
    out: list[tuple[list[str], str]] = []
    trail: list[tuple[int, str]] = []
    lines: list[str] = []
    fenced = False

    def flush() -> None:
        body = "\n".join(lines).strip()
        if body:
            out.append(([h for _, h in trail], body))
        lines.clear()

    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        heading = None if fenced else HEADING.match(line)
        if heading is None:
            lines.append(line)
            continue
        flush()
        level = len(heading.group(1))
        trail = [(lv, h) for lv, h in trail if lv < level] + [(level, heading.group(2))]
    flush()
    return out
