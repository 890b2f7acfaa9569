"""Issue 25 items 2 and 6: publisher request caps, auth-domain 500s, marked-invalid blobs,
``deletable`` no longer sent.

Public publishers cap a request at 10 MiB. Batches were sized up to 96 MiB and a 413 split
a batch into one blob per fact (each paying the minimum storage), so 200 facts of 60 KB
cost one 413 and 201 single-blob PUTs where two quilts do.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import respx

from relayer_mock.server import RelayerServer
from tests.helpers_memory import MASTER_HEX, make_settings
from tests.helpers_walrus import BLOB_ID, DATA17, MARKED_INVALID, NEWLY_CREATED
from walrus_mem.errors import StoreFailed
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder
from walrus_mem.walrus import WalrusClient

MiB = 1024 * 1024
PUB_A = "http://pub-a.test"
PUB_B = "http://pub-b.test"
AGG = "http://agg.test"


@dataclass
class Counted(httpx.BaseTransport):
    """A real HTTP transport that notes each publisher PUT: (path, status, body bytes)."""

    inner: httpx.BaseTransport = field(default_factory=httpx.HTTPTransport)
    puts: list[tuple[str, int, int]] = field(default_factory=list)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        response = self.inner.handle_request(request)
        if request.method == "PUT":
            self.puts.append((request.url.path, response.status_code, len(body)))
        return response


def _facts(n: int, size: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    words = [f"w{i:04d}" for i in range(4000)]
    out = []
    for i in range(n):
        text = f"fact {i}: " + " ".join(rng.choice(words) for _ in range(size // 5))
        out.append(text[:size])
    return out


@pytest.fixture
def capped(tmp_path: Path) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path / "walrus", fsync=False, max_request_bytes=10 * MiB) as server:
        yield server


def _memory(data_dir: Path, server: RelayerServer, transport: Counted,
            embedder: HashEmbedder, **settings: object) -> Memory:
    client = WalrusClient(server.url, [server.url], transport=transport,
                          publish_deadline=30.0, epochs=5)
    values: dict[str, object] = {"publisher_url": server.url, "aggregator_urls": [server.url],
                                 "publish_deadline": 30.0, "verify_publish": "none",
                                 "manifest_every": 1000}  # no manifest blob among the PUTs
    values.update(settings)
    return Memory(make_settings(data_dir, **values), embedder=embedder, master_key=MASTER_HEX,
                  walrus=client)


def test_200_facts_of_60kb_under_a_10_mib_cap_go_as_a_few_quilts(
        tmp_path: Path, capped: RelayerServer, fake_embedder: HashEmbedder) -> None:
    transport = Counted()
    with _memory(tmp_path / "m", capped, transport, fake_embedder) as memory:
        result = memory.remember_many(_facts(200, 60_000))
        assert result.queued == 0
    statuses = [s for _, s, _ in transport.puts]
    paths = [p for p, _, _ in transport.puts]
    assert 413 not in statuses, transport.puts
    assert "/v1/blobs" not in paths  # no single-fact blobs
    assert 2 <= len(transport.puts) <= 3, transport.puts
    assert all(size <= 10 * MiB for _, _, size in transport.puts)


def test_a_413_halves_the_batch_and_the_learned_cap_survives_a_new_process(
        tmp_path: Path, fake_embedder: HashEmbedder) -> None:
    """The publisher takes 6 MiB while the setting says 10 MiB: the first batch is refused,
    halved (not split into one blob per fact); the cap is remembered in the data dir, so a
    new Memory on it sizes its quilts under it from the start."""
    with RelayerServer(tmp_path / "walrus", fsync=False, max_request_bytes=6 * MiB) as server:
        first = Counted()
        with _memory(tmp_path / "m", server, first, fake_embedder) as memory:
            assert memory.remember_many(_facts(120, 60_000, seed=1)).queued == 0
        refused = [p for p in first.puts if p[1] == 413]
        assert len(refused) == 1, first.puts
        assert all(p == "/v1/quilts" for p, _, _ in first.puts), first.puts
        second = Counted()
        with _memory(tmp_path / "m", server, second, fake_embedder) as memory:
            assert memory.remember_many(_facts(120, 60_000, seed=2)).queued == 0
        assert [s for _, s, _ in second.puts if s != 200] == [], second.puts
        assert all(p == "/v1/quilts" for p, _, _ in second.puts), second.puts


def test_only_a_fact_over_the_cap_goes_alone(
        tmp_path: Path, fake_embedder: HashEmbedder) -> None:
    with RelayerServer(tmp_path / "walrus", fsync=False, max_request_bytes=10 * MiB) as server:
        transport = Counted()
        with _memory(tmp_path / "m", server, transport, fake_embedder,
                     publisher_max_request_bytes=150_000) as memory:
            assert memory.remember_many(_facts(8, 60_000, seed=3)).queued == 0
            assert [p for p, _, _ in transport.puts] == ["/v1/quilts"] * 4  # 2 facts each
            transport.puts.clear()
            memory.settings.publisher_max_request_bytes = 65_536  # each fact is over it
            assert memory.remember_many(_facts(3, 60_000, seed=4)).queued == 0
            assert [p for p, _, _ in transport.puts] == ["/v1/blobs"] * 3
        assert all(s == 200 for _, s, _ in transport.puts), transport.puts


def test_relayer_mock_request_cap_answers_413_like_the_daemon(tmp_path: Path) -> None:
    with RelayerServer(tmp_path / "walrus", fsync=False, max_request_bytes=MiB) as server, \
            server.client() as http:
        refused = http.put("/v1/quilts", files={"a": b"x" * (MiB + 1)})
        assert refused.status_code == 413
        assert refused.text == "Failed to buffer the request body: length limit exceeded"
        assert http.put("/v1/blobs", content=b"x" * (MiB + 1)).status_code == 413
        assert http.put("/v1/blobs", content=b"x" * 1000).status_code == 200
    with RelayerServer(tmp_path / "walrus2", fsync=False) as server, server.client() as http:
        assert http.put("/v1/quilts", files={"a": b"x" * (11 * MiB)}).status_code == 200


# -- item 6 ---------------------------------------------------------------------------


def _auth_500() -> httpx.Response:
    return httpx.Response(500, json={"error": {
        "status": "INTERNAL", "code": 500, "message": "the cache is full",
        "details": [{"@type": "ErrorInfo", "reason": "INTERNAL_ERROR",
                     "domain": "auth.publisher.walrus.space", "metadata": {}},
                    {"@type": "DebugInfo", "stackEntries": [], "detail": "TraceID: 00"}]}})


def test_an_auth_domain_500_fails_over_to_the_next_publisher() -> None:
    with respx.mock(assert_all_called=False) as mock:
        a = mock.put(f"{PUB_A}/v1/blobs").mock(return_value=_auth_500())
        b = mock.put(f"{PUB_B}/v1/blobs").mock(return_value=httpx.Response(200,
                                                                            json=NEWLY_CREATED))
        with WalrusClient([PUB_A, PUB_B], [AGG], token="t", sleep=lambda s: None) as client:
            stored = client.store_blob(DATA17)
        assert stored.blob_id == BLOB_ID
        assert a.call_count == 1 and b.call_count == 1


def _marked_invalid_500() -> httpx.Response:
    return httpx.Response(500, json={"error": {
        "status": "INTERNAL", "code": 500,
        "message": "the blob was marked invalid, which is likely a system error, please "
                   "report it",
        "details": [{"@type": "ErrorInfo", "reason": "INTERNAL_ERROR",
                     "domain": "daemon.walrus.space",
                     "metadata": {}},
                    {"@type": "DebugInfo", "stackEntries": [], "detail": "TraceID: 00"}]}})


@pytest.mark.parametrize("answer", ["500", "200"])
def test_a_marked_invalid_blob_is_not_retried(answer: str) -> None:
    reply = _marked_invalid_500() if answer == "500" else httpx.Response(200, json=MARKED_INVALID)
    with respx.mock(assert_all_called=False) as mock:
        a = mock.put(f"{PUB_A}/v1/blobs").mock(return_value=reply)
        b = mock.put(f"{PUB_B}/v1/blobs").mock(return_value=reply)
        with WalrusClient([PUB_A, PUB_B], [AGG], sleep=lambda s: None,
                          publish_deadline=5.0) as client:
            with pytest.raises(StoreFailed, match="marked invalid"):
                client.store_blob(DATA17)
        assert a.call_count + b.call_count == 1


def test_deletable_is_not_sent_where_it_is_the_default() -> None:
    with respx.mock(assert_all_called=False) as mock:
        route = mock.put(f"{PUB_A}/v1/blobs").mock(
            return_value=httpx.Response(200, json=NEWLY_CREATED))
        quilts = mock.put(f"{PUB_A}/v1/quilts").mock(return_value=httpx.Response(500))
        with WalrusClient(PUB_A, [AGG], epochs=3, sleep=lambda s: None,
                          publish_deadline=0.5) as client:
            client.store_blob(DATA17)
            client.store_blob(DATA17, permanent=True)
            with pytest.raises(Exception):  # noqa: B017 - only the request matters here
                client.store_quilt({"a": b"1"})
        first, second = (c.request for c in route.calls)
        assert dict(first.url.params) == {"epochs": "3"}
        assert dict(second.url.params) == {"epochs": "3", "permanent": "true"}
        assert "deletable" not in dict(quilts.calls[0].request.url.params)
