"""Issue 28 item 4: with the embedded relayer, a published row keeps no sealed copy in the
catalog (the relayer's quilt holds the same bytes, ~1,410 B a short fact); every reader
takes it from the relayer's folder, checked against the row's digest. A copy the folder
lost or that was changed there is never used: the memory is sealed again from its row and
published again, never lost. With a Walrus URL (here: an injected client) the catalog
keeps every copy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from relayer_mock.embedded import EmbeddedRelayer
from walrus_mem import Memory, Settings
from walrus_mem._catalog.held import digest_of
from walrus_mem._memory.integrity import damaged_sealed
from walrus_mem._memory.repair import repair_namespace
from walrus_mem.testing import HashEmbedder
from walrus_mem.walrus import WalrusClient

MASTER = "17" * 32
NS = "default"


def _settings(tmp: Path, name: str = "data") -> Settings:
    return Settings(config_file=None, data_dir=tmp / name, use_keyring=False,
                    publisher_url=None, aggregator_urls=[], state_dir=tmp / "state")


def _open(tmp: Path, name: str = "data", walrus: WalrusClient | None = None) -> Memory:
    return Memory(_settings(tmp, name), embedder=HashEmbedder(64), master_key=MASTER,
                  walrus=walrus)


def _texts(n: int, tag: str = "") -> list[str]:
    return [f"fact {tag}{i}: the {['red', 'blue', 'green'][i % 3]} notebook {i * 7}"
            for i in range(n)]


def _kept(mem: Memory) -> dict[str, bool]:
    """Memory id -> whether its catalog row keeps a sealed copy."""
    return {str(r[0]): r[1] is not None for r in mem._parts.catalog.query(
        "SELECT id, sealed FROM memories WHERE namespace = ?", (NS,))}


def _reader(tmp: Path, mem: Memory, name: str) -> tuple[Memory, EmbeddedRelayer]:
    """A fresh data dir reading the writer's relayer folder (as `walrus-mem relayer`
    serves it)."""
    relayer = EmbeddedRelayer(mem.data_dir / "relayer")
    client = WalrusClient(relayer.base_url, [relayer.base_url], transport=relayer.transport)
    return _open(tmp, name, client), relayer


def _quilt_copy(mem: Memory, mid: str) -> tuple[Path, int, int]:
    """(file, offset, length) of a memory's patch in the relayer's folder."""
    row = mem._parts.catalog.memory(NS, mid)
    store = mem._parts.publisher.backend().embedded.relayer.store
    record = store.get_patch_by_id(str(row["quilt_patch_id"]))
    return store.blob_path(str(row["blob_id"])), record.offset, record.length


def test_published_rows_keep_no_sealed_copy_and_every_reader_still_works(
        tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        records = mem.remember_many(_texts(30))
        single = mem.remember("the single fact about the yellow pencil")
        assert not mem.sync().errors
        catalog = mem._parts.catalog
        assert _kept(mem) and not any(_kept(mem).values())
        rows = catalog.query("SELECT sealed, digest, blob_id, quilt_patch_id, length(vector) "
                             "FROM memories")
        assert all(r[1] and r[2] and r[4] == 0 for r in rows)  # vector in the relayer's copy
        # the bytes come back from the relayer, exactly the digest's
        data, version = catalog.sealed_of(NS, single.id)
        assert version == 1 and digest_of(data) == str(catalog.query_one(
            "SELECT digest FROM memories WHERE id = ?", (single.id,))[0])
        hits = mem.recall("yellow pencil")
        assert hits[0].record.id == single.id
        assert mem.get(records[3].id).text == _texts(30)[3]
        before = {h.record.id for h in mem.recall("green notebook")}
        # what an index rebuild reads: every vector from the relayer's copies
        keys = [int(r[0]) for r in catalog.query("SELECT key FROM memories")]
        vectors = catalog.vectors_by_keys(NS, keys)
        assert len(vectors) == 31 and all(np.isfinite(v).all() for v in vectors.values())
        assert len(catalog.index_rows(NS, keys)) == 31
        assert damaged_sealed(catalog, mem.keys_for(NS), NS) == []
        # extend re-stores the relayer's bytes; an update's lineage reads the old copy
        assert not mem.extend([single.id]).failed
        mem.update(records[0].id, text="fact 0: the red notebook, rewritten")
        assert not mem.sync().errors
        assert not any(_kept(mem).values())
        report = mem.rotate_key()
        assert report.complete and not report.errors
        assert not any(_kept(mem).values())
        assert mem.get(single.id).text == "the single fact about the yellow pencil"
        assert repair_namespace(mem, NS).unrepaired == []
        head = str(mem._parts.log.newest(NS)[0])
    reader, relayer = _reader(tmp_path, mem, "fresh")
    try:
        restored = reader.restore(NS, head)
        assert restored.restored == 31
        assert reader.get(single.id).text == "the single fact about the yellow pencil"
        assert reader.recall("green notebook")
        assert all(_kept(reader).values())  # a Walrus URL: the catalog keeps its copies
        assert {h.record.id for h in reader.recall("green notebook")} <= before | {
            records[0].id}
    finally:
        reader.close()
        relayer.close()


def test_a_changed_byte_in_the_relayers_quilt_is_never_used(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        records = mem.remember_many(_texts(12))
        assert not mem.sync().errors
        victim = records[5].id
        path, offset, length = _quilt_copy(mem, victim)
        raw = bytearray(path.read_bytes())
        raw[offset + length // 2] ^= 0x01
        path.chmod(0o600)
        path.write_bytes(bytes(raw))
        catalog = mem._parts.catalog
        assert catalog.sealed_of(NS, victim) is None  # never the changed bytes
        assert [m for m, _ in damaged_sealed(catalog, mem.keys_for(NS), NS)] == [victim]
        fixed = repair_namespace(mem, NS)
        assert victim in fixed.resealed
        assert catalog.memory(NS, victim)["status"] == "queued"
        assert not mem.sync().errors
        assert catalog.memory(NS, victim)["status"] == "published"
        data, _ = catalog.sealed_of(NS, victim)
        assert damaged_sealed(catalog, mem.keys_for(NS), NS) == []
        assert mem.get(victim).text == _texts(12)[5]
        assert data is not None
        head = str(mem._parts.log.newest(NS)[0])
    reader, relayer = _reader(tmp_path, mem, "fresh")
    try:
        assert reader.restore(NS, head).restored == 12
        assert reader.get(victim).text == _texts(12)[5]
    finally:
        reader.close()
        relayer.close()


def test_a_blob_deleted_from_the_relayer_is_published_again_by_sync(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        mem.remember_many(_texts(6))
        single = mem.remember("the single fact about the orange stapler")
        assert not mem.sync().errors
        catalog = mem._parts.catalog
        old_blob = str(catalog.memory(NS, single.id)["blob_id"])
        backend = mem._parts.publisher.backend()
        assert backend.delete_blob(old_blob)[0]
        assert catalog.sealed_of(NS, single.id) is None
        # its blob is due for renewal: sync stores it again, sealed again from the row
        end = int(catalog.memory(NS, single.id)["end_epoch"])
        store = backend.embedded.relayer.store
        store.advance_epoch(end - 1 - store.current_epoch())
        report = mem.sync()
        assert not report.errors, report.errors
        row = catalog.memory(NS, single.id)
        assert row["status"] == "published" and str(row["blob_id"]) != old_blob
        assert catalog.sealed_of(NS, single.id) is not None
        assert mem.recall("orange stapler")[0].record.id == single.id
        head = str(mem._parts.log.newest(NS)[0])
    reader, relayer = _reader(tmp_path, mem, "fresh")
    try:
        assert reader.restore(NS, head).restored == 7
        assert reader.get(single.id).text == "the single fact about the orange stapler"
    finally:
        reader.close()
        relayer.close()


def test_compact_drops_the_copies_rows_kept_before(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows published while the catalog kept every copy (an older walrus_mem, schema 9)
    drop theirs at `compact`, and read the same afterwards."""
    with _open(tmp_path) as mem:
        monkeypatch.setattr(mem._parts.publisher.copies, "_drops", False)
        mem.remember_many(_texts(20))
        assert not mem.sync().errors
        assert all(_kept(mem).values())
        before = [(h.record.id, round(h.score, 6)) for h in mem.recall("blue notebook 7")]
        monkeypatch.setattr(mem._parts.publisher.copies, "_drops", True)
        mem.compact()
        assert not any(_kept(mem).values())
        assert [(h.record.id, round(h.score, 6)) for h in mem.recall("blue notebook 7")] == before
        assert damaged_sealed(mem._parts.catalog, mem.keys_for(NS), NS) == []


def test_with_a_walrus_client_the_catalog_keeps_every_copy(tmp_path: Path) -> None:
    relayer = EmbeddedRelayer(tmp_path / "walrus")
    client = WalrusClient(relayer.base_url, [relayer.base_url], transport=relayer.transport)
    try:
        with _open(tmp_path, walrus=client) as mem:
            mem.remember_many(_texts(8))
            assert not mem.sync().errors
            mem.compact()
            assert len(_kept(mem)) == 8 and all(_kept(mem).values())
    finally:
        relayer.close()


def test_rows_without_their_copy_take_fewer_pages_without_compact(tmp_path: Path) -> None:
    """A row that drops its copy is written again (deleted and inserted), so SQLite packs
    the short rows into fewer pages at once; an UPDATE left each page as large as before."""
    in_use = {}
    for keep in (True, False):
        settings = _settings(tmp_path, f"keep-{keep}").model_copy(
            update={"catalog_keeps_sealed": keep})
        with Memory(settings, embedder=HashEmbedder(64), master_key=MASTER) as mem:
            for batch in range(3):
                mem.remember_many(_texts(100, tag=f"{batch}-"))
            assert all(_kept(mem).values()) is keep
            try:
                row = mem._parts.catalog.query_one(
                    "SELECT count(*) FROM dbstat WHERE name = 'memories'")
            except Exception:  # a SQLite built without dbstat
                pytest.skip("no dbstat")
            in_use[keep] = int(row[0])
    assert in_use[False] < 0.4 * in_use[True], in_use



def test_reading_a_folder_without_a_relayer_creates_nothing(tmp_path: Path) -> None:
    from relayer_mock.embedded import LocalCopies

    copies = LocalCopies(tmp_path / "relayer")
    assert copies.read("x" * 43, None) is None and copies.read_many("x" * 43, ["y"]) == {}
    assert not (tmp_path / "relayer").exists()
    copies.close()
