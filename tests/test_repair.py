"""Never push damage, integrity checks, and repair: lost outbox rows, damaged sealed copies,
a corrupt index with an intact header, an unusable catalog; doctor/repair through the CLI."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest
from usearch.index import Index

from tests.helpers_cli import TEST_MASTER_HEX, invoke, invoke_json
from tests.helpers_memory import MASTER_HEX, make_settings, mock_admin, store_count
from walrus_mem import Memory
from walrus_mem._memory.integrity import check_index_file, damaged_sealed, queued_without_outbox
from walrus_mem._memory.repair import repair_namespace
from walrus_mem._recall.index import file_digest
from walrus_mem.errors import CatalogCorrupt
from walrus_mem.testing import HashEmbedder

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def _sql(mem: Memory, statement: str, params: tuple[object, ...] = ()) -> None:
    """Damage the catalog from outside, as another tool or a bad disk would."""
    with sqlite3.connect(mem.catalog_path) as conn:
        conn.execute(statement, params)


def _flip_bit(mem: Memory, memory_id: str) -> None:
    with sqlite3.connect(mem.catalog_path) as conn:
        sealed = bytearray(conn.execute("SELECT sealed FROM memories WHERE id = ?",
                                        (memory_id,)).fetchone()[0])
        sealed[len(sealed) // 2] ^= 0x10
        conn.execute("UPDATE memories SET sealed = ? WHERE id = ?", (bytes(sealed), memory_id))


def _hold_publishing(mem: Memory) -> None:
    mem._publisher.breaker_until = time.monotonic() + 3600  # as after a publisher outage


def test_sync_re_enqueues_queued_memories_whose_outbox_rows_were_lost(mem: Memory) -> None:
    first = mem.remember("a fact published at once")
    _hold_publishing(mem)
    queued = mem.remember_many([f"queued fact number {i}" for i in range(30)]).records
    assert {r.status for r in queued} == {"queued"}
    _sql(mem, "DELETE FROM outbox_items")
    _sql(mem, "DELETE FROM outbox")
    assert len(queued_without_outbox(mem._catalog, "default")) == 30
    mem._publisher.breaker_until = 0.0
    report = mem.sync()
    assert report.published == 30 and report.still_queued == 0 and not report.errors
    assert queued_without_outbox(mem._catalog) == []
    head = mem.stats().manifest_blob_id
    assert mem.stats().published == 31
    listed = mem.restore("default", head)  # the manifest now lists every memory
    assert listed.total == 31 and listed.skipped == 31 and not listed.failed
    assert first.id in {r.id for r in mem.list(limit=100)}


def test_extend_never_replaces_a_good_remote_copy_with_damaged_bytes(mem: Memory) -> None:
    mem._parts.publisher.copies.drops = False  # the catalog keeps its copy, as with a URL
    rec = mem.remember("a fact whose local sealed copy rots")
    _flip_bit(mem, rec.id)
    admin = mock_admin(mem)
    stores = store_count(admin)
    report = mem.extend([rec.id], epochs=3)
    assert report.extended == {}
    assert report.failed[0][0] == rec.id and "damaged" in report.failed[0][1]
    assert store_count(admin) == stores  # nothing went to Walrus
    assert mem.get(rec.id).blob_id == rec.blob_id
    assert mem.get(rec.id, verify=True).text == rec.text  # the good copy is still there
    assert [m for m, _ in damaged_sealed(mem._catalog, mem.keys_for(), "default")] == [rec.id]

    fixed = repair_namespace(mem)
    assert fixed.refetched == [rec.id] and fixed.resealed == [] and not fixed.unrepaired
    assert damaged_sealed(mem._catalog, mem.keys_for(), "default") == []
    again = mem.extend([rec.id], epochs=3)
    assert rec.id in again.extended and not again.failed


def test_outbox_replay_does_not_publish_a_damaged_copy(mem: Memory) -> None:
    _hold_publishing(mem)
    good, bad = mem.remember_many(["a queued fact that is fine",
                                   "a queued fact whose sealed copy rots"]).records
    _flip_bit(mem, bad.id)
    mem._publisher.breaker_until = 0.0
    admin = mock_admin(mem)
    report = mem.sync()
    assert report.published == 1 and report.still_queued == 1
    assert any("fail verification" in e for e in report.errors)
    assert mem.get(good.id).status == "published" and mem.get(bad.id).status == "queued"
    assert report.manifests == {}  # a manifest now would omit the queued one

    fixed = repair_namespace(mem)
    assert fixed.resealed == [bad.id]  # queued: only the catalog row has it, sealed again
    stores = store_count(admin)
    report = mem.sync()
    assert report.published == 1 and report.still_queued == 0 and store_count(admin) > stores
    assert mem.get(bad.id, verify=True).text == bad.text
    # the row kept no vector (its sealed copy carried it): the reseal embedded it again
    mem._parts.indexes.rebuild("default", "test-hash-embedder-64", 64)
    assert mem.recall("a queued fact whose sealed copy rots", k=1)[0].id == bad.id


def _corrupt_index_keys(index_file: Path, dim: int, old_key: int, new_key: int, *,
                        restamp: bool = False) -> None:
    """Rewrite the index file with one key renamed: a valid header and count, wrong content.

    ``restamp`` also records the new file's digest in the metadata, as a writer bug (not a
    disk) would leave it: then only the comparison with the catalog can find the damage.
    """
    old = Index(ndim=dim, metric="cos", dtype="i8")
    old.load(str(index_file))
    keys = np.asarray(old.keys, dtype=np.uint64)
    vectors = np.stack([np.asarray(old.get(int(k)), dtype=np.int8) for k in keys])
    keys[keys == old_key] = new_key
    new = Index(ndim=dim, metric="cos", dtype="i8")
    new.add(keys, vectors)
    new.save(str(index_file))
    if restamp:
        meta_path = index_file.with_name(index_file.name.replace(".usearch", ".meta.json"))
        meta = json.loads(meta_path.read_text())
        meta["blake2b"] = file_digest(index_file)
        meta_path.write_text(json.dumps(meta))


def test_corrupt_index_with_intact_header_never_breaks_recall(mem_settings) -> None:
    with Memory(mem_settings, embedder=HashEmbedder(), master_key=MASTER_HEX) as mem:
        records = [mem.remember(f"fact {i} about {WORDS[i]} and {WORDS[i + 1]}")
                   for i in range(9)]
        mem.recall("alpha")
        index_dir = mem._indexes.directory
        path = mem._indexes.path_for("default")
    with Memory(mem_settings, embedder=HashEmbedder(), master_key=MASTER_HEX) as mem:
        key = int(mem._catalog.query("SELECT key FROM memories ORDER BY key")[2][0])
        _corrupt_index_keys(path, 64, key, 1000, restamp=True)
        health = check_index_file(mem._catalog, index_dir, "default", "test-hash-embedder-64", 64)
        assert not health.ok and health.missing == 1 and health.extra == 1
        assert health.index_count == 9
        ids = {r.id for r in records}
        for word in WORDS[:10]:
            hits = mem.recall(word, k=9, min_score=0)  # used to raise KeyError: 1000
            assert {h.id for h in hits} <= ids
        assert len(mem.recall("fact", k=9, min_score=0)) == 9
        healed = check_index_file(mem._catalog, index_dir, "default", "test-hash-embedder-64", 64)
    assert healed.ok and healed.index_count == 9  # the open rebuilt and saved the file


def test_catalog_corrupt_points_to_repair(mem_dir: Path) -> None:
    mem_dir.mkdir(parents=True)
    (mem_dir / "catalog.sqlite3").write_bytes(b"this is not a database" * 100)
    with pytest.raises(CatalogCorrupt, match="walrus-mem repair"):
        Memory(make_settings(mem_dir), embedder=HashEmbedder(), master_key=MASTER_HEX)


def _by_name(data) -> dict[str, dict[str, str]]:
    return {c["name"]: c for c in data["checks"]}


def test_doctor_and_repair_end_to_end_through_the_cli(tmp_path: Path, monkeypatch) -> None:
    data_dir = tmp_path / "data"
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", TEST_MASTER_HEX)
    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash")
    monkeypatch.setenv("WALRUS_MEM_DATA_DIR", str(data_dir))
    monkeypatch.setenv("WALRUS_MEM_CATALOG_KEEPS_SEALED", "1")  # its copies rot below
    for i in range(9):
        invoke(["remember", f"cli fact {i} about {WORDS[i]} and {WORDS[i + 1]}"])
    invoke(["recall", "alpha"])  # writes the index file
    assert invoke_json(["sync"])["manifests"]["default"]
    assert invoke_json(["doctor", "--no-model"])["ok"] is True

    catalog = data_dir / "catalog.sqlite3"
    with sqlite3.connect(catalog) as conn:
        rows = conn.execute("SELECT key, id, sealed FROM memories ORDER BY key").fetchall()
        sealed = bytearray(rows[0][2])
        sealed[100] ^= 0x01
        conn.execute("UPDATE memories SET sealed = ? WHERE key = ?", (bytes(sealed), rows[0][0]))
        # A memory left queued whose outbox row was lost (crash between two writes).
        conn.execute("UPDATE memories SET status = 'queued', blob_id = NULL WHERE key = ?",
                     (rows[1][0],))
    index_file = next((data_dir / "index").glob("*.usearch"))
    _corrupt_index_keys(index_file, 64, int(rows[4][0]), 4242)

    data = invoke_json(["doctor", "--no-model"], expect=1)
    checks = _by_name(data)
    assert checks["catalog integrity"]["status"] == "ok"
    assert checks["index default"]["status"] == "fail"
    assert "does not match its checksum" in checks["index default"]["detail"]
    assert checks["sealed copies default"]["status"] == "fail"
    assert rows[0][1] in checks["sealed copies default"]["detail"]
    assert checks["outbox default"]["status"] == "warn"
    assert checks["head default"]["status"] == "ok"
    assert "repair" in checks["index default"]["fix"]

    out = invoke_json(["repair"])
    assert out["ok"] is True and out["catalog"] is None
    report = out["namespaces"][0]
    assert report["index_rebuilt"] is True
    assert report["requeued"] == [rows[1][1]]
    assert report["refetched"] == [rows[0][1]]
    assert invoke_json(["sync"])["still_queued"] == 0
    assert invoke_json(["doctor", "--no-model"])["ok"] is True
    newest = invoke_json(["stats"])["manifest_blob_id"]  # the re-queued one: a newer head

    # An unusable catalog: repair moves it aside and rebuilds it from the head.
    catalog.write_bytes(b"garbage, not SQLite " * 200)
    for suffix in ("-wal", "-shm"):
        Path(str(catalog) + suffix).unlink(missing_ok=True)
    failed = invoke(["recall", "alpha"], expect=1)
    assert "walrus-mem repair" in failed.stderr
    # heads.sqlite3 (outside the catalog) remembers the newest head: no --manifest needed
    out = invoke_json(["repair"])
    assert len(list(data_dir.glob("catalog.sqlite3.corrupt-*"))) == 1
    assert out["catalog"]["restored"]["default"]["manifest_blob_id"] == newest
    assert out["ok"] is True and out["catalog"]["restored"]["default"]["restored"] == 9
    hits = invoke_json(["recall", "alpha", "--min-score", "0"])
    assert hits
    assert invoke_json(["doctor", "--no-model"])["ok"] is True


def test_doctor_shows_what_expires_when_and_sync_clears_it(mem_dir: Path) -> None:
    from walrus_mem._cli.doctor import check_integrity

    settings = make_settings(mem_dir, epochs=2, epoch_seconds=86400)
    with Memory(settings, embedder=HashEmbedder(), master_key=MASTER_HEX) as mem:
        mem.remember_many([f"expiring fact {i}" for i in range(5)])
        mem.sync()
        checks = {c.name: c for c in check_integrity(mem)}
        assert checks["expiry default"].status == "ok"
        assert "5 end at epoch 3 (~" in checks["expiry default"].detail
        assert "current epoch 1 (relayer_mock's clock)" in checks["expiry default"].detail
        mock_admin(mem).post("/_mock/epoch/advance", params={"by": 3}).raise_for_status()
        checks = {c.name: c for c in check_integrity(mem)}
        expiry = checks["expiry default"]
        assert expiry.status == "fail" and "5 memories are past their end epoch" in expiry.detail
        assert "sync" in expiry.fix
        assert checks["head default"].status == "fail"  # the manifest expired with them
        report = mem.sync()
        assert report.renewed == 5 and report.manifests
        checks = {c.name: c for c in check_integrity(mem)}
        assert checks["expiry default"].status == "ok" and checks["head default"].status == "ok"


def test_doctor_warns_about_a_seen_head_not_merged(tmp_path: Path) -> None:
    from relayer_mock.server import RelayerServer
    from walrus_mem._cli.doctor import check_integrity
    from walrus_mem._log.heads import HeadRef

    with RelayerServer(tmp_path / "walrus") as srv:
        def open_mem(name: str) -> Memory:
            settings = make_settings(tmp_path / name, publisher_url=srv.url,
                                     aggregator_urls=srv.url)
            return Memory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX)

        with open_mem("a") as a, open_mem("b") as b:
            a.remember("a fact written on machine a")
            first = a.sync().manifests["default"]
            b.restore("default", first)
            b.remember("a fact written on machine b")
            second = b.sync().manifests["default"]
            assert {c.name: c for c in check_integrity(a)}["head default"].status == "ok"
            ref = HeadRef.parse(second)  # seen but not merged, as after an interrupted pull
            a._log._remember("default", ref,
                             a._log._read_root("default", a.keys_for("default"), ref))
            check = {c.name: c for c in check_integrity(a)}["head default"]
            assert check.status == "warn" and second in check.detail
            a.sync()
            check = {c.name: c for c in check_integrity(a)}["head default"]
            assert check.status == "ok", check.detail


def test_a_repair_whose_restore_failed_is_finished_by_the_next_one(tmp_path: Path) -> None:
    from relayer_mock.faults import FaultConfig
    from relayer_mock.server import RelayerServer
    from walrus_mem._memory.repair_run import repair_data_dir

    with RelayerServer(tmp_path / "walrus") as srv:
        settings = make_settings(tmp_path / "d", publisher_url=srv.url, aggregator_urls=srv.url,
                                 read_deadline=2.0, master_key=MASTER_HEX)
        with Memory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem:
            mem.remember_many([f"fact {i} to survive a bad disk" for i in range(12)])
            mem.sync()
        catalog = Path(settings.data_dir) / "catalog.sqlite3"
        catalog.write_bytes(b"not sqlite at all " * 300)
        for suffix in ("-wal", "-shm"):
            Path(str(catalog) + suffix).unlink(missing_ok=True)
        srv.relayer.injector.configure(FaultConfig(rate=1.0, scope="reads", kinds="5xx"))
        first, _ = repair_data_dir(settings, embedder=HashEmbedder(64))
        assert first is not None and first.moved_to is not None
        assert first.failed["default"].startswith(("AggregatorUnavailable", "StorageError"))
        assert first.restored == {}
        srv.relayer.injector.configure(FaultConfig())  # the aggregators are back
        second, _ = repair_data_dir(settings, embedder=HashEmbedder(64))
        assert second is not None and second.moved_to is None  # nothing moved this time
        assert second.restored["default"].restored == 12 and not second.failed
        third, _ = repair_data_dir(settings, embedder=HashEmbedder(64))
        assert third is None  # the catalog now holds the remembered head: nothing to do
        with Memory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem:
            assert mem.stats().memories == 12


def test_repair_salvages_queued_memories_from_a_damaged_catalog(mem_settings) -> None:
    """A catalog SQLite still opens but whose integrity check fails (a broken index page):
    it is moved aside, restored from the head, and the never-published memories it still
    holds are written again instead of being lost with it."""
    from walrus_mem._memory.repair_run import repair_data_dir

    settings = make_settings(mem_settings.data_dir, master_key=MASTER_HEX)
    with Memory(settings, embedder=HashEmbedder(), master_key=MASTER_HEX) as mem:
        published = mem.remember_many([f"published fact {i} " + "x" * 200
                                       for i in range(50)]).records
        mem.sync()
        _hold_publishing(mem)
        queued = mem.remember_many([f"queued fact {i}" for i in range(5)]).records
        changed = mem.update(published[0].id, "published fact 0, changed while offline")
        assert changed.status == "queued"
    path = Path(settings.data_dir) / "catalog.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = int(conn.execute("SELECT rootpage FROM sqlite_master WHERE name = "
                                "'memories_blob'").fetchone()[0])
        size = int(conn.execute("PRAGMA page_size").fetchone()[0])
    with open(path, "r+b") as f:  # garbage over one index page: tables stay readable
        f.seek((page - 1) * size + 8)
        f.write(b"\xa5" * (size - 8))
    rebuild, _ = repair_data_dir(settings, embedder=HashEmbedder())
    assert rebuild is not None and rebuild.moved_to is not None and rebuild.problems
    assert rebuild.restored["default"].restored == 50
    assert set(rebuild.salvaged) == {r.id for r in queued} | {changed.id}
    assert rebuild.salvaged[changed.id] == changed.id and not rebuild.unsalvaged
    assert all(rebuild.salvaged[r.id] == r.id for r in queued)
    with Memory(settings, embedder=HashEmbedder(), master_key=MASTER_HEX) as mem:
        assert mem.stats().memories == 55
        assert mem.get(changed.id).text == "published fact 0, changed while offline"
        texts = {r.text for r in mem.list(limit=100)}
        assert {r.text for r in queued} <= texts
        assert mem.sync().still_queued == 0


def _remember_and_save_index(mem_settings, texts: list[str]) -> tuple[Path, Path]:
    with Memory(mem_settings, embedder=HashEmbedder(), master_key=MASTER_HEX) as mem:
        mem.remember_many(texts)
        mem.recall("subject 3")
        return mem._indexes.directory, mem._indexes.path_for("default")


def test_index_check_survives_a_damaged_graph_body(mem_settings) -> None:
    """Random bytes flipped past the header: doctor's check used to search the graph and die
    with SIGSEGV; it now reports the damage (keys/vectors first, any search in a child)."""
    import random

    index_dir, path = _remember_and_save_index(
        mem_settings, [f"index fact {i} about subject {i % 13}" for i in range(900)])
    rng = random.Random(5)
    body = bytearray(path.read_bytes())
    for _ in range(200):
        body[rng.randrange(512, len(body))] = rng.randrange(256)
    path.write_bytes(bytes(body))
    with Memory(mem_settings, embedder=HashEmbedder(), master_key=MASTER_HEX) as mem:
        health = check_index_file(mem._catalog, index_dir, "default", "test-hash-embedder-64", 64)
        assert not health.ok
        assert repair_namespace(mem, "default").index_rebuilt
        healed = check_index_file(mem._catalog, index_dir, "default", "test-hash-embedder-64", 64)
    assert healed.ok and healed.sampled > 0


def test_search_probe_reports_a_crashing_search_without_dying(tmp_path: Path) -> None:
    from walrus_mem._memory.integrity import search_probe

    missing = tmp_path / "no-such.usearch"
    problem = search_probe(missing, 64, np.ones((2, 64), dtype=np.float32), {1, 2})
    assert problem is not None and "search of the index file" in problem


def test_index_check_passes_a_namespace_of_one_memory(mem_settings) -> None:
    """One sampled vector: usearch answers a single query with Matches (no counts), and
    doctor said FAIL ('Matches' object has no attribute 'counts') on a healthy index."""
    index_dir, _ = _remember_and_save_index(mem_settings, ["the only memory here"])
    with Memory(mem_settings, embedder=HashEmbedder(), master_key=MASTER_HEX) as mem:
        health = check_index_file(mem._catalog, index_dir, "default", "test-hash-embedder-64", 64)
        assert health.ok and health.sampled == 1, health.describe()


def test_index_check_passes_a_healthy_index_full_of_duplicate_embeddings(mem_settings) -> None:
    """700 memories, 300 of them sharing a handful of embeddings: HNSW's approximate search
    does not reach the duplicate clusters, and the old lookup check said FAIL on a fresh index."""
    base = "remember to water the plants"
    variants = sorted({"".join(c.upper() if (mask >> (i % 8)) & 1 else c
                               for i, c in enumerate(base)) + p
                       for mask in range(256) for p in ("", ".", "!", "?", " .")})[:300]
    texts = [f"distinct memory number {i} about item {i * 7 % 101}" for i in range(400)]
    index_dir, _ = _remember_and_save_index(mem_settings, texts + variants)
    with Memory(mem_settings, embedder=HashEmbedder(), master_key=MASTER_HEX) as mem:
        health = check_index_file(mem._catalog, index_dir, "default", "test-hash-embedder-64", 64)
        assert health.ok, health.describe()
        assert health.sampled == 32 and health.bad_lookups == 0
        assert not repair_namespace(mem, "default").index_rebuilt


def test_repair_salvages_memories_published_after_the_last_manifest(mem_settings) -> None:
    """Acknowledged and published, but in no manifest yet: a repair that restores the head
    must not lose them (it salvaged only queued rows: 50/55)."""
    from walrus_mem._memory.repair_run import repair_data_dir

    settings = make_settings(mem_settings.data_dir, master_key=MASTER_HEX)
    with Memory(settings, embedder=HashEmbedder(), master_key=MASTER_HEX) as mem:
        mem.remember_many([f"synced fact {i} " + "x" * 200 for i in range(50)])
        mem.sync()
        head = mem.stats().manifest_blob_id
        late = [mem.remember(f"late acknowledged fact {i}") for i in range(5)]
        assert {r.status for r in late} == {"published"}
        assert mem.stats().manifest_blob_id == head  # no manifest lists them
    _damage_catalog_index_page(Path(settings.data_dir) / "catalog.sqlite3")
    rebuild, _ = repair_data_dir(settings, embedder=HashEmbedder())
    assert rebuild is not None and rebuild.moved_to is not None
    assert rebuild.restored["default"].restored == 50
    assert set(rebuild.salvaged) == {r.id for r in late} == set(rebuild.salvaged_published)
    assert all(rebuild.salvaged[r.id] == r.id for r in late)  # they keep their ids
    assert not rebuild.unsalvaged
    with Memory(settings, embedder=HashEmbedder(), master_key=MASTER_HEX) as mem:
        assert mem.stats().memories == 55
        texts = {r.text for r in mem.list(limit=100)}
        assert {r.text for r in late} <= texts
        assert {r.id: r.text for r in late} == {
            r.id: mem.get(r.id).text for r in late}
        report = mem.sync()
        assert report.still_queued == 0 and not report.errors
        listed = mem.restore("default", mem.stats().manifest_blob_id)
        assert listed.total == 55  # the next manifest lists them


def _damage_catalog_index_page(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = int(conn.execute("SELECT rootpage FROM sqlite_master WHERE name = "
                                "'memories_blob'").fetchone()[0])
        size = int(conn.execute("PRAGMA page_size").fetchone()[0])
    with open(path, "r+b") as f:  # garbage over one index page: tables stay readable
        f.seek((page - 1) * size + 8)
        f.write(b"\xa5" * (size - 8))


def test_repair_moves_a_corrupt_heads_store_aside_and_rebuilds_it(mem_settings) -> None:
    """A garbled heads.sqlite3 made every sync fail (LocalStoreError) and repair itself
    exit 1; repair now moves it aside and reads the catalog's heads back into a new one."""
    from walrus_mem._cli.doctor import check_local_store
    from walrus_mem._memory.repair_run import repair_data_dir

    settings = make_settings(mem_settings.data_dir, master_key=MASTER_HEX)
    with Memory(settings, embedder=HashEmbedder(), master_key=MASTER_HEX) as mem:
        mem.remember_many([f"heads store fact {i}" for i in range(10)])
        head = mem.sync().manifests["default"]
    path = Path(settings.data_dir) / "heads.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    body = bytearray(path.read_bytes())
    body[100:] = bytes((i * 7 + 3) % 256 for i in range(len(body) - 100))
    path.write_bytes(bytes(body))
    for extra in ("-wal", "-shm"):
        path.with_name(path.name + extra).unlink(missing_ok=True)
    checks = check_local_store(settings, embedder=HashEmbedder())
    assert any(c.status == "fail" and "walrus-mem repair" in (c.fix or "") for c in checks)
    rebuild, _ = repair_data_dir(settings, embedder=HashEmbedder())
    assert rebuild is not None and rebuild.heads_moved_to is not None
    assert rebuild.heads_moved_to.read_bytes() == bytes(body)  # moved, never deleted
    assert rebuild.heads_relearned == [f"default {head}"] and not rebuild.heads_unreadable
    with Memory(settings, embedder=HashEmbedder(), master_key=MASTER_HEX) as mem:
        mem.remember("written after the repair")
        report = mem.sync()
        assert not report.errors and report.manifests["default"] != head
        new = mem._log.seen.get("default", report.manifests["default"].split(".")[0])
        assert new is not None and [str(p) for p in new.parents] == [head]
        assert mem.restore("default", report.manifests["default"]).total == 11


def test_doctor_gives_no_sync_advice_while_a_restore_is_unfinished(mem_settings) -> None:
    """sync refuses (RestoreIncomplete) while the restore marker is set: doctor advised both
    the restore and a sync ('no manifest published yet')."""
    from walrus_mem._cli.doctor import check_local_store

    settings = make_settings(mem_settings.data_dir, master_key=MASTER_HEX)
    with Memory(settings, embedder=HashEmbedder(), master_key=MASTER_HEX) as mem:
        mem.remember("published but in no manifest")
        before = check_local_store(settings, embedder=HashEmbedder())
        assert any(c.fix.startswith("walrus-mem -n default sync") for c in before)
        mem._log.tables.set_restoring("default", {"heads": ["x"]})
    checks = check_local_store(settings, embedder=HashEmbedder())
    fixes = [c.fix for c in checks if c.status != "ok"]
    assert "walrus-mem -n default restore (resumes where it stopped)" in fixes
    assert not any(fix.startswith("walrus-mem -n default sync") for fix in fixes), fixes
