"""AsyncWalrusClient parity: the same decisions as the sync client, awaited."""

from __future__ import annotations

import inspect
import random
from typing import Any

import httpx
import pytest
import respx

from tests.helpers_walrus import (
    AGGREGATORS,
    BLOB_ID,
    BLOB_NOT_FOUND,
    DATA17,
    NEWLY_CREATED,
    PATCH_A,
    PATCH_LIST,
    PUBLISHER,
    QUILT_ID,
    QUILT_RESULT,
    STORE_ERROR_200,
    FakeClock,
    envelope,
)
from walrus_mem.errors import (
    AggregatorUnavailable,
    BadRequest,
    BlobNotFound,
    InsufficientConfirmations,
    PublisherUnavailable,
    RateLimited,
    VerificationFailed,
)
from walrus_mem.walrus import AsyncWalrusClient, WalrusClient

pytestmark = pytest.mark.anyio
PUT_BLOBS = f"{PUBLISHER}/v1/blobs"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def mock():
    with respx.mock(assert_all_called=False) as router:
        yield router


def make(clock: FakeClock, aggregators: list[str] | None = None, **kw: Any) -> AsyncWalrusClient:
    return AsyncWalrusClient(
        kw.pop("publisher", PUBLISHER),
        AGGREGATORS if aggregators is None else aggregators,
        sleep=clock.async_sleep,
        clock=clock,
        rng=random.Random(3),
        **kw,
    )


async def test_same_public_api_as_sync() -> None:
    public = {n for n in dir(WalrusClient) if not n.startswith("_")}
    assert public - {"close"} <= {n for n in dir(AsyncWalrusClient) if not n.startswith("_")}
    for name in public - {"stats", "publisher_url", "publisher_urls", "aggregator_urls",
                          "request_caps", "request_cap", "cost_sink", "in_doubt"}:
        sync_params = list(inspect.signature(getattr(WalrusClient, name)).parameters)
        async_params = list(inspect.signature(getattr(AsyncWalrusClient, name)).parameters)
        assert sync_params == async_params, name
    assert list(inspect.signature(WalrusClient).parameters) == list(
        inspect.signature(AsyncWalrusClient).parameters)


async def test_store_retries_then_succeeds(mock, clock) -> None:
    route = mock.put(PUT_BLOBS).mock(side_effect=[
        httpx.Response(503), httpx.ReadError("reset"), httpx.Response(200, json=STORE_ERROR_200),
        httpx.Response(200, json=NEWLY_CREATED)])
    async with make(clock, token="secret") as client:
        result = await client.store_blob(DATA17)
    assert result.blob_id == BLOB_ID and result.cost == 132300
    assert route.call_count == 4 and len(clock.sleeps) == 3
    assert route.calls.last.request.headers["authorization"] == "Bearer secret"
    assert client.stats.retries == 3


async def test_store_errors_map_the_same(mock, clock) -> None:
    route = mock.put(PUT_BLOBS).mock(return_value=httpx.Response(
        504, json=envelope("DEADLINE_EXCEEDED", 504, "INSUFFICIENT_CONFIRMATIONS")))
    async with make(clock, publish_deadline=3) as client:
        with pytest.raises(InsufficientConfirmations):
            await client.store_blob(DATA17)
        assert clock.now - 1000 <= 3
        route.return_value = httpx.Response(400, text="Failed to deserialize query string: x")
        calls = route.call_count
        with pytest.raises(BadRequest):
            await client.store_blob(DATA17)
        assert route.call_count == calls + 1
        route.return_value = httpx.Response(429, text="busy", headers={"Retry-After": "99"})
        with pytest.raises(RateLimited) as info:
            await client.store_blob(DATA17)
        assert info.value.retry_after == 99
        route.side_effect = httpx.ConnectError
        with pytest.raises(PublisherUnavailable):
            await client.store_blob(DATA17)


async def test_quilt_and_patches(mock, clock) -> None:
    mock.put(f"{PUBLISHER}/v1/quilts").mock(return_value=httpx.Response(200, json=QUILT_RESULT))
    mock.get(f"{AGGREGATORS[0]}/v1/quilts/{QUILT_ID}/patches").mock(
        return_value=httpx.Response(200, json=PATCH_LIST))
    mock.get(f"{AGGREGATORS[0]}/v1/blobs/by-quilt-patch-id/{PATCH_A}").mock(
        return_value=httpx.Response(200, content=b"A"))
    mock.get(f"{AGGREGATORS[0]}/v1/blobs/by-quilt-id/{QUILT_ID}/walrus.jpg").mock(
        return_value=httpx.Response(200, content=b"W"))
    async with make(clock) as client:
        quilt = await client.store_quilt({"walrus.jpg": b"W", "another_walrus.jpg": b"A"})
        assert quilt.patches["another_walrus.jpg"] == PATCH_A
        patches = await client.list_quilt_patches(QUILT_ID)
        assert patches[0].identifier == "walrus-38.jpeg"
        assert await client.read_quilt_patch(PATCH_A) == b"A"
        assert await client.read_quilt_patch_by_identifier(QUILT_ID, "walrus.jpg") == b"W"


async def test_failover_and_verification(mock, clock) -> None:
    order: list[str] = []

    def answer(content: bytes | None):
        def handler(request: httpx.Request) -> httpx.Response:
            order.append(request.url.host)
            if content is None:
                raise httpx.ConnectError("refused", request=request)
            return httpx.Response(200, content=content)
        return handler

    for agg, content in zip(AGGREGATORS, [None, b"lie", b"truth"], strict=True):
        mock.get(f"{agg}/v1/blobs/{BLOB_ID}").mock(side_effect=answer(content))

    def verify(data: bytes) -> None:
        if data != b"truth":
            raise ValueError("mismatch")

    async with make(clock) as client:
        assert await client.read_blob(BLOB_ID, verify=verify) == b"truth"
        assert order == ["agg1.test", "agg2.test", "agg3.test"]
        assert client.stats.failovers == 2 and client.stats.verification_failures == 1
        assert "authorization" not in mock.calls.last.request.headers


async def test_nothing_verifies(mock, clock) -> None:
    mock.get(f"{AGGREGATORS[0]}/v1/blobs/{BLOB_ID}").mock(
        return_value=httpx.Response(200, content=b"bad"))

    def verify(data: bytes) -> None:
        raise KeyError("nope")

    async with make(clock, aggregators=AGGREGATORS[:1], read_deadline=2) as client:
        with pytest.raises(VerificationFailed) as info:
            await client.read_blob(BLOB_ID, verify=verify)
    assert isinstance(info.value.__cause__, KeyError)
    assert len(clock.sleeps) >= 2 and clock.now - 1000 <= 2


async def test_not_found_and_unavailable(mock, clock) -> None:
    for agg in AGGREGATORS:
        mock.get(f"{agg}/v1/blobs/{BLOB_ID}").mock(
            return_value=httpx.Response(404, json=BLOB_NOT_FOUND))
    async with make(clock) as client:
        with pytest.raises(BlobNotFound):
            await client.read_blob(BLOB_ID)
        assert clock.sleeps == []
        for agg in AGGREGATORS:
            mock.get(f"{agg}/v1/blobs/{BLOB_ID}").mock(return_value=httpx.Response(502))
        with pytest.raises(AggregatorUnavailable):
            await client.read_blob(BLOB_ID, deadline=1.5)


async def test_byte_range_and_status(mock, clock) -> None:
    mock.get(f"{AGGREGATORS[0]}/v1/blobs/{BLOB_ID}/byte-range").mock(
        return_value=httpx.Response(200, content=b"bc"))
    for url in [PUBLISHER, *AGGREGATORS]:
        mock.get(f"{url}/status").mock(return_value=httpx.Response(200, text="OK"))
    async with make(clock) as client:
        assert await client.read_byte_range(BLOB_ID, 1, 2) == b"bc"
        assert all((await client.status()).values())
    await client.close()  # idempotent alias
