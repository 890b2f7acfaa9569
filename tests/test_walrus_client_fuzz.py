"""Hypothesis fuzz of the Walrus response parser and client: arbitrary bytes, JSON,
statuses and headers give a result or a WalrusMemError, never anything else."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers_walrus import (
    ALREADY_CERTIFIED_EVENT,
    ALREADY_CERTIFIED_OBJECT,
    BLOB_ID,
    DATA17,
    MARKED_INVALID,
    NEWLY_CREATED,
    PATCH_LIST,
    QUILT_RESULT,
    STORE_ERROR_200,
    FakeClock,
    envelope,
)
from walrus_mem._walrus.responses import (
    ErrorBody,
    Failure,
    QuiltStoreResult,
    StoreResult,
    failure_for_status,
    parse_error_body,
    parse_patch_list,
    parse_quilt_store_response,
    parse_store_response,
    quilt_store_outcome,
    read_outcome,
    store_outcome,
)
from walrus_mem.errors import WalrusMemError
from walrus_mem.walrus import WalrusClient

FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False), st.text(max_size=60),
    st.sampled_from([BLOB_ID, "0x" + "ab" * 32, "", "0x", "RS2"]),
)
json_values = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=20), inner,
                                                               max_size=5),
    max_leaves=25,
)
SPEC_BODIES = [NEWLY_CREATED, ALREADY_CERTIFIED_EVENT, ALREADY_CERTIFIED_OBJECT, MARKED_INVALID,
               STORE_ERROR_200, QUILT_RESULT, PATCH_LIST,
               envelope("NOT_FOUND", 404, "BLOB_NOT_FOUND")]


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated_spec_bodies(draw: st.DrawFn) -> Any:
    """A spec example with a few subtrees replaced, deleted or retyped."""
    body: Any = copy.deepcopy(draw(st.sampled_from(SPEC_BODIES)))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(body) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = body
        for key in path[:-1]:
            parent = parent[key]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(json_values)
    return body


bodies = st.one_of(
    st.binary(max_size=300),
    json_values.map(lambda v: json.dumps(v).encode()),
    mutated_spec_bodies().map(lambda v: json.dumps(v).encode()),
    mutated_spec_bodies().map(lambda v: json.dumps(v).encode()[: len(json.dumps(v)) // 2]),
)
statuses = st.one_of(st.sampled_from([200, 200, 200, 206, 400, 401, 403, 404, 408, 413, 416,
                                      429, 451, 500, 502, 503, 504]),
                     st.integers(100, 599))
headers = st.dictionaries(
    st.sampled_from(["content-length", "retry-after", "content-type", "content-encoding"]),
    st.one_of(st.text(max_size=30), st.integers(0, 500).map(str),
              st.sampled_from(["Wed, 21 Oct 2015 07:28:00 GMT", "text/html", "gzip", "-1"])),
    max_size=4,
)


@FUZZ
@given(body=bodies)
def test_store_parser_raises_only_typed_errors(body: bytes) -> None:
    for parse in (parse_store_response, parse_quilt_store_response, parse_patch_list):
        try:
            result = parse(body)
        except WalrusMemError:
            continue
        assert isinstance(result, StoreResult | QuiltStoreResult | list)


@FUZZ
@given(status=statuses, hdrs=headers, body=bodies)
def test_outcomes_never_raise(status: int, hdrs: dict[str, str], body: bytes) -> None:
    for outcome in (
        store_outcome(status, hdrs, body),
        quilt_store_outcome(status, hdrs, body, ["walrus.jpg", "another_walrus.jpg"]),
        read_outcome(status, hdrs, body, expected_length=3),
    ):
        assert isinstance(outcome, StoreResult | QuiltStoreResult | bytes | Failure)
        if isinstance(outcome, Failure):
            assert isinstance(outcome.error, WalrusMemError)
    if status >= 300:
        for side in ("publisher", "aggregator"):
            failure = failure_for_status(status, hdrs, body, side)
            assert isinstance(failure.error, WalrusMemError)
            if failure.retry_after is not None:
                assert failure.retry_after >= 0


@FUZZ
@given(body=st.binary(max_size=500), hdrs=headers)
def test_error_body_parser_never_raises(body: bytes, hdrs: dict[str, str]) -> None:
    info = parse_error_body(body, hdrs)
    assert isinstance(info, ErrorBody)
    assert len(info.message) <= 300
    assert not any(ord(c) < 32 for c in info.message)


@pytest.fixture(scope="module")
def fuzz_client():
    box: dict[str, httpx.Response] = {}
    clock = FakeClock()

    def handler(request: httpx.Request) -> httpx.Response:
        return box["response"]

    client = WalrusClient("http://pub.test", ["http://a.test", "http://b.test"],
                          transport=httpx.MockTransport(handler), sleep=clock.sleep, clock=clock,
                          rng=random.Random(0), publish_deadline=0.3, read_deadline=0.3)
    yield client, box
    client.close()


@FUZZ
@given(status=statuses, hdrs=headers, body=bodies)
def test_client_end_to_end_raises_only_typed_errors(fuzz_client, status, hdrs, body) -> None:
    client, box = fuzz_client
    hdrs = {k: v for k, v in hdrs.items() if k != "content-encoding"}  # httpx would decode
    try:
        box["response"] = httpx.Response(status, headers=hdrs, content=body)
    except (ValueError, TypeError):  # httpx refuses e.g. non-latin-1 header values
        return
    calls = [
        lambda: client.store_blob(DATA17),
        lambda: client.store_quilt({"walrus.jpg": b"a", "another_walrus.jpg": b"b"}),
        lambda: client.read_blob(BLOB_ID, verify=lambda d: d.startswith(b"{")),
        lambda: client.read_byte_range(BLOB_ID, 0, 3),
        lambda: client.list_quilt_patches(BLOB_ID),
    ]
    for call in calls:
        try:
            call()
        except WalrusMemError:
            pass
