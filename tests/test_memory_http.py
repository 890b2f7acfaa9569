"""Memory against relayer_mock over real loopback HTTP, and with the real embedding model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from relayer_mock.faults import FaultConfig
from relayer_mock.server import RelayerServer
from tests.helpers_memory import MASTER_HEX, make_settings
from walrus_mem import Memory
from walrus_mem.testing import HashEmbedder


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path / "walrus") as srv:
        yield srv


def http_memory(data_dir: Path, server: RelayerServer, **kw) -> Memory:
    kw.setdefault("mock_admin_token", server.admin_token)  # forget deletes over HTTP
    settings = make_settings(data_dir, publisher_url=server.url, aggregator_urls=server.url, **kw)
    return Memory(settings, embedder=kw.pop("embedder", None) or HashEmbedder(64),
                  master_key=MASTER_HEX)


def test_full_api_over_loopback_http(tmp_path: Path, server: RelayerServer) -> None:
    with http_memory(tmp_path / "a", server) as mem:
        assert not mem.stats().embedded
        rec = mem.remember("http fact about otters", metadata={"src": "http"})
        batch = mem.remember_many([f"http quilt fact {i}" for i in range(10)])
        assert rec.status == "published" and batch.queued == 0
        assert len({r.blob_id for r in batch}) == 1
        assert mem.recall("otters", min_score=0)[0].id == rec.id
        assert mem.get(rec.id, verify=True) == rec
        assert mem.get(batch[3].id, verify=True).quilt_patch_id == batch[3].quilt_patch_id
        updated = mem.update(rec.id, "http fact about sea otters")
        report = mem.forget(batch[0].id)
        assert report.kept_blobs  # shared quilt
        solo = mem.remember("solo blob to delete")
        report = mem.forget(solo.id)
        assert report.deleted_blobs == [solo.blob_id]  # the mock's admin delete route, over HTTP
        gone = httpx.get(f"{server.url}/v1/blobs/{solo.blob_id}")
        assert gone.status_code == 404
        mem.sync()
        manifest_id = mem.stats().manifest_blob_id
        stats = httpx.get(f"{server.url}/_mock/stats", headers=server.admin_headers).json()
        assert stats["counters"]["requests.put_quilt"] == 1
    with http_memory(tmp_path / "b", server) as fresh:
        result = fresh.restore("default", manifest_id)
        assert result.restored == 10 and not result.failed  # 9 quilt facts + the updated one
        assert fresh.get(updated.id).text == "http fact about sea otters"
        assert fresh.recall("sea otters", k=1)[0].id == rec.id


@pytest.mark.slow
def test_faulty_relayer_loses_nothing(tmp_path: Path) -> None:
    faults = FaultConfig.mix(0.3, seed=7)
    with RelayerServer(tmp_path / "walrus", faults=faults) as srv:
        settings = make_settings(tmp_path / "d", publisher_url=srv.url, aggregator_urls=srv.url,
                                 publish_deadline=20.0)
        with Memory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem:
            recs = [mem.remember(f"faulty fact {i}") for i in range(15)]
            recs += mem.remember_many([f"faulty quilt fact {i}" for i in range(30)]).records
            for _ in range(5):
                if mem.sync().still_queued == 0:
                    break
                mem._publisher.breaker_until = 0.0
            assert mem.stats().queued == 0
            for rec in recs:
                assert mem.get(rec.id, verify=True).text == rec.text


@pytest.mark.model
def test_real_model_recall_and_restore(tmp_path: Path, server: RelayerServer,
                                       real_embedder) -> None:
    facts = [
        "I'm allergic to peanuts",
        "My daughter's name is Ada",
        "I prefer window seats on long flights",
        "Our production database runs PostgreSQL 16",
        "I go running every morning before work",
    ]
    settings = make_settings(tmp_path / "a", publisher_url=server.url, aggregator_urls=server.url)
    with Memory(settings, embedder=real_embedder, master_key=MASTER_HEX) as mem:
        mem.remember_many(facts, namespace="researcher")
        hits = mem.recall("food allergies", namespace="researcher", k=2)
        assert hits[0].text == "I'm allergic to peanuts"
        assert mem.recall("what is my kid called", namespace="researcher", k=1)[0].text == (
            "My daughter's name is Ada")
        assert mem.recall("which SQL engine do we use", namespace="researcher", k=1,
                          min_score=0)[0].text.startswith("Our production database")
        assert mem.stats("researcher").model_id == "sentence-transformers/all-MiniLM-L6-v2"
        manifest_id = mem.sync().manifests["researcher"]
    fresh = make_settings(tmp_path / "b", publisher_url=server.url, aggregator_urls=server.url)
    with Memory(fresh, embedder=real_embedder, master_key=MASTER_HEX) as mem:
        assert mem.restore("researcher", manifest_id).restored == 5
        assert mem.recall("food allergies", namespace="researcher", k=1)[0].text == facts[0]


def test_verify_fails_over_from_a_lying_aggregator(tmp_path: Path) -> None:
    from walrus_mem.errors import VerificationFailed

    walrus_dir = tmp_path / "walrus"  # one Walrus state, two aggregators in front of it
    with RelayerServer(walrus_dir) as honest, \
            RelayerServer(walrus_dir, faults=FaultConfig.only("lie", 1.0, seed=3)) as liar:
        settings = make_settings(tmp_path / "d", publisher_url=honest.url,
                                 aggregator_urls=f"{liar.url},{honest.url}")
        with Memory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem:
            first = mem.remember("decoy fact so the liar has another blob to serve")
            rec = mem.remember("the fact we verify")
            assert mem.get(rec.id, verify=True) == rec  # the liar is skipped for the honest one
            assert mem.get(first.id, verify=True) == first
        only_liar = make_settings(tmp_path / "d", publisher_url=honest.url,
                                  aggregator_urls=liar.url, read_deadline=1.0)
        with Memory(only_liar, embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem:
            with pytest.raises(VerificationFailed):
                mem.get(rec.id, verify=True)
