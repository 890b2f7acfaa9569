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
            "SELECT DISTINCT memory_id FROM versions WHERE namespace = ?", (ns,)))
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
    (this module's ``answers``): the upgraded catalog answers the same."""
    expected = json.loads((DATA / "catalog_schema7.json").read_text())
    got, version = _answers_of_copy(SCHEMA7, tmp_path)
    assert version == SCHEMA_VERSION
    assert got == expected


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(_answers_of_copy(Path(sys.argv[1]), Path(tmp))[0], indent=1,
                         sort_keys=True))
