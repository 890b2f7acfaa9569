"""Fault injection: every kind observable, reproducible with a seed, transient per request."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from relayer_mock._ids import b64url_encode, blob_id_for
from relayer_mock.embedded import EmbeddedRelayer
from relayer_mock.faults import (
    ALL_KINDS,
    FaultConfig,
    FaultInjector,
    FaultKind,
    RouteClass,
    parse_kinds,
)

FAST = {"fault_latency_ms": (0, 1)}
RETRYABLE = {429, 500, 503, 504}


@pytest.fixture
def relayer(tmp_path: Path) -> Iterator[EmbeddedRelayer]:
    with EmbeddedRelayer(tmp_path / "relayer", fsync=False) as embedded:
        yield embedded


@pytest.fixture
def client(relayer: EmbeddedRelayer) -> Iterator[httpx.Client]:
    with relayer.client() as c:
        yield c


def set_faults(client: httpx.Client, **config: object) -> None:
    response = client.put("/_mock/faults", json=config)
    assert response.status_code == 200, response.text


def verified(blob_id: str, content: bytes) -> bool:
    """The mock's ids are BLAKE2b-256 of the content, so tests can verify reads."""
    return b64url_encode(hashlib.blake2b(content, digest_size=32).digest()) == blob_id


# -- configuration ------------------------------------------------------------------------


def test_parse_kinds_and_aliases() -> None:
    assert parse_kinds("5xx,429") == (FaultKind.HTTP_500, FaultKind.HTTP_503,
                                      FaultKind.HTTP_504, FaultKind.HTTP_429)
    assert parse_kinds("all") == ALL_KINDS
    assert parse_kinds("error200,lying") == (FaultKind.STORE_ERROR, FaultKind.LIE)
    assert set(parse_kinds("reads")) == {
        FaultKind.HTTP_500, FaultKind.HTTP_503, FaultKind.HTTP_429, FaultKind.LATENCY,
        FaultKind.DROP, FaultKind.TRUNCATE, FaultKind.CORRUPT, FaultKind.LIE}
    with pytest.raises(ValueError, match="unknown fault kind"):
        parse_kinds("explode")


def test_fault_config_validation() -> None:
    config = FaultConfig.model_validate(
        {"kinds": "5xx", "latency_ms": "5-10", "probabilities": {"lying": 0.5}})
    assert config.kinds == (FaultKind.HTTP_500, FaultKind.HTTP_503, FaultKind.HTTP_504)
    assert config.latency_ms == (5, 10)
    assert config.probabilities == {FaultKind.LIE: 0.5}
    assert config.enabled
    assert not FaultConfig().enabled
    for bad in ({"rate": 1.5}, {"probabilities": {"500": 2}}, {"latency_ms": "9-3"},
                {"kinds": "nope"}, {"unknown": 1}):
        with pytest.raises(ValueError):
            FaultConfig.model_validate(bad)
    assert FaultConfig.model_validate_json(config.model_dump_json()) == config


def test_decisions_reproducible_and_applicable() -> None:
    def decisions(seed: int) -> list[str | None]:
        injector = FaultInjector(FaultConfig.mix(0.5, seed=seed))
        out = []
        for i in range(300):
            route = RouteClass.WRITE if i % 3 == 0 else RouteClass.READ
            kind = injector.decide(route, "r").kind
            out.append(None if kind is None else kind.value)
        return out

    first = decisions(11)
    assert first == decisions(11)
    assert first != decisions(12)
    assert 0.35 < sum(k is not None for k in first) / len(first) < 0.65
    writes = {k for i, k in enumerate(first) if i % 3 == 0 and k}
    reads = {k for i, k in enumerate(first) if i % 3 and k}
    assert not writes & {"truncate", "corrupt", "lie"}
    assert not reads & {"504", "store_error", "marked_invalid"}


def test_scope_limits_routes() -> None:
    injector = FaultInjector(FaultConfig(rate=1.0, scope="writes", seed=1))
    assert all(injector.decide(RouteClass.READ, "r").kind is None for _ in range(50))
    assert all(injector.decide(RouteClass.WRITE, "w").kind is not None for _ in range(50))


# -- each kind, observed through the HTTP API ---------------------------------------------


def _store_blobs(client: httpx.Client) -> list[str]:
    return [
        client.put("/v1/blobs", content=data).json()["newlyCreated"]["blobObject"]["blobId"]
        for data in (b"the first stored blob", b"a second, different blob")
    ]


def _error(response: httpx.Response) -> tuple[int, str, str]:
    error = response.json()["error"]
    return response.status_code, error["status"], error["details"][0]["reason"]


def test_fault_500(client: httpx.Client) -> None:
    set_faults(client, probabilities={"500": 1})
    response = client.put("/v1/blobs", content=b"x")
    assert _error(response) == (500, "INTERNAL", "INTERNAL_ERROR")
    assert response.json()["error"]["details"][1]["@type"] == "DebugInfo"
    assert client.get("/_mock/blobs").json()["count"] == 0


def test_fault_503(client: httpx.Client) -> None:
    blob_id = _store_blobs(client)[0]
    set_faults(client, probabilities={"503": 1})
    assert _error(client.get(f"/v1/blobs/{blob_id}")) == (503, "UNAVAILABLE", "BLOB_UNAVAILABLE")
    assert _error(client.put("/v1/blobs", content=b"x"))[:2] == (503, "UNAVAILABLE")


def test_fault_504_insufficient_confirmations(client: httpx.Client) -> None:
    set_faults(client, probabilities={"504": 1})
    response = client.put("/v1/blobs", content=b"x")
    assert _error(response) == (504, "DEADLINE_EXCEEDED", "INSUFFICIENT_CONFIRMATIONS")
    assert response.json()["error"]["message"] == (
        "the service timed-out while waiting for confirmations, please try again")


def test_fault_429_text_and_json(client: httpx.Client) -> None:
    set_faults(client, probabilities={"429": 1}, retry_after=1, rate_limit_body="text")
    text = client.put("/v1/blobs", content=b"x")
    assert text.status_code == 429
    assert text.headers["retry-after"] == "1"
    assert text.headers["content-type"].startswith("text/plain")
    assert text.text == "the publisher is receiving too many requests; please try again later"
    blob_id = blob_id_for(b"x")
    read = client.get(f"/v1/blobs/{blob_id}")
    assert read.text == "the aggregator is receiving too many requests; please try again later"
    set_faults(client, probabilities={"429": 1}, rate_limit_body="json")
    as_json = client.put("/v1/blobs", content=b"x")
    assert _error(as_json)[:2] == (429, "RESOURCE_EXHAUSTED")
    assert as_json.headers["retry-after"] == "0"


def test_fault_latency_still_succeeds(client: httpx.Client) -> None:
    set_faults(client, probabilities={"latency": 1}, fault_latency_ms=(1, 2))
    assert client.put("/v1/blobs", content=b"slow").status_code == 200
    assert client.get("/_mock/stats").json()["faults"] == {"latency": 1}


def test_fault_drop_is_transport_error(client: httpx.Client) -> None:
    blob_id = _store_blobs(client)[0]
    set_faults(client, probabilities={"drop": 1})
    with pytest.raises(httpx.RemoteProtocolError):
        client.get(f"/v1/blobs/{blob_id}")
    with pytest.raises(httpx.RemoteProtocolError):
        client.put("/v1/blobs", content=b"dropped after storing")
    # the store happened before the response was lost (a retry is a duplicate store)
    set_faults(client)
    assert client.get(f"/v1/blobs/{blob_id_for(b'dropped after storing')}").status_code == 200


def test_fault_truncate(client: httpx.Client) -> None:
    blob_id = _store_blobs(client)[0]
    set_faults(client, probabilities={"truncate": 1})
    response = client.get(f"/v1/blobs/{blob_id}")
    assert response.status_code == 200
    assert len(response.content) < len(b"the first stored blob")
    assert b"the first stored blob".startswith(response.content)
    assert response.headers["content-length"] == str(len(response.content))
    assert not verified(blob_id, response.content)


def test_fault_corrupt(client: httpx.Client) -> None:
    blob_id = _store_blobs(client)[0]
    set_faults(client, probabilities={"corrupt": 1})
    response = client.get(f"/v1/blobs/{blob_id}")
    assert response.status_code == 200
    assert len(response.content) == len(b"the first stored blob")
    assert response.content != b"the first stored blob"
    assert not verified(blob_id, response.content)


def test_fault_lie_serves_another_blob(client: httpx.Client) -> None:
    first, second = _store_blobs(client)
    set_faults(client, probabilities={"lie": 1})
    response = client.get(f"/v1/blobs/{first}")
    assert response.status_code == 200
    assert response.headers["etag"] == first  # it lies about which blob this is
    assert response.content == b"a second, different blob"
    assert verified(second, response.content) and not verified(first, response.content)
    assert client.get("/_mock/stats").json()["faults"] == {"lie": 1}


def test_fault_lie_without_other_blobs_still_lies(client: httpx.Client) -> None:
    blob_id = client.put("/v1/blobs", content=b"alone").json()["newlyCreated"]["blobObject"][
        "blobId"]
    set_faults(client, probabilities={"lie": 1})
    response = client.get(f"/v1/blobs/{blob_id}")
    assert response.status_code == 200 and response.content != b"alone"


def test_fault_store_error_200(client: httpx.Client) -> None:
    set_faults(client, probabilities={"store_error": 1}, seed=3)
    seen_null = seen_id = False
    for i in range(12):
        response = client.put("/v1/blobs", content=b"never stored %d" % i)
        assert response.status_code == 200
        body = response.json()
        assert list(body) == ["error"]
        assert list(body["error"]) == ["blobId", "failurePhase", "errorMsg"]
        assert body["error"]["failurePhase"] in ("register", "store", "certify")
        seen_null |= body["error"]["blobId"] is None
        seen_id |= body["error"]["blobId"] is not None
    assert seen_null and seen_id
    assert client.get("/_mock/blobs").json()["count"] == 0
    quilt = client.put("/v1/quilts", files={"a": b"1"})
    assert quilt.status_code == 200
    assert list(quilt.json()["blobStoreResult"]) == ["error"]
    assert quilt.json()["storedQuiltBlobs"] == []


def test_fault_marked_invalid(client: httpx.Client) -> None:
    set_faults(client, probabilities={"marked_invalid": 1})
    response = client.put("/v1/blobs", content=b"x")
    assert _error(response) == (500, "INTERNAL", "INTERNAL_ERROR")
    assert "marked invalid" in response.json()["error"]["message"]
    quilt = client.put("/v1/quilts", files={"a": b"1"})  # put_quilt returns it as 200
    assert quilt.status_code == 200
    result = quilt.json()["blobStoreResult"]["markedInvalid"]
    assert list(result) == ["blobId", "event"]
    assert quilt.json()["storedQuiltBlobs"] == []


def test_admin_and_status_never_faulted(client: httpx.Client) -> None:
    set_faults(client, rate=1.0, kinds="5xx,429,drop")
    for _ in range(20):
        assert client.get("/status").text == "OK"
        assert client.get("/_mock/stats").status_code == 200
    for _ in range(5):
        try:
            assert client.put("/v1/blobs", content=b"x").status_code in RETRYABLE
        except httpx.RemoteProtocolError:
            pass  # the drop fault


def test_runtime_fault_changes(client: httpx.Client) -> None:
    set_faults(client, probabilities={"500": 1}, seed=4)
    assert client.put("/v1/blobs", content=b"x").status_code == 500
    patched = client.patch("/_mock/faults", json={"probabilities": {}})
    assert patched.json()["seed"] == 4 and patched.json()["enabled"] is False
    assert client.put("/v1/blobs", content=b"x").status_code == 200
    stats = client.get("/_mock/stats").json()
    assert stats["faults"] == {"500": 1}
    assert stats["counters"]["faults_by_route.put_blob.500"] == 1


def test_latency_added_to_every_request_is_counted_nowhere(client: httpx.Client) -> None:
    set_faults(client, latency_ms=(1, 2))
    assert client.put("/v1/blobs", content=b"x").status_code == 200
    assert client.get("/_mock/stats").json()["faults"] == {}


# -- reproducibility and transience -------------------------------------------------------


def _run(path: Path, seed: int) -> tuple[list[object], list[str]]:
    faults = FaultConfig.mix(0.5, seed=seed, **FAST)
    outcomes: list[object] = []
    with EmbeddedRelayer(path, fsync=False, faults=faults) as relayer, relayer.client() as c:
        for i in range(80):
            data = b"blob number %d" % (i % 9)
            try:
                response = c.put("/v1/blobs", content=data)
                outcomes.append(("put", response.status_code, sorted(response.json())
                                 if response.headers.get("content-type") == "application/json"
                                 else response.text))
            except httpx.TransportError as exc:
                outcomes.append(("put", type(exc).__name__))
            try:
                read = c.get(f"/v1/blobs/{blob_id_for(data)}")
                digest = hashlib.sha256(read.content).hexdigest() if read.is_success else ""
                outcomes.append(("get", read.status_code, digest))
            except httpx.TransportError as exc:
                outcomes.append(("get", type(exc).__name__))
        log = [entry["kind"] for entry in c.get("/_mock/faults/log").json()["faults"]]
    return outcomes, log


def test_same_seed_same_sequence(tmp_path: Path) -> None:
    first, first_log = _run(tmp_path / "a", seed=42)
    second, second_log = _run(tmp_path / "b", seed=42)
    other, other_log = _run(tmp_path / "c", seed=43)
    assert first == second
    assert first_log == second_log
    assert len(set(first_log)) >= 8  # most kinds show up in 160 requests at rate 0.5
    assert first != other


def _store_with_retries(client: httpx.Client, data: bytes, attempts: list[int]) -> str:
    for attempt in range(1, 40):
        try:
            response = client.put("/v1/blobs", content=data)
        except httpx.TransportError:
            continue
        if response.status_code in RETRYABLE:
            continue
        assert response.status_code == 200, response.text
        body = response.json()
        if "error" in body:
            continue
        attempts.append(attempt)
        result = body.get("newlyCreated", {}).get("blobObject") or body["alreadyCertified"]
        return str(result["blobId"])
    raise AssertionError("store did not get through")


def _read_verified(client: httpx.Client, blob_id: str, attempts: list[int]) -> bytes:
    for attempt in range(1, 40):
        try:
            response = client.get(f"/v1/blobs/{blob_id}")
        except httpx.TransportError:
            continue
        if response.status_code in RETRYABLE:
            continue
        assert response.status_code == 200, response.text
        if verified(blob_id, response.content):
            attempts.append(attempt)
            return response.content
    raise AssertionError("read did not verify")


def test_faults_are_transient_so_retries_get_through(tmp_path: Path) -> None:
    faults = FaultConfig.mix(0.3, seed=2024, **FAST)
    store_attempts: list[int] = []
    read_attempts: list[int] = []
    with EmbeddedRelayer(tmp_path / "r", fsync=False, faults=faults) as relayer:
        with relayer.client() as c:
            blobs = {}
            for i in range(120):
                data = b"fact %d " % i + bytes(i % 13)
                blobs[_store_with_retries(c, data, store_attempts)] = data
            for blob_id, data in blobs.items():
                assert _read_verified(c, blob_id, read_attempts) == data
            stats = c.get("/_mock/stats").json()
    assert len(blobs) == 120
    assert max(store_attempts) > 1 and max(read_attempts) > 1
    assert set(stats["faults"]) == {k.value for k in ALL_KINDS}
    # a dropped store response means the retry stored the bytes again
    assert stats["stores"]["newlyCreated"] >= 120 + stats["counters"].get(
        "faults_by_route.put_blob.drop", 0)


@pytest.mark.parametrize("kind", ["truncate", "corrupt", "lie"])
def test_silent_faults_on_every_read_route(client: httpx.Client, kind: str) -> None:
    first, _ = _store_blobs(client)
    quilt = client.put("/v1/quilts", files={"p": b"patch bytes here"}).json()
    patch_id = quilt["storedQuiltBlobs"][0]["quiltPatchId"]
    quilt_id = patch_id[:43]
    object_id = client.put("/v1/blobs", content=b"the first stored blob").json()[
        "newlyCreated"]["blobObject"]["id"]
    set_faults(client, probabilities={kind: 1})
    reads: list[tuple[str, bytes, dict[str, str]]] = [
        (f"/v1/blobs/{first}", b"the first stored blob", {}),
        (f"/v1/blobs/{first}", b"first", {"Range": "bytes=4-8"}),
        (f"/v1/blobs/{first}/byte-range?start=4&length=5", b"first", {}),
        (f"/v1/blobs/by-object-id/{object_id}", b"the first stored blob", {}),
        (f"/v1/blobs/by-quilt-patch-id/{patch_id}", b"patch bytes here", {}),
        (f"/v1/blobs/by-quilt-id/{quilt_id}/p", b"patch bytes here", {}),
    ]
    for path, good, headers in reads:
        response = client.get(path, headers=headers)
        assert response.status_code in (200, 206)
        assert response.content != good, path
    assert client.get("/_mock/stats").json()["faults"] == {kind: len(reads)}
