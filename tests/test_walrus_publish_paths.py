"""Every path that publishes goes through the verified-publish rules (issue 11 audit).

* a publisher-only config (no aggregator) stores nothing it could not read back: else
  each ``sync`` pays for the same store again and the fact never leaves the outbox;
* ``extend`` (and sync's renewal, same code), ``share`` and the epoch probe read their
  store back per ``verify_publish``: a lying publisher must not move a memory to a blob
  that does not exist, nor hand out a grant reference to one.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_memory import MASTER_HEX, make_settings
from tests.test_walrus_lying import LyingPublisher, _memory
from walrus_mem._walrus.blobio import QUILT_MAX_BYTES, store_batches
from walrus_mem.errors import AggregatorUnavailable, BodyTooLarge, StorageError
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder
from walrus_mem.walrus import MAX_BLOB_BODY, MAX_QUILT_BODY, WalrusClient


def _liar_with_decoy(server: RelayerServer, mode: str) -> LyingPublisher:
    """A publisher in front of ``server`` that, once told to lie, rewrites store answers to
    a real decoy blob (``rewrite``) or stores nothing (``nothing``)."""
    decoy = httpx.put(f"{server.url}/v1/blobs", content=b"decoy").json()
    return LyingPublisher(mode, decoy["newlyCreated"]["blobObject"]["blobId"], lie=False,
                          admin_headers=server.admin_headers)


def _stores(server: RelayerServer) -> int:
    with server.client() as admin:
        counters: dict[str, int] = admin.get("/_mock/stats").json()["counters"]
    return sum(v for k, v in counters.items() if k.startswith("requests.put"))


def test_publisher_only_config_pays_for_no_store_it_cannot_verify(
        tmp_path: Path, fake_embedder: HashEmbedder) -> None:
    with RelayerServer(tmp_path / "walrus", fsync=False, role="publisher") as publisher:
        settings = make_settings(tmp_path / "m", publisher_url=publisher.url,
                                 publish_deadline=2.0, read_deadline=1.0)
        with Memory(settings, embedder=fake_embedder, master_key=MASTER_HEX) as memory:
            record = memory.remember("the user keeps bees")
            assert memory.get(record.id).status == "queued"
            first = memory.sync()
            second = memory.sync()
            with pytest.raises(AggregatorUnavailable, match="aggregator_urls"):
                memory.probe_epoch()
        assert _stores(publisher) == 0  # nothing stored, nothing paid, twice over
        assert first.still_queued == second.still_queued == 1
        assert any("no aggregator is configured" in e for e in first.errors), first.errors


@pytest.mark.parametrize("mode", ["rewrite", "nothing"])
def test_extend_never_moves_a_memory_to_a_blob_that_does_not_verify(
        tmp_path: Path, fake_embedder: HashEmbedder, mode: str) -> None:
    with RelayerServer(tmp_path / "walrus", fsync=False) as server:
        liar = _liar_with_decoy(server, mode)
        with _memory(tmp_path, server, liar, fake_embedder) as memory:
            one = memory.remember("the user keeps bees")
            many = memory.remember_many(["hive one is blue", "hive two is green"])
            assert memory.sync().errors == []
            before = {r.id: (r.blob_id, r.quilt_patch_id, r.end_epoch) for r in memory.list()}
            liar.lie = True
            report = memory.extend([one.id, *(r.id for r in many.records)], epochs=20)
            after = {r.id: (r.blob_id, r.quilt_patch_id, r.end_epoch) for r in memory.list()}
            assert report.extended == {}
            assert {m for m, _ in report.failed} == set(before)
            assert after == before  # the old, verified locations stay
            liar.lie = False
            for record in memory.list():
                assert memory.get(record.id, verify=True).text == record.text


@pytest.mark.parametrize("mode", ["rewrite", "nothing"])
def test_share_never_hands_out_a_grant_that_was_not_stored(
        tmp_path: Path, fake_embedder: HashEmbedder, mode: str) -> None:
    with RelayerServer(tmp_path / "walrus", fsync=False) as server:
        liar = _liar_with_decoy(server, mode)
        with _memory(tmp_path, server, liar, fake_embedder) as memory:
            record = memory.remember("the user keeps bees")
            recipient = memory.keys_for("friend").verify_key.hex()
            liar.lie = True
            with pytest.raises(StorageError):
                memory.share([record.id], to=recipient)


def test_quilt_cap_is_the_quilt_routes_100_mib_limit(tmp_path: Path) -> None:
    """Quilts were capped at 9 MiB on the belief that publishers take 10 MiB requests; the
    daemon's PUT /v1/quilts default limit is 102,400 KiB (blobs: 10,240 KiB)."""
    assert MAX_QUILT_BODY == 100 * 2**20 and MAX_BLOB_BODY == 10 * 2**20
    assert QUILT_MAX_BYTES > 90 * 2**20  # batches leave room for the multipart framing
    assert [len(r) for r in store_batches([2**20] * 200)] == [96, 96, 8]
    assert [len(r) for r in store_batches([100] * 1400)] == [666, 666, 68]
    with RelayerServer(tmp_path / "walrus", fsync=False) as server, \
            WalrusClient(server.url, [server.url]) as client:
        files = {f"f{i}": bytes([i]) * 2**20 for i in range(12)}  # 12 MiB: over a blob's limit
        quilt = client.store_quilt(files)
        client.read_back(files["f11"], patch_id=quilt.patches["f11"])
        with pytest.raises(BodyTooLarge):
            client.store_quilt({f"g{i}": b"\0" * 2**20 for i in range(101)})
        assert client.stats.requests == 2  # the over-limit quilt was never sent
