"""Issue 28 item 4: a row keeps no vector of its own when its sealed copy carries it (the
768 bytes were stored twice); reads, index rebuilds, updates and an old catalog's
upgrade take the vector from the sealed copy (walrus_mem/_catalog/vectors.py)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers_memory import MASTER_HEX, make_settings
from walrus_mem._catalog.catalog import SCHEMA_VERSION, Catalog
from walrus_mem._memory.integrity import check_index_file
from walrus_mem._recall.index_vectors import quantize
from walrus_mem.errors import LocalStoreError
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder

NS = "default"
OLD = Path(__file__).parent / "data" / "catalog_schema6.sqlite3"

TEXTS = [f"the {w} notebook sits on shelf {i}" for i, w in enumerate(
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split())]


class NoDigest(HashEmbedder):
    """An embedder naming no weights: its facts are sealed without their vector."""

    def __init__(self) -> None:
        super().__init__(64)
        self.weights_digest = None  # type: ignore[assignment]


def _open(path: Path, embedder: object | None = None) -> Memory:
    return Memory(make_settings(path), embedder=embedder or HashEmbedder(64),
                  master_key=MASTER_HEX)


def _lengths(mem: Memory) -> list[int]:
    return [int(r[0]) for r in mem._parts.catalog.query(
        "SELECT length(vector) FROM memories ORDER BY key")]


def _expected(texts: list[str]) -> np.ndarray:
    return HashEmbedder(64).embed(texts).astype("<f2").astype(np.float32)


def _vectors(mem: Memory) -> dict[str, np.ndarray]:
    rows = {int(r[0]): str(r[1]) for r in mem._parts.catalog.query(
        "SELECT key, text FROM memories WHERE namespace = ?", (NS,))}
    return {rows[k]: v for k, v in mem._parts.catalog.vectors_by_keys(NS, list(rows)).items()}


def test_a_row_keeps_no_vector_its_sealed_copy_carries(tmp_path: Path) -> None:
    with _open(tmp_path / "d") as mem:
        mem.remember_many(TEXTS)
        assert _lengths(mem) == [0] * len(TEXTS)
        got = _vectors(mem)
        for text, vector in zip(TEXTS, _expected(TEXTS), strict=True):
            assert np.array_equal(got[text], vector)
        assert "notebook" in mem.recall("golf notebook", k=1)[0].text


def test_a_vector_the_sealed_copy_does_not_carry_stays_in_the_row(tmp_path: Path) -> None:
    with _open(tmp_path / "d", NoDigest()) as mem:
        mem.remember_many(TEXTS[:3])
        assert _lengths(mem) == [128] * 3
        assert len(_vectors(mem)) == 3


def test_an_update_keeps_the_vector_through_the_new_sealed_copy(tmp_path: Path) -> None:
    with _open(tmp_path / "d") as mem:
        recs = mem.remember_many(TEXTS[:3])
        mem.update(recs[0].id, metadata={"room": "attic"})  # same text: the vector stays
        mem.update(recs[1].id, text="the bravo notebook moved to the attic")
        assert _lengths(mem) == [0, 0, 0]
        got = _vectors(mem)
        expected = _expected([TEXTS[0], "the bravo notebook moved to the attic"])
        assert np.array_equal(got[TEXTS[0]], expected[0])
        assert np.array_equal(got["the bravo notebook moved to the attic"], expected[1])


def test_the_index_is_rebuilt_from_the_sealed_copies(tmp_path: Path) -> None:
    with _open(tmp_path / "d") as mem:
        mem.remember_many(TEXTS)
        before = [(h.id, round(h.score, 6)) for h in mem.recall("kilo notebook shelf", k=5)]
        index_dir = mem._parts.indexes.directory
    shutil.rmtree(index_dir)  # the index is lost: the catalog rows have no vectors
    with _open(tmp_path / "d") as mem:
        assert [(h.id, round(h.score, 6)) for h in mem.recall("kilo notebook shelf", k=5)] \
            == before
        idx = mem._parts.indexes.get(NS, "test-hash-embedder-64", 64)
        found, at = idx.find(sorted(int(r[0]) for r in mem._parts.catalog.query(
            "SELECT key FROM memories")))
        assert found.all()
        assert np.array_equal(np.sort(idx.vectors[at], axis=0),
                              np.sort(quantize(_expected(TEXTS)), axis=0))


def test_without_the_keys_a_shed_row_is_refused_not_misread(tmp_path: Path) -> None:
    with _open(tmp_path / "d") as mem:
        mem.remember_many(TEXTS[:2])
        path = mem.catalog_path
        mem.recall("alpha notebook")
        index_dir = mem._parts.indexes.directory
    cat = Catalog(path)  # opened alone: no vector source
    try:
        keys = [int(r[0]) for r in cat.query("SELECT key FROM memories")]
        with pytest.raises(LocalStoreError, match="sealed copy"):
            cat.vectors_by_keys(NS, keys)
        # doctor's index check of a namespace whose key is not here: counts, no crash
        health = check_index_file(cat, index_dir, NS, "test-hash-embedder-64", 64)
        assert health.missing == health.extra == 0
        assert any("not compared" in note for note in health.notes)
    finally:
        cat.close()


def test_a_catalog_written_by_schema_6_is_upgraded_in_place(tmp_path: Path) -> None:
    """tests/data/catalog_schema6.sqlite3 was written by walrus_mem at schema 6 (2a78617:
    24 facts through Memory with HashEmbedder(64), their vectors sealed base64 in version
    1 envelopes and again in the rows; one updated with new text, one with new metadata,
    one forgotten). It opens at schema 7 (and later) with its rows' vectors as they were; compact
    empties those its sealed copies carry, and every vector and recall stays the same."""
    data = tmp_path / "d"
    data.mkdir(mode=0o700)
    shutil.copy(OLD, data / "catalog.sqlite3")
    (data / "catalog.sqlite3").chmod(0o600)  # a checkout may leave it group-writable
    with _open(data) as mem:
        assert mem._parts.catalog.query_one(
            "SELECT max(version) FROM schema_version")[0] == SCHEMA_VERSION >= 7
        assert _lengths(mem) == [128] * 23
        before = _vectors(mem)
        hits = [(h.id, round(h.score, 6)) for h in mem.recall("the golf notebook", k=5)]
        mem.compact()
        assert _lengths(mem) == [0] * 23
        after = _vectors(mem)
        assert before.keys() == after.keys()
        assert all(np.array_equal(before[t], after[t]) for t in before)
        assert [(h.id, round(h.score, 6)) for h in mem.recall("the golf notebook", k=5)] == hits
        assert after["the alpha notebook moved to the attic"] is not None


def test_the_fast_read_of_a_sealed_vector_equals_the_full_open() -> None:
    """SealedVectors reads a version 2 fact's vector after the AEAD alone (the JSON begins
    with its one attachment); every other shape goes through the full parse: the same
    bytes either way, None where no vector is carried."""
    import base64

    from walrus_mem._recall.carried import SealedVectors, carried_bytes
    from walrus_mem.envelope import open_own_copy, seal
    from walrus_mem.keys import MasterSeed, NamespaceKeys

    keys = NamespaceKeys.derive(MasterSeed.from_hex(MASTER_HEX), NS)
    source = SealedVectors(lambda ns, generation=None: keys)
    raw = np.arange(64, dtype="<f2").tobytes()
    vec = {"model": "m", "weights": "w", "dim": 64, "dtype": "f16"}
    base = {"id": "m1", "kind": "fact", "text": "x"}
    records = [
        {**base, "vec": {**vec, "data": raw}},
        {**base, "metadata": {"#bytes": [[["vec", "data"], 128]]}, "vec": {**vec, "data": raw}},
        {**base, "vec": {**vec, "data": base64.b64encode(raw).decode()}},  # version 1
        {**base, "vec": {**vec, "data": raw}, "other": {"blob": b"\x01\x02"}},  # two slices
        base,
    ]
    for record in records:
        sealed = seal(keys, record)
        assert source(NS, sealed) == carried_bytes(open_own_copy(keys, sealed))
    assert [source(NS, seal(keys, r)) for r in records] == [raw, raw, raw, raw, None]
    other = NamespaceKeys.derive(MasterSeed.from_hex(MASTER_HEX), "elsewhere")
    assert source(NS, seal(other, records[0])) is None  # not this namespace's key


def test_a_restore_stores_the_rows_the_full_check_stores_without_reopening(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A restore (or pull) took each vector from the fact it just opened: the catalog does
    not open that sealed copy again to see it carries the vector (it asks only whether it
    holds the key), and the rows are the ones the full check writes, byte for byte; a
    pull's new versions too (replace_version)."""
    from relayer_mock.embedded import EmbeddedRelayer
    from tests.test_index_background import open_mem, texts
    from walrus_mem._recall.carried import SealedVectors

    relayer = EmbeddedRelayer(tmp_path / "walrus")
    writer = open_mem(tmp_path / "writer", relayer)
    recs = writer.remember_many(texts(40))
    assert not writer.sync().errors
    head = str(writer._parts.log.newest(NS)[0])

    columns = ("id, text, metadata, category, importance, created_at, updated_at, "
               "expires_at, version, dedupe_hash, status, blob_id, quilt_patch_id, "
               "end_epoch, sealed, vector, digest")

    def rows(mem: Memory) -> list[tuple]:
        return [tuple(r) for r in mem._parts.catalog.query(
            f"SELECT {columns} FROM memories WHERE namespace = ? ORDER BY id", (NS,))]

    opened: list[int] = []
    real_call = SealedVectors.__call__

    def counted(self, namespace, sealed):  # type: ignore[no-untyped-def]
        if sys._getframe(1).f_code.co_name == "stored_vector":  # not an index rebuild's read
            opened.append(1)
        return real_call(self, namespace, sealed)

    monkeypatch.setattr(SealedVectors, "__call__", counted)
    fast = open_mem(tmp_path / "fast", relayer)
    assert fast.restore(NS, head).restored == 40
    assert opened == []  # no sealed copy opened a second time
    with monkeypatch.context() as m:  # the check every other writer gets
        m.delattr(SealedVectors, "holds_key")
        full = open_mem(tmp_path / "full", relayer)
        assert full.restore(NS, head).restored == 40
        assert len(opened) == 40
        assert rows(fast) == rows(full)
        assert [len(r[15]) for r in rows(fast)] == [0] * 40  # no vector kept twice

        writer.update(recs[0].id, text="fact 0: the red notebook moved to the porch")
        writer.update(recs[1].id, metadata={"room": "attic"})
        assert not writer.sync().errors
        head = str(writer._parts.log.newest(NS)[0])
        assert full.pull(head, namespace=NS).updated == 2
    del opened[:]
    assert fast.pull(head, namespace=NS).updated == 2
    assert opened == []
    assert rows(fast) == rows(full)
    assert {r[0]: r[1] for r in rows(fast)}[recs[0].id].endswith("porch")
    assert np.array_equal(fast.stored_vectors([recs[0].id])[recs[0].id],
                          full.stored_vectors([recs[0].id])[recs[0].id])
    for mem in (writer, fast, full):
        mem.close()
    relayer.close()


def test_a_carried_vector_without_the_key_is_checked_the_full_way() -> None:
    """stored_vector(carried=True) trusts the caller only when the source holds the key
    the sealed copy names; otherwise (no such key, no holds_key) it opens it as before."""
    import sqlite3

    from walrus_mem._catalog.vectors import VectorConnection, stored_vector
    from walrus_mem._recall.carried import SealedVectors
    from walrus_mem.envelope import seal
    from walrus_mem.keys import MasterSeed, NamespaceKeys

    keys = NamespaceKeys.derive(MasterSeed.from_hex(MASTER_HEX), NS)
    other = NamespaceKeys.derive(MasterSeed.from_hex(MASTER_HEX), "elsewhere")
    raw = np.arange(1, 65, dtype="<f2").tobytes()
    record = {"id": "m1", "kind": "fact", "text": "x",
              "vec": {"model": "m", "weights": "w", "dim": 64, "dtype": "f16", "data": raw}}
    conn = sqlite3.connect(":memory:", factory=VectorConnection)
    conn.vector_source = SealedVectors(lambda ns, generation=None: keys)
    ours, theirs = seal(keys, record), seal(other, record)
    assert stored_vector(conn, NS, ours, raw, carried=True) == b""
    assert stored_vector(conn, NS, theirs, raw, carried=True) == raw  # no key: kept
    conn.vector_source = lambda ns, sealed: None  # a source with no holds_key
    assert stored_vector(conn, NS, ours, raw, carried=True) == raw
    conn.close()
