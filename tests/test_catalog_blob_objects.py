"""Issue 28 footprint: a quilt's Sui object id is kept once per blob (``blob_objects``),
not in each of its up to 666 memories' rows (66 B of hex a row, read by nothing else);
``compact`` moves the ids rows written before still hold."""

from __future__ import annotations

from pathlib import Path

from walrus_mem import Memory, Settings
from walrus_mem.testing import HashEmbedder

NS = "default"


def _open(tmp: Path) -> Memory:
    settings = Settings(config_file=None, data_dir=tmp / "data", use_keyring=False,
                        publisher_url=None, aggregator_urls=[], state_dir=tmp / "state")
    return Memory(settings, embedder=HashEmbedder(64), master_key="17" * 32)


def _rows(mem: Memory) -> list[tuple[str, str | None]]:
    return [(str(r[0]), r[1]) for r in mem._parts.catalog.query(
        "SELECT blob_id, object_id FROM memories WHERE namespace = ?", (NS,))]


def _objects(mem: Memory) -> dict[str, str]:
    return {str(r[0]): str(r[1]) for r in mem._parts.catalog.query(
        "SELECT blob_id, object_id FROM blob_objects")}


def test_a_published_quilt_names_its_object_once(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        mem.remember_many([f"fact {i}: the blue notebook {i * 7}" for i in range(30)],
                          namespace=NS)
        mem.sync(namespace=NS)
        rows = _rows(mem)
        assert len(rows) == 30 and all(obj is None for _, obj in rows)
        objects = _objects(mem)
        assert {blob for blob, _ in rows} <= set(objects)
        assert all(o.startswith("0x") and len(o) == 66 for o in objects.values())


def test_compact_moves_the_object_ids_rows_still_hold(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        mem.remember_many([f"fact {i}: the red notebook {i * 3}" for i in range(12)],
                          namespace=NS)
        mem.sync(namespace=NS)
        blob = _rows(mem)[0][0]
        with mem._parts.catalog.write() as c:  # as a catalog written before this keeps them
            c.execute("DELETE FROM blob_objects")
            c.execute("UPDATE memories SET object_id = ? WHERE blob_id = ?",
                      ("0x" + "ab" * 32, blob))
        mem.compact()
        assert all(obj is None for _, obj in _rows(mem))
        assert _objects(mem) == {blob: "0x" + "ab" * 32}
