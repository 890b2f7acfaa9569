"""Issue 28 item 2: what a restore asks the catalog per chunk costs what the chunk holds,
not what the namespace holds (the tombstone check of a chunk's new memories)."""

from __future__ import annotations

import json
from pathlib import Path

from walrus_mem._catalog.catalog import Catalog
from walrus_mem._log import apply


def test_the_tombstone_check_of_a_chunk_is_one_lookup_per_id(tmp_path: Path,
                                                             monkeypatch) -> None:
    cat = Catalog(tmp_path / "c.sqlite3")
    with cat.write() as c:
        c.execute("INSERT INTO namespaces (name, created_at) VALUES ('ns', 0)")
    for i in range(300):  # many tombstones: a scan of them per id is what must not happen
        cat.add_history("ns", f"gone-{i}", 2, "DELETE", 0.0)
    cat.add_history("other", "gone-live", 2, "DELETE", 0.0)  # another namespace's
    asked: list[str] = []
    real = cat.query

    def query(sql, params=()):  # type: ignore[no-untyped-def]
        asked.append(sql)
        return real(sql, params)

    monkeypatch.setattr(cat, "query", query)
    ids = ["gone-3", "live-1", "gone-299", "gone-live"]
    assert apply._tombstoned(cat, "ns", ids) == {"gone-3", "gone-299"}
    assert len(asked) == 1  # one query for the chunk
    plan = " | ".join(str(r[3]) for r in real("EXPLAIN QUERY PLAN " + asked[0],
                                              (json.dumps(ids), "ns")))
    assert "versions_ns_event" not in plan and "(memory_id=?)" in plan, plan
    assert apply._tombstoned(cat, "ns", []) == set()
    cat.close()


def test_a_pull_reads_the_local_versions_once(tmp_path: Path, monkeypatch) -> None:
    from relayer_mock.embedded import EmbeddedRelayer
    from tests.test_index_background import NS, open_mem, texts

    relayer = EmbeddedRelayer(tmp_path / "walrus")
    writer = open_mem(tmp_path / "writer", relayer)
    writer.remember_many(texts(20))
    assert not writer.sync().errors
    reader = open_mem(tmp_path / "reader", relayer)
    reader.restore(NS, str(writer._parts.log.newest(NS)[0]))
    writer.remember_many(texts(5, "new "))
    assert not writer.sync().errors
    calls: list[str] = []
    real = reader._parts.catalog.versions_now
    monkeypatch.setattr(reader._parts.catalog, "versions_now",
                        lambda ns: calls.append(ns) or real(ns))
    report = reader.pull(str(writer._parts.log.newest(NS)[0]))
    assert report.added == 5 and report.complete
    # every live row's version, update time and digest: read for the plan, not again at
    # the end (which needs the ids only): 2 s of a 10k pull into 100k
    assert calls == [NS]
    assert reader._parts.catalog.namespace(NS) is not None
    writer.close()
    reader.close()
    relayer.close()


def test_is_tombstoned_is_a_primary_key_lookup(tmp_path: Path, monkeypatch) -> None:
    """record_location (every published memory) and forget ask Catalog.is_tombstoned one
    id at a time: answered from the (namespace, event) index it read every tombstone of
    the namespace per call."""
    cat = Catalog(tmp_path / "c.sqlite3")
    with cat.write() as c:
        c.execute("INSERT INTO namespaces (name, created_at) VALUES ('ns', 0)")
    for i in range(300):
        cat.add_history("ns", f"gone-{i}", 2, "DELETE", 0.0)
    cat.add_history("other", "gone-live", 2, "DELETE", 0.0)
    cat.add_history("ns", "live-1", 1, "ADD", 0.0)
    asked: list[tuple[str, tuple]] = []
    real = cat.query_one

    def query_one(sql, params=()):  # type: ignore[no-untyped-def]
        asked.append((sql, tuple(params)))
        return real(sql, params)

    monkeypatch.setattr(cat, "query_one", query_one)
    assert cat.is_tombstoned("ns", "gone-3") and cat.is_tombstoned("ns", "gone-299")
    assert not cat.is_tombstoned("ns", "live-1")  # a version, no tombstone
    assert not cat.is_tombstoned("ns", "gone-live")  # another namespace's tombstone
    assert not cat.is_tombstoned("ns", "never")
    assert cat.is_tombstoned("other", "gone-live")
    sql, params = asked[0]
    plan = " | ".join(str(r[3]) for r in cat.query("EXPLAIN QUERY PLAN " + sql, params))
    assert "versions_ns_event" not in plan and "(memory_id=?)" in plan, plan
    cat.close()
