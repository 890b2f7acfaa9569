"""The SQLite catalog: schema, WAL, corruption handling, FTS, vectors, change log."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from walrus_mem._catalog.catalog import (
    SCHEMA_VERSION,
    Catalog,
    fts_table,
    vector_from_blob,
    vector_to_blob,
)
from walrus_mem._recall.ranking import FTS_TOKENIZE
from walrus_mem.errors import CatalogCorrupt, LocalStoreError


def test_new_catalog_has_schema_wal_and_private_mode(tmp_path: Path) -> None:
    cat = Catalog(tmp_path / "c.sqlite3")
    try:
        assert cat.query_one("SELECT max(version) FROM schema_version")[0] == SCHEMA_VERSION
        assert cat.query_one("PRAGMA journal_mode")[0] == "wal"
        assert cat.query_one("PRAGMA foreign_keys")[0] == 1
        assert cat.get_meta("fts_tokenize") == FTS_TOKENIZE
        assert (tmp_path / "c.sqlite3").stat().st_mode & 0o077 == 0
    finally:
        cat.close()


def test_reopen_is_idempotent(tmp_path: Path) -> None:
    Catalog(tmp_path / "c.sqlite3").close()
    cat = Catalog(tmp_path / "c.sqlite3")
    try:
        assert cat.query_one("SELECT count(*) FROM schema_version")[0] == SCHEMA_VERSION
    finally:
        cat.close()


def test_not_a_database_is_catalog_corrupt_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    garbage = b"this is not sqlite at all" * 100
    path.write_bytes(garbage)
    with pytest.raises(CatalogCorrupt, match="not a usable SQLite database"):
        Catalog(path)
    assert path.read_bytes() == garbage


def test_malformed_database_is_catalog_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    cat = Catalog(path)
    cat.close()
    data = bytearray(path.read_bytes())
    # Keep the header, smash every page after the first.
    for i in range(4096, len(data)):
        data[i] = 0xA5
    path.write_bytes(bytes(data))
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"c.sqlite3{suffix}").unlink(missing_ok=True)
    with pytest.raises(CatalogCorrupt):
        cat = Catalog(path)
        cat.query("SELECT * FROM memories")


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    Catalog(path).close()
    con = sqlite3.connect(path)
    con.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION + 5,))
    con.commit()
    con.close()
    with pytest.raises(LocalStoreError, match="upgrade walrus-mem"):
        Catalog(path)


def test_fts_tables_are_per_namespace_and_named_by_hash(tmp_path: Path) -> None:
    cat = Catalog(tmp_path / "c.sqlite3")
    try:
        cat.ensure_namespace("private-ns", None)
        cat.ensure_namespace("other", None)
        with cat.write():
            cat.fts_add("private-ns", 1, "apples and pears")
            cat.fts_add("other", 2, "apples only")
        names = [r[0] for r in cat.query("SELECT name FROM sqlite_master")]
        assert fts_table("private-ns") in names and not any("private" in n for n in names)
        assert [k for k, _ in cat.fts_search("private-ns", '"apples"', 5)] == [1]
        assert [k for k, _ in cat.fts_search("other", '"apples"', 5)] == [2]
        assert set(cat.fts_scores("private-ns", '"pears"', [1, 2])) == {1}
        with cat.write():
            cat.fts_remove("private-ns", 1, "apples and pears")
        assert cat.fts_search("private-ns", '"apples"', 5) == []
    finally:
        cat.close()


def test_tokenizer_change_rebuilds_fts(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    cat = Catalog(path)
    cat.ensure_namespace("ns", None)
    with cat.write() as c:
        c.execute(
            "INSERT INTO memories (id, namespace, text, importance, created_at, updated_at, "
            "version, dedupe_hash, status, vector) VALUES ('a', 'ns', 'running dogs', 0.5, 0, 0, "
            "1, 'h', 'queued', x'00')"
        )
        # Simulate a catalog written before the FTS row existed under another tokenizer.
        c.execute("UPDATE meta SET value = 'unicode61' WHERE key = 'fts_tokenize'")
    cat.close()
    cat = Catalog(path)
    try:
        assert cat.get_meta("fts_tokenize") == FTS_TOKENIZE
        assert [k for k, _ in cat.fts_search("ns", '"run"', 5)] == [1]  # porter stemming
    finally:
        cat.close()


def test_write_rolls_back_on_error(tmp_path: Path) -> None:
    cat = Catalog(tmp_path / "c.sqlite3")
    try:
        with pytest.raises(RuntimeError), cat.write() as c:
            c.execute("INSERT INTO meta VALUES ('x', '1')")
            raise RuntimeError("boom")
        assert cat.get_meta("x") is None
        with cat.write():
            with cat.write() as inner:  # nested joins the outer transaction
                inner.execute("INSERT INTO meta VALUES ('y', '1')")
        assert cat.get_meta("y") == "1"
    finally:
        cat.close()


def test_note_epoch_keeps_the_maximum(tmp_path: Path) -> None:
    cat = Catalog(tmp_path / "c.sqlite3")
    try:
        assert cat.current_epoch() is None
        cat.note_epoch(7)
        cat.note_epoch(3)
        cat.note_epoch(None)
        assert cat.current_epoch() == 7
        cat.note_epoch(12)
        assert cat.current_epoch() == 12
    finally:
        cat.close()


def test_vectors_round_trip_as_float16() -> None:
    v = np.random.default_rng(1).standard_normal(384).astype(np.float32)
    v /= np.linalg.norm(v)
    blob = vector_to_blob(v)
    assert len(blob) == 384 * 2
    back = vector_from_blob(blob)
    assert back.dtype == np.float32
    assert float(np.max(np.abs(back - v))) < 1e-3


def test_change_log_and_pruning(tmp_path: Path) -> None:
    cat = Catalog(tmp_path / "c.sqlite3")
    try:
        with cat.write() as c:
            c.executemany("INSERT INTO changes (namespace, key) VALUES (?, ?)",
                          [("a", 1), ("b", 9), ("a", 2), ("a", 1)])
        keys, newest = cat.changes_since("a", 0)
        assert keys == [1, 2] and newest == 4
        assert cat.changes_since("a", newest) == ([], newest)
        cat.prune_changes("a", 3)
        assert cat.changes_floor("a") == 3
        assert cat.changes_since("a", 0) == ([1], 4)
        assert cat.changes_since("b", 0) == ([9], 2)  # other namespaces untouched
    finally:
        cat.close()


def test_a_snapshot_reads_one_state_of_the_file_and_refuses_writes(tmp_path: Path) -> None:
    """Recall's reads run in one read transaction: another process's commit during it is
    not half-seen (the namespace row, cached or not, and the rows agree); it shows after."""
    path = tmp_path / "c.sqlite3"
    reader, writer = Catalog(path), Catalog(path)
    try:
        writer.ensure_namespace("ns", None)
        assert reader.namespace("ns") is not None and reader.namespace("late") is None
        with reader.snapshot():
            before = reader.query_one("SELECT count(*) FROM namespaces")[0]
            writer.ensure_namespace("late", None)  # another connection commits meanwhile
            assert reader.namespace("late") is None
            assert reader.query_one("SELECT count(*) FROM namespaces")[0] == before
            with reader.snapshot():  # nested: the same view
                assert reader.namespace("late") is None
            with pytest.raises(LocalStoreError, match="inside a read snapshot"):
                with reader.write():
                    pass
        assert reader.namespace("late") is not None  # the cache saw the change
        assert reader.query_one("SELECT count(*) FROM namespaces")[0] == before + 1
        with reader.write() as conn:  # the snapshot left no transaction open
            conn.execute("UPDATE namespaces SET created_at = 1 WHERE name = 'ns'")
    finally:
        reader.close()
        writer.close()
