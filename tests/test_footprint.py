"""Disk footprint (issue 28 item 4): the catalog gives a large forget's pages back."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

import walrus_mem._catalog.catalog as catalog_mod
from walrus_mem import Memory, Settings
from walrus_mem._catalog.catalog import Catalog
from walrus_mem.testing import HashEmbedder

MASTER = "5a" * 32


def _pages(path: Path) -> tuple[int, int, int]:
    con = sqlite3.connect(path)
    try:
        return tuple(int(con.execute(f"PRAGMA {p}").fetchone()[0])  # type: ignore[return-value]
                     for p in ("page_count", "freelist_count", "auto_vacuum"))
    finally:
        con.close()


def test_a_large_forget_gives_the_space_back(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A new catalog is in incremental auto_vacuum mode: after forgetting most memories the
    file shrinks at once (without it the freed pages stayed in the file until a VACUUM).
    (The threshold is 1 MiB of free pages; 128 KiB here, so few memories make the test.)"""
    monkeypatch.setattr(catalog_mod, "RECLAIM_MIN_PAGES", 8, raising=False)
    # the rows keep their sealed copies: the pages a publish frees by dropping them (reused
    # by the next writes, tests/test_catalog_held.py) are not what this test measures
    settings = Settings(config_file=None, data_dir=tmp_path / "data", use_keyring=False,
                        publisher_url=None, aggregator_urls=[], state_dir=tmp_path / "state",
                        catalog_keeps_sealed=True)
    texts = [f"Fact {i}: " + " ".join(f"word{(i * 7 + j) % 997}" for j in range(120))
             for i in range(320)]  # 16 KiB pages: enough rows to outweigh the fixed tables
    catalog = tmp_path / "data" / "catalog.sqlite3"
    with Memory(settings, embedder=HashEmbedder(dim=64), master_key=MASTER) as mem:
        ids = [r.id for r in mem.remember_many(texts).records]
        mem.forget(ids[0])  # a small forget leaves its few pages for the next writes
        full, free, mode = _pages(catalog)
        assert mode == 2 and free < full // 4
        mem.forget_all(confirm=True)
        after, free_after, _ = _pages(catalog)
        assert after < full // 2 and free_after < after // 4
        mem.remember("after the forget")  # and the file still works
        assert mem.recall("after the forget", k=1)[0].text == "after the forget"


def test_compact_switches_an_older_catalog_to_incremental_vacuum(tmp_path: Path) -> None:
    """A catalog made before auto_vacuum was set (tests/data/catalog_schema5.sqlite3) keeps
    its mode until a VACUUM (Memory.compact) switches it over."""
    path = tmp_path / "catalog.sqlite3"
    shutil.copy(Path(__file__).parent / "data" / "catalog_schema5.sqlite3", path)
    assert _pages(path)[2] == 0
    cat = Catalog(path)
    try:
        assert int(cat.conn.execute("PRAGMA auto_vacuum").fetchone()[0]) == 0
        cat.vacuum()
        assert int(cat.conn.execute("PRAGMA auto_vacuum").fetchone()[0]) == 2
        assert cat.query_one("SELECT count(*) FROM memories")[0] == 29
    finally:
        cat.close()


def test_saved_index_rows_end_past_the_last_slot_in_use(tmp_path: Path) -> None:
    """The rows and vector-copy files hold the slots in use plus a headroom, not the
    arrays' doubled capacity; a reopened index maps them and answers as before, and
    takes new memories in their free slots."""
    import numpy as np

    from walrus_mem._recall.index import NamespaceIndex

    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((1100, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    idx = NamespaceIndex("ns", tmp_path, "m", 8)
    for start in range(0, 1100, 100):  # as memories arrive: the arrays double
        idx.upsert(list(range(start, start + 100)), vectors[start:start + 100],
                   [(1.0, 0.5, None)] * 100)
    idx.remove([5, 6])
    assert len(idx.keys) > 1098 + 1098 // 8 + 64  # capacity doubled past what is used
    before = [idx.search(vectors[i], 5)[0] for i in (0, 500, 1099)]
    assert idx.save()
    saved = np.load(next(tmp_path.glob("*.vectors.npy")), mmap_mode="r")
    assert len(saved) <= 1100 + 1098 // 8 + 64  # last slot in use + headroom
    again = NamespaceIndex("ns", tmp_path, "m", 8)
    assert again.load()
    assert [again.search(vectors[i], 5)[0] for i in (0, 500, 1099)] == before
    assert again.count() == 1098
    again.upsert([5000], vectors[:1], [(1.0, 0.5, None)])
    assert again.search(vectors[0], 1)[0][0] in (0, 5000)
