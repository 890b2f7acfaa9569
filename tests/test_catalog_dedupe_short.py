"""The catalog keeps the first 128 bits of a text's keyed dedupe hash, in base64url (schema 11;
issue 28: 84 B a memory less in the row and in its unique index at 1M memories)."""

from __future__ import annotations

import base64
import shutil
import sqlite3
from pathlib import Path

from tests.helpers_memory import MASTER_HEX, make_settings
from tests.test_catalog_lean import SCHEMA7
from walrus_mem._catalog.dedupe import DEDUPE_BYTES
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder


def _open(path: Path) -> Memory:
    return Memory(make_settings(path), embedder=HashEmbedder(64), master_key=MASTER_HEX)


def _short(full: str) -> str:
    raw = bytes.fromhex(full)[:DEDUPE_BYTES]
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _slots(mem: Memory) -> dict[str, str]:
    return {str(r[0]): str(r[1]) for r in mem._parts.catalog.query(
        "SELECT text, dedupe_hash FROM memories")}


def test_a_new_memory_keeps_128_bits_of_its_dedupe_hash(tmp_path: Path) -> None:
    with _open(tmp_path / "d") as mem:
        rec = mem.remember("the kilo notebook sits on shelf 9")
        full = mem.keys_for("default").dedupe_hash("the kilo notebook sits on shelf 9")
        assert len(full) == 64
        assert _slots(mem) == {rec.text: _short(full)}
        assert len(_short(full)) == 22
        assert mem.remember("the kilo notebook sits on shelf 9").deduplicated
        assert len(_slots(mem)) == 1


def test_an_older_catalog_keeps_deduplicating_its_texts_after_the_upgrade(
        tmp_path: Path) -> None:
    """tests/data/catalog_schema7.sqlite3 holds whole (64-hex) hashes: schema 11 cuts them,
    a twin's ``<hash>:<id>`` too, and a text it holds is still found as a duplicate."""
    data = tmp_path / "d"
    data.mkdir(mode=0o700)
    shutil.copy(SCHEMA7, data / "catalog.sqlite3")
    (data / "catalog.sqlite3").chmod(0o600)
    with sqlite3.connect(data / "catalog.sqlite3") as con:  # one row a twin
        twin_key, twin_id = con.execute("SELECT key, id FROM memories LIMIT 1").fetchone()
        con.execute("UPDATE memories SET dedupe_hash = dedupe_hash || ':' || id WHERE key = ?",
                    (twin_key,))
    con.close()
    with _open(data) as mem:
        rows = mem._parts.catalog.query(
            "SELECT namespace, text, dedupe_hash, key FROM memories")
        assert rows
        for ns, text, slot, key in rows:
            short = _short(mem.keys_for(str(ns)).dedupe_hash(str(text)))
            assert slot == (f"{short}:{twin_id}" if key == twin_key else short)
        count = len(rows)
        ns, text, _, _ = next(r for r in rows if r[3] != twin_key)
        assert mem.remember(str(text), namespace=str(ns)).deduplicated
        assert len(mem._parts.catalog.query("SELECT key FROM memories")) == count
