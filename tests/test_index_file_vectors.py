"""A built memory's vector is kept once, in the USearch file (issue 28 item 4).

The index directory used to hold every vector twice: in the USearch file and in the
mapped copies (``<stem>.<token>.vectors.npy``, 869 B per memory at 10k). The copies now
hold only the memories the saved USearch file does not (pending ones); the others are
read from the file's vector matrix by slot (walrus_mem/_recall/usearch_file.py).
"""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from usearch.index import Index

from tests.test_index import DIM, add, cat, delete, unit  # noqa: F401  (cat: a fixture)
from walrus_mem._catalog.catalog import Catalog
from walrus_mem._recall import index as index_module
from walrus_mem._recall.index import NamespaceIndex, index_file_stem
from walrus_mem._recall.index_store import IndexStore
from walrus_mem._recall.index_vectors import quantize
from walrus_mem._recall.usearch_file import slot_keys, vector_matrix

ATTRS = (1.0, 0.5, None)


def vectors(seed: int, n: int, dim: int = DIM) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def kept(seed: int) -> np.ndarray:
    """``unit(seed)`` as the catalog keeps it (float16), which the index quantizes."""
    return unit(seed).astype(np.float16)


def saved_copies(directory: Path) -> np.ndarray:
    [path] = directory.glob("*.vectors.npy")
    return np.load(path)


def assert_holds(idx: NamespaceIndex, truth: dict[int, np.ndarray]) -> None:
    """Every key's vector reads back as inserted (int8), and no other key is held."""
    assert set(idx.slots) == set(truth)
    keys = sorted(truth)
    found, at = idx.find(keys)
    assert found.all()
    want = quantize(np.stack([truth[k] for k in keys]))
    assert np.array_equal(idx.vectors[at], want)
    assert all(np.array_equal(idx.vectors[int(s)], w) for s, w in zip(at[:5], want[:5],
                                                                      strict=True))


def test_the_saved_index_keeps_no_copy_of_a_built_memorys_vector(tmp_path: Path) -> None:
    v = vectors(1, 200)
    idx = NamespaceIndex("ns", tmp_path, "m", DIM)
    idx.upsert(list(range(200)), v, [ATTRS] * 200)
    assert idx.save()
    assert saved_copies(tmp_path).shape == (0, DIM)
    assert len(idx._copied()) == 0  # and none held in this process either
    truth = dict(enumerate(v))
    assert_holds(idx, truth)
    again = NamespaceIndex("ns", tmp_path, "m", DIM)
    assert again.load() and again.rows_loaded
    assert_holds(again, truth)
    assert again.search(v[17], 1)[0] == [17]
    assert again.similarities([17, 3], v[17])[0] == pytest.approx(1.0, abs=1e-3)


def test_vectors_read_back_after_updates_removals_and_reopens(tmp_path: Path) -> None:
    v = vectors(2, 300)
    truth = dict(enumerate(v))
    idx = NamespaceIndex("ns", tmp_path, "m", DIM)
    idx.upsert(list(range(300)), v, [ATTRS] * 300)
    assert idx.save()
    idx = NamespaceIndex("ns", tmp_path, "m", DIM)
    assert idx.load()
    new = vectors(3, 80)
    idx.upsert(list(range(40)), new[:40], [ATTRS] * 40)  # updated: new vectors
    idx.remove(list(range(100, 130)))
    idx.upsert(list(range(1000, 1040)), new[40:], [ATTRS] * 40)  # new keys, freed slots
    truth.update(zip(range(40), new[:40], strict=True))
    truth.update(zip(range(1000, 1040), new[40:], strict=True))
    for key in range(100, 130):
        del truth[key]
    assert_holds(idx, truth)  # unsaved: the saved file's rows plus the copies
    assert len(idx._copied()) == 80
    assert idx.save()
    assert saved_copies(tmp_path).shape == (0, DIM)
    assert len(idx._copied()) == 0
    assert_holds(idx, truth)
    for key in (5, 1005, 250):
        assert idx.search(truth[key], 1)[0] == [key]
    again = NamespaceIndex("ns", tmp_path, "m", DIM)
    assert again.load() and again.rows_loaded
    assert_holds(again, truth)
    # slots USearch freed keep their stale rows in the file: a removed key is not read
    assert not set(range(100, 130)) & set(again.search_all(v[110])[0])


def test_pending_memories_are_the_only_copies_saved(tmp_path: Path) -> None:
    v = vectors(4, 150)
    idx = NamespaceIndex("ns", tmp_path, "m", DIM)
    idx.upsert(list(range(100)), v[:100], [ATTRS] * 100)
    idx.defer(list(range(100, 150)), v[100:], [ATTRS] * 50)  # not in the graph yet
    assert idx.save()
    copies = saved_copies(tmp_path)
    assert np.array_equal(copies, quantize(v[100:]))  # in slot (= key) order
    truth = dict(enumerate(v))
    again = NamespaceIndex("ns", tmp_path, "m", DIM)
    assert again.load() and again.pending == 50
    assert_holds(again, truth)
    assert again.search(v[120], 1)[0] == [120]  # the exact scan of the pending copies
    assert again.build_step(50) == 50
    assert again.save()
    assert saved_copies(tmp_path).shape == (0, DIM)
    assert_holds(again, truth)
    final = NamespaceIndex("ns", tmp_path, "m", DIM)
    assert final.load() and final.pending == 0
    assert_holds(final, truth)


def test_a_rebuilt_and_reopened_store_reads_the_catalogs_vectors(
    tmp_path: Path, cat: Catalog  # noqa: F811
) -> None:
    keys = add(cat, "ns", 60)
    delete(cat, "ns", keys[3])
    store = IndexStore(tmp_path / "index", cat)
    idx = store.rebuild("ns", "m", DIM)
    truth = {k: kept(i) for i, k in enumerate(keys) if i != 3}
    assert_holds(idx, truth)
    assert saved_copies(tmp_path / "index").shape == (0, DIM)
    store.close()
    store = IndexStore(tmp_path / "index", cat)
    idx = store.get("ns", "m", DIM)
    assert idx.rows_loaded
    assert_holds(idx, truth)
    store.close()


def _write_v1_rows(directory: Path, idx: NamespaceIndex) -> None:
    """Rewrite the saved rows as walrus_mem wrote them before the vectors were read from
    the USearch file: no ``file_slot``, a copy of every slot's vector."""
    meta = json.loads((directory / f"{index_file_stem('ns')}.meta.json").read_text())
    rows = np.load(directory / meta["rows_file"])
    old = np.zeros(len(rows), index_module._ROWS_DTYPE_V1)
    for name in index_module._ROWS_DTYPE_V1.names or ():
        old[name] = rows[name]
    every = np.zeros((len(rows), DIM), np.int8)
    present = np.flatnonzero(rows["key"] >= 0)
    every[present] = idx.vectors[present]
    np.save(directory / meta["rows_file"], old)
    np.save(directory / meta["vectors_file"], every)


def test_rows_saved_by_the_earlier_version_open_without_reading_the_catalog(
    tmp_path: Path, cat: Catalog, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    keys = add(cat, "ns", 40)
    store = IndexStore(tmp_path / "index", cat)
    idx = store.get("ns", "m", DIM)
    truth = {k: kept(i) for i, k in enumerate(keys)}
    store.close()
    _write_v1_rows(tmp_path / "index", idx)
    with monkeypatch.context() as patched:
        patched.setattr(IndexStore, "_load_rows", lambda *a: pytest.fail("read the catalog"))
        store = IndexStore(tmp_path / "index", cat)
        idx = store.get("ns", "m", DIM)
        assert idx.rows_loaded
        assert_holds(idx, truth)
        assert idx.search(unit(7), 1)[0] == [keys[7]]
    more = add(cat, "ns", 1, start=100)
    store.refresh("ns")
    truth[more[0]] = kept(100)
    store.close()  # saved as this version saves: no copies of built memories
    assert saved_copies(tmp_path / "index").shape == (0, DIM)
    store = IndexStore(tmp_path / "index", cat)
    idx = store.get("ns", "m", DIM)
    assert idx.rows_loaded
    assert_holds(idx, truth)
    store.close()


@pytest.mark.parametrize("damage", ["slot-past-the-matrix", "pending-in-the-file",
                                    "copies-count"])
def test_rows_that_do_not_match_the_usearch_file_fall_back_to_the_catalog(
    tmp_path: Path, cat: Catalog, damage: str  # noqa: F811
) -> None:
    keys = add(cat, "ns", 30)
    store = IndexStore(tmp_path / "index", cat)
    store.get("ns", "m", DIM)
    store.close()
    meta = json.loads((tmp_path / "index" / f"{index_file_stem('ns')}.meta.json").read_text())
    path = tmp_path / "index" / meta["rows_file"]
    rows = np.load(path)
    if damage == "slot-past-the-matrix":
        rows["file_slot"][np.flatnonzero(rows["key"] >= 0)[0]] = 10_000
    elif damage == "pending-in-the-file":
        rows["norm"][np.flatnonzero(rows["key"] >= 0)[0]] = 0.0  # pending, yet in the file
    else:
        np.save(tmp_path / "index" / meta["vectors_file"], np.zeros((2, DIM), np.int8))
    np.save(path, rows)
    store = IndexStore(tmp_path / "index", cat)
    idx = store.get("ns", "m", DIM)
    assert not idx.rows_loaded
    assert_holds(idx, {k: kept(i) for i, k in enumerate(keys)})
    store.close()


def test_a_usearch_file_of_another_layout_keeps_the_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should a USearch release change its file layout, the parse refuses it (its parts do
    not add up to the file's size) and the vectors stay in the copies, saved as before."""
    v = vectors(5, 60)
    idx = NamespaceIndex("ns", tmp_path, "m", DIM)
    idx.upsert(list(range(50)), v[:50], [ATTRS] * 50)
    assert idx.save()  # read in place: the rows name slots of this file
    monkeypatch.setattr(index_module, "slot_keys", lambda path, dim: None)
    idx.upsert(list(range(50, 60)), v[50:], [ATTRS] * 10)
    idx.remove([0, 1])
    assert idx.save()  # replaces that file: its slots must not be named any more
    truth = {k: v[k] for k in range(2, 60)}
    assert np.array_equal(saved_copies(tmp_path), quantize(v[2:]))
    assert_holds(idx, truth)
    again = NamespaceIndex("ns", tmp_path, "m", DIM)
    assert again.load() and again.rows_loaded
    assert_holds(again, truth)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_slot_keys_and_matrix_read_the_file_as_usearch_does(tmp_path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    index = Index(ndim=24, metric="cos", dtype="i8")
    keys = rng.choice(10**12, 400, replace=False).astype(np.uint64)
    index.add(keys, quantize(vectors(seed, 400, 24)), threads=1)
    index.remove(keys[rng.random(400) < 0.3])  # freed slots, reused by the next add
    index.add(np.arange(5, 105, dtype=np.uint64), quantize(vectors(seed + 10, 100, 24)),
              threads=1)
    path = tmp_path / "x.usearch"
    index.save(str(path))
    slots, matrix = slot_keys(path, 24), vector_matrix(path, 24)
    assert slots is not None and matrix is not None and len(slots) == len(matrix)
    live = slots >= 0
    assert np.count_nonzero(live) == len(index)
    assert set(slots[live].tolist()) == set(np.asarray(index.keys).tolist())
    stored = np.asarray(index.get(slots[live].astype(np.uint64), dtype="i8"))
    assert np.array_equal(matrix[live], stored)
    assert vector_matrix(path, 25) is None  # another dimension: not this file's matrix
    path.write_bytes(path.read_bytes() + b"\0")  # parts no longer add up to the size
    assert slot_keys(path, 24) is None
    empty = tmp_path / "e.usearch"
    Index(ndim=24, metric="cos", dtype="i8").save(str(empty))
    assert slot_keys(empty, 24) is not None and len(slot_keys(empty, 24)) == 0


def _mappings_of(path: Path) -> int:
    return sum(line.rstrip().endswith(str(path)) for line in open("/proc/self/maps"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_the_usearch_file_is_mapped_once_for_its_graph_and_its_vectors(tmp_path: Path) -> None:
    """USearch views the file through our mapping, which the vector matrix reads too: a
    page that a search and a gather both touch is counted once in the process's memory
    (a second mapping of the file counted the vectors recalls read twice)."""
    v = vectors(6, 300)
    idx = NamespaceIndex("ns", tmp_path, "m", DIM)
    idx.upsert(list(range(300)), v, [ATTRS] * 300)
    assert idx.save()
    del idx
    gc.collect()
    again = NamespaceIndex("ns", tmp_path, "m", DIM)
    assert again.load() and again.viewed
    path = again.path.resolve()
    assert again.search(v[9], 1)[0] == [9]
    assert_holds(again, dict(enumerate(v)))
    assert _mappings_of(path) == 1
    gc.collect()
    assert again.search(v[10], 1)[0] == [10]  # the view's buffer outlives every gather
    again.upsert([1000], vectors(7, 1), [ATTRS])  # copied into memory: the view is gone
    gc.collect()
    assert not again.viewed and again.search(v[11], 1)[0] == [11]
    assert_holds(again, {**dict(enumerate(v)), 1000: vectors(7, 1)[0]})
    del again
    gc.collect()
    assert _mappings_of(path) == 0
