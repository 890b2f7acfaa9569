"""Lying publishers: answers that do not match what was stored never count as published.

The liar sits between the client and a real relayer_mock on loopback (an httpx transport
that forwards, then rewrites): ``rewrite`` points every blob id (and the quilt patch ids)
at one blob that exists; ``nothing`` answers 200 with a well-formed ``newlyCreated``
and stores nothing.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_memory import MASTER_HEX, make_settings
from walrus_mem.errors import BlobNotFound, InvalidInput, StorageError, VerificationFailed
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder
from walrus_mem.walrus import WalrusClient

DEADLINE = 0.5


def _fake_id(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.blake2b(data + b"never stored",
                                                    digest_size=32).digest()).rstrip(b"=").decode()


class LyingPublisher(httpx.BaseTransport):
    """Forwards to the real mock; rewrites (or invents) store answers."""

    def __init__(self, mode: str, decoy: str | None = None, *, lie: bool = True,
                 admin_headers: dict[str, str] | None = None) -> None:
        self.mode = mode
        self.admin_headers = admin_headers or {}  # the real mock's admin token (its undo)
        self.decoy = decoy
        self.lie = lie  # switchable, so a test can store honestly first
        self.lies = 0
        self._inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        is_store = request.method == "PUT" and request.url.path in ("/v1/blobs", "/v1/quilts")
        if not (is_store and self.lie):
            return self._inner.handle_request(request)
        self.lies += 1
        if self.mode == "nothing" and request.url.path == "/v1/blobs":
            body = request.read()
            answer = {"newlyCreated": {
                "blobObject": {"id": "0x" + "1" * 64, "registeredEpoch": 1,
                               "blobId": _fake_id(body), "size": len(body),
                               "encodingType": "RS2", "certifiedEpoch": 1,
                               "storage": {"id": "0x" + "2" * 64, "startEpoch": 1,
                                           "endEpoch": 6, "storageSize": 66034000},
                               "deletable": True},
                "resourceOperation": {"registerFromScratch": {"encodedLength": 66034000,
                                                              "epochsAhead": 5}},
                "cost": 1}}
            return httpx.Response(200, json=answer)
        response = self._inner.handle_request(request)
        response.read()
        data: dict[str, Any] = json.loads(response.content)
        target = self.decoy if self.mode == "rewrite" else _fake_id(response.content)
        assert target is not None
        text = json.dumps(data)
        real = _blob_id_of(data)
        text = text.replace(real, target)  # blob id and every patch id prefix
        if self.mode == "nothing":  # quilt: also undo the store on the real mock
            httpx.delete(f"{request.url.scheme}://{request.url.netloc.decode()}"
                         f"/_mock/blobs/{real}", headers=self.admin_headers).raise_for_status()
        return httpx.Response(200, content=text.encode(),
                              headers={"content-type": "application/json"})


def _blob_id_of(answer: dict[str, Any]) -> str:
    inner = answer.get("blobStoreResult", answer)
    if "newlyCreated" in inner:
        return str(inner["newlyCreated"]["blobObject"]["blobId"])
    return str(inner["alreadyCertified"]["blobId"])


def _memory(tmp_path: Path, server: RelayerServer, liar: LyingPublisher,
            embedder: HashEmbedder, name: str = "mem", **kw: Any) -> Memory:
    client = WalrusClient(server.url, [server.url], transport=liar, read_deadline=DEADLINE,
                          publish_deadline=DEADLINE)
    settings = make_settings(tmp_path / name, publisher_url=server.url,
                             aggregator_urls=[server.url], publish_deadline=DEADLINE,
                             read_deadline=DEADLINE, **kw)
    return Memory(settings, embedder=embedder, master_key=MASTER_HEX, walrus=client)


@pytest.mark.parametrize("mode", ["rewrite", "nothing"])
def test_no_fact_stays_published_after_sync(tmp_path: Path, fake_embedder: HashEmbedder,
                                            mode: str) -> None:
    with RelayerServer(tmp_path / "walrus", fsync=False) as server:
        decoy = httpx.put(f"{server.url}/v1/blobs", content=b"decoy blob").json()
        decoy_id = decoy["newlyCreated"]["blobObject"]["blobId"]
        liar = LyingPublisher(mode, decoy_id, admin_headers=server.admin_headers)
        with _memory(tmp_path, server, liar, fake_embedder) as memory:
            singles = [memory.remember(f"fact {i} that the publisher lies about")
                       for i in range(3)]
            many = memory.remember_many([f"batched fact {i}" for i in range(4)])
            report = memory.sync()
            ids = [r.id for r in singles] + [r.id for r in many.records]
            statuses = {memory.get(i).status for i in ids}
            head = memory.stats().manifest_blob_id
    assert liar.lies >= 4
    assert statuses == {"queued"}, statuses  # nothing the liar touched is `published`
    assert report.published == 0 and report.still_queued == len(ids)
    assert any("VerificationFailed" in e or "BlobNotFound" in e or "AggregatorUnavailable" in e
               for e in report.errors), report.errors
    assert head is None  # no manifest lists facts that do not verify


@pytest.mark.parametrize("mode", ["rewrite", "nothing"])
def test_sync_publishes_once_the_publisher_is_honest(tmp_path: Path,
                                                     fake_embedder: HashEmbedder,
                                                     mode: str) -> None:
    with RelayerServer(tmp_path / "walrus", fsync=False) as server:
        decoy = httpx.put(f"{server.url}/v1/blobs", content=b"decoy").json()
        liar = LyingPublisher(mode, decoy["newlyCreated"]["blobObject"]["blobId"],
                              admin_headers=server.admin_headers)
        with _memory(tmp_path, server, liar, fake_embedder) as memory:
            record = memory.remember("published only when it reads back")
            assert memory.get(record.id).status == "queued"
            liar.lie = False
            report = memory.sync()
            assert report.errors == [] and memory.get(record.id).status == "published"
            assert memory.get(record.id, verify=True).text == record.text


def test_read_back_primitive(tmp_path: Path) -> None:
    with RelayerServer(tmp_path / "walrus", fsync=False) as server, \
            WalrusClient(server.url, [server.url], read_deadline=DEADLINE) as client:
        stored = client.store_blob(b"exact bytes")
        client.read_back(b"exact bytes", blob_id=stored.blob_id)
        with pytest.raises(VerificationFailed):
            client.read_back(b"other bytes", blob_id=stored.blob_id)
        quilt = client.store_quilt({"a": b"first", "b": b"second"})
        client.read_back(b"second", patch_id=quilt.patches["b"])
        with pytest.raises(VerificationFailed):
            client.read_back(b"first", patch_id=quilt.patches["b"])
        client.forget_stored(_fake_id(b"x"))
        with pytest.raises(BlobNotFound):
            client.read_back(b"x", blob_id=_fake_id(b"x"))
        with pytest.raises(InvalidInput):
            client.read_back(b"x")  # neither blob_id nor patch_id


def test_verify_publish_none_trusts_the_answer(tmp_path: Path,
                                              fake_embedder: HashEmbedder) -> None:
    """The opt-out does what it says (and is why `sample` is the default)."""
    with RelayerServer(tmp_path / "walrus", fsync=False) as server:
        liar = LyingPublisher("nothing", admin_headers=server.admin_headers)
        with _memory(tmp_path, server, liar, fake_embedder, verify_publish="none") as memory:
            record = memory.remember("trusted blindly")
            assert memory.get(record.id).status == "published"
            with pytest.raises(StorageError):
                memory.get(record.id, verify=True)



@pytest.mark.parametrize("policy, expected", [("none", 0), ("sample", 1), ("all", 3)])
def test_verify_published_policies(tmp_path: Path, policy: str, expected: int) -> None:
    from walrus_mem._walrus.publish_check import verify_published

    with RelayerServer(tmp_path / "walrus", fsync=False) as server, \
            WalrusClient(server.url, [server.url], read_deadline=DEADLINE) as client:
        files = {"m1": b"one", "m2": b"two", "m3": b"three"}
        quilt = client.store_quilt(files)
        before = client.stats.requests
        assert verify_published(client, policy, quilt, files) == expected  # type: ignore[arg-type]
        assert client.stats.requests - before == expected
        blob = client.store_blob(b"alone")
        assert verify_published(client, policy, blob, {"m4": b"alone"}) == min(expected, 1)  # type: ignore[arg-type]
        swapped = quilt.model_copy(update={"patches": {"m1": quilt.patches["m2"],
                                                       "m2": quilt.patches["m1"],
                                                       "m3": quilt.patches["m3"]}})
        if policy == "all":  # only reading every patch catches swapped patch ids
            with pytest.raises(VerificationFailed):
                verify_published(client, "all", swapped, files)
        with pytest.raises(InvalidInput):
            verify_published(client, "most", quilt, files)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["rewrite", "nothing"])
def test_manifest_head_never_points_at_a_blob_that_does_not_verify(
    tmp_path: Path, fake_embedder: HashEmbedder, mode: str
) -> None:
    with RelayerServer(tmp_path / "walrus", fsync=False) as server:
        decoy = httpx.put(f"{server.url}/v1/blobs", content=b"decoy").json()
        liar = LyingPublisher(mode, decoy["newlyCreated"]["blobObject"]["blobId"], lie=False,
                              admin_headers=server.admin_headers)
        with _memory(tmp_path, server, liar, fake_embedder) as memory:
            memory.remember("stored honestly")
            first = memory.sync()
            assert first.errors == []
            head = memory.stats().manifest_blob_id
            memory.remember("stored honestly too")
            memory._flush(None)  # the fact is published honestly ...
            liar.lie = True  # ... and the manifest store is lied about
            report = memory.sync()
            after = memory.stats().manifest_blob_id
        assert report.errors, "a manifest that does not read back must be reported"
        assert after == head  # the head did not move to the lie
        fresh = make_settings(tmp_path / "fresh", publisher_url=server.url,
                              aggregator_urls=[server.url], read_deadline=DEADLINE)
        with Memory(fresh, embedder=fake_embedder, master_key=MASTER_HEX) as restored:
            assert head is not None
            assert restored.restore("default", head).failed == []
