"""The Walrus client against relayer_mock over real loopback HTTP.

Each test starts :class:`relayer_mock.server.RelayerServer` on a free 127.0.0.1
port over a temp data dir. Figures (retries, faults seen) are printed; run with
``-s`` to see them.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from relayer_mock.embedded import EmbeddedRelayer
from relayer_mock.faults import FaultConfig
from relayer_mock.server import RelayerServer
from tests.helpers_walrus import FakeClock
from walrus_mem._walrus.retry import RetryPolicy
from walrus_mem.errors import BlobNotFound, BodyTooLarge, InvalidInput, StoreFailed
from walrus_mem.walrus import MAX_BLOB_BODY, AsyncWalrusClient, WalrusClient


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "relayer"


@pytest.fixture
def server(data_dir: Path) -> Iterator[RelayerServer]:
    with RelayerServer(data_dir, fsync=False) as srv:
        yield srv


@pytest.fixture
def client(server: RelayerServer) -> Iterator[WalrusClient]:
    with WalrusClient(server.url, [server.url]) as c:
        yield c


def advance_epoch(server: RelayerServer, by: int = 1) -> int:
    response = httpx.post(f"{server.url}/_mock/epoch/advance", params={"by": by},
                          headers=server.admin_headers)
    response.raise_for_status()
    return int(response.json()["currentEpoch"])


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def hash_check(expected: str):
    def verify(data: bytes) -> None:
        if sha(data) != expected:
            raise ValueError("content hash mismatch")
    return verify


def test_blob_round_trips(client: WalrusClient) -> None:
    rng = random.Random(1)
    for size in (0, 1, 17, 4096, 445_557, 2 * 1024 * 1024):
        data = rng.randbytes(size)
        stored = client.store_blob(data, epochs=2)
        assert stored.newly_created and len(stored.blob_id) == 43
        assert stored.registered_epoch is not None
        assert stored.end_epoch == stored.registered_epoch + 2
        assert stored.cost and stored.cost > 0
        # every blob up to 445,556 bytes pays the same 63 storage units
        assert stored.encoded_length is not None
        assert (stored.encoded_length == 66_034_000) == (size <= 445_556)
        assert client.read_blob(stored.blob_id, verify=hash_check(sha(data))) == data
    assert client.stats.retries == 0 and not client.stats.faults


def test_byte_range_and_repeat_store(client: WalrusClient) -> None:
    data = bytes(range(256)) * 10
    first = client.store_blob(data, permanent=True, epochs=5)
    assert first.deletable is False
    assert client.read_byte_range(first.blob_id, 300, 20) == data[300:320]
    again = client.store_blob(data, permanent=True, epochs=3)
    assert again.blob_id == first.blob_id and again.newly_created is False
    assert again.object_id is None and again.tx_digest


def test_quilt_round_trip(client: WalrusClient) -> None:
    files = {f"fact-{i:03d}": f"sealed fact number {i}".encode() * (i + 1) for i in range(30)}
    files["notes/2024 q1?#%.md"] = b"odd identifier"
    files["caf\u00e9 \u2615"] = b"unicode identifier"
    quilt = client.store_quilt(files, metadata={"fact-001": {"kind": "fact", "ns": "a"}})
    assert set(quilt.patches) == set(files)
    assert quilt.blob.newly_created
    patches = client.list_quilt_patches(quilt.quilt_id)
    assert {p.identifier: p.patch_id for p in patches} == quilt.patches
    assert next(p for p in patches if p.identifier == "fact-001").tags == {
        "kind": "fact", "ns": "a"}
    for identifier, data in files.items():
        patch_id = quilt.patches[identifier]
        assert client.read_quilt_patch(patch_id, verify=hash_check(sha(data))) == data
        assert client.read_quilt_patch_by_identifier(quilt.quilt_id, identifier) == data


def test_epoch_expiry_gives_blob_not_found(server: RelayerServer, client: WalrusClient) -> None:
    stored = client.store_blob(b"short-lived", epochs=1)
    longer = client.store_blob(b"longer-lived", epochs=3)
    advance_epoch(server)
    # a fresh client: this one would treat a 404 of a just-stored blob as cache lag
    with WalrusClient(None, [server.url]) as reader:
        with pytest.raises(BlobNotFound) as info:
            reader.read_blob(stored.blob_id)
        assert info.value.status_code == 404 and info.value.reason == "BLOB_NOT_FOUND"
        assert reader.read_blob(longer.blob_id) == b"longer-lived"
        assert reader.stats.retries == 0


def test_recent_store_404_is_retried_until_deadline(server: RelayerServer) -> None:
    # The deadline runs on a fake clock that only the client's sleeps advance, and
    # every request keeps >= 2 s of it. On the real clock (deadline 0.5 s) the last
    # retry could get as little as 50 ms: a response slowed by a loaded machine
    # timed out and the read ended with AggregatorUnavailable instead of the 404.
    clock = FakeClock()
    policy = RetryPolicy(min_request_time=2.0)
    with WalrusClient(server.url, [server.url], clock=clock, sleep=clock.sleep,
                      rng=random.Random(0), retry=policy) as client:
        stored = client.store_blob(b"gone at once", epochs=1)
        advance_epoch(server)
        with pytest.raises(BlobNotFound):
            client.read_blob(stored.blob_id, deadline=10.0)
        retries = client.stats.retry_reasons["not_found_after_store"]
    assert retries >= 2 and retries == len(clock.sleeps)
    # retried until too little of the deadline would remain, never past it
    last_start = 10.0 - policy.min_request_time
    assert last_start - policy.max_delay <= sum(clock.sleeps) <= last_start


def test_a_forgotten_store_404_fails_at_once(server: RelayerServer, client: WalrusClient) -> None:
    stored = client.store_blob(b"deleted by its owner", epochs=1)
    advance_epoch(server)
    client.forget_stored(stored.blob_id)  # e.g. Memory.forget deleted it
    with pytest.raises(BlobNotFound):
        client.read_blob(stored.blob_id, deadline=30.0)
    assert client.stats.retries == 0 and client.stats.deadline_exhaustions == 0


def test_restart_persistence(data_dir: Path) -> None:
    with RelayerServer(data_dir, fsync=False) as first, WalrusClient(first.url, [first.url]) as c:
        blob = c.store_blob(b"survives a restart", epochs=5)
        quilt = c.store_quilt({"a": b"A", "b": b"B"}, epochs=5)
    with RelayerServer(data_dir, fsync=False) as second, WalrusClient(None, [second.url]) as c:
        assert c.read_blob(blob.blob_id) == b"survives a restart"
        assert c.read_quilt_patch(quilt.patches["b"]) == b"B"


def test_server_413_is_body_too_large(server: RelayerServer) -> None:
    with WalrusClient(server.url, [server.url], max_blob_size=2 * MAX_BLOB_BODY) as c:
        with pytest.raises(BodyTooLarge) as info:
            c.store_blob(b"\0" * (MAX_BLOB_BODY + 1))
    assert info.value.status_code == 413
    assert "length limit exceeded" in str(info.value)


def test_bad_quilt_identifier_refused_locally(client: WalrusClient) -> None:
    with pytest.raises(InvalidInput):
        client.store_quilt({"ends with space ": b"x"})


def test_status_and_unreachable(server: RelayerServer) -> None:
    dead = "http://127.0.0.1:9"  # discard port: nothing listens
    with WalrusClient(server.url, [dead, server.url]) as c:
        assert c.status() == {f"publisher:{server.url}": True, f"aggregator:{dead}": False,
                              f"aggregator:{server.url}": True}
        stored = c.store_blob(b"failover")
        assert c.read_blob(stored.blob_id) == b"failover"
        assert c.stats.failovers == 1 and c.stats.faults["transport_ConnectError"] == 1


def test_embedded_transport(tmp_path: Path) -> None:
    with EmbeddedRelayer(tmp_path / "embedded", fsync=False) as relayer, WalrusClient(
        relayer.base_url, [relayer.base_url], transport=relayer.transport
    ) as c:
        stored = c.store_blob(b"in-process")
        assert c.read_blob(stored.blob_id) == b"in-process"


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_async_client_over_loopback(server: RelayerServer, anyio_backend: str) -> None:
    async with AsyncWalrusClient(server.url, [server.url]) as c:
        stored = await c.store_blob(b"async bytes")
        assert await c.read_blob(stored.blob_id, verify=hash_check(sha(b"async bytes"))) == (
            b"async bytes")
        quilt = await c.store_quilt({"x": b"X"})
        assert await c.read_quilt_patch(quilt.patches["x"]) == b"X"


# -- faults ---------------------------------------------------------------------------


def _server_faults(server: RelayerServer) -> Counter[str]:
    log = httpx.get(f"{server.url}/_mock/faults/log",
                    headers=server.admin_headers).json()["faults"]
    return Counter(entry.get("kind") for entry in log)


@pytest.mark.slow
def test_500_stores_through_fault_rate_0_3(data_dir: Path) -> None:
    """--fault-rate 0.3 with every fault kind on: every store succeeds through retries,
    every read returns exactly the stored bytes once verified."""
    faults = FaultConfig.mix(0.3, seed=20260822, retry_after=0)
    rng = random.Random(42)
    with RelayerServer(data_dir, faults=faults, fsync=False) as srv, WalrusClient(
        srv.url, [srv.url], rng=random.Random(5), publish_deadline=30, read_deadline=30
    ) as c:
        stored: list[tuple[str, bytes]] = []
        for i in range(500):
            data = f"fact {i} ".encode() + rng.randbytes(rng.randint(64, 2048))
            while True:
                try:
                    result = c.store_blob(data)
                    break
                except StoreFailed as exc:  # marked invalid is final (the mock's is random)
                    assert exc.reason == "MARKED_INVALID", exc
            stored.append((result.blob_id, data))
        store_stats = c.stats.snapshot()
        for blob_id, data in stored:
            assert c.read_blob(blob_id, verify=hash_check(sha(data))) == data
        read_stats = c.stats.snapshot()
        server_stats = httpx.get(f"{srv.url}/_mock/stats", headers=srv.admin_headers).json()
    assert len({b for b, _ in stored}) == 500
    assert store_stats["retries"] > 0 and read_stats["verification_failures"] > 0
    assert read_stats["deadline_exhaustions"] == 0
    injected = server_stats["faults"]
    assert {"500", "503", "504", "429", "drop", "store_error", "marked_invalid", "lie",
            "corrupt", "truncate"} <= set(injected), injected
    report = {
        "store_phase": store_stats,
        "total": read_stats,
        "server_counters": {k: v for k, v in server_stats.items()
                            if k in ("faults", "counters", "requests")},
    }
    print("\nfault-rate 0.3, 500 stores + 500 verified reads:\n"
          + json.dumps(report, indent=1, sort_keys=True))


def test_lying_aggregator_is_detected_and_skipped(data_dir: Path) -> None:
    """Two servers over one data dir: the first lies on every read, the second is honest."""
    liar_faults = FaultConfig.only("lie", 1.0, seed=3)
    with RelayerServer(data_dir, fsync=False) as honest, RelayerServer(
        data_dir, faults=liar_faults, fsync=False
    ) as liar, WalrusClient(honest.url, [liar.url, honest.url]) as c:
        blobs = {c.store_blob(f"memory {i}".encode() * 20).blob_id: f"memory {i}".encode() * 20
                 for i in range(10)}
        # without verification the liar's bytes would be accepted
        some_id, some_data = next(iter(blobs.items()))
        with WalrusClient(None, [liar.url]) as naive:
            assert naive.read_blob(some_id) != some_data
        for blob_id, data in blobs.items():
            assert c.read_blob(blob_id, verify=hash_check(sha(data))) == data
        stats = c.stats.snapshot()
        lies = _server_faults(liar)
    # The liar is caught once, then benched (asked last) for the rest of the reads.
    assert stats["verification_failures"] == 1
    assert stats["failovers"] == 1
    assert stats["faults"] == {"verification": 1}
    assert list(c._core.aggregator_health.benched()) == [liar.url]
    print(f"\nlying aggregator: {stats}, liar's fault log: {dict(lies)}")
