"""EmbeddedRelayer: socket-free sync and async httpx transports."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from relayer_mock import EmbeddedRelayer, FaultConfig
from relayer_mock._ids import blob_id_for
from relayer_mock.embedded import EMBEDDED_BASE_URL


def test_sync_client_with_plain_httpx(tmp_path: Path) -> None:
    relayer = EmbeddedRelayer(tmp_path / "r")
    try:
        assert relayer.base_url == EMBEDDED_BASE_URL == "http://relayer.embedded"
        assert isinstance(relayer.transport, httpx.BaseTransport)
        with httpx.Client(transport=relayer.transport, base_url=relayer.base_url) as client:
            stored = client.put("/v1/blobs?epochs=2", content=b"embedded")
            assert stored.status_code == 200
            blob_id = stored.json()["newlyCreated"]["blobObject"]["blobId"]
            read = client.get(f"/v1/blobs/{blob_id}")
            assert read.content == b"embedded"
            assert read.headers["etag"] == blob_id
            assert read.request.url.host == "relayer.embedded"
    finally:
        relayer.close()
    relayer.close()  # idempotent


def test_async_transport(tmp_path: Path) -> None:
    async def run(relayer: EmbeddedRelayer) -> list[bytes]:
        async with relayer.async_client() as client:
            ids = []
            for i in range(5):
                response = await client.put("/v1/blobs", content=b"async %d" % i)
                ids.append(response.json()["newlyCreated"]["blobObject"]["blobId"])
            reads = await asyncio.gather(*(client.get(f"/v1/blobs/{i}") for i in ids))
            return [r.content for r in reads]

    with EmbeddedRelayer(tmp_path / "r", fsync=False) as relayer:
        assert asyncio.run(run(relayer)) == [b"async %d" % i for i in range(5)]
        # the sync side sees what the async side stored (same app, same store)
        with relayer.client() as client:
            assert client.get("/_mock/stats").json()["blobCount"] == 5


def test_sync_transport_is_thread_safe(tmp_path: Path) -> None:
    with EmbeddedRelayer(tmp_path / "r", fsync=False) as relayer, relayer.client() as client:
        def work(i: int) -> bytes:
            data = b"thread %d" % i
            assert client.put("/v1/blobs", content=data).status_code == 200
            return client.get(f"/v1/blobs/{blob_id_for(data)}").content

        with ThreadPoolExecutor(12) as pool:
            results = list(pool.map(work, range(120)))
        assert results == [b"thread %d" % i for i in range(120)]
        assert client.get("/_mock/stats").json()["requests"]["put_blob"] == 120


def test_embedded_streams_request_bodies(tmp_path: Path) -> None:
    with EmbeddedRelayer(tmp_path / "r", fsync=False) as relayer, relayer.client() as client:
        response = client.put("/v1/blobs", content=iter([b"chunk-1|", b"chunk-2"]))
        assert response.json()["newlyCreated"]["blobObject"]["size"] == 15


def test_embedded_faults_are_opt_in(tmp_path: Path) -> None:
    with EmbeddedRelayer(tmp_path / "r", fsync=False) as relayer:
        assert relayer.relayer.injector.config.enabled is False
    faults = FaultConfig.only("drop", 1.0)
    with EmbeddedRelayer(tmp_path / "r", fsync=False, faults=faults) as relayer:
        with relayer.client() as client, pytest.raises(httpx.RemoteProtocolError):
            client.put("/v1/blobs", content=b"x")

        async def run() -> None:
            async with relayer.async_client() as client:
                await client.put("/v1/blobs", content=b"x")

        with pytest.raises(httpx.RemoteProtocolError):
            asyncio.run(run())


def test_closed_relayer_refuses_requests(tmp_path: Path) -> None:
    relayer = EmbeddedRelayer(tmp_path / "r", fsync=False)
    client = relayer.client()
    relayer.close()
    with pytest.raises(httpx.ConnectError):
        client.get("/status")
    client.close()
    assert not relayer._loop_thread.thread.is_alive()


def test_read_timeout_maps_to_httpx(tmp_path: Path) -> None:
    faults = FaultConfig.model_validate({"latency_ms": (300, 300)})
    with EmbeddedRelayer(tmp_path / "r", fsync=False, faults=faults) as relayer:
        with relayer.client(timeout=0.05) as client, pytest.raises(httpx.ReadTimeout):
            client.put("/v1/blobs", content=b"slow")
