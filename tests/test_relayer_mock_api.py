"""relayer_mock routes in-process (sync bridge transport): shapes, headers, every error."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from relayer_mock import _cost as cost
from relayer_mock._ids import blob_id_for
from relayer_mock.embedded import EmbeddedRelayer

SMALL_BLOB_LIMIT = 4096
SMALL_QUILT_LIMIT = 256 * 1024
CACHE = "public, max-age=86400, stale-while-revalidate=3600"
BLOB_ID_RE = re.compile(r"^[A-Za-z0-9_-]{43}$")
OBJECT_ID_RE = re.compile(r"^0x[0-9a-f]{64}$")
NOT_FOUND = {
    "error": {
        "status": "NOT_FOUND",
        "code": 404,
        "message": "the requested blob ID does not exist on Walrus, ensure that it was entered "
        "correctly",
        "details": [{"@type": "ErrorInfo", "reason": "BLOB_NOT_FOUND",
                     "domain": "daemon.walrus.space", "metadata": {}}],
    }
}


@pytest.fixture
def relayer(tmp_path: Path) -> Iterator[EmbeddedRelayer]:
    with EmbeddedRelayer(
        tmp_path / "relayer", fsync=False, max_blob_size=SMALL_BLOB_LIMIT,
        max_quilt_size=SMALL_QUILT_LIMIT,
    ) as embedded:
        yield embedded


@pytest.fixture
def client(relayer: EmbeddedRelayer) -> Iterator[httpx.Client]:
    with relayer.client() as c:
        yield c


def store(client: httpx.Client, data: bytes, query: str = "") -> dict[str, Any]:
    response = client.put(f"/v1/blobs{query}", content=data)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def created(result: dict[str, Any]) -> dict[str, Any]:
    obj: dict[str, Any] = result["newlyCreated"]["blobObject"]
    return obj


def reason(response: httpx.Response) -> str:
    return str(response.json()["error"]["details"][0]["reason"])


# -- basics -------------------------------------------------------------------------------


def test_status_is_plain_ok(client: httpx.Client) -> None:
    response = client.get("/status")
    assert response.status_code == 200
    assert response.text == "OK"
    assert response.headers["content-type"].startswith("text/plain")


def test_unknown_path_and_method_are_empty(client: httpx.Client) -> None:
    missing = client.get("/v2/nothing")
    assert (missing.status_code, missing.content) == (404, b"")
    wrong = client.post("/v1/blobs", content=b"x")
    assert (wrong.status_code, wrong.content) == (405, b"")


def test_api_docs_is_html(client: httpx.Client) -> None:
    response = client.get("/v1/api")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")


def test_cors_preflight_allows_any_origin(client: httpx.Client) -> None:
    response = client.options(
        "/v1/blobs",
        headers={"Origin": "https://example.org", "Access-Control-Request-Method": "PUT"},
    )
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] in ("*", "https://example.org")
    assert response.headers["access-control-max-age"] == "86400"


# -- publisher ----------------------------------------------------------------------------


def test_newly_created_shape_and_values(client: httpx.Client) -> None:
    data = b"seventeen bytes!!"
    result = store(client, data)
    assert list(result) == ["newlyCreated"]
    body = result["newlyCreated"]
    assert list(body) == ["blobObject", "resourceOperation", "cost"]
    obj = body["blobObject"]
    assert list(obj) == ["id", "registeredEpoch", "blobId", "size", "encodingType",
                         "certifiedEpoch", "storage", "deletable"]
    assert list(obj["storage"]) == ["id", "startEpoch", "endEpoch", "storageSize"]
    assert OBJECT_ID_RE.match(obj["id"]) and OBJECT_ID_RE.match(obj["storage"]["id"])
    assert obj["blobId"] == blob_id_for(data)
    digest = hashlib.blake2b(data, digest_size=32).digest()
    assert obj["blobId"] == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    assert BLOB_ID_RE.match(obj["blobId"])
    current = client.get("/_mock/epoch").json()["currentEpoch"]
    assert obj["registeredEpoch"] == obj["certifiedEpoch"] == current
    assert obj["storage"]["startEpoch"] == current
    assert obj["storage"]["endEpoch"] == current + 1  # epochs defaults to 1, end exclusive
    assert obj["size"] == len(data)
    assert obj["encodingType"] == "RS2"
    assert obj["deletable"] is True  # deletable by default since v1.33
    assert obj["storage"]["storageSize"] == 66_034_000
    assert body["resourceOperation"] == {
        "registerFromScratch": {"encodedLength": 66_034_000, "epochsAhead": 1}
    }
    assert body["cost"] == 63 * (cost.DEFAULT_STORAGE_PRICE + cost.DEFAULT_WRITE_PRICE)


def test_docs_example_cost_with_configured_prices(tmp_path: Path) -> None:
    # storing-blobs.mdx: 17 bytes, 1 epoch -> cost 132300 = 63 units * 2100.
    with EmbeddedRelayer(tmp_path / "r", fsync=False, storage_price=1000, write_price=1100) as r:
        with r.client() as c:
            body = store(c, b"x" * 17)["newlyCreated"]
    assert body["cost"] == 132_300
    assert body["blobObject"]["storage"]["storageSize"] == 66_034_000


def test_epochs_and_cost_scale(client: httpx.Client) -> None:
    body = store(client, b"abc", "?epochs=5")["newlyCreated"]
    start = body["blobObject"]["storage"]["startEpoch"]
    assert body["blobObject"]["storage"]["endEpoch"] == start + 5
    assert body["resourceOperation"]["registerFromScratch"]["epochsAhead"] == 5
    assert body["cost"] == cost.store_cost(3, 5)
    assert store(client, b"abc", "?epochs=53")["newlyCreated"]["resourceOperation"][
        "registerFromScratch"]["epochsAhead"] == 53


@pytest.mark.parametrize("epochs", ["0", "54", "1000"])
def test_epochs_out_of_range_is_internal_error(client: httpx.Client, epochs: str) -> None:
    response = client.put(f"/v1/blobs?epochs={epochs}", content=b"x")
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["status"] == "INTERNAL"
    # the error type's own domain: the RestApiError derive does not delegate domain() to
    # the Internal(anyhow) variant (walrus-proc-macros derive_api_errors.rs domain_method;
    # StoreBlobError is #[rest_api_error(domain = DAEMON_ERROR_DOMAIN)], routes.rs)
    assert error["details"][0] == {"@type": "ErrorInfo", "reason": "INTERNAL_ERROR",
                                   "domain": "daemon.walrus.space", "metadata": {}}
    assert error["details"][1]["@type"] == "DebugInfo"
    assert error["details"][1]["detail"].startswith("TraceID: ")
    assert client.get("/_mock/blobs").json()["count"] == 0


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ("epochs=abc", "invalid digit"),
        ("epochs=-1", "invalid digit"),
        ("epochs=4294967296", "number too large"),
        ("permanent=yes", "provided string was not `true` or `false`"),
        ("force=1", "provided string was not `true` or `false`"),
        ("share=true&share=false", "duplicate field `share`"),
        ("send_object_to=0xzz", "send_object_to"),
        ("send_object_to=", "send_object_to"),
        (f"send_object_to=0x{'1' * 64}&share=true", "cannot be used together"),
        ("encoding_type=RS1", "unknown variant"),
    ],
)
def test_bad_publisher_query_is_plain_400(client: httpx.Client, query: str, fragment: str) -> None:
    response = client.put(f"/v1/blobs?{query}", content=b"x")
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text.startswith("Failed to deserialize query string: ")
    assert fragment in response.text


@pytest.fixture
def lenient_client(tmp_path: Path) -> Iterator[httpx.Client]:
    with EmbeddedRelayer(tmp_path / "lenient", fsync=False, strict=False) as embedded, \
            embedded.client() as c:
        yield c


def test_unknown_publisher_params_are_rejected(client: httpx.Client) -> None:
    # PublisherQuery has #[serde(deny_unknown_fields)] (walrus-http-api.md section 10)
    response = client.put("/v1/blobs?foo=bar&epochs=2", content=b"x")
    assert response.status_code == 400
    assert response.text.startswith("Failed to deserialize query string: unknown field `foo`")
    assert client.put("/v1/blobs?deletable=true&epochs=2", content=b"x").status_code == 200


def test_lenient_mode_ignores_unknown_publisher_params(lenient_client: httpx.Client) -> None:
    assert lenient_client.put("/v1/blobs?foo=bar&epochs=2", content=b"x").status_code == 200
    short = lenient_client.put("/v1/blobs?send_object_to=0xAB", content=b"y")
    assert short.status_code == 200


def test_deletable_and_permanent_conflict(client: httpx.Client) -> None:
    response = client.put("/v1/blobs?deletable=true&permanent=true", content=b"x")
    assert response.status_code == 400
    assert response.json() == {
        "error": {
            "status": "INVALID_ARGUMENT",
            "code": 400,
            "message": "the blob cannot be defined as both deletable and permanent",
            "details": [{"@type": "ErrorInfo", "reason": "INVALID_BLOB_PERSISTENCE",
                         "domain": "daemon.walrus.space", "metadata": {}}],
        }
    }
    # deletable=true alone (deprecated, no effect) is fine
    assert created(store(client, b"x", "?deletable=true"))["deletable"] is True


def test_permanent_repeat_is_already_certified(client: httpx.Client) -> None:
    data = b"permanent fact"
    first = created(store(client, data, "?permanent=true&epochs=5"))
    assert first["deletable"] is False
    again = store(client, data, "?permanent=true&epochs=3")
    assert list(again) == ["alreadyCertified"]
    body = again["alreadyCertified"]
    assert list(body) == ["blobId", "event", "endEpoch"]
    assert body["blobId"] == first["blobId"]
    assert body["endEpoch"] == first["storage"]["endEpoch"]
    assert list(body["event"]) == ["txDigest", "eventSeq"]
    assert body["event"]["eventSeq"] == "0"
    assert re.match(r"^[1-9A-HJ-NP-Za-km-z]{32,44}$", body["event"]["txDigest"])
    # a deletable request is also satisfied by the covering permanent blob
    assert "alreadyCertified" in store(client, data, "?epochs=2")
    # but not when it needs more epochs than the permanent blob has
    assert "newlyCreated" in store(client, data, "?permanent=true&epochs=10")
    # force always creates a new Blob object
    assert "newlyCreated" in store(client, data, "?permanent=true&epochs=1&force=true")
    listed = client.get(f"/_mock/blobs/{first['blobId']}").json()
    assert listed["storeCount"] == 5
    assert listed["newlyCreatedCount"] == 3
    assert listed["alreadyCertifiedCount"] == 2
    assert len(listed["objects"]) == 3


def test_deletable_repeat_creates_new_objects(client: httpx.Client) -> None:
    ids = {created(store(client, b"same bytes"))["id"] for _ in range(3)}
    assert len(ids) == 3
    listed = client.get("/_mock/blobs").json()
    assert listed["count"] == 1
    entry = listed["blobs"][0]
    assert (entry["storeCount"], entry["newlyCreatedCount"]) == (3, 3)
    assert {o["objectId"] for o in entry["objects"]} == ids


def test_share_and_send_object_to(client: httpx.Client) -> None:
    shared = store(client, b"shared", "?share=true")["newlyCreated"]
    assert list(shared)[-1] == "sharedBlobObject"
    assert OBJECT_ID_RE.match(shared["sharedBlobObject"])
    read = client.get(f"/v1/blobs/by-object-id/{shared['sharedBlobObject']}")
    assert read.content == b"shared"
    owner = "0x" + "ab" * 32
    sent = created(store(client, b"sent", f"?send_object_to={owner}"))
    entry = client.get(f"/_mock/blobs/{sent['blobId']}").json()
    assert entry["objects"][0]["owner"] == owner
    short = client.put("/v1/blobs?send_object_to=0xAB", content=b"sent2")
    assert short.status_code == 400  # a SuiAddress is 32 bytes: 0x + 64 hex digits
    assert "send_object_to" in short.text
    upper = created(store(client, b"sent3", f"?send_object_to=0x{'AB' * 32}"))
    entry = client.get(f"/_mock/blobs/{upper['blobId']}").json()
    assert entry["objects"][0]["owner"] == owner
    assert "sharedBlobObject" not in store(client, b"plain")["newlyCreated"]


def test_body_limit_is_plain_413(client: httpx.Client) -> None:
    assert client.put("/v1/blobs", content=b"a" * SMALL_BLOB_LIMIT).status_code == 200
    response = client.put("/v1/blobs", content=b"a" * (SMALL_BLOB_LIMIT + 1))
    assert response.status_code == 413
    assert response.text == "Failed to buffer the request body: length limit exceeded"
    assert response.headers["content-type"].startswith("text/plain")
    # also when the size is only discovered while streaming (no Content-Length)
    chunks = [b"b" * 1000] * 5
    streamed = client.put("/v1/blobs", content=iter(chunks))
    assert streamed.status_code == 413
    assert client.get("/_mock/blobs").json()["count"] == 1


def test_empty_blob_is_storable(client: httpx.Client) -> None:
    obj = created(store(client, b""))
    assert obj["size"] == 0
    response = client.get(f"/v1/blobs/{obj['blobId']}")
    assert (response.status_code, response.content) == (200, b"")


# -- aggregator ---------------------------------------------------------------------------


def test_read_blob_headers(client: httpx.Client) -> None:
    blob_id = created(store(client, b"hello walrus"))["blobId"]
    response = client.get(f"/v1/blobs/{blob_id}")
    assert response.status_code == 200
    assert response.content == b"hello walrus"
    assert response.headers["etag"] == blob_id
    assert response.headers["cache-control"] == CACHE
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["content-length"] == "12"
    assert "content-type" not in response.headers  # httpx sends Accept: */*
    mirrored = client.get(f"/v1/blobs/{blob_id}", headers={"Accept": "application/json"})
    assert mirrored.headers["content-type"] == "application/json"
    from_ct = client.get(f"/v1/blobs/{blob_id}", headers={"Content-Type": "image/png"})
    assert from_ct.headers["content-type"] == "image/png"


def test_head_has_headers_without_body(client: httpx.Client) -> None:
    blob_id = created(store(client, b"12345"))["blobId"]
    response = client.head(f"/v1/blobs/{blob_id}")
    assert response.status_code == 200
    assert response.headers["etag"] == blob_id
    assert response.content == b""


def test_missing_blob_is_exact_envelope(client: httpx.Client) -> None:
    response = client.get(f"/v1/blobs/{blob_id_for(b'never stored')}")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/json"
    assert response.content == json.dumps(NOT_FOUND, separators=(",", ":")).encode()


@pytest.mark.parametrize(
    "bad", ["short", "A" * 44, "A" * 42 + "=", "M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUl",
            "M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK+W7_4BUk"],
)
def test_bad_blob_id_is_plain_400(client: httpx.Client, bad: str) -> None:
    response = client.get(f"/v1/blobs/{quote(bad, safe='')}")
    assert response.status_code == 400
    assert response.text.startswith("Invalid URL: ")


def test_read_options(client: httpx.Client) -> None:
    blob_id = created(store(client, b"opts"))["blobId"]
    for query in ("strict_consistency_check=true", "skip_consistency_check=true",
                  "strict_consistency_check=false&skip_consistency_check=false"):
        assert client.get(f"/v1/blobs/{blob_id}?{query}").content == b"opts"
    both = client.get(
        f"/v1/blobs/{blob_id}?strict_consistency_check=true&skip_consistency_check=true"
    )
    assert (both.status_code, reason(both)) == (400, "INVALID_CONSISTENCY_CHECK")
    cache_buster = client.get(f"/v1/blobs/{blob_id}?cb=123")
    assert cache_buster.status_code == 400
    assert cache_buster.text == (
        "Failed to deserialize query string: unknown field `cb`, expected "
        "`strict_consistency_check` or `skip_consistency_check`"
    )


def test_range_header(client: httpx.Client) -> None:
    data = bytes(range(100))
    blob_id = created(store(client, data))["blobId"]
    response = client.get(f"/v1/blobs/{blob_id}", headers={"Range": "bytes=10-19"})
    assert response.status_code == 206
    assert response.content == data[10:20]
    assert response.headers["content-range"] == "bytes 10-19/100"
    assert response.headers["content-length"] == "10"
    assert response.headers["etag"] == blob_id
    last = client.get(f"/v1/blobs/{blob_id}", headers={"Range": "bytes=99-99"})
    assert (last.status_code, last.content) == (206, data[99:])
    for bad in ("bytes=10-", "bytes=-10", "bytes=0-1,5-6", "bytes=5-4", "items=0-1",
                "bytes=0-100", "bytes=abc"):
        response = client.get(f"/v1/blobs/{blob_id}", headers={"Range": bad})
        assert response.status_code == 416, bad
        error = response.json()["error"]
        assert error["status"] == "RANGE_NOT_SATISFIABLE"
        assert error["details"][0]["reason"] == "INVALID_BYTE_RANGE"
        assert error["message"].startswith("invalid byte range parameters: ")


def test_byte_range_route(client: httpx.Client) -> None:
    data = bytes(range(50))
    blob_id = created(store(client, data))["blobId"]
    response = client.get(f"/v1/blobs/{blob_id}/byte-range?start=5&length=10")
    assert response.status_code == 200  # not 206, so CDNs cache it
    assert response.content == data[5:15]
    assert response.headers["etag"] == f"{blob_id}-5-10"
    assert response.headers["cache-control"] == CACHE
    whole = client.get(f"/v1/blobs/{blob_id}/byte-range?start=0&length=50")
    assert whole.content == data
    for query in ("start=0&length=0", "start=45&length=6", "start=50&length=1",
                  f"start={2**64 - 1}&length=1"):
        response = client.get(f"/v1/blobs/{blob_id}/byte-range?{query}")
        assert response.status_code == 400, query
        error = response.json()["error"]
        assert (error["status"], error["details"][0]["reason"]) == (
            "INVALID_ARGUMENT", "INVALID_BYTE_RANGE")
    for query, fragment in (("start=1", "missing field `length`"),
                            ("length=1", "missing field `start`"),
                            ("start=0&length=1&cb=2", "unknown field `cb`"),
                            ("start=x&length=1", "invalid digit")):
        response = client.get(f"/v1/blobs/{blob_id}/byte-range?{query}")
        assert response.status_code == 400
        assert response.text.startswith("Failed to deserialize query string: ")
        assert fragment in response.text
    missing = client.get(f"/v1/blobs/{blob_id_for(b'nope')}/byte-range?start=0&length=1")
    assert (missing.status_code, reason(missing)) == (404, "BLOB_NOT_FOUND")


def test_by_object_id(client: httpx.Client) -> None:
    obj = created(store(client, b"object bytes"))
    response = client.get(f"/v1/blobs/by-object-id/{obj['id']}")
    assert response.status_code == 200
    assert response.content == b"object bytes"
    assert response.headers["etag"] == obj["blobId"]
    upper = client.get(f"/v1/blobs/by-object-id/0x{obj['id'][2:].upper()}")
    assert upper.content == b"object bytes"
    ranged = client.get(f"/v1/blobs/by-object-id/{obj['id']}", headers={"Range": "bytes=0-5"})
    assert (ranged.status_code, ranged.content) == (206, b"object")
    unknown = client.get(f"/v1/blobs/by-object-id/0x{'0' * 64}")
    assert (unknown.status_code, reason(unknown)) == (404, "BLOB_NOT_FOUND")
    bad = client.get("/v1/blobs/by-object-id/not-hex")
    assert bad.status_code == 400 and bad.text.startswith("Invalid URL: ")
    unknown_param = client.get(f"/v1/blobs/by-object-id/{obj['id']}?x=1")
    assert unknown_param.status_code == 400


def test_v1alpha_stream_and_concat(client: httpx.Client) -> None:
    first = created(store(client, b"first-"))
    second = created(store(client, b"second"))
    streamed = client.get(f"/v1alpha/blobs/{first['blobId']}/stream")
    assert streamed.content == b"first-"
    assert streamed.headers["x-walrus-streaming"] == "true"
    ids = f"{first['blobId']},{second['id']}"
    concat = client.get(f"/v1alpha/blobs/concat?ids={ids}")
    assert (concat.status_code, concat.content) == (200, b"first-second")
    posted = client.post("/v1alpha/blobs/concat", json={"ids": [second["blobId"], first["id"]]})
    assert posted.content == b"secondfirst-"
    bad = client.get("/v1alpha/blobs/concat?ids=zzz")
    assert reason(bad) == "INVALID_ID_FORMAT"
    empty = client.get("/v1alpha/blobs/concat?ids=")
    assert empty.status_code == 400


# -- quilts -------------------------------------------------------------------------------


def put_quilt(client: httpx.Client, files: dict[str, bytes], query: str = "",
              metadata: list[Any] | None = None) -> httpx.Response:
    parts: list[Any] = [(name, (f"file-{i}", data)) for i, (name, data) in enumerate(files.items())]
    if metadata is not None:
        parts.append(("_metadata", (None, json.dumps(metadata))))
    return client.put(f"/v1/quilts{query}", files=parts)


def test_quilt_store_and_reads(client: httpx.Client) -> None:
    files = {"walrus.jpg": b"\xff\xd8 jpeg bytes", "another_walrus.jpg": b"more",
             "notes/a b.txt": b"with slash and space"}
    metadata = [{"identifier": "walrus.jpg",
                 "tags": {"creator": "walrus", "version": 2, "ok": True,
                          "content-type": "image/jpeg"}}]
    response = put_quilt(client, files, "?epochs=2", metadata)
    assert response.status_code == 200, response.text
    body = response.json()
    assert list(body) == ["blobStoreResult", "storedQuiltBlobs"]
    quilt = body["blobStoreResult"]["newlyCreated"]["blobObject"]
    quilt_id = quilt["blobId"]
    assert quilt["storage"]["endEpoch"] - quilt["storage"]["startEpoch"] == 2
    entries = body["storedQuiltBlobs"]
    assert [e["identifier"] for e in entries] == sorted(files)
    for i, entry in enumerate(entries):
        assert list(entry) == ["identifier", "quiltPatchId", "range"]
        assert len(entry["quiltPatchId"]) == 50
        raw = base64.urlsafe_b64decode(entry["quiltPatchId"] + "==")
        assert base64.urlsafe_b64encode(raw[:32]).rstrip(b"=").decode() == quilt_id
        assert raw[32] == 1
        assert struct.unpack("<HH", raw[33:]) == (1 + i, 2 + i)
        assert entry["range"] == [1 + i, 2 + i]
        patch = client.get(f"/v1/blobs/by-quilt-patch-id/{entry['quiltPatchId']}")
        assert patch.status_code == 200
        assert patch.content == files[entry["identifier"]]
        assert patch.headers["etag"] == quilt_id
        assert patch.headers["x-quilt-patch-identifier"] == entry["identifier"]
        assert patch.headers["cache-control"] == CACHE
        by_name = client.get(
            f"/v1/blobs/by-quilt-id/{quilt_id}/{quote(entry['identifier'], safe='')}"
        )
        assert by_name.content == files[entry["identifier"]]
        assert by_name.headers["etag"] == quilt_id
    tagged = client.get(f"/v1/blobs/by-quilt-id/{quilt_id}/walrus.jpg")
    assert tagged.headers["content-type"] == "image/jpeg"  # allow-listed tag
    assert "creator" not in tagged.headers
    listing = client.get(f"/v1/quilts/{quilt_id}/patches")
    assert listing.status_code == 200
    items = listing.json()
    assert [list(item) for item in items] == [["identifier", "patch_id", "tags"]] * 3
    assert [item["patch_id"] for item in items] == [e["quiltPatchId"] for e in entries]
    walrus_tags = next(item["tags"] for item in items if item["identifier"] == "walrus.jpg")
    assert walrus_tags == {"content-type": "image/jpeg", "creator": "walrus", "ok": "true",
                           "version": "2"}
    assert all(item["tags"] == {} for item in items if item["identifier"] != "walrus.jpg")
    # the quilt itself is a blob
    assert client.get(f"/v1/blobs/{quilt_id}").status_code == 200
    assert client.get(f"/_mock/blobs/{quilt_id}").json()["isQuilt"] is True


def test_quilt_id_is_deterministic_and_permanent_repeat_certified(client: httpx.Client) -> None:
    files = {"a": b"1", "b": b"2"}
    first = put_quilt(client, files, "?permanent=true").json()
    again = put_quilt(client, {"b": b"2", "a": b"1"}, "?permanent=true").json()
    quilt_id = first["blobStoreResult"]["newlyCreated"]["blobObject"]["blobId"]
    assert again["blobStoreResult"]["alreadyCertified"]["blobId"] == quilt_id
    assert again["storedQuiltBlobs"] == first["storedQuiltBlobs"]


def test_quilt_plain_form_fields_are_patches(client: httpx.Client) -> None:
    response = client.put(
        "/v1/quilts", data={"text-field": "héllo", "ünï": "x"}, files={"f": b"\x00\xff"}
    )
    assert response.status_code == 200
    ids = {e["identifier"]: e["quiltPatchId"] for e in response.json()["storedQuiltBlobs"]}
    assert client.get(f"/v1/blobs/by-quilt-patch-id/{ids['text-field']}").content == (
        "héllo".encode())
    assert client.get(f"/v1/blobs/by-quilt-patch-id/{ids['f']}").content == b"\x00\xff"
    assert client.get(f"/v1/blobs/by-quilt-patch-id/{ids['ünï']}").content == b"x"


def test_quilt_666_ok_667_rejected(client: httpx.Client) -> None:
    files = {f"p{i:04d}": b"x" for i in range(666)}
    ok = put_quilt(client, files)
    assert ok.status_code == 200
    assert len(ok.json()["storedQuiltBlobs"]) == 666
    assert ok.json()["storedQuiltBlobs"][-1]["range"] == [666, 667]
    files["p9999"] = b"y"
    too_many = put_quilt(client, files)
    assert too_many.status_code == 400
    error = too_many.json()["error"]
    assert error["details"][0]["reason"] == "MALFORMED_REQUEST"
    assert error["message"].startswith("the request is malformed: failed to construct quilt:")
    assert "TooManyBlobs" in error["message"]


@pytest.mark.parametrize(
    ("parts", "fragment"),
    [
        ([("a", ("x", b"1")), ("a", ("y", b"2"))], "failed to construct quilt"),
        ([("bad ", ("x", b"1"))], "failed to construct quilt"),
        ([("a", ("x", b"1")),
          ("_metadata", (None, '[{"identifier":"a"},{"identifier":"a"}]'))],
         "duplicate identifiers found in _metadata"),
        ([("a", ("x", b"1")), ("_metadata", (None, "not json"))], "failed to parse multipart"),
        ([("_metadata", (None, "[]"))], "no files provided in multipart form"),
    ],
)
def test_quilt_malformed(client: httpx.Client, parts: list[Any], fragment: str) -> None:
    response = client.put("/v1/quilts", files=parts)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["status"], error["details"][0]["reason"]) == (
        "INVALID_ARGUMENT", "MALFORMED_REQUEST")
    assert fragment in error["message"]


def test_quilt_requires_multipart(client: httpx.Client) -> None:
    response = client.put("/v1/quilts", content=b"raw", headers={"content-type": "text/plain"})
    assert (response.status_code, reason(response)) == (400, "MALFORMED_REQUEST")
    boundaryless = client.put(
        "/v1/quilts", content=b"--x\r\n", headers={"content-type": "multipart/form-data"}
    )
    assert (boundaryless.status_code, reason(boundaryless)) == (400, "MALFORMED_REQUEST")


def test_quilt_query_errors(client: httpx.Client) -> None:
    conflict = client.put("/v1/quilts?permanent=true&deletable=true", files={"a": b"1"})
    assert reason(conflict) == "INVALID_BLOB_PERSISTENCE"
    assert client.put("/v1/quilts?quilt_version=V1", files={"a": b"1"}).status_code == 200
    assert client.put("/v1/quilts?quilt_version=v2", files={"a": b"1"}).status_code == 400


def test_quilt_body_limit(client: httpx.Client) -> None:
    response = client.put("/v1/quilts", files={"big": b"z" * (SMALL_QUILT_LIMIT + 10)})
    assert response.status_code == 413
    assert response.text == "Failed to buffer the request body: length limit exceeded"


def test_quilt_patch_errors(client: httpx.Client) -> None:
    entries = put_quilt(client, {"only": b"1"}).json()["storedQuiltBlobs"]
    quilt_id = entries[0]["quiltPatchId"][:43]
    missing_patch = client.get(f"/v1/blobs/by-quilt-id/{quilt_id}/other")
    assert (missing_patch.status_code, reason(missing_patch)) == (404, "QUILT_PATCH_NOT_FOUND")
    assert missing_patch.json()["error"]["message"] == (
        "the requested quilt patch does not exist on Walrus")
    raw = base64.urlsafe_b64decode(entries[0]["quiltPatchId"] + "==")
    other = base64.urlsafe_b64encode(raw[:33] + struct.pack("<HH", 7, 8)).rstrip(b"=").decode()
    assert reason(client.get(f"/v1/blobs/by-quilt-patch-id/{other}")) == "QUILT_PATCH_NOT_FOUND"
    unknown_quilt = blob_id_for(b"no quilt")
    assert reason(client.get(f"/v1/blobs/by-quilt-id/{unknown_quilt}/only")) == "BLOB_NOT_FOUND"
    assert reason(client.get(f"/v1/quilts/{unknown_quilt}/patches")) == "BLOB_NOT_FOUND"
    bad = client.get("/v1/blobs/by-quilt-patch-id/tooshort")
    assert bad.status_code == 400 and bad.text.startswith("Invalid URL: ")
    plain_blob = created(store(client, b"not a quilt"))["blobId"]
    # the daemon turns every quilt error but "patch not found" into Internal
    for path in (f"/v1/quilts/{plain_blob}/patches", f"/v1/blobs/by-quilt-id/{plain_blob}/x"):
        answer = client.get(path)
        assert (answer.status_code, reason(answer)) == (500, "INTERNAL_ERROR")


def test_lenient_quilt_routes_on_plain_blob_are_404(lenient_client: httpx.Client) -> None:
    plain_blob = created(store(lenient_client, b"not a quilt"))["blobId"]
    answer = lenient_client.get(f"/v1/quilts/{plain_blob}/patches")
    assert (answer.status_code, reason(answer)) == (404, "QUILT_PATCH_NOT_FOUND")


# -- blocklist, size cap, admin -----------------------------------------------------------


def test_blocked_blob_is_451(client: httpx.Client) -> None:
    blob_id = created(store(client, b"forbidden"))["blobId"]
    assert client.put(f"/_mock/blocklist/{blob_id}").status_code == 200
    read = client.get(f"/v1/blobs/{blob_id}")
    assert (read.status_code, reason(read)) == (451, "FORBIDDEN_BLOB")
    write = client.put("/v1/blobs", content=b"forbidden")
    assert (write.status_code, reason(write)) == (451, "FORBIDDEN_BLOB")
    assert client.get("/_mock/blocklist").json() == {"blocked": [blob_id]}
    client.delete(f"/_mock/blocklist/{blob_id}")
    assert client.get(f"/v1/blobs/{blob_id}").status_code == 200


def test_aggregator_max_blob_size(tmp_path: Path) -> None:
    with EmbeddedRelayer(tmp_path / "r", fsync=False, aggregator_max_blob_size=10) as r:
        with r.client() as c:
            small = created(store(c, b"0123456789"))["blobId"]
            large = created(store(c, b"0123456789A"))["blobId"]
            assert c.get(f"/v1/blobs/{small}").status_code == 200
            response = c.get(f"/v1/blobs/{large}")
            assert response.status_code == 403
            assert response.json()["error"]["status"] == "SIZE_EXCEEDED"
            assert reason(response) == "BLOB_TOO_LARGE"


def test_stats_count_routes(client: httpx.Client) -> None:
    blob_id = created(store(client, b"count me"))["blobId"]
    store(client, b"count me")
    client.get(f"/v1/blobs/{blob_id}")
    client.get(f"/v1/blobs/{blob_id}/byte-range?start=0&length=1")
    client.get(f"/v1/blobs/{blob_id_for(b'x')}")
    stats = client.get("/_mock/stats").json()
    assert stats["requests"] == {"put_blob": 2, "get_blob": 2, "get_byte_range": 1}
    assert stats["counters"]["responses.get_blob.404"] == 1
    assert stats["stores"] == {"total": 2, "newlyCreated": 2, "alreadyCertified": 0}
    assert (stats["blobCount"], stats["objectCount"], stats["availableBlobCount"]) == (1, 2, 1)
    assert stats["faults"] == {}
    assert stats["settings"]["maxBlobSize"] == SMALL_BLOB_LIMIT


def test_admin_delete(client: httpx.Client) -> None:
    deletable = created(store(client, b"delete me"))
    response = client.delete(f"/_mock/blobs/{deletable['blobId']}")
    assert response.status_code == 200
    assert response.json() == {"blobId": deletable["blobId"],
                               "deletedObjects": [deletable["id"]], "available": False}
    assert client.get(f"/v1/blobs/{deletable['blobId']}").status_code == 404
    assert client.get(f"/v1/blobs/by-object-id/{deletable['id']}").status_code == 404
    assert client.delete(f"/_mock/blobs/{deletable['blobId']}").status_code == 404

    permanent = created(store(client, b"keep me", "?permanent=true"))
    refused = client.delete(f"/_mock/blobs/{permanent['blobId']}")
    assert refused.status_code == 400
    assert refused.json()["error"]["status"] == "FAILED_PRECONDITION"
    assert reason(refused) == "BLOB_NOT_DELETABLE"
    assert client.get(f"/v1/blobs/{permanent['blobId']}").status_code == 200

    # one of two objects: the blob stays readable through the other
    first = created(store(client, b"two owners"))
    second = created(store(client, b"two owners"))
    one = client.delete(f"/_mock/blobs/{first['blobId']}?object_id={first['id']}")
    assert one.json() == {"blobId": first["blobId"], "deletedObjects": [first["id"]],
                          "available": True}
    assert client.get(f"/v1/blobs/by-object-id/{first['id']}").status_code == 404
    assert client.get(f"/v1/blobs/by-object-id/{second['id']}").content == b"two owners"


def test_admin_delete_removes_file(relayer: EmbeddedRelayer, client: httpx.Client) -> None:
    obj = created(store(client, b"file to remove"))
    path = relayer.relayer.store.blob_path(obj["blobId"])
    assert path.read_bytes() == b"file to remove"
    client.delete(f"/_mock/blobs/{obj['blobId']}")
    assert not path.exists()
    # storing it again brings the file back
    store(client, b"file to remove")
    assert path.read_bytes() == b"file to remove"


def test_admin_reset_and_info(client: httpx.Client) -> None:
    store(client, b"a")
    client.post("/_mock/epoch/advance?by=3")
    info = client.get("/_mock/info").json()
    assert OBJECT_ID_RE.match(info["publisherAddress"])
    assert client.post("/_mock/reset").json() == {"reset": True}
    assert client.get("/_mock/blobs").json() == {"count": 0, "blobs": []}
    assert client.get("/_mock/epoch").json()["currentEpoch"] == 1
    assert client.get("/_mock/stats").json()["requests"] == {}


def test_admin_errors(client: httpx.Client) -> None:
    assert client.get("/_mock/blobs/not-an-id").status_code == 400
    assert client.get(f"/_mock/blobs/{blob_id_for(b'x')}").status_code == 404
    assert client.post("/_mock/epoch/advance?by=-1").status_code == 400
    assert client.put("/_mock/faults", json={"rate": 2}).status_code == 400
    assert client.put("/_mock/faults", json={"kinds": ["nope"]}).status_code == 400
    assert client.get("/_mock/blobs?available=maybe").status_code == 400


# -- publisher JWT auth -------------------------------------------------------------------


def test_publisher_jwt_auth(tmp_path: Path) -> None:
    from relayer_mock.auth import encode_token

    secret = "test-only-secret"
    now = int(time.time())

    def token(**claims: Any) -> dict[str, str]:
        body = {"exp": now + 600, "jti": f"jti-{claims}", **claims}
        return {"Authorization": f"Bearer {encode_token(body, secret)}"}

    def auth_reason(response: httpx.Response) -> tuple[int, str, str]:
        error = response.json()["error"]
        assert error["details"][0]["domain"] == "auth.publisher.walrus.space"
        return response.status_code, error["status"], error["details"][0]["reason"]

    with EmbeddedRelayer(tmp_path / "r", fsync=False, jwt_secret=secret,
                         jwt_verify_upload=True) as r, r.client() as c:
        missing = c.put("/v1/blobs", content=b"x")
        assert missing.status_code == 400 and missing.headers["content-type"].startswith("text")
        ok_headers = token()
        stored = c.put("/v1/blobs?epochs=1", content=b"x", headers=ok_headers)
        assert stored.status_code == 200
        replay = c.put("/v1/blobs?epochs=1", content=b"x", headers=ok_headers)
        assert auth_reason(replay) == (429, "RESOURCE_EXHAUSTED", "TOKEN_ALREADY_USED")
        forged = {"exp": now + 600, "jti": "forged"}
        wrong = {"Authorization": f"Bearer {encode_token(forged, 'other-secret')}"}
        assert auth_reason(c.put("/v1/blobs", content=b"x", headers=wrong)) == (
            401, "UNAUTHENTICATED", "INVALID_SIGNATURE")
        assert auth_reason(c.put("/v1/blobs", content=b"x", headers=token(exp=now - 1))) == (
            504, "DEADLINE_EXCEEDED", "EXPIRED_SIGNATURE")
        cases = [
            ("?epochs=2", token(epochs=3), "INVALID_EPOCHS"),
            ("?epochs=5", token(max_epochs=4), "INVALID_EPOCHS"),
            ("", token(size=2), "INVALID_SIZE"),
            ("", token(max_size=0), "INVALID_SIZE"),
            ("", token(send_object_to="0x" + "1" * 64), "INVALID_SEND_OBJECT_TO"),
            ("", token(epochs=1, max_epochs=2), "INCONSISTENT_TOKEN"),
            ("", {"Authorization": "Bearer not.a.token"}, "INVALID_TOKEN"),
        ]
        for query, headers, expected in cases:
            response = c.put(f"/v1/blobs{query}", content=b"x", headers=headers)
            assert auth_reason(response) == (400, "FAILED_PRECONDITION", expected), expected
        good = [("?epochs=3", token(epochs=3, size=1)), ("?epochs=4", token(max_epochs=4)),
                (f"?send_object_to=0x{'1' * 64}", token(send_object_to="0x" + "1" * 64))]
        for query, headers in good:
            assert c.put(f"/v1/blobs{query}", content=b"x", headers=headers).status_code == 200
        quilt = c.put("/v1/quilts", files={"a": b"1"}, headers=token(max_size=10**6))
        assert quilt.status_code == 200
        blob_id = stored.json()["newlyCreated"]["blobObject"]["blobId"]
        assert c.get(f"/v1/blobs/{blob_id}").status_code == 200  # reads need no token
        assert c.get("/_mock/stats").json()["settings"]["publisherAuth"] is True


def test_publisher_jwt_auth_accepts_pyjwt_tokens(tmp_path: Path) -> None:
    jwt = pytest.importorskip("jwt")
    with EmbeddedRelayer(tmp_path / "r", fsync=False, jwt_secret="s" * 32) as r, r.client() as c:
        encoded = jwt.encode({"exp": int(time.time()) + 60, "jti": "one"}, "s" * 32,
                             algorithm="HS256")
        response = c.put("/v1/blobs", content=b"x", headers={"Authorization": f"Bearer {encoded}"})
        assert response.status_code == 200
