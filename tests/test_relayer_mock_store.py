"""relayer_mock persistence: restart, shared data dirs, epochs and expiry, atomic files."""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from relayer_mock._ids import blob_id_for
from relayer_mock._store import Store
from relayer_mock.app import create_app
from relayer_mock.embedded import EmbeddedRelayer


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "walrus"


@pytest.fixture
def relayer(data_dir: Path) -> Iterator[EmbeddedRelayer]:
    with EmbeddedRelayer(data_dir, fsync=False) as embedded:
        yield embedded


def store(client: httpx.Client, data: bytes, query: str = "") -> dict[str, Any]:
    response = client.put(f"/v1/blobs{query}", content=data)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body["newlyCreated"]["blobObject"] if "newlyCreated" in body else body


def test_restart_serves_everything(data_dir: Path) -> None:
    with EmbeddedRelayer(data_dir) as first, first.client() as c:
        blob = store(c, b"survives restarts", "?epochs=3")
        permanent = store(c, b"permanent one", "?permanent=true&epochs=10")
        quilt = c.put("/v1/quilts?epochs=5", files={"x": b"patch-x", "y": b"patch-y"}).json()
        c.post("/_mock/epoch/advance?by=2")
        stats_before = c.get("/_mock/stats").json()
    with EmbeddedRelayer(data_dir) as second, second.client() as c:
        assert c.get("/_mock/epoch").json()["currentEpoch"] == 3
        assert c.get(f"/v1/blobs/{blob['blobId']}").content == b"survives restarts"
        assert c.get(f"/v1/blobs/by-object-id/{blob['id']}").content == b"survives restarts"
        for entry in quilt["storedQuiltBlobs"]:
            patch = c.get(f"/v1/blobs/by-quilt-patch-id/{entry['quiltPatchId']}")
            assert patch.content == b"patch-" + entry["identifier"].encode()
        again = store(c, b"permanent one", "?permanent=true&epochs=5")
        assert again["alreadyCertified"]["blobId"] == permanent["blobId"]
        stats_after = c.get("/_mock/stats").json()
    assert stats_after["blobCount"] == stats_before["blobCount"] == 3
    assert stats_after["requests"]["put_blob"] == stats_before["requests"]["put_blob"] + 1


def test_two_instances_share_one_data_dir(data_dir: Path) -> None:
    with EmbeddedRelayer(data_dir, fsync=False) as a, EmbeddedRelayer(data_dir, fsync=False) as b:
        with a.client() as ca, b.client() as cb:
            blob_id = store(ca, b"written by A")["blobId"]
            assert cb.get(f"/v1/blobs/{blob_id}").content == b"written by A"
            cb.post("/_mock/epoch/advance?by=1")
            assert ca.get("/_mock/epoch").json()["currentEpoch"] == 2
            # the blob stored at epoch 1 for 1 epoch has expired, for both instances
            assert ca.get(f"/v1/blobs/{blob_id}").status_code == 404

            def work(i: int) -> str:
                client = ca if i % 2 else cb
                return str(store(client, b"concurrent %d" % (i % 10))["blobId"])

            with ThreadPoolExecutor(8) as pool:
                ids = list(pool.map(work, range(80)))
            assert len(set(ids)) == 10
            stats_a = ca.get("/_mock/stats").json()
            stats_b = cb.get("/_mock/stats").json()
    assert stats_a["stores"] == stats_b["stores"] == {
        "total": 81, "newlyCreated": 81, "alreadyCertified": 0}
    assert stats_a["requests"]["put_blob"] == 81
    assert stats_a["blobCount"] == 11


def test_epoch_expiry_on_every_read_route(relayer: EmbeddedRelayer) -> None:
    with relayer.client() as c:
        blob = store(c, b"two epochs", "?epochs=2")
        quilt = c.put("/v1/quilts?epochs=2", files={"p": b"q"}).json()
        patch_id = quilt["storedQuiltBlobs"][0]["quiltPatchId"]
        quilt_id = patch_id[:43]
        assert blob["storage"]["endEpoch"] == 3
        reads = [
            f"/v1/blobs/{blob['blobId']}",
            f"/v1/blobs/{blob['blobId']}/byte-range?start=0&length=1",
            f"/v1/blobs/by-object-id/{blob['id']}",
            f"/v1/blobs/by-quilt-patch-id/{patch_id}",
            f"/v1/blobs/by-quilt-id/{quilt_id}/p",
            f"/v1/quilts/{quilt_id}/patches",
        ]
        c.post("/_mock/epoch/advance?by=1")  # epoch 2: still stored (end is exclusive)
        assert [c.get(path).status_code for path in reads] == [200] * 6
        c.post("/_mock/epoch/advance?by=1")  # epoch 3 == endEpoch: expired
        for path in reads:
            response = c.get(path)
            assert response.status_code == 404, path
            assert response.json()["error"]["details"][0]["reason"] == "BLOB_NOT_FOUND"
        listed = c.get(f"/_mock/blobs/{blob['blobId']}").json()
        assert listed["available"] is False and listed["objects"][0]["expired"] is True
        assert c.get("/_mock/blobs?available=true").json()["count"] == 0
        assert c.get("/_mock/stats").json()["expiredObjectCount"] == 2
        # storing again makes it available again, with a new Blob object
        renewed = store(c, b"two epochs")
        assert renewed["storage"]["startEpoch"] == 3 and renewed["id"] != blob["id"]
        assert c.get(f"/v1/blobs/{blob['blobId']}").status_code == 200


def test_expired_permanent_blob_is_not_already_certified(relayer: EmbeddedRelayer) -> None:
    with relayer.client() as c:
        store(c, b"perm", "?permanent=true")
        c.post("/_mock/epoch/advance?by=1")
        assert "blobId" in store(c, b"perm", "?permanent=true")  # newlyCreated blobObject


def test_epoch_clock_with_duration() -> None:
    clock = FakeClock()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(tmp, clock=clock, fsync=False)
        assert store.current_epoch() == 1
        store.set_epoch_duration(10.0)
        clock.now += 25
        assert store.current_epoch() == 3
        info = store.epoch_info()
        assert info["epochDuration"] == 10.0
        assert info["nextEpochAt"] == pytest.approx(clock.now + 5)
        assert store.advance_epoch(2) == 5
        clock.now += 5
        assert store.current_epoch() == 6
        store.set_epoch_duration(None)  # manual from now on
        clock.now += 1000
        assert store.current_epoch() == 6
        # another Store on the same dir sees the same persisted clock
        assert Store(tmp, clock=clock, fsync=False).current_epoch() == 6
        with pytest.raises(ValueError):
            store.advance_epoch(-1)
        with pytest.raises(ValueError):
            store.set_epoch_duration(0)
        store.close()


def test_automatic_epochs_expire_blobs(data_dir: Path) -> None:
    with EmbeddedRelayer(data_dir, fsync=False, epoch_duration=0.05) as r, r.client() as c:
        blob = store(c, b"short lived")
        time.sleep(0.3)
        epoch = c.get("/_mock/epoch").json()
        assert epoch["currentEpoch"] >= blob["storage"]["endEpoch"] + 2
        assert epoch["epochDuration"] == 0.05
        assert c.get(f"/v1/blobs/{blob['blobId']}").status_code == 404
        c.put("/_mock/epoch", json={"epochDuration": None})
        frozen = c.get("/_mock/epoch").json()
        assert frozen["epochDuration"] is None and frozen["nextEpochAt"] is None


def test_files_are_content_addressed_and_tmp_is_clean(relayer: EmbeddedRelayer) -> None:
    store_ = relayer.relayer.store
    with relayer.client() as c:
        blob_id = store(c, b"content addressed")["blobId"]
        store(c, b"content addressed")
        c.put("/v1/quilts", files={"a": b"1"})
        c.put("/v1/quilts", files=[("a", ("x", b"1")), ("a", ("y", b"2"))])  # rejected
        c.put("/v1/blobs?epochs=99", content=b"rejected")
    path = store_.blob_path(blob_id)
    assert path.parent.name == path.name[:2] and len(path.name) == 64
    assert path.read_bytes() == b"content addressed"
    assert list(store_.tmp_dir.iterdir()) == []
    assert sorted(p.name for p in store_.data_dir.iterdir()) == [
        "blobs", "index.sqlite3", "index.sqlite3-shm", "index.sqlite3-wal", "tmp"]


def test_lost_file_reads_404_and_store_heals(relayer: EmbeddedRelayer) -> None:
    with relayer.client() as c:
        blob_id = store(c, b"fragile", "?permanent=true")["blobId"]
        relayer.relayer.store.blob_path(blob_id).unlink()
        assert c.get(f"/v1/blobs/{blob_id}").status_code == 404
        assert "alreadyCertified" in store(c, b"fragile", "?permanent=true")
        assert c.get(f"/v1/blobs/{blob_id}").content == b"fragile"


def test_concurrent_store_and_delete_keep_index_and_files_consistent(data_dir: Path) -> None:
    with EmbeddedRelayer(data_dir, fsync=False) as a, EmbeddedRelayer(data_dir, fsync=False) as b:
        payloads = [b"churn %d" % i for i in range(5)]
        stop = threading.Event()

        def deleter() -> None:
            with b.client() as cb:
                while not stop.is_set():
                    for data in payloads:
                        cb.delete(f"/_mock/blobs/{blob_id_for(data)}")

        thread = threading.Thread(target=deleter)
        thread.start()
        try:
            with a.client() as ca:
                for _ in range(40):
                    for data in payloads:
                        assert ca.put("/v1/blobs", content=data).status_code == 200
        finally:
            stop.set()
            thread.join()
        store_ = a.relayer.store
        for entry in store_.list_blobs():
            undeleted = [o for o in entry["objects"] if not o["deleted"]]
            assert store_.blob_path(entry["blobId"]).exists() == bool(undeleted)
        with a.client() as ca:
            for data in payloads:
                ca.put("/v1/blobs", content=data)
                assert ca.get(f"/v1/blobs/{blob_id_for(data)}").content == data


def test_create_app_returns_starlette_with_relayer_state(data_dir: Path) -> None:
    app = create_app(data_dir, fsync=False, initial_epoch=34)
    relayer = app.state.relayer
    assert relayer.store.current_epoch() == 34
    relayer.store.close()
