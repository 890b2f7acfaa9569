"""update / history / forget: every claim of docs/forget.md is checked here."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.helpers_memory import (
    MASTER_HEX,
    SeededEmbedder,
    blob_ids,
    make_settings,
    mock_admin,
    store_count,
)
from walrus_mem._log.heads import HeadRef
from walrus_mem._log.manifest import parse_page, parse_root
from walrus_mem._recall.index_vectors import quantize
from walrus_mem.envelope import open_envelope
from walrus_mem.errors import (
    BlobNotFound,
    InvalidInput,
    MemoryNotFound,
    TamperedBlob,
    WrongNamespace,
)
from walrus_mem.keys import MasterSeed, NamespaceKeys
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder


def manifest_ids(mem: Memory, ns: str = "default") -> set[str]:
    """Memory ids listed by the namespace's latest manifest (opened from Walrus)."""
    keys = mem.keys_for(ns)
    blob = mem.stats(ns).manifest_blob_id
    assert blob is not None
    root = parse_root(open_envelope(keys, mem.walrus.read_blob(HeadRef.parse(blob).blob_id),
                                    expected_kind="manifest"))
    entries = list(root.entries or [])
    for page_blob, patch, digest, _ in root.pages:
        raw = mem.walrus.read_quilt_patch(patch) if patch else mem.walrus.read_blob(page_blob)
        entries += parse_page(open_envelope(keys, raw, expected_id=f"page-{digest}"), digest)
    return {e.memory_id for e in entries if not e.deleted}


# -- update / history ----------------------------------------------------------------


def test_update_keeps_the_id_and_adds_a_version(mem: Memory) -> None:
    rec = mem.remember("I live in Lisbon", metadata={"source": "chat"})
    new = mem.update(rec.id, "I live in Porto")
    assert new.id == rec.id and new.version == 2 and new.text == "I live in Porto"
    assert new.created_at == rec.created_at and new.updated_at > rec.updated_at
    assert new.metadata == {"source": "chat"}  # kept unless given
    assert new.status == "published" and new.blob_id and new.blob_id != rec.blob_id
    history = mem.history(rec.id)
    assert [(h.version, h.event, h.text, h.blob_id) for h in history] == [
        (1, "ADD", "I live in Lisbon", rec.blob_id),
        (2, "UPDATE", "I live in Porto", new.blob_id),
    ]
    hits = mem.recall("Porto", min_score=0)
    assert hits[0].id == rec.id and hits[0].text == "I live in Porto"
    assert mem.recall("Lisbon", min_score=0)[0].lexical is None  # old text left FTS
    keys = mem.keys_for("default")
    opened = open_envelope(keys, mem.walrus.read_blob(new.blob_id), expected_id=rec.id)
    assert opened["version"] == 2 and opened["text"] == "I live in Porto"
    old = open_envelope(keys, mem.walrus.read_blob(rec.blob_id), expected_id=rec.id)
    assert old["version"] == 1  # the previous version stays readable on Walrus


def test_update_metadata_only_does_not_re_embed(mem: Memory, fake_embedder: HashEmbedder) -> None:
    rec = mem.remember("stable text")
    calls = fake_embedder.calls
    new = mem.update(rec.id, metadata={"k": "v"}, importance=0.1, category="rule")
    assert fake_embedder.calls == calls
    assert (new.version, new.metadata, new.importance, new.category) == (2, {"k": "v"}, 0.1, "rule")
    assert mem.update(rec.id, "stable text") == new  # nothing changed: no new version
    assert len(mem.history(rec.id)) == 2


def test_update_argument_errors(mem: Memory) -> None:
    a = mem.remember("first text")
    mem.remember("second text")
    with pytest.raises(InvalidInput, match="at least one"):
        mem.update(a.id)
    with pytest.raises(InvalidInput, match="already holds that text"):
        mem.update(a.id, "second text")
    with pytest.raises(InvalidInput):
        mem.update(a.id, "   ")


def test_update_while_queued_publishes_only_the_new_version(mem: Memory) -> None:
    admin = mock_admin(mem)
    mem._publisher.breaker_until = float("inf")  # publisher "down"
    rec = mem.remember("draft one")
    new = mem.update(rec.id, "draft two")
    assert rec.status == new.status == "queued"
    mem._publisher.breaker_until = 0.0
    before = store_count(admin)
    report = mem.sync()
    assert report.published == 1 and report.still_queued == 0
    assert store_count(admin) == before + 2  # the fact (v2 only) + the manifest
    assert mem.get(rec.id).version == 2 and mem.get(rec.id, verify=True).blob_id
    assert [h.blob_id is None for h in mem.history(rec.id)] == [True, False]


# -- forget --------------------------------------------------------------------------


def test_forget_removes_it_everywhere_locally(mem: Memory) -> None:
    keep = mem.remember("keep this: the sky is blue")
    gone = mem.remember("forget this: my pin is quokka4321", metadata={"secret": True})
    mem.update(gone.id, "forget this: my pin is quokka9876")
    mem.sync()
    report = mem.forget(gone.id)
    assert report.forgotten == [gone.id]
    # not in get / list / recall
    with pytest.raises(MemoryNotFound):
        mem.get(gone.id)
    assert [r.id for r in mem.list()] == [keep.id]
    assert all(h.id != gone.id for h in mem.recall("pin quokka9876", k=10, min_score=0))
    # not in FTS, not in the vector table, not in the index
    cat = mem._catalog
    assert cat.fts_search("default", '"pin"', 10) == []
    assert cat.fts_search("default", '"sky"', 10) != []
    assert cat.query("SELECT 1 FROM memories WHERE id = ?", (gone.id,)) == []
    idx = mem._indexes.loaded("default")
    assert idx is not None and len(idx) == 1
    # history: tombstone, blob ids kept, no text or metadata anywhere
    history = mem.history(gone.id)
    assert [h.event for h in history] == ["ADD", "UPDATE", "DELETE"]
    assert all(h.text is None and h.metadata is None for h in history)
    assert history[0].blob_id and history[1].blob_id
    # the plaintext is not in the catalog files any more
    mem.close()
    for path in mem.data_dir.glob("catalog.sqlite3*"):
        data = path.read_bytes()
        # Words no hex or base64 identifier holds by chance: "4321" alone turned up in an
        # object id (0x...79876...) about once in 300 runs.
        assert b"quokka4321" not in data and b"quokka9876" not in data, path.name


def test_forget_keeps_it_out_of_every_later_manifest(mem: Memory) -> None:
    a = mem.remember("memory a")
    b = mem.remember("memory b")
    mem.sync()
    assert manifest_ids(mem) == {a.id, b.id}
    report = mem.forget(a.id)
    assert report.manifest_blob_id == mem.stats().manifest_blob_id  # republished at once
    assert manifest_ids(mem) == {b.id}
    c = mem.remember("memory c")
    mem.sync()
    assert manifest_ids(mem) == {b.id, c.id}


def test_forget_deletes_deletable_blobs_on_the_mock(mem: Memory) -> None:
    admin = mock_admin(mem)
    rec = mem.remember("delete my blob")
    mem.update(rec.id, "delete my blob too")
    v1, v2 = (h.blob_id for h in mem.history(rec.id))
    assert {v1, v2} <= blob_ids(admin)
    report = mem.forget(rec.id)
    assert set(report.deleted_blobs) == {v1, v2} and report.kept_blobs == {}
    assert not {v1, v2} & blob_ids(admin)
    with pytest.raises(BlobNotFound):
        mem.walrus.read_blob(v1, deadline=1.0)


def test_forget_cannot_delete_one_patch_of_a_shared_quilt(mem: Memory) -> None:
    admin = mock_admin(mem)
    batch = mem.remember_many(["quilt fact one", "quilt fact two"]).records
    quilt = batch[0].blob_id
    first = mem.forget(batch[0].id)
    assert first.deleted_blobs == [] and "quilt" in first.kept_blobs[quilt]
    assert quilt in blob_ids(admin)  # ciphertext of the forgotten patch is still there
    second = mem.forget(batch[1].id)  # last live member gone: the whole quilt can go
    assert second.deleted_blobs == [quilt]
    assert quilt not in blob_ids(admin)


def test_forgotten_ciphertext_is_unreadable_without_the_key(mem: Memory) -> None:
    batch = mem.remember_many(["shared quilt secret one", "shared quilt other"]).records
    mem.forget(batch[0].id)
    raw = mem.walrus.read_quilt_patch(batch[0].quilt_patch_id)  # still on Walrus (shared quilt)
    assert b"secret" not in raw
    other = NamespaceKeys.derive(MasterSeed.from_hex("aa" * 32), "default")
    with pytest.raises(WrongNamespace):
        open_envelope(other, raw)
    forged = NamespaceKeys.derive(MasterSeed.from_hex(MASTER_HEX), "default")
    tampered = raw[:-1] + bytes([raw[-1] ^ 1])
    with pytest.raises(TamperedBlob):
        open_envelope(forged, tampered)


def test_forget_on_real_walrus_keeps_blob_and_says_why(mem_dir, fake_embedder) -> None:
    from walrus_mem._walrus.storage import Backend

    with Memory(make_settings(mem_dir), embedder=fake_embedder, master_key=MASTER_HEX) as m:
        rec = m.remember("no http delete on real walrus")
        backend = m._get_backend()
        backend._admin_ok = False  # behave like a real publisher: no /_mock/ routes
        assert isinstance(backend, Backend) and not backend.can_delete
        report = m.forget(rec.id)
        assert report.deleted_blobs == []
        assert "on-chain" in report.kept_blobs[rec.blob_id]


def test_forget_a_queued_memory_never_publishes_it(mem: Memory) -> None:
    admin = mock_admin(mem)
    mem._publisher.breaker_until = float("inf")
    rec = mem.remember("queued then forgotten")
    assert rec.status == "queued"
    mem.forget(rec.id)
    mem._publisher.breaker_until = 0.0
    before = store_count(admin)
    report = mem.sync()
    assert report.published == 0 and store_count(admin) == before
    assert mem.stats().outbox_batches == 0


def test_forget_all_requires_confirm(mem: Memory) -> None:
    mem.remember_many(["a one", "a two", "a three"], namespace="a")
    keep = mem.remember("b one", namespace="b")
    with pytest.raises(InvalidInput, match="confirm=True"):
        mem.forget_all("a")
    with pytest.raises(InvalidInput):
        mem.forget_all("a", confirm="yes")  # type: ignore[arg-type]
    assert mem.stats("a").memories == 3
    report = mem.forget_all("a", confirm=True)
    assert len(report.forgotten) == 3
    assert mem.list("a") == [] and mem.recall("a one", namespace="a") == []
    assert mem.stats("a").forgotten == 3
    assert [r.id for r in mem.list("b")] == [keep.id]


@pytest.fixture
def dense_mem(mem_dir):
    memory = Memory(make_settings(mem_dir), embedder=SeededEmbedder(), master_key=MASTER_HEX)
    yield memory
    memory.close()


def vector_bytes(mem: Memory, text: str) -> bytes:
    """The bytes the index file holds for ``text``'s vector (int8, index_vectors.py)."""
    vector = mem.embedder.embed([text])[0]
    half = np.asarray(vector / np.linalg.norm(vector), dtype="<f2")  # as the catalog keeps it
    return quantize(half.astype(np.float32)).tobytes()


def test_forget_all_leaves_no_vectors_in_the_index_file(dense_mem: Memory) -> None:
    mem = dense_mem
    recs = mem.remember_many([f"vector fact {i}" for i in range(5)]).records
    mem.recall("vector fact")
    mem.sync()
    index_path = mem.stats().index_path
    vector = vector_bytes(mem, recs[0].text)
    assert vector in index_path.read_bytes()
    mem.forget_all(confirm=True)
    mem.close()
    assert vector not in index_path.read_bytes()


def test_compact_rewrites_the_index_file(dense_mem: Memory) -> None:
    mem = dense_mem
    recs = mem.remember_many(["compact me", "keep me"]).records
    mem.recall("compact me")
    mem.sync()
    path = mem.stats().index_path
    vector = vector_bytes(mem, "compact me")
    mem.forget(recs[0].id)
    mem.sync()
    assert vector in path.read_bytes()  # USearch keeps removed vectors in its file...
    mem.compact()
    assert vector not in path.read_bytes()  # ...until compact rebuilds it
    assert [h.text for h in mem.recall("keep me", min_score=0)] == ["keep me"]


def test_forget_survives_an_unreachable_publisher(mem_dir, fake_embedder) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    settings = make_settings(mem_dir, publisher_url=url, aggregator_urls=url)
    with Memory(settings, embedder=fake_embedder, master_key=MASTER_HEX) as m:
        rec = m.remember("offline memory")
        report = m.forget(rec.id)
        assert report.forgotten == [rec.id]
        with pytest.raises(MemoryNotFound):
            m.get(rec.id)
        assert rec.status == "queued" and report.deleted_blobs == []


def test_update_of_importance_and_expiry_reaches_recall(mem: Memory, monkeypatch) -> None:
    import walrus_mem._recall.recall as recall_module

    # RecallHit.importance is the importance ranking was given (the index's copy),
    # not the record's: both must follow an update.
    rec = mem.remember("importance carrier", importance=0.9)
    hit = mem.recall("importance carrier", min_score=0)[0]
    assert hit.importance == 0.9
    mem.update(rec.id, importance=0.05)
    hit = mem.recall("importance carrier", min_score=0)[0]
    assert hit.importance == 0.05 and hit.record.importance == 0.05
    mem.update(rec.id, expires_at=time.time() + 30)
    real_time = time.time
    monkeypatch.setattr(recall_module.time, "time", lambda: real_time() + 60)
    assert mem.recall("importance carrier", min_score=0) == []
