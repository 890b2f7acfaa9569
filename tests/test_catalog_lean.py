"""Issue 28 item 4, the catalog's own bytes: what a catalog written by an older schema
answers must not change when it is upgraded (tests/data/catalog_schema7.*).

``python -m tests.test_catalog_lean tests/data/catalog_schema7.sqlite3`` prints the
answers of a catalog opened alone in a fresh data dir (the JSON the test compares with).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.helpers_memory import MASTER_HEX, make_settings
from walrus_mem._catalog.catalog import SCHEMA_VERSION
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder

DATA = Path(__file__).parent / "data"
SCHEMA7 = DATA / "catalog_schema7.sqlite3"


def _open(path: Path) -> Memory:
    return Memory(make_settings(path), embedder=HashEmbedder(64), master_key=MASTER_HEX)


def answers(mem: Memory) -> dict[str, Any]:
    """Every memory's history, the live list and one recall, per namespace."""
    out: dict[str, Any] = {}
    for ns in ("default", "other"):
        ids = sorted(str(r[0]) for r in mem._parts.catalog.query(
            "SELECT memory_id FROM versions WHERE namespace = ? UNION "
            "SELECT id FROM memories WHERE namespace = ?", (ns, ns)))
        out[ns] = {
            "history": {i: [e.model_dump(mode="json") for e in mem.history(i, namespace=ns)]
                        for i in ids},
            "list": [r.model_dump(mode="json") for r in mem.list(namespace=ns, limit=100)],
            "recall": [[h.id, round(h.score, 6)]
                       for h in mem.recall("the golf notebook shelf", k=5, namespace=ns)],
        }
    return out


def _answers_of_copy(catalog: Path, tmp: Path) -> tuple[dict[str, Any], int]:
    data = tmp / "d"
    data.mkdir(mode=0o700)
    shutil.copy(catalog, data / "catalog.sqlite3")
    (data / "catalog.sqlite3").chmod(0o600)  # a checkout may leave it group-writable
    with _open(data) as mem:
        version = int(mem._parts.catalog.query_one(
            "SELECT max(version) FROM schema_version")[0])
        return answers(mem), version


def test_a_catalog_written_by_schema_7_answers_the_same(tmp_path: Path) -> None:
    """tests/data/catalog_schema7.sqlite3 was written by walrus_mem at schema 7 (79a4de8,
    HashEmbedder(64)): 24 facts in two remember_many (metadata, category, importance),
    synced; then one updated with new text, one with new metadata, one twice, one
    forgotten, synced again; one updated and one remembered after that, one fact in a
    second namespace; compacted. catalog_schema7.json holds what that code answered
    (this module's ``answers``): the upgraded catalog answers the same. The recall's
    scores are compared to within int8's rounding: the index stores int8 vectors since
    (index_vectors.quantize), which move a cosine by about 0.001; the ranked ids are
    compared exactly."""
    expected = json.loads((DATA / "catalog_schema7.json").read_text())
    got, version = _answers_of_copy(SCHEMA7, tmp_path)
    assert version == SCHEMA_VERSION
    for ns in expected:
        want, have = expected[ns].pop("recall"), got[ns].pop("recall")
        assert [i for i, _ in have] == [i for i, _ in want]
        assert all(abs(a - b) < 5e-3 for (_, a), (_, b) in zip(have, want, strict=True))
    assert got == expected


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(_answers_of_copy(Path(sys.argv[1]), Path(tmp))[0], indent=1,
                         sort_keys=True))


TEXTS = [f"the {w} notebook sits on shelf {i}" for i, w in enumerate(
    "alpha bravo charlie delta echo foxtrot".split())]


def _versions(mem: Memory) -> list[tuple[str, int, str, str | None]]:
    return [(str(r[0]), int(r[1]), str(r[2]), r[3]) for r in mem._parts.catalog.query(
        "SELECT memory_id, version, event, text FROM versions ORDER BY memory_id, version")]


def test_a_memory_never_updated_keeps_no_history_row_of_its_own(tmp_path: Path) -> None:
    """Schema 8: the current version's history is the memory row (its text, metadata and
    blob are there already); ``versions`` holds only what the row no longer does."""
    with _open(tmp_path / "d") as mem:
        recs = mem.remember_many([{"text": t, "metadata": {"n": i}}
                                  for i, t in enumerate(TEXTS)]).records
        mem.sync()
        assert _versions(mem) == []
        entry = mem.history(recs[2].id)
        assert [(e.version, e.event, e.text, e.metadata) for e in entry] == [
            (1, "ADD", TEXTS[2], {"n": 2})]
        assert entry[0].blob_id == mem.get(recs[2].id).blob_id is not None


def test_history_moves_to_versions_as_the_memory_changes(tmp_path: Path) -> None:
    """An update copies the superseded version (text, metadata, blob) to ``versions``;
    a forget the current one, blanked, with its tombstone; what ``history`` answers is
    what it answered when every version had its row."""
    with _open(tmp_path / "d") as mem:
        recs = mem.remember_many(TEXTS[:3]).records
        mem.sync()
        first_blob = mem.get(recs[0].id).blob_id
        mem.update(recs[0].id, text="the alpha notebook moved to the attic",
                   metadata={"room": "attic"})
        mem.sync()
        mem.forget(recs[1].id)
        assert _versions(mem) == [
            *sorted([(recs[0].id, 1, "ADD", TEXTS[0]),
                     (recs[1].id, 1, "ADD", None), (recs[1].id, 2, "DELETE", None)])]
        hist = mem.history(recs[0].id)
        assert [(e.version, e.event, e.text, e.metadata) for e in hist] == [
            (1, "ADD", TEXTS[0], {}),
            (2, "UPDATE", "the alpha notebook moved to the attic", {"room": "attic"})]
        assert hist[0].blob_id == first_blob != hist[1].blob_id
        assert hist[1].blob_id == mem.get(recs[0].id).blob_id
        assert [(e.version, e.event, e.text) for e in mem.history(recs[1].id)] == [
            (1, "ADD", None), (2, "DELETE", None)]
        assert mem._parts.catalog.live_versions_in_blob(first_blob) == 2  # 0's v1, 2's v1


def _lexical(mem: Memory, queries: list[str]) -> list[list[tuple[int, float]]]:
    cat = mem._parts.catalog
    return [[(k, round(s, 9)) for k, s in cat.fts_matches("default", q)] for q in queries]


def test_fts5_keeps_no_text_and_stays_exact_through_updates_forgets_and_repair(
        tmp_path: Path) -> None:
    """Schema 9: FTS5 holds the index and row sizes only (``content=''``); a row's tokens
    are removed by the text memories.text holds. After updates, a forget and a repair of
    a rotted text, the index and postings equal ones built again from memories."""
    from walrus_mem._catalog.catalog import fts_table
    from walrus_mem._catalog.postings import differences
    from walrus_mem._memory.repair import repair_namespace

    queries = ['"notebook"', '"alpha"', '"attic"', '"shelf" OR "cellar"', '"bravo"',
               '"delta"', '"echo"', '"charlie"']
    with _open(tmp_path / "d") as mem:
        recs = mem.remember_many(TEXTS).records
        mem.update(recs[0].id, text="the alpha notebook moved to the attic")
        mem.update(recs[1].id, metadata={"room": "attic"})
        mem.update(recs[2].id, text="the charlie notebook went to the cellar")
        mem.forget(recs[3].id)
        cat = mem._parts.catalog
        keys = {str(r[0]): int(r[1]) for r in cat.query("SELECT id, key FROM memories")}
        table = fts_table("default")
        assert cat.query_one("SELECT 1 FROM sqlite_master WHERE name = ?",
                             (f"{table}_content",)) is None
        assert cat.query_one(f"SELECT text FROM {table} WHERE rowid = ?",
                             (keys[recs[1].id],))[0] is None
        assert differences(cat.conn, "default") == []
        incremental = _lexical(mem, queries)
        cat.rebuild_lexical("default")
        assert _lexical(mem, queries) == incremental
        assert [k for k, _ in incremental[1]] == [keys[recs[0].id]]  # alpha: the new text
        with cat.write() as c:  # the text column rots; the sealed copy is intact
            c.execute("UPDATE memories SET text = 'the echo notebook sits on shelf 4 zulu' "
                      "WHERE key = ?", (keys[recs[4].id],))
        report = repair_namespace(mem)
        assert report.rebuilt == [recs[4].id]
        assert differences(cat.conn, "default") == []
        assert cat.fts_matches("default", '"zulu"') == []
        assert _lexical(mem, queries) == incremental


def test_the_upgraded_schema_7_catalog_keeps_no_fts5_text(tmp_path: Path) -> None:
    from walrus_mem._catalog.catalog import fts_table
    from walrus_mem._catalog.postings import differences

    data = tmp_path / "d"
    data.mkdir(mode=0o700)
    shutil.copy(SCHEMA7, data / "catalog.sqlite3")
    (data / "catalog.sqlite3").chmod(0o600)  # a checkout may leave it group-writable
    with _open(data) as mem:
        cat = mem._parts.catalog
        for ns in ("default", "other"):
            assert cat.query_one("SELECT 1 FROM sqlite_master WHERE name = ?",
                                 (f"{fts_table(ns)}_content",)) is None
            assert differences(cat.conn, ns) == []
        assert int(cat.query_one("SELECT count(*) FROM versions")[0]) == 7
