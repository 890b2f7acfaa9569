"""respx unit tests of the Walrus client: response shapes, error mapping, retries, failover.

No network and no real sleeping: ``time.sleep`` is booby-trapped, and every
client gets a :class:`FakeClock` for both its clock and its sleep.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import re
import time
from typing import Any

import httpx
import pydantic
import pytest
import respx

from tests.helpers_walrus import (
    AGGREGATORS,
    ALREADY_CERTIFIED_EVENT,
    ALREADY_CERTIFIED_OBJECT,
    BLOB_ID,
    BLOB_NOT_FOUND,
    DATA17,
    MARKED_INVALID,
    NEWLY_CREATED,
    NEWLY_CREATED_TEXT,
    OBJECT_ID,
    PATCH_A,
    PATCH_B,
    PATCH_LIST,
    PUBLISHER,
    QUILT_ID,
    QUILT_RESULT,
    QUILT_RESULT_TEXT,
    STORE_ERROR_200,
    FakeClock,
    MaxRandom,
    envelope,
    newly_created,
)
from walrus_mem._walrus.retry import RetryPolicy
from walrus_mem.errors import (
    AggregatorUnavailable,
    AuthenticationFailed,
    BadRequest,
    BlobNotFound,
    BodyTooLarge,
    ForbiddenBlob,
    InsufficientConfirmations,
    InvalidInput,
    InvalidResponse,
    PayloadTooLarge,
    PublisherUnavailable,
    RateLimited,
    StorageError,
    StoreFailed,
    VerificationFailed,
    WalrusMemError,
)
from walrus_mem.walrus import MAX_BLOB_BODY, WalrusClient

PUT_BLOBS = f"{PUBLISHER}/v1/blobs"
PUT_QUILTS = f"{PUBLISHER}/v1/quilts"


@pytest.fixture(autouse=True)
def no_real_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    def trap(seconds: float) -> None:
        raise AssertionError(f"real time.sleep({seconds}) called")

    monkeypatch.setattr(time, "sleep", trap)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def mock():
    with respx.mock(assert_all_called=False) as router:
        yield router


def make(clock: FakeClock, aggregators: list[str] | None = None, **kw: Any) -> WalrusClient:
    kw.setdefault("rng", random.Random(7))
    return WalrusClient(
        kw.pop("publisher", PUBLISHER),
        AGGREGATORS if aggregators is None else aggregators,
        sleep=clock.sleep,
        clock=clock,
        **kw,
    )


@pytest.fixture
def client(clock: FakeClock):
    with make(clock) as c:
        yield c


def ok(data: Any) -> httpx.Response:
    return httpx.Response(200, json=data)


def blob_url(agg: str, blob_id: str = BLOB_ID) -> str:
    return f"{agg}/v1/blobs/{blob_id}"


# -- response shapes -----------------------------------------------------------


def test_newly_created_exact_spec_example(mock, client) -> None:
    route = mock.put(PUT_BLOBS).mock(return_value=httpx.Response(
        200, content=NEWLY_CREATED_TEXT.encode(), headers={"content-type": "application/json"}))
    result = client.store_blob(b"seventeen bytes!!")
    assert route.call_count == 1
    assert result.blob_id == BLOB_ID
    assert result.object_id == "0xe91eee8c5b6f35b9a250cfc29e30f0d9e5463a21fd8d1ddb0fc22d44db4eac50"
    assert result.newly_created is True
    assert result.end_epoch == 35
    assert result.cost == 132300
    assert result.deletable is False
    assert result.encoded_length == 66034000
    assert result.registered_epoch == 34
    assert result.certified_epoch == 34
    assert result.size == 17
    assert result.shared_object_id is None
    assert result.resource_operation == "registerFromScratch"
    assert result.raw == NEWLY_CREATED
    with pytest.raises(pydantic.ValidationError):  # frozen
        result.blob_id = "x"


def test_newly_created_null_certified_epoch_and_shared_object(mock, client) -> None:
    body = json.loads(NEWLY_CREATED_TEXT)
    body["newlyCreated"]["blobObject"]["certifiedEpoch"] = None
    body["newlyCreated"]["sharedBlobObject"] = "0x" + "12" * 32
    mock.put(PUT_BLOBS).mock(return_value=ok(body))
    result = client.store_blob(DATA17)
    assert result.certified_epoch is None
    assert result.shared_object_id == "0x" + "12" * 32


@pytest.mark.parametrize("op, inner", [
    ("reuseStorage", {"encodedLength": 66034000}),
    ("reuseRegistration", {"encodedLength": 66034000}),
    ("reuseAndExtend", {"encodedLength": 66034000, "epochsExtended": 3}),
    ("reuseAndExtendNonCertified", {"encodedLength": 66034000, "epochsExtended": 2}),
])
def test_every_resource_operation(mock, client, op: str, inner: dict[str, int]) -> None:
    body = json.loads(NEWLY_CREATED_TEXT)
    body["newlyCreated"]["resourceOperation"] = {op: inner}
    mock.put(PUT_BLOBS).mock(return_value=ok(body))
    result = client.store_blob(DATA17)
    assert result.resource_operation == op
    assert result.encoded_length == 66034000


def test_already_certified_with_event(mock, client) -> None:
    mock.put(PUT_BLOBS).mock(return_value=ok(ALREADY_CERTIFIED_EVENT))
    result = client.store_blob(DATA17)
    assert result.newly_created is False
    assert result.object_id is None
    assert result.blob_id == BLOB_ID
    assert result.end_epoch == 35
    assert result.cost is None
    assert result.tx_digest == "4XQHFa9S324wTzYHF3vsBSwpUZuLpmwTHYMFv9nsttSs"
    assert result.event_seq == "0"
    assert result.resource_operation == "alreadyCertified"


def test_already_certified_with_object(mock, client) -> None:
    mock.put(PUT_BLOBS).mock(return_value=ok(ALREADY_CERTIFIED_OBJECT))
    result = client.store_blob(DATA17)
    assert result.newly_created is False
    assert result.object_id == OBJECT_ID
    assert result.tx_digest is None


def test_marked_invalid_is_store_failed_and_not_retried(mock, client) -> None:
    route = mock.put(PUT_BLOBS).mock(return_value=ok(MARKED_INVALID))
    with pytest.raises(StoreFailed) as info:
        client.store_blob(DATA17)
    assert route.call_count == 1
    assert info.value.reason == "MARKED_INVALID"


def test_200_with_error_variant_is_retried_then_succeeds(mock, client, clock) -> None:
    route = mock.put(PUT_BLOBS).mock(side_effect=[ok(STORE_ERROR_200), ok(NEWLY_CREATED)])
    result = client.store_blob(DATA17)
    assert result.blob_id == BLOB_ID
    assert route.call_count == 2
    assert client.stats.retry_reasons["store_error"] == 1
    assert len(clock.sleeps) == 1


def test_200_with_error_variant_gives_store_failed_at_deadline(mock, client, clock) -> None:
    mock.put(PUT_BLOBS).mock(return_value=ok(STORE_ERROR_200))
    with pytest.raises(StoreFailed) as info:
        client.store_blob(DATA17, deadline=3.0)
    assert "register" in str(info.value) and "insufficient WAL" in str(info.value)
    assert info.value.reason == "register"
    assert clock.now - 1000.0 <= 3.0
    assert client.stats.deadline_exhaustions == 1


def test_status_envelope_in_200_is_not_the_store_error_variant(mock, client) -> None:
    """{"error":{status,code,...}} is the AIP-193 envelope: map it by its code."""
    route = mock.put(PUT_BLOBS).mock(return_value=ok(
        envelope("INVALID_ARGUMENT", 400, "MALFORMED_REQUEST")))
    with pytest.raises(BadRequest) as info:
        client.store_blob(DATA17)
    assert route.call_count == 1
    assert info.value.status_code == 400 and info.value.reason == "MALFORMED_REQUEST"


def test_quilt_exact_spec_example(mock, client) -> None:
    route = mock.put(PUT_QUILTS).mock(return_value=httpx.Response(
        200, content=QUILT_RESULT_TEXT.encode()))
    result = client.store_quilt({"walrus.jpg": b"a", "another_walrus.jpg": b"b"})
    assert route.call_count == 1
    assert result.quilt_id == QUILT_ID
    assert result.blob.certified_epoch is None
    assert result.blob.encoded_length == 72040000
    assert result.blob.cost == 12075000
    assert result.patches == {"another_walrus.jpg": PATCH_A, "walrus.jpg": PATCH_B}
    assert result.ranges == {}


def test_quilt_with_ranges_and_the_multipart_request(mock, client) -> None:
    body = json.loads(QUILT_RESULT_TEXT)
    body["storedQuiltBlobs"][0]["range"] = [1, 2]
    body["storedQuiltBlobs"][1]["range"] = [2, 3]
    route = mock.put(PUT_QUILTS).mock(return_value=ok(body))
    result = client.store_quilt(
        {"walrus.jpg": b"AAA", "another_walrus.jpg": b"BBB"},
        metadata={"walrus.jpg": {"kind": "fact"}}, epochs=3,
    )
    assert result.ranges == {"another_walrus.jpg": (1, 2), "walrus.jpg": (2, 3)}
    request = route.calls.last.request
    assert request.url.params["epochs"] == "3"
    assert request.headers["content-type"].startswith("multipart/form-data; boundary=")
    payload = request.content
    assert b'name="walrus.jpg"' in payload and b'name="another_walrus.jpg"' in payload
    assert b'name="_metadata"' in payload
    assert b'[{"identifier":"walrus.jpg","tags":{"kind":"fact"}}]' in payload


def test_quilt_failed_blob_store_result(mock, client) -> None:
    mock.put(PUT_QUILTS).mock(return_value=ok(
        {"blobStoreResult": MARKED_INVALID, "storedQuiltBlobs": []}))
    with pytest.raises(StoreFailed):
        client.store_quilt({"walrus.jpg": b"a", "another_walrus.jpg": b"b"})


def test_quilt_answer_naming_other_identifiers_is_invalid(mock, client) -> None:
    mock.put(PUT_QUILTS).mock(return_value=ok(QUILT_RESULT))
    with pytest.raises(InvalidResponse):
        client.store_quilt({"walrus.jpg": b"a"}, deadline=1.0)


def test_a_store_answer_for_other_bytes_is_not_accepted(mock, clock) -> None:
    """The answer must describe what was sent: a size that is not the body's is a lie (or a
    mix-up); the next publisher is asked, and with none honest the store fails typed."""
    second = "http://publisher-2.test"
    liar = mock.put(PUT_BLOBS).mock(return_value=ok(NEWLY_CREATED))  # says 17 bytes
    honest = mock.put(f"{second}/v1/blobs").mock(return_value=ok(newly_created(5)))
    with make(clock, publisher=[PUBLISHER, second]) as client:
        assert client.store_blob(b"12345").size == 5
        assert liar.call_count == 1 and honest.call_count == 1
    with make(clock) as alone, pytest.raises(InvalidResponse) as info:
        alone.store_blob(b"12345", deadline=1.0)
    assert info.value.reason == "STORE_MISMATCH"


def test_a_quilt_answer_whose_patches_are_not_of_the_quilt_is_not_accepted(mock, clock) -> None:
    foreign = "A" * 43 + PATCH_A[43:]  # a patch id of another blob
    text = QUILT_RESULT_TEXT.replace(PATCH_A, foreign)
    mock.put(PUT_QUILTS).mock(return_value=httpx.Response(200, content=text.encode()))
    with make(clock) as client, pytest.raises(InvalidResponse) as info:
        client.store_quilt({"walrus.jpg": b"a", "another_walrus.jpg": b"b"}, deadline=1.0)
    assert info.value.reason == "STORE_MISMATCH"


@pytest.mark.parametrize("files, match", [
    ({}, "at least one"),
    ({"_metadata": b"x"}, "reserved"),
    ({"trailing ": b"x"}, "whitespace"),
    ({"ctl\x07": b"x"}, "control"),
    ({'quo"te': b"x"}, "must not contain"),
    ({f"f{i}": b"x" for i in range(667)}, "at most 666"),
    ({"ok": "not bytes"}, "must be bytes"),
])
def test_quilt_input_checked_before_any_request(mock, client, files, match) -> None:
    route = mock.put(PUT_QUILTS)
    with pytest.raises(InvalidInput, match=match):
        client.store_quilt(files)
    assert route.call_count == 0


def test_quilt_metadata_for_unknown_identifier(mock, client) -> None:
    with pytest.raises(InvalidInput, match="unknown quilt identifier"):
        client.store_quilt({"a": b"x"}, metadata={"b": {"k": "v"}})


def test_patch_list_snake_case(mock, client) -> None:
    route = mock.get(f"{AGGREGATORS[0]}/v1/quilts/{QUILT_ID}/patches").mock(
        return_value=ok(PATCH_LIST + [
            {"identifier": "b", "patch_id": PATCH_B, "tags": {"n": 3, "s": "x"}}]))
    patches = client.list_quilt_patches(QUILT_ID)
    assert route.call_count == 1
    assert [p.identifier for p in patches] == ["walrus-38.jpeg", "b"]
    assert patches[0].patch_id == PATCH_LIST[0]["patch_id"] and patches[0].tags == {}
    assert patches[1].tags == {"n": "3", "s": "x"}


def test_patch_list_in_camel_case_is_invalid(mock, client) -> None:
    for agg in AGGREGATORS:
        mock.get(f"{agg}/v1/quilts/{QUILT_ID}/patches").mock(
            return_value=ok([{"identifier": "a", "patchId": PATCH_A}]))
    with pytest.raises(InvalidResponse):
        client.list_quilt_patches(QUILT_ID, deadline=0.5)


@pytest.mark.parametrize("body", [
    b"", b"not json", b"<html><body>oops</body></html>", b"[]", b"null", b'{"newlyCreated":{}}',
    b'{"newlyCreated":' + json.dumps(NEWLY_CREATED["newlyCreated"] | {"cost": "lots"}).encode()
    + b"}",
    b'{"surprise":{}}', b"\xff\xfe\x00garbage", json.dumps(
        {"alreadyCertified": {"blobId": "not-a-blob-id", "object": OBJECT_ID, "endEpoch": 1}}
    ).encode(),
    json.dumps({"alreadyCertified": {"blobId": BLOB_ID, "endEpoch": 1}}).encode(),
])
def test_unparseable_store_bodies_are_invalid_response(mock, client, body: bytes) -> None:
    mock.put(PUT_BLOBS).mock(return_value=httpx.Response(200, content=body))
    with pytest.raises(InvalidResponse) as info:
        client.store_blob(DATA17, deadline=1.0)
    assert client.stats.faults["invalid_response"] >= 2  # retried: storing again is safe
    assert not isinstance(info.value.__cause__, AssertionError)


# -- error mapping ---------------------------------------------------------------

BODY_FORMS = ["json", "text", "html", "invalid_json", "empty"]


def error_response(status: int, form: str, reason: str, status_name: str,
                   domain: str = "daemon.walrus.space", headers: dict[str, str] | None = None,
                   ) -> httpx.Response:
    if form == "json":
        return httpx.Response(status, json=envelope(status_name, status, reason, domain=domain),
                              headers=headers)
    content = {
        "text": b"Failed to buffer the request body: length limit exceeded",
        "html": b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head></html>",
        "invalid_json": b'{"error": {"status": ',
        "empty": b"",
    }[form]
    ctype = "text/html" if form == "html" else "text/plain"
    return httpx.Response(status, content=content,
                          headers={"content-type": ctype, **(headers or {})})


FINAL_PUBLISHER = [
    (400, "MALFORMED_REQUEST", "INVALID_ARGUMENT", BadRequest),
    (401, "INVALID_SIGNATURE", "UNAUTHENTICATED", AuthenticationFailed),
    (403, "PERMISSION_DENIED", "PERMISSION_DENIED", BadRequest),
    (404, "NOT_FOUND", "NOT_FOUND", PublisherUnavailable),
    (413, "LENGTH_LIMIT", "SIZE_EXCEEDED", BodyTooLarge),
    (451, "FORBIDDEN_BLOB", "UNAVAILABLE_FOR_LEGAL_REASONS", ForbiddenBlob),
    (405, "METHOD", "INVALID_ARGUMENT", BadRequest),
]


@pytest.mark.parametrize("form", BODY_FORMS)
@pytest.mark.parametrize("status, reason, status_name, exc_type", FINAL_PUBLISHER)
def test_publisher_4xx_is_final(mock, client, clock, form, status, reason, status_name,
                                exc_type) -> None:
    if status == 401 and form != "json":
        exc_type = AuthenticationFailed
    route = mock.put(PUT_BLOBS).mock(
        return_value=error_response(status, form, reason, status_name))
    with pytest.raises(exc_type) as info:
        client.store_blob(DATA17)
    assert route.call_count == 1, "a 4xx that cannot succeed must not be retried"
    assert clock.sleeps == []
    err = info.value
    assert err.status_code == status
    assert err.reason == (reason if form == "json" else None)
    assert isinstance(err.__cause__, httpx.HTTPStatusError)
    assert err.__cause__.response.status_code == status
    if form == "text":
        assert "length limit exceeded" in str(err)
    if form == "html":
        assert "502 Bad Gateway" in str(err) and "<" not in str(err)


FINAL_AGGREGATOR = [
    (400, "INVALID_CONSISTENCY_CHECK", "INVALID_ARGUMENT", BadRequest),
    (416, "INVALID_BYTE_RANGE", "RANGE_NOT_SATISFIABLE", BadRequest),
]
# What one operator decides (its --max-blob-size, its blocklist): another may serve the blob.
PER_OPERATOR = [
    (403, "BLOB_TOO_LARGE", "SIZE_EXCEEDED", BodyTooLarge),
    (451, "FORBIDDEN_BLOB", "UNAVAILABLE_FOR_LEGAL_REASONS", ForbiddenBlob),
]


@pytest.mark.parametrize("form", BODY_FORMS)
@pytest.mark.parametrize("status, reason, status_name, exc_type", FINAL_AGGREGATOR)
def test_aggregator_4xx_is_final_without_failover(mock, client, clock, form, status, reason,
                                                  status_name, exc_type) -> None:
    first = mock.get(blob_url(AGGREGATORS[0])).mock(
        return_value=error_response(status, form, reason, status_name))
    second = mock.get(blob_url(AGGREGATORS[1])).mock(return_value=httpx.Response(200))
    with pytest.raises(exc_type) as info:
        client.read_blob(BLOB_ID)
    assert first.call_count == 1 and second.call_count == 0
    assert info.value.status_code == status
    assert clock.sleeps == []


@pytest.mark.parametrize("status, reason, status_name, exc_type", PER_OPERATOR)
def test_per_operator_refusal_fails_over(mock, client, clock, status, reason, status_name,
                                         exc_type) -> None:
    first = mock.get(blob_url(AGGREGATORS[0])).mock(
        return_value=error_response(status, "json", reason, status_name))
    second = mock.get(blob_url(AGGREGATORS[1])).mock(return_value=httpx.Response(200,
                                                                                 content=b"ok"))
    assert client.read_blob(BLOB_ID) == b"ok"
    assert first.call_count == 1 and second.call_count == 1
    assert clock.sleeps == []


@pytest.mark.parametrize("status, reason, status_name, exc_type", PER_OPERATOR)
def test_per_operator_refusal_everywhere_is_final(mock, client, clock, status, reason,
                                                  status_name, exc_type) -> None:
    routes = [mock.get(blob_url(a)).mock(return_value=error_response(
        status, "json", reason, status_name)) for a in AGGREGATORS]
    with pytest.raises(exc_type) as info:
        client.read_blob(BLOB_ID)
    assert [r.call_count for r in routes] == [1, 1, 1]  # each asked once, no backoff
    assert info.value.status_code == status
    assert clock.sleeps == []


@pytest.mark.parametrize("form", BODY_FORMS)
def test_404_everywhere_is_blob_not_found(mock, client, clock, form) -> None:
    routes = [mock.get(blob_url(a)).mock(return_value=error_response(
        404, form, "BLOB_NOT_FOUND", "NOT_FOUND")) for a in AGGREGATORS]
    with pytest.raises(BlobNotFound) as info:
        client.read_blob(BLOB_ID)
    assert isinstance(info.value, LookupError)
    assert [r.call_count for r in routes] == [1, 1, 1]  # each asked once, no backoff
    assert clock.sleeps == []
    assert info.value.status_code == 404


def test_quilt_patch_not_found_reason(mock, client) -> None:
    for agg in AGGREGATORS:
        mock.get(f"{agg}/v1/blobs/by-quilt-patch-id/{PATCH_A}").mock(return_value=httpx.Response(
            404, json=envelope("NOT_FOUND", 404, "QUILT_PATCH_NOT_FOUND")))
    with pytest.raises(BlobNotFound) as info:
        client.read_quilt_patch(PATCH_A)
    assert info.value.reason == "QUILT_PATCH_NOT_FOUND"


RETRYABLE_PUBLISHER = [
    (429, "RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED", RateLimited),
    (500, "INTERNAL_ERROR", "INTERNAL", PublisherUnavailable),
    (502, "BAD_GATEWAY", "UNAVAILABLE", PublisherUnavailable),
    (503, "BLOB_UNAVAILABLE", "UNAVAILABLE", PublisherUnavailable),
    (504, "INSUFFICIENT_CONFIRMATIONS", "DEADLINE_EXCEEDED", InsufficientConfirmations),
]


@pytest.mark.parametrize("form", BODY_FORMS)
@pytest.mark.parametrize("status, reason, status_name, exc_type", RETRYABLE_PUBLISHER)
def test_publisher_retryable_errors_until_deadline(mock, clock, form, status, reason,
                                                   status_name, exc_type) -> None:
    if status == 504 and form != "json":
        exc_type = PublisherUnavailable
    route = mock.put(PUT_BLOBS).mock(
        return_value=error_response(status, form, reason, status_name))
    with make(clock, publish_deadline=5.0) as client, pytest.raises(exc_type) as info:
        client.store_blob(DATA17)
    assert route.call_count >= 3
    assert route.call_count == len(clock.sleeps) + 1
    assert clock.now - 1000.0 <= 5.0, "never sleeps past the deadline"
    assert client.stats.retries == len(clock.sleeps)
    assert client.stats.retry_reasons[f"http_{status}"] == len(clock.sleeps)
    assert client.stats.deadline_exhaustions == 1
    assert info.value.status_code == status
    assert any("gave up after" in n for n in getattr(info.value, "__notes__", []))


def test_retryable_then_success(mock, client, clock) -> None:
    route = mock.put(PUT_BLOBS).mock(side_effect=[
        httpx.Response(503, json=envelope("UNAVAILABLE", 503, "BLOB_UNAVAILABLE")),
        httpx.Response(500, text="oops"),
        httpx.Response(502, text="<html><title>Bad gateway</title></html>"),
        httpx.Response(504, json=envelope("DEADLINE_EXCEEDED", 504, "INSUFFICIENT_CONFIRMATIONS")),
        ok(NEWLY_CREATED),
    ])
    assert client.store_blob(DATA17).blob_id == BLOB_ID
    assert route.call_count == 5
    assert client.stats.retries == 4
    assert dict(client.stats.faults) == {"http_503": 1, "http_500": 1, "http_502": 1,
                                         "http_504": 1}


@pytest.mark.parametrize("reason, status, status_name", [
    ("TOKEN_ALREADY_USED", 429, "RESOURCE_EXHAUSTED"),
    ("EXPIRED_SIGNATURE", 504, "DEADLINE_EXCEEDED"),
    ("INVALID_EPOCHS", 400, "FAILED_PRECONDITION"),
])
def test_auth_failures_are_not_retried(mock, clock, reason, status, status_name) -> None:
    route = mock.put(PUT_BLOBS).mock(return_value=httpx.Response(status, json=envelope(
        status_name, status, reason, domain="auth.publisher.walrus.space")))
    with make(clock, token="jwt") as client, pytest.raises(AuthenticationFailed) as info:
        client.store_blob(DATA17)
    assert route.call_count == 1
    assert info.value.reason == reason


# -- backoff and Retry-After ---------------------------------------------------------


def test_backoff_is_exponential_full_jitter(mock, clock) -> None:
    policy = RetryPolicy(base_delay=0.1, max_delay=1.0)
    mock.put(PUT_BLOBS).mock(side_effect=[httpx.Response(503)] * 6 + [ok(NEWLY_CREATED)])
    with make(clock, rng=MaxRandom(), retry=policy) as client:
        client.store_blob(DATA17)
    assert clock.sleeps == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])


def test_jitter_stays_under_the_ceiling(mock, clock) -> None:
    policy = RetryPolicy(base_delay=0.1, max_delay=1.0)
    mock.put(PUT_BLOBS).mock(side_effect=[httpx.Response(503)] * 8 + [ok(NEWLY_CREATED)])
    with make(clock, rng=random.Random(1), retry=policy, publish_deadline=60) as client:
        client.store_blob(DATA17)
    ceilings = [min(1.0, 0.1 * 2**n) for n in range(8)]
    assert all(0 <= s <= c for s, c in zip(clock.sleeps, ceilings, strict=True))
    assert len(set(clock.sleeps)) == 8  # jittered, not constant


def test_retry_after_seconds_is_honoured(mock, client, clock) -> None:
    route = mock.put(PUT_BLOBS).mock(side_effect=[
        httpx.Response(429, text="the publisher is receiving too many requests; please try "
                       "again later", headers={"Retry-After": "3"}),
        ok(NEWLY_CREATED),
    ])
    client.store_blob(DATA17)
    assert route.call_count == 2
    assert clock.sleeps[0] == pytest.approx(3.0)
    assert client.stats.retry_reasons["http_429"] == 1


def test_retry_after_http_date_is_honoured(mock, client, clock, monkeypatch) -> None:
    # A fixed wall clock: the date is exactly 4 s ahead when the client reads it,
    # however long the run stalls between writing the header and parsing it.
    now = 1_760_000_000.0
    monkeypatch.setattr(time, "time", lambda: now)
    when = email.utils.formatdate(now + 4, usegmt=True)
    mock.put(PUT_BLOBS).mock(side_effect=[
        httpx.Response(503, headers={"Retry-After": when}), ok(NEWLY_CREATED)])
    client.store_blob(DATA17)
    assert clock.sleeps == [pytest.approx(4.0)]


def test_retry_after_past_the_deadline_fails_now(mock, clock) -> None:
    route = mock.put(PUT_BLOBS).mock(return_value=httpx.Response(
        429, text="slow down", headers={"Retry-After": "120"}))
    with make(clock, publish_deadline=10) as client, pytest.raises(RateLimited) as info:
        client.store_blob(DATA17)
    assert route.call_count == 1
    assert clock.sleeps == []
    assert info.value.retry_after == 120
    assert info.value.status_code == 429
    assert client.stats.deadline_exhaustions == 1


def test_rate_limited_at_deadline_keeps_retry_after(mock, clock) -> None:
    mock.put(PUT_BLOBS).mock(return_value=httpx.Response(
        429, json=envelope("RESOURCE_EXHAUSTED", 429, "RESOURCE_EXHAUSTED"),
        headers={"Retry-After": "1"}))
    with make(clock, publish_deadline=4) as client, pytest.raises(RateLimited) as info:
        client.store_blob(DATA17)
    assert info.value.retry_after == 1.0
    assert info.value.reason == "RESOURCE_EXHAUSTED"
    assert all(s >= 1.0 for s in clock.sleeps)


def test_per_call_deadline_overrides_default(mock, clock) -> None:
    mock.put(PUT_BLOBS).mock(return_value=httpx.Response(503))
    with make(clock, publish_deadline=100) as client, pytest.raises(PublisherUnavailable):
        client.store_blob(DATA17, deadline=2.0)
    assert clock.now - 1000.0 <= 2.0


def test_request_timeout_is_clipped_to_the_deadline(mock, clock) -> None:
    seen: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["timeout"]["read"])
        clock.now += 1.5  # the request itself takes time
        return httpx.Response(503)

    mock.put(PUT_BLOBS).mock(side_effect=handler)
    with make(clock, timeout=10, publish_deadline=4, rng=MaxRandom(),
              retry=RetryPolicy(base_delay=0.1)) as client, pytest.raises(PublisherUnavailable):
        client.store_blob(DATA17)
    assert seen[0] == 4.0
    assert all(t <= 4.0 for t in seen) and seen[-1] < 4.0


# -- transport errors -----------------------------------------------------------------


@pytest.mark.parametrize("exc", [
    httpx.ReadError, httpx.RemoteProtocolError, httpx.ReadTimeout, httpx.WriteError,
    httpx.PoolTimeout,
])
def test_transport_errors_are_retried(mock, client, exc) -> None:
    route = mock.put(PUT_BLOBS).mock(side_effect=[exc, exc, ok(NEWLY_CREATED)])
    assert client.store_blob(DATA17).blob_id == BLOB_ID
    assert route.call_count == 3
    assert client.stats.retry_reasons[f"transport_{exc.__name__}"] == 2


def test_refused_connection_fails_fast(mock, clock) -> None:
    route = mock.put(PUT_BLOBS).mock(side_effect=httpx.ConnectError("refused"))
    with make(clock, publish_deadline=30) as client, pytest.raises(PublisherUnavailable) as info:
        client.store_blob(DATA17)
    assert route.call_count == 3
    assert sum(clock.sleeps) < 0.5
    assert isinstance(info.value.__cause__, httpx.ConnectError)
    assert "refused" in str(info.value)


def test_flaky_connections_do_not_drop_the_only_honest_aggregator(mock, clock) -> None:
    """Three connect timeouts in a row (a loaded box) would drop an aggregator; not when
    the only one left has served wrong bytes: the read could then only fail."""
    mock.get(blob_url(AGGREGATORS[0])).mock(return_value=httpx.Response(200, content=b"lie"))
    honest = mock.get(blob_url(AGGREGATORS[1])).mock(side_effect=[
        httpx.ConnectTimeout("slow accept"), httpx.ConnectTimeout("slow accept"),
        httpx.ConnectTimeout("slow accept"), httpx.ConnectTimeout("slow accept"),
        httpx.Response(200, content=b"good")])

    def verify(data: bytes) -> None:
        if data != b"good":
            raise ValueError("another blob")

    with make(clock, AGGREGATORS[:2], read_deadline=30) as client:
        assert client.read_blob(BLOB_ID, verify=verify) == b"good"
    assert honest.call_count == 5


def test_truncated_store_body_is_retried(mock, client) -> None:
    full = json.dumps(NEWLY_CREATED).encode()
    route = mock.put(PUT_BLOBS).mock(side_effect=[
        httpx.Response(200, content=full[:50], headers={"content-length": str(len(full))}),
        ok(NEWLY_CREATED),
    ])
    assert client.store_blob(DATA17).blob_id == BLOB_ID
    assert route.call_count == 2
    assert client.stats.faults["truncated"] == 1


def test_store_result_safe_to_repeat(mock, client) -> None:
    """Storing the same bytes twice: second answer alreadyCertified, same blob id."""
    mock.put(PUT_BLOBS).mock(side_effect=[ok(NEWLY_CREATED), ok(ALREADY_CERTIFIED_EVENT)])
    first = client.store_blob(DATA17)
    second = client.store_blob(DATA17)
    assert first.blob_id == second.blob_id and second.newly_created is False


# -- request shape, limits, auth ---------------------------------------------------------


def test_store_request_parameters(mock, clock) -> None:
    route = mock.put(PUT_BLOBS).mock(return_value=ok(NEWLY_CREATED))
    owner = "0x" + "cd" * 32
    with make(clock, epochs=5, send_object_to=owner) as client:
        client.store_blob(DATA17)
        client.store_blob(DATA17, epochs=53, permanent=True)
    first, second = (c.request for c in route.calls)
    assert dict(first.url.params) == {"epochs": "5", "send_object_to": owner}
    assert dict(second.url.params) == {"epochs": "53", "permanent": "true",
                                       "send_object_to": owner}
    assert first.content == DATA17


@pytest.mark.parametrize("epochs", [0, 54, -1, True, 2.5])
def test_bad_epochs_rejected_locally(mock, client, epochs) -> None:
    route = mock.put(PUT_BLOBS)
    with pytest.raises(InvalidInput):
        client.store_blob(DATA17, epochs=epochs)
    assert route.call_count == 0


def test_publisher_limit_is_checked_locally(mock, client) -> None:
    route = mock.put(PUT_BLOBS)
    with pytest.raises(BodyTooLarge) as info:
        client.store_blob(b"\0" * (MAX_BLOB_BODY + 1))
    assert isinstance(info.value, PayloadTooLarge) and isinstance(info.value, StorageError)
    assert info.value.status_code is None
    assert route.call_count == 0
    mock.put(PUT_BLOBS).mock(return_value=ok(newly_created(MAX_BLOB_BODY)))
    client.store_blob(b"\0" * MAX_BLOB_BODY)  # exactly at the limit is fine


def test_token_goes_to_the_publisher_only(mock, clock, caplog) -> None:
    caplog.set_level(logging.DEBUG, logger="walrus_mem")
    put = mock.put(PUT_BLOBS).mock(return_value=ok(NEWLY_CREATED))
    gets = [mock.get(blob_url(a)).mock(return_value=httpx.Response(503)) for a in AGGREGATORS[:2]]
    gets.append(mock.get(blob_url(AGGREGATORS[2])).mock(return_value=httpx.Response(200,
                                                                                   content=b"d")))
    status = [mock.get(f"{u}/status").mock(return_value=httpx.Response(200, text="OK"))
              for u in [PUBLISHER, *AGGREGATORS]]
    secret = "eyJhbGciOiJIUzI1NiJ9.super-secret-token"
    with make(clock, token=secret) as client:
        client.store_blob(DATA17)
        assert client.read_blob(BLOB_ID) == b"d"
        client.status()
        assert secret not in repr(client) and "token=***" in repr(client)
    assert put.calls.last.request.headers["authorization"] == f"Bearer {secret}"
    for route in gets + status:
        for call in route.calls:
            assert "authorization" not in call.request.headers
    assert caplog.records, "requests are logged at DEBUG"
    assert all(secret not in r.getMessage() for r in caplog.records)
    assert any("PUT http://publisher.test/v1/blobs -> 200" in r.getMessage()
               for r in caplog.records)


def test_no_publisher_configured(clock) -> None:
    with make(clock, publisher=None) as client, pytest.raises(PublisherUnavailable,
                                                              match="no publisher"):
        client.store_blob(DATA17)


@pytest.mark.parametrize("kwargs", [
    {"publisher": "ftp://x"}, {"aggregators": "http://one-string"}, {"aggregators": ["nohost"]},
    {"send_object_to": "0xZZ"}, {"epochs": 60}, {"timeout": 0},
    # Walrus parses a full 32-byte SuiAddress: short hex 400s every store
    {"send_object_to": "0x1234"}, {"send_object_to": "0x" + "a" * 63},
    {"send_object_to": "a" * 64}, {"send_object_to": "0x" + "a" * 65},
])
def test_bad_configuration(clock, kwargs) -> None:
    aggregators = kwargs.pop("aggregators", AGGREGATORS)
    with pytest.raises(InvalidInput):
        make(clock, aggregators=aggregators, **kwargs)


@pytest.mark.parametrize("bad", ["", "short", BLOB_ID + "A", BLOB_ID[:-1] + "/",
                                 "../../etc/passwd/../../../../../aaaaaaaaaaaaa", None])
def test_blob_ids_are_validated_before_use(mock, client, bad) -> None:
    with pytest.raises(InvalidInput):
        client.read_blob(bad)
    with pytest.raises(InvalidInput):
        client.read_byte_range(bad, 0, 1)
    with pytest.raises(InvalidInput):
        client.list_quilt_patches(bad)
    assert not mock.calls


def test_patch_ids_are_validated(mock, client) -> None:
    with pytest.raises(InvalidInput):
        client.read_quilt_patch("abc/../def")
    assert not mock.calls


# -- reads: failover, verification ---------------------------------------------------


def test_failover_order_across_three_aggregators(mock, client, clock) -> None:
    order: list[str] = []

    def record(response: httpx.Response | type[httpx.TransportError]):
        def handler(request: httpx.Request) -> httpx.Response:
            order.append(request.url.host)
            if isinstance(response, type):
                raise response("boom", request=request)
            return response
        return handler

    mock.get(blob_url(AGGREGATORS[0])).mock(side_effect=record(httpx.ConnectError))
    mock.get(blob_url(AGGREGATORS[1])).mock(side_effect=record(httpx.Response(503)))
    mock.get(blob_url(AGGREGATORS[2])).mock(side_effect=record(httpx.Response(200, content=b"hi")))
    assert client.read_blob(BLOB_ID) == b"hi"
    assert order == ["agg1.test", "agg2.test", "agg3.test"]
    assert client.stats.failovers == 2
    assert clock.sleeps == []  # failover is immediate; backoff only between rounds


def test_rounds_back_off_then_succeed(mock, client, clock) -> None:
    for agg in AGGREGATORS[:2]:
        mock.get(blob_url(agg)).mock(return_value=httpx.Response(503))
    mock.get(blob_url(AGGREGATORS[2])).mock(side_effect=[
        httpx.Response(500), httpx.Response(500), httpx.Response(200, content=b"ok")])
    assert client.read_blob(BLOB_ID) == b"ok"
    assert len(clock.sleeps) == 2
    assert client.stats.retries == 2
    assert client.stats.requests == 9


def test_all_aggregators_failing_until_deadline(mock, clock) -> None:
    for agg in AGGREGATORS:
        mock.get(blob_url(agg)).mock(return_value=httpx.Response(
            503, json=envelope("UNAVAILABLE", 503, "BLOB_UNAVAILABLE")))
    with make(clock, read_deadline=6) as client, pytest.raises(AggregatorUnavailable) as info:
        client.read_blob(BLOB_ID)
    assert clock.now - 1000.0 <= 6.0
    assert info.value.reason == "BLOB_UNAVAILABLE" and info.value.status_code == 503
    assert client.stats.deadline_exhaustions == 1


def test_all_aggregators_refusing_fail_fast(mock, clock) -> None:
    for agg in AGGREGATORS:
        mock.get(blob_url(agg)).mock(side_effect=httpx.ConnectError)
    with make(clock, read_deadline=30) as client, pytest.raises(AggregatorUnavailable) as info:
        client.read_blob(BLOB_ID)
    assert client.stats.requests == 9  # 3 rounds x 3 aggregators
    assert sum(clock.sleeps) < 0.5
    assert isinstance(info.value.__cause__, httpx.ConnectError)


def test_verification_failure_moves_to_next_aggregator(mock, client) -> None:
    mock.get(blob_url(AGGREGATORS[0])).mock(return_value=httpx.Response(200, content=b"lie"))
    mock.get(blob_url(AGGREGATORS[1])).mock(return_value=httpx.Response(200, content=b"truth"))
    seen: list[bytes] = []

    def verify(data: bytes) -> None:
        seen.append(data)
        if data != b"truth":
            raise ValueError("wrong memory id")

    assert client.read_blob(BLOB_ID, verify=verify) == b"truth"
    assert seen == [b"lie", b"truth"]
    assert client.stats.verification_failures == 1
    assert client.stats.faults["verification"] == 1
    assert client.stats.failovers == 1


def test_verify_returning_false_rejects(mock, client) -> None:
    mock.get(blob_url(AGGREGATORS[0])).mock(return_value=httpx.Response(200, content=b"lie"))
    mock.get(blob_url(AGGREGATORS[1])).mock(return_value=httpx.Response(200, content=b"truth"))
    assert client.read_blob(BLOB_ID, verify=lambda d: d == b"truth") == b"truth"


def test_single_aggregator_retries_verification_within_deadline(mock, clock) -> None:
    route = mock.get(blob_url(AGGREGATORS[0])).mock(side_effect=[
        httpx.Response(200, content=b"corrupt1"), httpx.Response(200, content=b"corrupt2"),
        httpx.Response(200, content=b"good")])

    def verify(data: bytes) -> None:
        if data != b"good":
            raise RuntimeError("bad signature")

    with make(clock, aggregators=AGGREGATORS[:1]) as client:
        assert client.read_blob(BLOB_ID, verify=verify) == b"good"
    assert route.call_count == 3 and len(clock.sleeps) == 2


def test_nothing_verifies_gives_verification_failed(mock, clock) -> None:
    for agg in AGGREGATORS:
        mock.get(blob_url(agg)).mock(return_value=httpx.Response(200, content=b"lie"))

    class Mismatch(Exception):
        pass

    def verify(data: bytes) -> None:
        raise Mismatch("expected another memory")

    with make(clock, read_deadline=3) as client, pytest.raises(VerificationFailed) as info:
        client.read_blob(BLOB_ID, verify=verify)
    assert isinstance(info.value.__cause__, Mismatch)
    assert clock.now - 1000.0 <= 3.0
    assert client.stats.verification_failures >= 3


def test_exhausted_read_says_what_every_aggregator_answered(mock, clock) -> None:
    """A liar's verification failure is the error raised, but the notes also name what the
    honest aggregator answered (here: only 500s on a quilt route), so an operator can tell a
    lying endpoint from an overloaded one. The honest one is asked until the deadline:
    dropping it would leave only the liar."""
    mock.get(f"{AGGREGATORS[0]}/v1/blobs/by-quilt-patch-id/{PATCH_A}").mock(
        return_value=httpx.Response(200, content=b"lie"))
    mock.get(f"{AGGREGATORS[1]}/v1/blobs/by-quilt-patch-id/{PATCH_A}").mock(
        return_value=httpx.Response(500, json=envelope("INTERNAL", 500, "INTERNAL_ERROR")))

    def verify(data: bytes) -> None:
        raise ValueError("another memory")

    with make(clock, AGGREGATORS[:2], read_deadline=3) as client, \
            pytest.raises(VerificationFailed) as info:
        client.read_quilt_patch(PATCH_A, verify=verify)
    notes = [n for n in getattr(info.value, "__notes__", []) if "per aggregator" in n]
    assert len(notes) == 1
    liar, honest = notes[0].split(": ", 1)[1].split("; ")
    assert liar.startswith(f"{AGGREGATORS[0]}: verification x")
    assert re.fullmatch(rf"{re.escape(AGGREGATORS[1])}: http_500 x(\d+)", honest)
    assert int(honest.rsplit("x", 1)[1]) > 3


def test_quilt_500s_drop_an_aggregator_only_when_consecutive(mock, clock) -> None:
    """Three 500s in a row on a quilt route is real Walrus's answer for a non-quilt blob;
    500s with other failures between them are an overloaded node, still worth asking."""
    route = mock.get(f"{AGGREGATORS[0]}/v1/blobs/by-quilt-patch-id/{PATCH_A}").mock(
        side_effect=[httpx.Response(500, json=envelope("INTERNAL", 500, "INTERNAL_ERROR")),
                     httpx.Response(500, json=envelope("INTERNAL", 500, "INTERNAL_ERROR")),
                     httpx.Response(503),
                     httpx.Response(500, json=envelope("INTERNAL", 500, "INTERNAL_ERROR")),
                     httpx.Response(500, json=envelope("INTERNAL", 500, "INTERNAL_ERROR")),
                     httpx.Response(200, content=b"patch")])
    with make(clock, AGGREGATORS[:1], read_deadline=30) as client:
        assert client.read_quilt_patch(PATCH_A) == b"patch"
    assert route.call_count == 6


def test_three_quilt_500s_in_a_row_are_final(mock, clock) -> None:
    route = mock.get(f"{AGGREGATORS[0]}/v1/blobs/by-quilt-patch-id/{PATCH_A}").mock(
        return_value=httpx.Response(500, json=envelope("INTERNAL", 500, "INTERNAL_ERROR")))
    with make(clock, AGGREGATORS[:1], read_deadline=30) as client, pytest.raises(StorageError):
        client.read_quilt_patch(PATCH_A)
    assert route.call_count == 3


def test_404_from_one_aggregator_asks_the_others(mock, client) -> None:
    mock.get(blob_url(AGGREGATORS[0])).mock(return_value=httpx.Response(404, json=BLOB_NOT_FOUND))
    mock.get(blob_url(AGGREGATORS[1])).mock(return_value=httpx.Response(200, content=b"here"))
    assert client.read_blob(BLOB_ID) == b"here"


def test_404_right_after_store_is_retried(mock, clock) -> None:
    mock.put(PUT_BLOBS).mock(return_value=ok(NEWLY_CREATED))
    route = mock.get(blob_url(AGGREGATORS[0])).mock(side_effect=[
        httpx.Response(404, json=BLOB_NOT_FOUND), httpx.Response(404),
        httpx.Response(200, content=b"late")])
    with make(clock, aggregators=AGGREGATORS[:1]) as client:
        client.store_blob(DATA17)
        assert client.read_blob(BLOB_ID) == b"late"
        assert client.stats.retry_reasons["not_found_after_store"] == 2
        # a minute later the same 404 is believed at once
        clock.now += 61
        route.side_effect = None
        route.return_value = httpx.Response(404, json=BLOB_NOT_FOUND)
        with pytest.raises(BlobNotFound):
            client.read_blob(BLOB_ID)
    assert route.call_count == 4


def test_404_right_after_store_gives_not_found_at_deadline(mock, clock) -> None:
    mock.put(PUT_BLOBS).mock(return_value=ok(NEWLY_CREATED))
    mock.get(blob_url(AGGREGATORS[0])).mock(return_value=httpx.Response(404, json=BLOB_NOT_FOUND))
    with make(clock, aggregators=AGGREGATORS[:1], read_deadline=2) as client:
        client.store_blob(DATA17)
        with pytest.raises(BlobNotFound):
            client.read_blob(BLOB_ID)


def test_truncated_read_fails_over(mock, client) -> None:
    mock.get(blob_url(AGGREGATORS[0])).mock(return_value=httpx.Response(
        200, content=b"half", headers={"content-length": "8"}))
    mock.get(blob_url(AGGREGATORS[1])).mock(return_value=httpx.Response(200, content=b"complete"))
    assert client.read_blob(BLOB_ID) == b"complete"
    assert client.stats.faults["truncated"] == 1


def test_byte_range(mock, client) -> None:
    first = mock.get(f"{blob_url(AGGREGATORS[0])}/byte-range").mock(
        return_value=httpx.Response(200, content=b"xyz-too-long"))
    second = mock.get(f"{blob_url(AGGREGATORS[1])}/byte-range").mock(
        return_value=httpx.Response(200, content=b"cde"))
    assert client.read_byte_range(BLOB_ID, 2, 3) == b"cde"
    assert dict(second.calls.last.request.url.params) == {"start": "2", "length": "3"}
    assert first.call_count == 1
    with pytest.raises(InvalidInput):
        client.read_byte_range(BLOB_ID, -1, 3)
    with pytest.raises(InvalidInput):
        client.read_byte_range(BLOB_ID, 0, 0)


def test_quilt_patch_reads(mock, client) -> None:
    by_patch = mock.get(f"{AGGREGATORS[0]}/v1/blobs/by-quilt-patch-id/{PATCH_A}").mock(
        return_value=httpx.Response(200, content=b"patch-a",
                                    headers={"X-Quilt-Patch-Identifier": "a"}))
    assert client.read_quilt_patch(PATCH_A) == b"patch-a"
    assert by_patch.call_count == 1
    identifier = "notes/2024 q1?#%.md"
    route = mock.get(url__regex=r"^http://agg1\.test/v1/blobs/by-quilt-id/").mock(
        return_value=httpx.Response(200, content=b"by-name"))
    assert client.read_quilt_patch_by_identifier(QUILT_ID, identifier) == b"by-name"
    raw = route.calls.last.request.url.raw_path.decode()
    assert raw == f"/v1/blobs/by-quilt-id/{QUILT_ID}/notes%2F2024%20q1%3F%23%25.md"


def test_read_with_redirect_is_followed(mock, client) -> None:
    mock.get(blob_url(AGGREGATORS[0])).mock(return_value=httpx.Response(
        307, headers={"location": "http://cdn.test/blob"}))
    mock.get("http://cdn.test/blob").mock(return_value=httpx.Response(200, content=b"cdn"))
    assert client.read_blob(BLOB_ID) == b"cdn"


def test_status(mock, client) -> None:
    mock.get(f"{PUBLISHER}/status").mock(return_value=httpx.Response(200, text="OK"))
    mock.get(f"{AGGREGATORS[0]}/status").mock(side_effect=httpx.ConnectError)
    mock.get(f"{AGGREGATORS[1]}/status").mock(return_value=httpx.Response(503))
    mock.get(f"{AGGREGATORS[2]}/status").mock(return_value=httpx.Response(200, text="OK"))
    assert client.status() == {
        f"publisher:{PUBLISHER}": True,
        f"aggregator:{AGGREGATORS[0]}": False,
        f"aggregator:{AGGREGATORS[1]}": False,
        f"aggregator:{AGGREGATORS[2]}": True,
    }


def test_status_asks_a_url_serving_both_roles_once(mock) -> None:
    """A daemon URL listed as publisher and aggregator: one probe (one 5 s budget), not two."""
    route = mock.get(f"{PUBLISHER}/status").mock(return_value=httpx.Response(200, text="OK"))
    with WalrusClient(PUBLISHER, [PUBLISHER]) as both:
        assert both.status() == {f"publisher:{PUBLISHER}": True,
                                 f"aggregator:{PUBLISHER}": True}
    assert route.call_count == 1


def test_one_http_client_is_reused(mock, client) -> None:
    mock.put(PUT_BLOBS).mock(return_value=ok(NEWLY_CREATED))
    http = client._http
    client.store_blob(DATA17)
    client.store_blob(DATA17)
    assert client._http is http


def test_stats_snapshot_is_plain(mock, client) -> None:
    mock.put(PUT_BLOBS).mock(side_effect=[httpx.Response(503), ok(NEWLY_CREATED)])
    client.store_blob(DATA17)
    snap = client.stats.snapshot()
    assert json.loads(json.dumps(snap)) == snap
    assert snap["requests"] == 2 and snap["retries"] == 1 and snap["faults"] == {"http_503": 1}


def test_every_error_is_a_walrus_mem_error(mock, client) -> None:
    for aggregator in AGGREGATORS:
        mock.get(blob_url(aggregator)).mock(return_value=httpx.Response(451, text="blocked"))
    with pytest.raises(WalrusMemError):
        client.read_blob(BLOB_ID)
