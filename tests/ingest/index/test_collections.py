from __future__ import annotations

from cardrag.ingest.index.layout import merge_filters


def test_merge_filters() -> None:
    assert merge_filters(None, {}) is None
    assert merge_filters({"a": 1}) == {"a": 1}
    assert merge_filters({"a": 1}, {"b": {"$ne": 2}}) == {"$and": [{"a": 1}, {"b": {"$ne": 2}}]}
    assert merge_filters({"a": 1, "b": 2}) == {"$and": [{"a": 1}, {"b": 2}]}
    assert merge_filters({"$or": [{"a": 1}, {"b": 2}]}, None) == {"$or": [{"a": 1}, {"b": 2}]}
