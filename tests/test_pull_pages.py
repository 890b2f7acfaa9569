"""Issue 28: a pull reads only the manifest pages it has not merged (_log/page_memory.py).

A pull of a few new memories into a large namespace read the whole manifest and
planned over the local state of every memory. Now the pages merged before whose ids
the local state still holds are skipped; everything else must come out as a merge
of every page gives (compared against that oracle), and losing local state (rows
lost, a backup restored, a merge cut short) must make the pages be read again.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import walrus_mem._log.manifest as mf
from relayer_mock.embedded import EmbeddedRelayer
from tests.test_index_background import NS, open_mem, texts
from walrus_mem._catalog import merged_pages
from walrus_mem._log import merging, namespace_log, page_memory, pages
from walrus_mem.errors import BlobNotFound
from walrus_mem.memory import Memory


@pytest.fixture(autouse=True)
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mf, "PAGE_TARGET", 5)
    monkeypatch.setattr(mf, "PAGE_MAX", 8)
    monkeypatch.setattr(mf, "INLINE_MAX", 3)
    monkeypatch.setattr(mf, "CHANGED_INLINE_MAX", 3)


@pytest.fixture
def relayer(tmp_path: Path) -> Iterator[EmbeddedRelayer]:
    server = EmbeddedRelayer(tmp_path / "walrus")
    yield server
    server.close()


@pytest.fixture
def pages_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The digests of the manifest pages a merge reads, in order."""
    seen: list[str] = []
    real = pages.read_page

    def read(client: Any, keys: Any, blob_id: str, patch_id: str | None, digest: str,
             **kw: Any) -> list[mf.Entry]:
        seen.append(digest)
        return real(client, keys, blob_id, patch_id, digest, **kw)

    monkeypatch.setattr(namespace_log, "read_page", read)
    return seen


def head_of(mem: Memory) -> str:
    return str(mem._parts.log.newest(NS)[0])


def root_pages(mem: Memory, head: str) -> set[str]:
    log = mem._parts.log
    ref = log.resolve(NS, head)
    return {d for _, _, d, _ in log._read_root(NS, mem.keys_for(NS), ref).pages}


def synced(mem: Memory) -> str:
    assert not mem.sync().errors
    return head_of(mem)


def state(mem: Memory) -> dict[str, Any]:
    """What a merge leaves in the catalog: live rows, tombstones, history, counters."""
    cat = mem._parts.catalog
    return {
        "live": sorted(tuple(r) for r in cat.query(
            "SELECT id, version, text, digest, blob_id FROM memories WHERE namespace = ?",
            (NS,))),
        "tombstones": cat.tombstones(NS),
        "history": sorted(tuple(r) for r in cat.query(
            "SELECT memory_id, version, event, text FROM versions WHERE namespace = ?",
            (NS,))),
        "writes": written(mem),
    }


def written(mem: Memory) -> tuple[int, str]:
    """The namespace's count of changes no manifest lists yet, and its merged heads."""
    row = mem._parts.catalog.query_one(
        "SELECT writes_since_manifest, log_heads FROM namespaces WHERE name = ?", (NS,))
    assert row is not None
    return int(row[0]), str(row[1])


def test_a_pull_reads_only_the_pages_that_changed(
        tmp_path: Path, relayer: EmbeddedRelayer, pages_read: list[str]) -> None:
    writer = open_mem(tmp_path / "writer", relayer)
    writer.remember_many(texts(120))
    first = synced(writer)
    reader = open_mem(tmp_path / "reader", relayer)
    assert reader.restore(NS, first).restored == 120
    assert set(pages_read) == root_pages(writer, first)  # a restore reads every page
    writer.remember_many(texts(4, "new"))
    second = synced(writer)
    changed = root_pages(writer, second) - root_pages(writer, first)
    assert 0 < len(changed) < len(root_pages(writer, second)) // 3
    pages_read.clear()
    report = reader.pull(second, namespace=NS)
    assert report.added == 4 and report.complete
    assert report.total == 124 and report.unchanged == 120  # as a merge of every page
    assert set(pages_read) == changed  # the unchanged pages are not read again
    assert {r.id for r in reader.list(NS, limit=1000)} == {
        r.id for r in writer.list(NS, limit=1000)}
    # nothing is ahead of the writer: no manifest is due after the pull
    assert written(reader)[0] == 0
    writer.close()
    reader.close()


def _oracle_pair(tmp_path: Path, relayer: EmbeddedRelayer) -> tuple[Memory, Memory, Memory]:
    """A writer and two identical readers (copies of one data dir) that merged its head."""
    writer = open_mem(tmp_path / "writer", relayer)
    ids = [r.id for r in writer.remember_many(texts(90))]
    head = synced(writer)
    reader = open_mem(tmp_path / "fast", relayer)
    assert reader.restore(NS, head).complete
    # the reader changes memories some of the next pull's unchanged pages list
    reader.update(ids[3], "fact 3 as the reader saw it")
    reader.forget(ids[40])
    reader.remember_many(["a fact only the reader holds"])
    assert not reader.sync().errors
    writer.pull(head_of(reader), namespace=NS)
    reader.close()
    shutil.copytree(tmp_path / "fast", tmp_path / "oracle")
    # the writer: new facts, concurrent edits, forgets spread over the namespace
    writer.remember_many(texts(6, "w"))
    writer.update(ids[3], "fact 3 as the writer saw it")  # concurrent with the reader's
    writer.update(ids[60], "fact 60, updated")
    writer.forget(ids[75])
    writer.forget(ids[20])
    return writer, open_mem(tmp_path / "fast", relayer), open_mem(tmp_path / "oracle", relayer)


def test_skipping_pages_merges_as_reading_every_page(
        tmp_path: Path, relayer: EmbeddedRelayer, monkeypatch: pytest.MonkeyPatch,
        pages_read: list[str]) -> None:
    writer, fast, oracle = _oracle_pair(tmp_path, relayer)
    head = synced(writer)
    pages_read.clear()
    got = fast.pull(head, namespace=NS)
    skipped_some = len(pages_read) < len(root_pages(writer, head))
    monkeypatch.setattr(merging, "held_pages", lambda *a: {})  # the oracle reads them all
    pages_read.clear()
    want = oracle.pull(head, namespace=NS)
    assert len(pages_read) == len(root_pages(writer, head))
    assert skipped_some
    assert got.model_dump() == want.model_dump()
    assert state(fast) == state(oracle)
    for mem in (writer, fast, oracle):
        mem.close()


def test_two_heads_at_once_merge_as_reading_every_page(
        tmp_path: Path, relayer: EmbeddedRelayer, monkeypatch: pytest.MonkeyPatch,
        pages_read: list[str]) -> None:
    """Two writers' heads pulled together, with concurrent edits of one memory (one
    version loses to the other head's: a rival) and a forget on one side."""
    a = open_mem(tmp_path / "a", relayer)
    ids = [r.id for r in a.remember_many(texts(90))]
    first = synced(a)
    b = open_mem(tmp_path / "b", relayer)
    assert b.restore(NS, first).complete
    reader = open_mem(tmp_path / "fast", relayer)
    assert reader.restore(NS, first).complete
    reader.close()
    shutil.copytree(tmp_path / "fast", tmp_path / "oracle")
    a.remember_many(texts(5, "a"))
    a.update(ids[3], "fact 3 as a saw it")
    a.forget(ids[20])
    b.remember_many(texts(4, "b"))
    b.update(ids[3], "fact 3 as b saw it")
    b.update(ids[60], "fact 60 as b saw it")
    heads = [synced(a), synced(b)]
    fast = open_mem(tmp_path / "fast", relayer)
    pages_read.clear()
    got = fast.pull(heads, namespace=NS)
    assert len(pages_read) < len(root_pages(a, heads[0]) | root_pages(b, heads[1]))
    monkeypatch.setattr(merging, "held_pages", lambda *a: {})
    oracle = open_mem(tmp_path / "oracle", relayer)
    want = oracle.pull(heads, namespace=NS)
    assert got.conflicts == 1
    assert got.model_dump() == want.model_dump()
    assert state(fast) == state(oracle)
    for mem in (a, b, fast, oracle):
        mem.close()


def test_rows_lost_from_the_catalog_are_merged_again(
        tmp_path: Path, relayer: EmbeddedRelayer, pages_read: list[str]) -> None:
    """Rows lost while the record of merged pages survived (a damaged file salvaged by
    hand, a half-done repair): the pages listing them are read and merged again."""
    writer = open_mem(tmp_path / "writer", relayer)
    ids = [r.id for r in writer.remember_many(texts(100))]
    first = synced(writer)
    reader = open_mem(tmp_path / "reader", relayer)
    assert reader.restore(NS, first).restored == 100
    reader.close()
    lost = ids[10:13] + ids[50:52]
    with sqlite3.connect(tmp_path / "reader" / "catalog.sqlite3") as conn:
        conn.executemany("DELETE FROM memories WHERE id = ?", [(m,) for m in lost])
    conn.close()
    writer.remember_many(texts(3, "new"))
    second = synced(writer)
    reader = open_mem(tmp_path / "reader", relayer)
    pages_read.clear()
    report = reader.pull(second, namespace=NS)
    assert report.added == 3 + len(lost) and report.complete
    assert len(pages_read) < len(root_pages(writer, second))  # the others still skipped
    assert {r.id for r in reader.list(NS, limit=1000)} == {
        r.id for r in writer.list(NS, limit=1000)}
    writer.close()
    reader.close()


def test_a_backup_restored_forgets_the_pages_merged_after_it(
        tmp_path: Path, relayer: EmbeddedRelayer) -> None:
    writer = open_mem(tmp_path / "writer", relayer)
    writer.remember_many(texts(60))
    first = synced(writer)
    reader = open_mem(tmp_path / "reader", relayer)
    assert reader.restore(NS, first).complete
    reader.close()
    shutil.copytree(tmp_path / "reader", tmp_path / "backup")
    writer.remember_many(texts(30, "b"))
    second = synced(writer)
    reader = open_mem(tmp_path / "reader", relayer)
    assert reader.pull(second, namespace=NS).added == 30
    reader.close()
    shutil.rmtree(tmp_path / "reader")
    shutil.copytree(tmp_path / "backup", tmp_path / "reader")  # back before the pull
    writer.remember_many(texts(2, "c"))
    third = synced(writer)
    reader = open_mem(tmp_path / "reader", relayer)
    report = reader.pull(third, namespace=NS, allow_stale=True)
    assert report.added == 32 and report.complete
    assert {r.id for r in reader.list(NS, limit=1000)} == {
        r.id for r in writer.list(NS, limit=1000)}
    writer.close()
    reader.close()


def test_a_page_with_an_entry_not_fetched_is_not_recorded(
        tmp_path: Path, relayer: EmbeddedRelayer, monkeypatch: pytest.MonkeyPatch,
        pages_read: list[str]) -> None:
    writer = open_mem(tmp_path / "writer", relayer)
    writer.remember_many(texts(60))
    first = synced(writer)
    reader = open_mem(tmp_path / "reader", relayer)
    assert reader.restore(NS, first).complete
    new = [r.id for r in writer.remember_many(texts(5, "n"))]
    second = synced(writer)
    monkeypatch.setattr(merging, "BULK_MIN", 10**6)  # facts read one by one
    real = merging.Merging._fetch

    def fetch(self: Any, keys: Any, entry: mf.Entry) -> Any:
        if entry.memory_id == new[0]:
            raise BlobNotFound("lost for this test")
        return real(self, keys, entry)

    monkeypatch.setattr(merging.Merging, "_fetch", fetch)
    report = reader.pull(second, namespace=NS)
    assert report.added == 4 and [m for m, _ in report.missing] == [new[0]]
    recorded = merged_pages.load(reader._parts.catalog, NS, reader.keys_for(NS).generation)
    holder = [d for d, text in recorded.items()
              if new[0] in (page_memory.PageSummary.decode(text) or page_memory.PageSummary(
                  (), (), ())).live]
    assert holder == []  # the page listing the missing entry is read again next time
    assert set(recorded) & root_pages(writer, second)  # the others are recorded
    monkeypatch.setattr(merging.Merging, "_fetch", real)
    writer.remember_many(texts(1, "later"))
    third = synced(writer)
    report = reader.pull(third, namespace=NS)
    assert report.complete and not report.missing
    assert {r.id for r in reader.list(NS, limit=1000)} == {
        r.id for r in writer.list(NS, limit=1000)}
    writer.close()
    reader.close()


def test_a_pull_cut_short_records_no_page(
        tmp_path: Path, relayer: EmbeddedRelayer, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = open_mem(tmp_path / "writer", relayer)
    writer.remember_many(texts(40))
    first = synced(writer)
    reader = open_mem(tmp_path / "reader", relayer)
    assert reader.restore(NS, first).complete
    before = merged_pages.load(reader._parts.catalog, NS, reader.keys_for(NS).generation)
    writer.remember_many(texts(30, "k"))
    second = synced(writer)
    monkeypatch.setattr(merging, "RESTORE_CHUNK", 4)

    class Killed(Exception):
        pass

    def killer(done: int, total: int) -> None:
        if done and done < total:
            raise Killed

    with pytest.raises(Killed):
        reader.pull(second, namespace=NS, progress=killer)
    assert merged_pages.load(reader._parts.catalog, NS,
                             reader.keys_for(NS).generation) == before
    reader.close()
    reader = open_mem(tmp_path / "reader", relayer)
    report = reader.pull(namespace=NS)  # resumes the interrupted pull
    assert report.complete
    assert {r.id for r in reader.list(NS, limit=1000)} == {
        r.id for r in writer.list(NS, limit=1000)}
    writer.close()
    reader.close()


def test_the_record_is_per_namespace_and_key_generation(tmp_path: Path) -> None:
    from walrus_mem._catalog.catalog import Catalog

    cat = Catalog(tmp_path / "catalog.sqlite3")
    summary = page_memory.PageSummary(("a",), ("b",), ("blob",)).encode()
    merged_pages.replace(cat, "ns", 1, (), {"d1": summary})
    merged_pages.replace(cat, "ns:1", 1, (), {"d2": summary})  # a name that holds ':'
    assert merged_pages.load(cat, "ns", 1) == {"d1": summary}
    assert merged_pages.load(cat, "ns", 2) == {}
    assert merged_pages.load(cat, "ns:1", 1) == {"d2": summary}
    merged_pages.replace(cat, "ns", 2, (), {"d3": summary})  # a rotation: the old goes
    assert merged_pages.load(cat, "ns", 1) == {}
    assert merged_pages.load(cat, "ns:1", 1) == {"d2": summary}
    merged_pages.clear(cat, "ns:1")
    assert merged_pages.load(cat, "ns:1", 1) == {}
    assert page_memory.PageSummary.decode("not json") is None
    decoded = page_memory.PageSummary.decode(summary)
    assert decoded is not None and decoded.held({"a"}, {"b"})
    assert not decoded.held(set(), {"b"}) and not decoded.held({"a", "b"}, set())
    assert decoded.held(set(), {"a", "b"})  # a live entry forgotten here is held
    cat.close()
