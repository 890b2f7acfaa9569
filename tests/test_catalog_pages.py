"""Issue 28 footprint: the catalog's pages are 16 KiB. A row that keeps a caller-given
vector is about 1,250 B, so a 4 KiB page held three and left a tenth of itself empty
(109 B a memory at 200k); 16 KiB pages hold thirteen. A catalog made with 4 KiB pages
switches at ``compact`` (its VACUUM) and answers the same."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from tests.helpers_memory import MASTER_HEX, make_settings
from tests.test_catalog_lean import SCHEMA7, answers
from walrus_mem._catalog.catalog import PAGE_SIZE, Catalog
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder


def _page_size(path: Path) -> int:
    with sqlite3.connect(path) as c:
        return int(c.execute("PRAGMA page_size").fetchone()[0])


def test_a_new_catalog_has_16_kib_pages(tmp_path: Path) -> None:
    assert PAGE_SIZE == 16384
    cat = Catalog(tmp_path / "c.sqlite3")
    cat.close()
    assert _page_size(tmp_path / "c.sqlite3") == PAGE_SIZE


def test_compact_moves_an_older_catalog_to_16_kib_pages(tmp_path: Path) -> None:
    data = tmp_path / "d"
    data.mkdir(mode=0o700)
    shutil.copy(SCHEMA7, data / "catalog.sqlite3")
    (data / "catalog.sqlite3").chmod(0o600)
    assert _page_size(data / "catalog.sqlite3") == 4096
    with Memory(make_settings(data), embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem:
        before = answers(mem)
        mem.compact()
        assert answers(mem) == before
        mode = mem._parts.catalog.query_one("PRAGMA journal_mode")[0]
        assert str(mode).lower() == "wal"
    assert _page_size(data / "catalog.sqlite3") == PAGE_SIZE
    with Memory(make_settings(data), embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem:
        assert answers(mem) == before


def test_compact_keeps_4_kib_pages_while_another_connection_reads(tmp_path: Path) -> None:
    data = tmp_path / "d"
    data.mkdir(mode=0o700)
    shutil.copy(SCHEMA7, data / "catalog.sqlite3")
    (data / "catalog.sqlite3").chmod(0o600)
    with Memory(make_settings(data), embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem:
        before = answers(mem)
        other = sqlite3.connect(data / "catalog.sqlite3")
        try:
            other.execute("SELECT count(*) FROM memories").fetchone()
            mem.compact()  # cannot leave WAL while another connection is open: plain VACUUM
            assert answers(mem) == before
            assert str(mem._parts.catalog.query_one("PRAGMA journal_mode")[0]).lower() == "wal"
        finally:
            other.close()
