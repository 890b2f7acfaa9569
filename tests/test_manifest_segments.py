"""Incremental manifests (issue 28 item 3): a manifest built from the last one's cached
segments plus the changed keys lists exactly the pages the full computation would, reads
only what changed, and survives a failed publish and missed changes."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers_memory import MASTER_HEX, make_settings
from walrus_mem._catalog.catalog import Catalog
from walrus_mem._log import manifest as mf
from walrus_mem._log import publishing
from walrus_mem._log.segments import build
from walrus_mem.errors import StorageError
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder

NS = "seg"


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages of a few entries, so a few dozen memories make many segments and pages."""
    monkeypatch.setattr(mf, "PAGE_TARGET", 5)
    monkeypatch.setattr(mf, "PAGE_MAX", 8)
    monkeypatch.setattr(mf, "INLINE_MAX", 3)
    monkeypatch.setattr(mf, "CHANGED_INLINE_MAX", 6)


def _row(key: int, mid: str, version: int) -> dict[str, Any]:
    return {"key": key, "id": mid, "version": version, "blob_id": f"b{key}",
            "quilt_patch_id": None, "end_epoch": 9, "updated_at": float(version),
            "digest": f"{key:064x}"}


def _full(rows: dict[int, dict[str, Any]], tail: list[mf.Entry]) -> list[tuple[str, int]]:
    entries = [mf.Entry(r["id"], r["version"], r["blob_id"], r["quilt_patch_id"],
                        r["end_epoch"], r["updated_at"], r["digest"])
               for _, r in sorted(rows.items())] + tail
    return [(mf.entries_digest(p), len(p)) for p in mf.chunk_entries(entries)]


@pytest.mark.parametrize("seed", range(6))
def test_build_matches_full_chunking_under_random_changes(small_pages: None, seed: int) -> None:
    rng = random.Random(seed)
    rows = {2 * k: _row(2 * k, f"m{seed}-{k}", 1) for k in range(1, 200)}
    next_id = 1000
    cached = None
    known: set[str] = set()
    dirty: set[int] = set(rows)
    reads: list[int] = []
    for step in range(25):
        reads.clear()

        def between(after: int | None, upto: int | None) -> list[dict[str, Any]]:
            got = [r for k, r in sorted(rows.items())
                   if (after is None or k > after) and (upto is None or k <= upto)]
            reads.append(len(got))
            return got

        tail = [mf.Entry.tombstone(f"gone-{i}", 1) for i in range(step % 4)]
        chunks, segments = build(cached, dirty, known.__contains__, between, tail)
        assert [(c.digest, c.count) for c in chunks] == _full(rows, tail)
        for chunk in chunks:
            if chunk.entries is None:
                assert chunk.digest in known
            else:
                assert mf.entries_digest(chunk.entries) == chunk.digest
        if cached is not None and len(dirty) <= 3:
            assert sum(reads) < len(rows) // 2  # what changed, not what exists
        # published: its pages are known (a few dropped, as a failed check would)
        known |= {c.digest for c in chunks}
        known -= {d for d in known if rng.random() < 0.03}
        cached, dirty = segments, set()
        for _ in range(rng.choice([1, 2, 3, 10])):
            op = rng.random()
            if op < 0.35:  # a new memory (a new key at the end, or a gap's key)
                key = max(rows) + 1 if rng.random() < 0.7 else rng.randrange(1, max(rows), 2)
                if key not in rows:
                    next_id += 1
                    rows[key] = _row(key, f"n{seed}-{next_id}", 1)
                    dirty.add(key)
            elif op < 0.6 and rows:  # forgotten (or unpublished)
                key = rng.choice(list(rows))
                del rows[key]
                dirty.add(key)
            elif rows:  # a new version
                key = rng.choice(list(rows))
                rows[key] = _row(key, rows[key]["id"], rows[key]["version"] + 1)
                dirty.add(key)


def test_build_without_cache_reads_everything_once(small_pages: None) -> None:
    rows = {k: _row(k, f"x{k}", 1) for k in range(1, 60)}
    calls: list[tuple[int | None, int | None]] = []

    def between(after: int | None, upto: int | None) -> list[dict[str, Any]]:
        calls.append((after, upto))
        return [r for k, r in sorted(rows.items())
                if (after is None or k > after) and (upto is None or k <= upto)]

    chunks, _ = build(None, set(), lambda d: True, between, [])
    assert calls == [(None, None)]
    assert all(c.entries is not None for c in chunks)


# -- through Memory ------------------------------------------------------------------


@pytest.fixture
def mem(tmp_path: Path, small_pages: None) -> Iterator[Memory]:
    m = Memory(make_settings(tmp_path / "data", manifest_every=10_000),
               embedder=HashEmbedder(32), master_key=MASTER_HEX)
    yield m
    m.close()


def _both(mem: Memory) -> tuple[list[tuple[str, int]], list[tuple[str, int]], int]:
    """(incremental pages, full pages, cached pages listed by digest) of NS right now."""
    log = mem._log
    keys = log.host.keys_for(NS)
    clock = log._clock()
    _, chunks, _ = log._chunks(NS, keys, clock)
    with mem._catalog.snapshot():
        _, full, _ = log._full(NS, clock)
    return ([(c.digest, c.count) for c in chunks], [(c.digest, c.count) for c in full],
            sum(c.entries is None for c in chunks))


def test_manifests_through_memory_list_what_the_full_computation_lists(mem: Memory) -> None:
    recs = mem.remember_many([f"fact number {i} about topic {i % 7}" for i in range(60)],
                             namespace=NS).records
    assert mem.sync(NS).manifests
    inc, full, cached = _both(mem)
    assert inc == full and cached > 0  # the published manifest's segments are reused
    changes = [
        lambda: mem.remember("one more fact", namespace=NS),
        lambda: mem.forget(recs[3].id, namespace=NS),
        lambda: mem.update(recs[40].id, text="fact forty, restated", namespace=NS),
        lambda: mem.remember_many([f"late fact {i}" for i in range(12)], namespace=NS),
        lambda: mem.forget(recs[59].id, namespace=NS),
    ]
    for change in changes:
        change()
        inc, full, cached = _both(mem)
        assert inc == full  # before the manifest: the dirty keys are read
        assert cached > 0
        mem._log.publish(NS)  # a forget may have published its own already
        inc, full, _ = _both(mem)
        assert inc == full


def test_a_failed_publish_keeps_the_changes_for_the_next(mem: Memory,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    recs = mem.remember_many([f"fact {i}" for i in range(40)], namespace=NS).records
    mem.sync(NS)
    mem.forget(recs[5].id, namespace=NS)  # (publishes a manifest of its own)
    before = mem._catalog.get_meta("manifest_segments:" + NS)
    mem.update(recs[7].id, text="fact seven, again", namespace=NS)
    mem.remember("a new one", namespace=NS)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise StorageError("publisher down")

    monkeypatch.setattr(publishing, "store_root", refuse)
    report = mem.sync(NS)
    assert not report.manifests and report.errors
    assert mem._catalog.get_meta("manifest_segments:" + NS) == before  # nothing recorded
    monkeypatch.undo()
    inc, full, _ = _both(mem)
    assert inc == full
    assert mem.sync(NS).manifests
    inc, full, _ = _both(mem)
    assert inc == full


def test_changes_made_without_the_triggers_drop_the_cache(tmp_path: Path,
                                                          small_pages: None) -> None:
    data = tmp_path / "data"
    mem = Memory(make_settings(data, manifest_every=10_000), embedder=HashEmbedder(32),
                 master_key=MASTER_HEX)
    try:
        recs = mem.remember_many([f"fact {i}" for i in range(40)], namespace=NS).records
        mem.sync(NS)
        assert mem._catalog.get_meta("manifest_segments:" + NS) is not None
        with mem._catalog.write() as c:  # an older writer, or a migration that rebuilt it
            c.execute("DROP TRIGGER manifest_dirty_update")
            c.execute("UPDATE memories SET version = version + 1 WHERE id = ?", (recs[2].id,))
    finally:
        mem.close()
    Catalog(data / "catalog.sqlite3").close()  # the next open re-creates the triggers
    mem = Memory(make_settings(data, manifest_every=10_000), embedder=HashEmbedder(32),
                 master_key=MASTER_HEX)
    try:
        assert mem._catalog.get_meta("manifest_segments:" + NS) is None
        inc, full, cached = _both(mem)
        assert inc == full and cached == 0
    finally:
        mem.close()


def test_triggers_mark_every_manifest_column(tmp_path: Path) -> None:
    cat = Catalog(tmp_path / "c.sqlite3")
    try:
        with cat.write() as c:
            c.execute("INSERT INTO namespaces (name, created_at) VALUES ('n', 0)")
            c.execute("INSERT INTO memories (id, namespace, text, importance, created_at, "
                      "updated_at, version, dedupe_hash, status, vector) VALUES "
                      "('a', 'n', 't', 0.5, 0, 0, 1, 'h', 'queued', x'00')")
            c.execute("DELETE FROM manifest_dirty")
        for column, value in [("status", "'published'"), ("blob_id", "'b'"),
                              ("quilt_patch_id", "'p'"), ("end_epoch", "3"),
                              ("updated_at", "1"), ("digest", "'d'"), ("version", "2")]:
            with cat.write() as c:
                c.execute(f"UPDATE memories SET {column} = {value} WHERE id = 'a'")
                marked = c.execute("SELECT count(*) FROM manifest_dirty").fetchone()[0]
                c.execute("DELETE FROM manifest_dirty")
            assert marked == 1, column
        with cat.write() as c:
            c.execute("UPDATE memories SET importance = 0.9 WHERE id = 'a'")  # not listed
            assert c.execute("SELECT count(*) FROM manifest_dirty").fetchone()[0] == 0
            c.execute("DELETE FROM memories WHERE id = 'a'")
            assert c.execute("SELECT count(*) FROM manifest_dirty").fetchone()[0] == 1
    finally:
        cat.close()
