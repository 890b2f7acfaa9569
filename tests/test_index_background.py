"""No recall waits on an index build (issue 28 item 3): a restore, a pull or a large
catch-up holds its memories pending (in the index's rows, not in the HNSW graph yet);
recall answers from the graph plus an exact scan of the pending vectors, ranked as the
built graph ranks; a background thread inserts them, saves, stops at close, and a
process killed mid-build resumes where its last save left it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from relayer_mock.embedded import EmbeddedRelayer
from tests.helpers_memory import MASTER_HEX, make_settings
from tests.test_index import DIM, add, unit
from walrus_mem._catalog.catalog import Catalog
from walrus_mem._memory.integrity import check_index_file
from walrus_mem._recall import index_store
from walrus_mem._recall.index_store import IndexStore
from walrus_mem._recall.index_vectors import quantize
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder
from walrus_mem.walrus import WalrusClient

NS = "default"
QUERIES = ["blue notebook", "the red kettle", "green 14", "attic lamp 3", "notebook 91"]


def texts(n: int, tag: str = "") -> list[str]:
    things = ["notebook", "kettle", "lamp", "scarf", "bicycle", "teapot", "atlas"]
    places = ["attic", "kitchen", "garage", "study", "porch"]
    return [f"fact {tag}{i}: the {['red', 'blue', 'green'][i % 3]} {things[i % 7]} in the "
            f"{places[i % 5]} {i * 7}" for i in range(n)]


@pytest.fixture
def walrus(tmp_path: Path) -> Iterator[EmbeddedRelayer]:
    relayer = EmbeddedRelayer(tmp_path / "walrus")
    yield relayer
    relayer.close()


def open_mem(path: Path, relayer: EmbeddedRelayer) -> Memory:
    base = relayer.base_url
    client = WalrusClient(base, [base], transport=relayer.transport, epochs=5)
    return Memory(make_settings(path), embedder=HashEmbedder(32), master_key=MASTER_HEX,
                  walrus=client)


def written(tmp_path: Path, relayer: EmbeddedRelayer, n: int) -> str:
    mem = open_mem(tmp_path / "writer", relayer)
    mem.remember_many(texts(n))
    assert not mem.sync().errors
    head = str(mem._parts.log.newest(NS)[0])
    mem.close()
    return head


def ranked(mem: Memory) -> list[list[tuple[str, float, float]]]:
    """Every query's top 8: id, dense similarity and score (to 5 places: recency moves
    with the clock between two recalls)."""
    return [[(h.record.id, h.dense, round(h.score, 5))
             for h in mem.recall(q, k=8, min_score=-1.0)] for q in QUERIES]


def test_recall_during_a_partial_build_ranks_as_the_built_index(
        tmp_path: Path, walrus, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_store, "BACKGROUND_MIN", 0)
    head = written(tmp_path, walrus, 150)
    reader = open_mem(tmp_path / "reader", walrus)
    reader._parts.indexes.auto_build = False  # the test moves memories into the graph
    assert reader.restore(NS, head).restored == 150
    indexes = reader._parts.indexes
    idx = indexes.loaded(NS)
    # The restore held every memory pending: no HNSW insertion inside it.
    assert idx is not None and len(idx.index) == 0 and idx.pending == 150 and len(idx) == 150
    nothing_built = ranked(reader)
    assert len(idx.index) == 0  # the recall built nothing: it scanned the pending exactly
    assert indexes.build_some(NS, 60) == 60
    assert len(idx.index) == 60 and idx.pending == 90  # rows in and out of the graph
    partial = ranked(reader)
    indexes.save_all()
    health = check_index_file(reader._parts.catalog, indexes.directory, NS,
                              reader.embedder.model_id, reader.embedder.dim)
    assert health.ok and health.unbuilt == 90 and health.index_count == 60, health.describe()
    assert "90 not in the graph yet" in health.describe()
    indexes.build_some(NS, 1000)
    assert len(idx.index) == 150 and idx.pending == 0
    built = ranked(reader)
    assert all(built), built
    assert partial == built and nothing_built == built
    reader.close()


def test_the_builder_thread_finishes_saves_and_reports_progress(
        tmp_path: Path, walrus, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_store, "BACKGROUND_MIN", 1)
    head = written(tmp_path, walrus, 120)
    reader = open_mem(tmp_path / "reader", walrus)
    reader.restore(NS, head)
    first = ranked(reader)  # answered whatever the builder has done by now
    indexes = reader._parts.indexes
    assert indexes.wait_built(NS, timeout=60)
    assert indexes.build_progress(NS) == {"in_graph": 120, "pending": 0, "building": False}
    assert ranked(reader) == first
    stats = reader.stats()
    assert stats.index_vectors == 120 and stats.index_pending == 0
    meta = json.loads(indexes.path_for(NS).with_suffix(".meta.json").read_text())
    assert meta["count"] == 120 and meta["pending"] == 0  # saved when done
    reader.close()


def test_close_cancels_a_running_build(tmp_path: Path) -> None:
    cat = Catalog(tmp_path / "c.sqlite3")
    add(cat, "ns", 3000)
    store = IndexStore(tmp_path / "index", cat)
    idx = store.get("ns", "m", DIM)  # no file: rebuilt pending, built in the background
    builder = store._builders["ns"]
    store.close()
    assert not builder.is_alive()
    cat.close()
    assert idx.pending + len(idx.index) == 3000


def test_an_index_rebuilt_in_the_background_answers_exactly_meanwhile(tmp_path: Path) -> None:
    cat = Catalog(tmp_path / "c.sqlite3")
    keys = add(cat, "ns", 400)
    store = IndexStore(tmp_path / "index", cat)
    store.auto_build = False
    idx = store.get("ns", "m", DIM)
    assert len(idx.index) == 0 and idx.pending == 400 and len(idx) == 400
    for seed in (3, 77, 399):
        assert idx.search(unit(seed), 1)[0] == [keys[seed]]
    store.build_some("ns", 123)
    before = [idx.search(unit(s) + 0.3 * unit(s + 1), 10) for s in range(0, 400, 37)]
    store.build_some("ns", 400)
    after = [idx.search(unit(s) + 0.3 * unit(s + 1), 10) for s in range(0, 400, 37)]
    assert [b[0] for b in before] == [a[0] for a in after]
    assert np.allclose([b[1] for b in before], [a[1] for a in after], atol=1e-6)
    store.close()
    cat.close()


_KILLED = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {root!r})
    from tests.test_index_background import open_mem
    from relayer_mock.embedded import EmbeddedRelayer
    from walrus_mem._recall import index_store
    from pathlib import Path
    index_store.BACKGROUND_MIN = 0
    relayer = EmbeddedRelayer(Path({walrus!r}))
    mem = open_mem(Path({path!r}), relayer)
    mem._parts.indexes.auto_build = False
    mem.restore("default", {head!r})
    indexes = mem._parts.indexes
    indexes.build_some("default", 50)
    indexes.save_all()            # a periodic save of the builder's progress
    indexes.build_some("default", 30)  # built, not saved: lost with the process
    print("built", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_a_process_killed_mid_build_resumes_at_the_next_open(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    relayer = EmbeddedRelayer(tmp_path / "walrus")
    head = written(tmp_path, relayer, 140)
    relayer.close()
    root = str(Path(__file__).resolve().parent.parent)
    script = _KILLED.format(root=root, walrus=str(tmp_path / "walrus"),
                            path=str(tmp_path / "reader"), head=head)
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           timeout=120, env={**os.environ, "PYTHONPATH": root}, check=False)
    assert child.returncode == -9 and "built" in child.stdout, child.stderr[-2000:]
    meta = json.loads((next((tmp_path / "reader" / "index").glob("*.meta.json"))).read_text())
    assert (meta["count"], meta["pending"]) == (50, 90)  # the last save's state
    relayer = EmbeddedRelayer(tmp_path / "walrus")
    monkeypatch.setattr(index_store, "BACKGROUND_MIN", 1)
    mem = open_mem(tmp_path / "reader", relayer)
    progress = mem._parts.indexes.build_progress(NS)
    assert progress == {"in_graph": 50, "pending": 90, "building": False}
    mid_build = ranked(mem)  # opens the index: 50 in the graph, 90 pending, builder started
    indexes = mem._parts.indexes
    assert indexes.wait_built(NS, timeout=60)
    idx = indexes.loaded(NS)
    assert idx is not None and len(idx.index) == 140 and idx.pending == 0
    assert ranked(mem) == mid_build
    mem.close()
    relayer.close()


def test_a_write_inserts_inline_and_a_recall_defers_a_large_catch_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_store, "DEFER_AT", 50)
    cat = Catalog(tmp_path / "c.sqlite3")
    add(cat, "ns", 10)
    store = IndexStore(tmp_path / "index", cat)
    store.auto_build = False  # nothing pending is built unless the test says so
    idx = store.rebuild("ns", "m", DIM)
    assert len(idx.index) == 10 and idx.pending == 0
    add(cat, "ns", 60, start=100)
    store.refresh("ns", build=True)  # a write (remember_many): built as memories arrive
    assert len(idx.index) == 70 and idx.pending == 0
    other = Catalog(tmp_path / "c.sqlite3")  # another process's connection
    keys = add(other, "ns", 60, start=200)
    other.close()
    store.get("ns", "m", DIM)  # a recall after another process's import: held pending
    assert len(idx.index) == 70 and idx.pending == 60
    assert idx.search(unit(230), 1)[0] == [keys[30]]
    store.close()
    cat.close()


def test_a_restore_hands_its_vectors_to_the_index_instead_of_reading_them_back(
        tmp_path: Path, walrus, monkeypatch: pytest.MonkeyPatch) -> None:
    from walrus_mem._log import merging

    monkeypatch.setattr(merging, "RESTORE_CHUNK", 10)
    head = written(tmp_path, walrus, 40)
    reader = open_mem(tmp_path / "reader", walrus)
    catalog = reader._parts.catalog
    asked: list[int] = []
    real = catalog.index_rows

    def index_rows(ns, keys):  # type: ignore[no-untyped-def]
        asked.extend(keys)
        return real(ns, keys)

    monkeypatch.setattr(catalog, "index_rows", index_rows)
    assert reader.restore(NS, head).restored == 40
    # The first chunk opened the index (rows read from the catalog: it had no file);
    # the other three handed their rows over: none read back (each read of a vector
    # opens the memory's sealed copy).
    assert asked == []
    idx = reader._parts.indexes.loaded(NS)
    assert idx is not None and len(idx) == 40
    keys = [int(r[0]) for r in catalog.query("SELECT key FROM memories")]
    truth = catalog.vectors_by_keys(NS, keys)
    found, slots = idx.find(keys)
    assert found.all()
    for key, slot in zip(keys, slots.tolist(), strict=True):
        assert idx.vectors[slot].tobytes() == quantize(truth[key]).tobytes()
    reader.close()


def test_rows_another_connection_wrote_meanwhile_are_read_back(
        tmp_path: Path, walrus, monkeypatch: pytest.MonkeyPatch) -> None:
    from walrus_mem._log import merging

    monkeypatch.setattr(merging, "RESTORE_CHUNK", 10)
    head = written(tmp_path, walrus, 30)
    reader = open_mem(tmp_path / "reader", walrus)
    catalog = reader._parts.catalog
    asked: list[int] = []
    real_rows, real_version = catalog.index_rows, catalog.data_version
    versions = iter(range(10_000))
    monkeypatch.setattr(catalog, "index_rows",
                        lambda ns, keys: asked.extend(keys) or real_rows(ns, keys))
    # each reading differs, as when another connection commits between two of them
    monkeypatch.setattr(catalog, "data_version", lambda: real_version() + next(versions))
    assert reader.restore(NS, head).restored == 30
    assert len(asked) == 20  # the 2nd and 3rd chunks: read back
    reader.close()


def test_a_recall_that_holds_a_large_catch_up_pending_does_not_save(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_store, "DEFER_AT", 50)
    cat = Catalog(tmp_path / "c.sqlite3")
    add(cat, "ns", 10)
    store = IndexStore(tmp_path / "index", cat, save_every=20)
    store.auto_build = False
    store.rebuild("ns", "m", DIM)
    saves: list[int] = []
    real = store._save
    monkeypatch.setattr(store, "_save", lambda idx: saves.append(len(idx)) or real(idx))
    other = Catalog(tmp_path / "c.sqlite3")  # another process's import
    add(other, "ns", 60, start=100)
    other.close()
    idx = store.get("ns", "m", DIM)  # a recall: 60 held pending, over save_every
    assert idx.pending == 60 and saves == []  # the whole file is not written inside it
    store.close()  # saved at close (or by the builder)
    assert saves == [70]
    cat.close()
