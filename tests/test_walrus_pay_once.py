"""Issue 25 item 3: a store whose answer was lost (the client's deadline passed while the
publisher was still storing) is not sent again blindly: the client computes its blob id,
checks the aggregators, and adopts it. Against relayer_mock over HTTP with a slow store.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from relayer_mock import mock_blob_id
from relayer_mock.server import RelayerServer
from tests.helpers_memory import MASTER_HEX, make_settings
from walrus_mem.config import Settings
from walrus_mem.errors import PublisherUnavailable
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder
from walrus_mem.walrus import StoreRequest, WalrusClient

STORE_SECONDS = 1.2


@dataclass
class Puts(httpx.BaseTransport):
    """A real HTTP transport that notes each publisher PUT's body digest."""

    inner: httpx.BaseTransport = field(default_factory=httpx.HTTPTransport)
    bodies: list[str] = field(default_factory=list)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "PUT":
            self.bodies.append(hashlib.sha256(request.read()).hexdigest())
        return self.inner.handle_request(request)


def oracle(request: StoreRequest) -> str | None:
    return mock_blob_id(request.body, files=request.files, metadata=request.metadata)


@pytest.fixture
def slow(tmp_path: Path) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path / "walrus", fsync=False,
                       store_latency=str(int(STORE_SECONDS * 1000))) as server:
        yield server


def _stores(server: RelayerServer) -> int:
    with server.client() as admin:
        return int(admin.get("/_mock/stats").json()["stores"]["newlyCreated"])


def test_a_store_answered_after_the_deadline_is_paid_once(slow: RelayerServer) -> None:
    transport = Puts()
    with WalrusClient(slow.url, [slow.url], transport=transport, blob_id=oracle,
                      publish_deadline=0.4, epochs=3) as client:
        with pytest.raises(PublisherUnavailable):
            client.store_blob(b"a fact whose answer is lost")  # the store goes on
        # the next attempt checks first: still being stored (503), then there: adopted
        stored = client.store_blob(b"a fact whose answer is lost", deadline=10.0)
    assert stored.resource_operation == "adopted" and stored.blob_id == mock_blob_id(
        b"a fact whose answer is lost")
    assert len(transport.bodies) == 1 and _stores(slow) == 1
    assert client.stats.adopted == 1


def test_a_memory_whose_quilt_answer_was_lost_pays_once(
        tmp_path: Path, slow: RelayerServer) -> None:
    transport = Puts()
    client = WalrusClient(slow.url, [slow.url], transport=transport, blob_id=oracle,
                          publish_deadline=0.4, epochs=5)
    settings = make_settings(tmp_path / "m", publisher_url=slow.url,
                             aggregator_urls=[slow.url], publish_deadline=0.4,
                             read_back_deadline=5.0, manifest_every=1000)
    with client, Memory(settings, embedder=HashEmbedder(), master_key=MASTER_HEX,
                        walrus=client) as memory:
        result = memory.remember_many(["Ana lives in Lisbon", "Ben plays the cello",
                                       "Caro keeps bees"])
        assert result.queued == 3  # the answer was lost: queued, in doubt
        time.sleep(STORE_SECONDS)
        report = memory.sync()
        assert memory.stats().queued == 0, report.errors
        quilts = {r[0] for r in memory._parts.catalog.query(
            "SELECT blob_id FROM memories WHERE namespace = 'default'")}
    assert len(quilts) == 1 and client.stats.adopted == 1
    quilt_puts = [b for b in transport.bodies]  # the quilt once, then the manifest's
    assert len(quilt_puts) == len(set(quilt_puts))


def test_default_deadlines_follow_walrus_guidance() -> None:
    settings = Settings(use_keyring=False)
    assert settings.publish_deadline >= 30.0 and settings.read_back_deadline >= 30.0
    assert WalrusClient("http://p.test", [])._core.publish_deadline >= 30.0


def test_a_later_process_checks_the_lost_store_too(tmp_path: Path,
                                                   slow: RelayerServer) -> None:
    """The store in doubt is kept in the catalog: a new Memory (``walrus-mem sync`` in
    another process) adopts it instead of paying again."""
    settings = make_settings(tmp_path / "m", publisher_url=slow.url,
                             aggregator_urls=[slow.url], publish_deadline=0.4,
                             read_back_deadline=5.0, manifest_every=1000)
    first = Puts()
    client = WalrusClient(slow.url, [slow.url], transport=first, blob_id=oracle,
                          publish_deadline=0.4, epochs=5)
    with client, Memory(settings, embedder=HashEmbedder(), master_key=MASTER_HEX,
                        walrus=client) as memory:
        assert memory.remember("Dan sails on Sundays").status == "queued"  # answer lost
    time.sleep(STORE_SECONDS)
    later = Puts()
    client = WalrusClient(slow.url, [slow.url], transport=later, blob_id=oracle,
                          publish_deadline=0.4, epochs=5)
    with client, Memory(settings, embedder=HashEmbedder(), master_key=MASTER_HEX,
                        walrus=client) as memory:
        memory.sync()
        assert memory.stats().queued == 0
    assert client.stats.adopted == 1 and len(first.bodies) == 1
    assert first.bodies[0] not in later.bodies  # the fact's blob was not sent again
