"""Roles and failover on strict relayer_mock ports: split publisher/aggregator deployments,
a publisher that is down, an aggregator whose operator blocks everything (451), and the
mock's time realism (store latency with 503 while storing, 404 right after a store)."""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from relayer_mock._ids import blob_id_for
from relayer_mock._realism import StoreLatency
from relayer_mock.server import RelayerServer
from tests.helpers_memory import MASTER_HEX, make_settings
from walrus_mem.errors import AggregatorUnavailable, ForbiddenBlob
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder
from walrus_mem.walrus import WalrusClient


def _closed_port_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


def _counters(server: RelayerServer) -> dict[str, int]:
    with server.client() as admin:
        counters: dict[str, int] = admin.get("/_mock/stats").json()["counters"]
    return counters


@pytest.fixture
def split(tmp_path: Path) -> Iterator[tuple[str, str, str, str]]:
    """(down publisher, publisher, blocking aggregator, aggregator) over one data dir."""
    data = tmp_path / "walrus"
    with RelayerServer(data, fsync=False, role="publisher") as publisher, \
            RelayerServer(data, fsync=False, role="aggregator",
                          operator_blocklist=["*"]) as blocking, \
            RelayerServer(data, fsync=False, role="aggregator") as aggregator:
        yield _closed_port_url(), publisher.url, blocking.url, aggregator.url


def test_roles_serve_only_their_routes(split: tuple[str, str, str, str]) -> None:
    _, publisher, _, aggregator = split
    stored = httpx.put(f"{publisher}/v1/blobs", content=b"role split").json()
    blob_id = stored["newlyCreated"]["blobObject"]["blobId"]
    no_read = httpx.get(f"{publisher}/v1/blobs/{blob_id}")
    assert (no_read.status_code, no_read.content) == (404, b"")  # like `walrus publisher`
    assert httpx.put(f"{aggregator}/v1/blobs", content=b"x").status_code in (404, 405)
    assert httpx.get(f"{aggregator}/v1/blobs/{blob_id}").content == b"role split"
    for url in (publisher, aggregator):
        assert httpx.get(f"{url}/status").text == "OK"


def test_client_fails_over_both_roles(split: tuple[str, str, str, str]) -> None:
    down, publisher, blocking, aggregator = split
    with WalrusClient([down, publisher], [blocking, aggregator], publish_deadline=5.0,
                      read_deadline=5.0) as client:
        stored = client.store_blob(b"failover on both sides")
        assert client.read_blob(stored.blob_id) == b"failover on both sides"
        quilt = client.store_quilt({"a": b"one", "b": b"two"})
        assert client.read_quilt_patch(quilt.patches["b"]) == b"two"
        assert [p.identifier for p in client.list_quilt_patches(quilt.quilt_id)] == ["a", "b"]
        client.read_back(b"one", patch_id=quilt.patches["a"])
        snap = client.stats.snapshot()
        benched = client._core.publisher_health.benched()
    assert snap["failovers"] >= 2 and snap["faults"].get("http_451", 0) >= 1
    assert down in benched  # the refused publisher sits out: later stores go straight on
    with WalrusClient(None, [blocking]) as only_blocked, pytest.raises(ForbiddenBlob):
        only_blocked.read_blob(stored.blob_id)


def test_memory_on_a_split_deployment(tmp_path: Path, split: tuple[str, str, str, str],
                                      fake_embedder: HashEmbedder) -> None:
    down, publisher, blocking, aggregator = split
    settings = make_settings(tmp_path / "a", publisher_url=down, publisher_urls=[publisher],
                             aggregator_urls=[blocking, aggregator], publish_deadline=5.0,
                             read_deadline=5.0)
    with Memory(settings, embedder=fake_embedder, master_key=MASTER_HEX) as memory:
        one = memory.remember("the user prefers the window seat")
        many = memory.remember_many([f"trip detail {i}" for i in range(4)])
        report = memory.sync()
        assert report.errors == [] and report.still_queued == 0
        assert memory.get(one.id, verify=True).text == one.text
        assert memory.get(many.records[2].id, verify=True).text == "trip detail 2"
        head = report.manifests["default"]
    fresh = make_settings(tmp_path / "b", aggregator_urls=[blocking, aggregator],
                          read_deadline=5.0)
    with Memory(fresh, embedder=fake_embedder, master_key=MASTER_HEX) as restored:
        result = restored.restore("default", head)
        assert result.failed == [] and result.restored == 5


def test_reads_never_go_to_a_publisher_only_url(tmp_path: Path,
                                                fake_embedder: HashEmbedder) -> None:
    with RelayerServer(tmp_path / "walrus", fsync=False, role="publisher") as publisher:
        settings = make_settings(tmp_path / "m", publisher_url=publisher.url,
                                 verify_publish="none", read_deadline=1.0)
        with Memory(settings, embedder=fake_embedder, master_key=MASTER_HEX) as memory:
            record = memory.remember("stored, but nowhere to read it from")
            assert memory.get(record.id).status == "published"
            with pytest.raises(AggregatorUnavailable, match="publisher_serves_reads"):
                memory.get(record.id, verify=True)
        reads = sum(v for k, v in _counters(publisher).items()
                    if k.startswith("requests.get"))
        assert reads == 0


def test_publisher_serves_reads_when_told(tmp_path: Path, fake_embedder: HashEmbedder) -> None:
    with RelayerServer(tmp_path / "walrus", fsync=False) as daemon:  # role both
        settings = make_settings(tmp_path / "m", publisher_url=daemon.url,
                                 publisher_serves_reads=True)
        with Memory(settings, embedder=fake_embedder, master_key=MASTER_HEX) as memory:
            record = memory.remember("a daemon serves both roles")
            assert memory.get(record.id, verify=True).status == "published"


def test_store_latency_gives_503_while_storing(tmp_path: Path) -> None:
    data = b"slow to certify"
    with RelayerServer(tmp_path / "walrus", fsync=False, store_latency="600") as server:
        done: list[int] = []
        thread = threading.Thread(target=lambda: done.append(
            httpx.put(f"{server.url}/v1/blobs", content=data, timeout=10).status_code))
        thread.start()
        time.sleep(0.2)
        during = httpx.get(f"{server.url}/v1/blobs/{blob_id_for(data)}")
        thread.join()
        after = httpx.get(f"{server.url}/v1/blobs/{blob_id_for(data)}")
    assert during.status_code == 503
    assert during.json()["error"]["details"][0]["reason"] == "BLOB_UNAVAILABLE"
    assert done == [200] and after.content == data


def test_not_found_right_after_store_is_waited_out(tmp_path: Path) -> None:
    with RelayerServer(tmp_path / "walrus", fsync=False, not_found_after_store=0.4) as server, \
            WalrusClient(server.url, [server.url], read_deadline=5.0) as client:
        stored = client.store_blob(b"cached 404 for a while")
        assert httpx.get(f"{server.url}/v1/blobs/{stored.blob_id}").status_code == 404
        assert client.read_blob(stored.blob_id) == b"cached 404 for a while"
        assert client.stats.faults["not_found_after_store"] >= 1


def test_store_latency_distributions() -> None:
    rng = random.Random(5)
    assert StoreLatency.parse("0").sample(rng) == 0 and not StoreLatency.parse(None).enabled
    assert StoreLatency.parse("250").sample(rng) == 0.25
    uniform = [StoreLatency.parse("100-300").sample(rng) for _ in range(200)]
    assert 0.1 <= min(uniform) and max(uniform) <= 0.3
    lognormal = sorted(StoreLatency.parse("lognormal:200:0.5").sample(rng) for _ in range(401))
    assert 0.15 < lognormal[200] < 0.27  # the median is the median
    exp = [StoreLatency.parse("exp:100").sample(rng) for _ in range(400)]
    assert 0.07 < sum(exp) / len(exp) < 0.13
    for bad in ("-5", "300-100", "lognormal:x:1", "exp:", "nan", "fast"):
        with pytest.raises(ValueError):
            StoreLatency.parse(bad)
    assert StoreLatency.parse("lognormal:300:0.6").describe() == "lognormal:300:0.6"


def test_endpoint_health_benches_and_recovers() -> None:
    from walrus_mem._walrus.endpoints import EndpointHealth

    now = [100.0]
    health = EndpointHealth(lambda: now[0], base_cooldown=5.0, max_cooldown=20.0)
    urls = ["a", "b", "c"]
    assert health.order(urls) == urls
    health.failed("a")
    health.failed("b")
    health.failed("b")  # benched longer: 10 s
    assert health.order(urls) == ["c", "a", "b"]
    now[0] += 6.0  # a is back, b still out
    assert health.order(urls) == ["a", "c", "b"]
    for _ in range(10):
        health.failed("c")
    assert health.benched()["c"] == 20.0  # capped
    health.succeeded("b")
    assert health.order(urls) == ["a", "b", "c"]


def test_cli_role_and_lenient_options(tmp_path: Path) -> None:
    from relayer_mock.cli import main
    from relayer_mock.server import RelayerProcess

    assert main(["--role", "reader"]) == 2
    assert main(["--store-latency-ms", "fast"]) == 2
    data = tmp_path / "walrus"
    with RelayerProcess(data, extra_args=["--role", "publisher", "--lenient"]) as publisher, \
            RelayerProcess(data, extra_args=["--role", "aggregator"]) as aggregator:
        short = httpx.put(f"{publisher.url}/v1/blobs?send_object_to=0x1&cb=1", content=b"ok")
        assert short.status_code == 200  # lenient: short address padded, unknown param ignored
        blob_id = short.json()["newlyCreated"]["blobObject"]["blobId"]
        assert httpx.get(f"{publisher.url}/v1/blobs/{blob_id}").status_code == 404
        assert httpx.get(f"{aggregator.url}/v1/blobs/{blob_id}").content == b"ok"
        plain = httpx.get(f"{aggregator.url}/v1/quilts/{blob_id}/patches")
        assert plain.status_code == 500  # the aggregator process is strict
        settings = httpx.get(f"{aggregator.url}/_mock/info",
                             headers=aggregator.admin_headers).json()["settings"]
        assert settings["role"] == "aggregator" and settings["strict"] is True


@pytest.mark.parametrize("mid_expiry", [True, False])
def test_mid_expiry_503_then_404(tmp_path: Path, mid_expiry: bool) -> None:
    with RelayerServer(tmp_path / "walrus", fsync=False,
                       unavailable_after_expiry=mid_expiry) as server:
        stored = httpx.put(f"{server.url}/v1/blobs?epochs=1", content=b"short-lived").json()
        blob_id = stored["newlyCreated"]["blobObject"]["blobId"]
        assert httpx.get(f"{server.url}/v1/blobs/{blob_id}").status_code == 200
        httpx.post(f"{server.url}/_mock/epoch/advance?by=1",
                   headers=server.admin_headers).raise_for_status()
        first = httpx.get(f"{server.url}/v1/blobs/{blob_id}")
        httpx.post(f"{server.url}/_mock/epoch/advance?by=1",
                   headers=server.admin_headers).raise_for_status()
        later = httpx.get(f"{server.url}/v1/blobs/{blob_id}")
    reason = first.json()["error"]["details"][0]["reason"]
    if mid_expiry:
        assert (first.status_code, reason) == (503, "BLOB_UNAVAILABLE")
    else:
        assert (first.status_code, reason) == (404, "BLOB_NOT_FOUND")
    assert later.status_code == 404
