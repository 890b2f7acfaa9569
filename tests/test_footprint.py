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
    (The threshold is 1 MiB of free pages; 32 KiB here, so few memories make the test.)"""
    monkeypatch.setattr(catalog_mod, "RECLAIM_MIN_PAGES", 8, raising=False)
    settings = Settings(config_file=None, data_dir=tmp_path / "data", use_keyring=False,
                        publisher_url=None, aggregator_urls=[], state_dir=tmp_path / "state")
    texts = [f"Fact {i}: " + " ".join(f"word{(i * 7 + j) % 997}" for j in range(120))
             for i in range(80)]
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
