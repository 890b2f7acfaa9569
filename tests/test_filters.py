"""mem0-style filters: every operator, logic, record fields vs metadata, malformed input."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from walrus_mem._recall.filters import compile_filters
from walrus_mem.errors import InvalidInput

JAN = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
FEB = datetime(2026, 2, 1, tzinfo=UTC).timestamp()


def rec(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "a" * 32, "text": "I like Green Tea", "category": "preference",
        "importance": 0.8, "created_at": FEB, "updated_at": FEB, "expires_at": None,
        "version": 1, "status": "published", "blob_id": "b", "quilt_patch_id": None,
        "end_epoch": 5,
        "metadata": {"source": "chat", "n": 3, "tags": ["x", "Y"], "flag": True,
                     "nested": {"deep": "v"}},
    }
    base.update(kw)
    return base


def match(filters: dict[str, Any], record: dict[str, Any] | None = None) -> bool:
    pred = compile_filters(filters)
    assert pred is not None
    return pred(record or rec())


def test_none_and_empty_match_everything() -> None:
    assert compile_filters(None) is None
    assert compile_filters({}) is None


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"category": "preference"}, True),
        ({"category": "identity"}, False),
        ({"source": "chat"}, True),  # bare key = metadata key
        ({"metadata.source": {"eq": "chat"}}, True),
        ({"metadata.source": {"ne": "chat"}}, False),
        ({"metadata.nested.deep": "v"}, True),
        ({"n": {"gt": 2}}, True),
        ({"n": {"gt": 3}}, False),
        ({"n": {"gte": 3}}, True),
        ({"n": {"lt": 3}}, False),
        ({"n": {"lte": 3}}, True),
        ({"n": {"gt": "2"}}, False),  # number vs string: false, not an error
        ({"source": {"in": ["chat", "email"]}}, True),
        ({"source": {"nin": ["chat", "email"]}}, False),
        ({"tags": {"in": ["x"]}}, True),  # list field: any element
        ({"text": {"contains": "Green"}}, True),
        ({"text": {"contains": "green"}}, False),
        ({"text": {"icontains": "GREEN tea"}}, True),
        ({"tags": {"contains": "x"}}, True),
        ({"tags": {"icontains": "y"}}, True),
        ({"importance": {"gte": 0.5, "lt": 0.9}}, True),
        ({"importance": {"gte": 0.9}}, False),
        ({"flag": True}, True),
        ({"flag": 1}, False),  # bool is not a number
        ({"$and": [{"source": "chat"}]}, True),
        ({"source": {"$eq": "chat"}}, True),
        ({"tags": "*"}, True),
        ({"missing": "*"}, False),
    ],
)
def test_operators(filters: dict[str, Any], expected: bool) -> None:
    assert match(filters) is expected


def test_missing_field_semantics() -> None:
    assert match({"nope": {"eq": 1}}) is False
    assert match({"nope": {"ne": 1}}) is True
    assert match({"nope": {"nin": [1]}}) is True
    assert match({"nope": {"in": [1]}}) is False
    assert match({"nope": {"gt": 0}}) is False


def test_created_at_ranges_accept_iso_dates_datetimes_and_numbers() -> None:
    assert match({"created_at": {"gte": "2026-01-15"}})
    assert not match({"created_at": {"lt": "2026-01-15"}})
    assert match({"created_at": {"gt": datetime(2026, 1, 1, tzinfo=UTC)}})
    assert match({"created_at": {"gte": JAN, "lte": FEB}})
    assert match({"created_at": {"eq": "2026-02-01T00:00:00Z"}})


def test_logic_and_or_not() -> None:
    assert match({"AND": [{"category": "preference"}, {"source": "chat"}]})
    assert not match({"AND": [{"category": "preference"}, {"source": "email"}]})
    assert match({"OR": [{"category": "identity"}, {"source": "chat"}]})
    assert not match({"OR": [{"category": "identity"}, {"source": "email"}]})
    assert match({"NOT": {"category": "identity"}})
    assert not match({"NOT": [{"category": "identity"}, {"source": "chat"}]})  # none may match
    assert match({"category": "preference", "OR": [{"n": 1}, {"n": 3}]})
    nested = {"OR": [{"AND": [{"n": {"gt": 10}}]}, {"NOT": {"source": "email"}}]}
    assert match(nested)


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"n": {"regex": "x"}}, "unknown filter operator 'regex'"),
        ({"n": {"in": "abc"}}, "needs a list"),
        ({"text": {"icontains": 3}}, "needs a string"),
        ({"n": {"gt": [1]}}, "number or a string"),
        ({"AND": "x"}, "non-empty list"),
        ({"OR": []}, "non-empty list"),
        ({"AND": [1]}, "must be a mapping"),
        ({"n": {}}, "empty operator object"),
        ({"created_at": {"gte": "yesterday"}}, "ISO-8601"),
        ({"metadata..x": 1}, "empty path segment"),
    ],
)
def test_malformed_filters_raise_invalid_input(filters: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        compile_filters(filters)


def test_non_mapping_filters_rejected() -> None:
    with pytest.raises(InvalidInput, match="must be a mapping"):
        compile_filters(["category"])  # type: ignore[arg-type]
