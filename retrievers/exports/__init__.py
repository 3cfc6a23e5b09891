"""cardrag: parent-document ("small-to-big") retrieval for LangChain, with scores.

The names a user imports from ``cardrag`` itself::

    from cardrag import ScoredParentDocumentRetriever

(This file is the ``cardrag`` package's ``__init__``: ``pyproject.toml`` maps the package to
this folder, so the repository keeps its four top-level folders.)
"""

from cardrag.ingest.splitter import CardSplitter
from cardrag.retrievers.judge.cross_encoder import AnswerJudge
from cardrag.retrievers.parent import ScoredParentDocumentRetriever

__all__ = ["AnswerJudge", "CardSplitter", "ScoredParentDocumentRetriever"]
