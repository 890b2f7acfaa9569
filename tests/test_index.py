"""USearch index store: catch-up from the change log, atomic saves, rebuild on corruption."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from walrus_mem._catalog.catalog import Catalog, vector_to_blob
from walrus_mem._recall.index import index_file_stem
from walrus_mem._recall.index_store import IndexStore
from walrus_mem.errors import ModelMismatch

DIM = 16


def unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def add(cat: Catalog, ns: str, n: int, start: int = 0) -> list[int]:
    keys = []
    with cat.write() as c:
        c.execute("INSERT OR IGNORE INTO namespaces (name, created_at) VALUES (?, 0)", (ns,))
        for i in range(start, start + n):
            cur = c.execute(
                "INSERT INTO memories (id, namespace, text, importance, created_at, updated_at, "
                "version, dedupe_hash, status, vector) VALUES (?, ?, ?, 0.5, 0, 0, 1, ?, "
                "'queued', ?)",
                (f"{ns}-{i}", ns, f"text {i}", f"h{i}", vector_to_blob(unit(i))),
            )
            key = int(cur.lastrowid)
            c.execute("INSERT INTO changes (namespace, key) VALUES (?, ?)", (ns, key))
            keys.append(key)
    return keys


def delete(cat: Catalog, ns: str, key: int) -> None:
    with cat.write() as c:
        c.execute("DELETE FROM memories WHERE key = ?", (key,))
        c.execute("INSERT INTO changes (namespace, key) VALUES (?, ?)", (ns, key))


@pytest.fixture
def cat(tmp_path: Path):
    catalog = Catalog(tmp_path / "c.sqlite3")
    yield catalog
    catalog.close()


def test_file_names_do_not_reveal_the_namespace(tmp_path: Path, cat: Catalog) -> None:
    store = IndexStore(tmp_path / "index", cat)
    add(cat, "secret-project", 3)
    store.get("secret-project", "m", DIM)
    store.close()
    names = " ".join(p.name for p in (tmp_path / "index").iterdir())
    assert "secret" not in names
    assert index_file_stem("secret-project") in names


def test_search_finds_exact_vector(tmp_path: Path, cat: Catalog) -> None:
    keys = add(cat, "ns", 50)
    store = IndexStore(tmp_path / "index", cat)
    idx = store.get("ns", "m", DIM)
    found, sims = idx.search(unit(7), 3)
    assert found[0] == keys[7]
    assert sims[0] == pytest.approx(1.0, abs=1e-2)
    store.close()


def test_catch_up_sees_other_writers_adds_and_deletes(tmp_path: Path, cat: Catalog) -> None:
    keys = add(cat, "ns", 10)
    store = IndexStore(tmp_path / "index", cat)
    idx = store.get("ns", "m", DIM)
    assert len(idx) == 10
    other = Catalog(tmp_path / "c.sqlite3")  # a second connection, as another process has
    try:
        new = add(other, "ns", 5, start=100)
        delete(other, "ns", keys[0])
    finally:
        other.close()
    idx = store.get("ns", "m", DIM)
    assert len(idx) == 14
    assert idx.search(unit(100), 1)[0] == [new[0]]
    assert keys[0] not in idx.search(unit(0), 14)[0]
    store.close()


def test_reopen_loads_saved_file_and_replays_unsaved_tail(tmp_path: Path, cat: Catalog) -> None:
    add(cat, "ns", 20)
    store = IndexStore(tmp_path / "index", cat)
    store.get("ns", "m", DIM)
    store.close()
    meta_path = tmp_path / "index" / f"{index_file_stem('ns')}.meta.json"
    meta = json.loads(meta_path.read_text())
    assert meta["count"] == 20 and meta["model_id"] == "m" and meta["dim"] == DIM
    more = add(cat, "ns", 3, start=50)  # written after the save (as if a crash lost it)
    store = IndexStore(tmp_path / "index", cat)
    idx = store.get("ns", "m", DIM)
    assert len(idx) == 23
    assert idx.search(unit(51), 1)[0] == [more[1]]
    store.close()


@pytest.mark.parametrize("damage", ["garbage", "truncate", "meta"])
def test_corrupt_index_file_is_rebuilt_with_a_warning(
    tmp_path: Path, cat: Catalog, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    add(cat, "ns", 30)
    store = IndexStore(tmp_path / "index", cat)
    store.get("ns", "m", DIM)
    store.close()
    path = tmp_path / "index" / f"{index_file_stem('ns')}.usearch"
    if damage == "garbage":
        path.write_bytes(b"\x00garbage" * 50)
    elif damage == "truncate":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:
        path.with_name(path.name.replace(".usearch", ".meta.json")).write_text("{not json")
    caplog.set_level(logging.WARNING, logger="walrus_mem._recall.index")
    store = IndexStore(tmp_path / "index", cat)
    idx = store.get("ns", "m", DIM)
    assert len(idx) == 30
    assert idx.search(unit(3), 1)[0] == [4]
    assert any("rebuild" in r.getMessage() for r in caplog.records)
    store.close()


def test_saved_index_for_another_model_is_rebuilt(tmp_path: Path, cat: Catalog) -> None:
    add(cat, "ns", 5)
    store = IndexStore(tmp_path / "index", cat)
    store.get("ns", "model-a", DIM)
    store.close()
    store = IndexStore(tmp_path / "index", cat)
    idx = store.get("ns", "model-b", DIM)
    assert len(idx) == 5 and idx.model_id == "model-b"
    with pytest.raises(ModelMismatch):
        store.get("ns", "model-c", DIM)
    store.close()


def test_pruned_change_log_forces_reload(tmp_path: Path, cat: Catalog) -> None:
    add(cat, "ns", 5)
    a = IndexStore(tmp_path / "index", cat, save_every=1)
    cat_b = Catalog(tmp_path / "c.sqlite3")  # process B has its own connection
    b = IndexStore(tmp_path / "index", cat_b, save_every=10**9)
    a.get("ns", "m", DIM)
    b.get("ns", "m", DIM)
    add(cat, "ns", 4, start=10)
    a.refresh("ns")  # own writes: applied, saved, and the log pruned past b's position
    assert cat.changes_floor("ns") > b.loaded("ns").applied_seq
    idx = b.get("ns", "m", DIM)
    assert len(idx) == 9
    a.close()
    b.close()
    cat_b.close()


def test_own_writes_need_refresh_other_connections_are_detected(
    tmp_path: Path, cat: Catalog
) -> None:
    add(cat, "ns", 3)
    store = IndexStore(tmp_path / "index", cat)
    assert len(store.get("ns", "m", DIM)) == 3
    add(cat, "ns", 1, start=10)  # same connection: data_version does not move
    assert len(store.get("ns", "m", DIM)) == 3
    store.refresh("ns")
    assert len(store.get("ns", "m", DIM)) == 4
    store.close()


def test_save_does_not_overwrite_a_newer_file(tmp_path: Path, cat: Catalog) -> None:
    add(cat, "ns", 5)
    old = IndexStore(tmp_path / "index", cat)
    old.get("ns", "m", DIM)
    new = IndexStore(tmp_path / "index", cat)
    add(cat, "ns", 5, start=20)
    new.get("ns", "m", DIM)
    new.save_all()
    new.loaded("ns").unsaved = 1
    old.loaded("ns").unsaved = 1
    assert old.loaded("ns").save() is False  # newer applied_seq on disk wins
    meta = json.loads((tmp_path / "index" / f"{index_file_stem('ns')}.meta.json").read_text())
    assert meta["count"] == 10
    new.close()
    old.close()


# -- the per-memory rows saved beside the index (reopen without reading the catalog) ------


def _rows_files(tmp_path: Path, kind: str = "rows") -> list[Path]:
    return sorted((tmp_path / "index").glob(f"*.{kind}.npy"))


def _state(idx) -> dict[int, tuple]:  # type: ignore[no-untyped-def]
    return {key: (idx.vectors[slot].tobytes(), float(idx.in_graph[slot]),
                  float(idx.created_at[slot]), float(idx.importance[slot]))
            for key, slot in idx.slots.items()}


def test_reopen_maps_the_saved_rows_instead_of_reading_the_catalog(
    tmp_path: Path, cat: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = add(cat, "ns", 40)
    store = IndexStore(tmp_path / "index", cat)
    before = _state(store.get("ns", "m", DIM))
    store.close()
    assert len(_rows_files(tmp_path)) == 1
    monkeypatch.setattr(IndexStore, "_load_rows", lambda *a: pytest.fail("read the catalog"))
    store = IndexStore(tmp_path / "index", cat)
    idx = store.get("ns", "m", DIM)
    assert idx.rows_loaded and _state(idx) == before
    assert idx.viewed and idx.search(unit(7), 1)[0] == [keys[7]]  # the graph is mapped
    # Writes after the reopen go to private pages: the mapped files are not changed in place.
    saved = _rows_files(tmp_path)[0].read_bytes()
    saved_vectors = _rows_files(tmp_path, "vectors")[0].read_bytes()
    graph = idx.path.read_bytes()
    delete(cat, "ns", keys[0])
    more = add(cat, "ns", 2, start=100)
    store.refresh("ns")  # same connection: data_version does not move
    idx = store.get("ns", "m", DIM)
    assert keys[0] not in idx.slots and set(more) <= set(idx.slots)
    assert idx.search(unit(101), 1)[0] == [more[1]]
    assert idx.similarities([more[0]], unit(100))[0] == pytest.approx(1.0, abs=1e-3)
    assert not idx.viewed  # copied into memory by the first write
    assert _rows_files(tmp_path)[0].read_bytes() == saved
    assert _rows_files(tmp_path, "vectors")[0].read_bytes() == saved_vectors
    assert idx.path.read_bytes() == graph
    store.close()  # saves new rows files and drops the old ones
    files = _rows_files(tmp_path)
    assert len(files) == 1 and files[0].read_bytes() != saved
    assert len(_rows_files(tmp_path, "vectors")) == 1
    store = IndexStore(tmp_path / "index", cat)
    idx = store.get("ns", "m", DIM)
    assert idx.rows_loaded and len(idx) == 41 and keys[0] not in idx.slots
    assert float(idx.vectors[~np.isin(np.arange(len(idx.keys)), list(idx.slots.values()))]
                 .astype(np.float32).__abs__().sum()) == 0.0  # forgotten vector not kept
    store.close()


@pytest.mark.parametrize("damage", ["missing", "garbage", "other-count", "bad-name",
                                    "vectors-missing", "vectors-shape"])
def test_damaged_rows_file_falls_back_to_the_catalog(
    tmp_path: Path, cat: Catalog, damage: str
) -> None:
    add(cat, "ns", 25)
    store = IndexStore(tmp_path / "index", cat)
    before = _state(store.get("ns", "m", DIM))
    store.close()
    rows = _rows_files(tmp_path)[0]
    vectors = _rows_files(tmp_path, "vectors")[0]
    meta_path = tmp_path / "index" / f"{index_file_stem('ns')}.meta.json"
    if damage == "missing":
        rows.unlink()
    elif damage == "garbage":
        rows.write_bytes(b"\x93NUMPY garbage" * 10)
    elif damage == "other-count":
        data = np.load(rows)
        data["key"][:3] = -1  # rows of another save: fewer memories than the index
        np.save(rows, data)
    elif damage == "vectors-missing":
        vectors.unlink()
    elif damage == "vectors-shape":
        np.save(vectors, np.load(vectors)[:, :-1])  # another dimension
    else:
        meta = json.loads(meta_path.read_text())
        meta["rows_file"] = "../../etc/passwd"
        meta_path.write_text(json.dumps(meta))
    store = IndexStore(tmp_path / "index", cat)
    idx = store.get("ns", "m", DIM)
    assert not idx.rows_loaded and _state(idx) == before
    assert idx.search(unit(3), 1)[0] == [4]
    store.close()  # writes the rows read from the catalog: the next open maps them
    store = IndexStore(tmp_path / "index", cat)
    idx = store.get("ns", "m", DIM)
    assert idx.rows_loaded and _state(idx) == before
    store.close()


def test_a_mapped_index_answers_exactly_as_the_one_it_was_saved_from(
    tmp_path: Path, cat: Catalog
) -> None:
    """The reopened index (graph view + mapped rows and vector copies) is the fast path of
    every recall; the index built in memory is the reference. Same keys, same scores."""
    keys = add(cat, "ns", 300)
    queries = [unit(1000 + i) for i in range(20)] + [unit(i) for i in (0, 150, 299)]
    store = IndexStore(tmp_path / "index", cat)
    built = store.get("ns", "m", DIM)
    assert not built.viewed
    want = [(built.search(q, 10), built.search_all(q), built.similarities(keys[::7], q))
            for q in queries]
    attrs = {k: (built.created_at[s], built.importance[s], built.expires_at[s].tobytes())
             for k, s in built.slots.items()}
    store.close()
    store = IndexStore(tmp_path / "index", cat)
    mapped = store.get("ns", "m", DIM)
    assert mapped.viewed and mapped.rows_loaded
    # every vector is read from the USearch file's matrix, in the mapping USearch views
    mapping = np.frombuffer(mapped.index.__dict__["_walrus_mem_mapping"], np.uint8)
    assert np.shares_memory(mapped._file_vectors, mapping)
    del mapping
    assert (mapped.file_slot[list(mapped.slots.values())] >= 0).all()
    got = [(mapped.search(q, 10), mapped.search_all(q), mapped.similarities(keys[::7], q))
           for q in queries]
    assert got == want
    assert {k: (mapped.created_at[s], mapped.importance[s], mapped.expires_at[s].tobytes())
            for k, s in mapped.slots.items()} == attrs
    store.close()


def test_every_build_of_a_batch_is_the_same_graph_and_reaches_every_memory(
    tmp_path: Path, cat: Catalog
) -> None:
    """USearch's concurrent add() strands nodes (stored, never found by a search) and makes
    every build a different graph (unum-cloud/USearch#735). Both build paths (one catch-up
    batch, the bulk rebuild) insert on one thread: the same memories give the same graph
    and each memory is among its own vector's nearest. With the old all-cores add this failed
    10 runs in 10 on 2 cores, mostly at the first build (and the calibration test flaked)."""
    rng = np.random.default_rng(0)
    dim, n = 384, 1000  # sentence-embedding-like: clusters of about 20, plenty of near ties
    centers = rng.standard_normal((n // 20, dim))
    vectors = centers[rng.integers(0, len(centers), n)] + 0.6 * rng.standard_normal((n, dim))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    keys = []
    with cat.write() as c:
        c.execute("INSERT INTO namespaces (name, created_at) VALUES ('ns', 0)")
        for i, vector in enumerate(vectors):
            cur = c.execute(
                "INSERT INTO memories (id, namespace, text, importance, created_at, updated_at, "
                "version, dedupe_hash, status, vector) VALUES (?, 'ns', ?, 0.5, 0, 0, 1, ?, "
                "'queued', ?)", (f"m{i}", f"text {i}", f"h{i}", vector_to_blob(vector)))
            keys.append(int(cur.lastrowid))
            c.execute("INSERT INTO changes (namespace, key) VALUES ('ns', ?)", (keys[-1],))
    answers = set()
    for build in range(10):
        store = IndexStore(tmp_path / f"index{build}", cat)
        idx = store.get("ns", "m", dim) if build % 2 else store.rebuild("ns", "m", dim)
        # get() builds in the background (index_builder.py), in batches: the same graph
        assert store.wait_built("ns", timeout=300)
        found = np.asarray(idx.index.search(vectors, 10).keys)
        stranded = [k for k, row in zip(keys, found.tolist(), strict=True) if k not in row]
        assert stranded == [], f"build {build}"
        answers.add(found.tobytes())
        store.close()
    assert len(answers) == 1
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 3_000), min_size=1, max_size=40)),
                min_size=1, max_size=12),
       st.lists(st.integers(-5, 3_100), max_size=60))
def test_find_agrees_with_the_key_dict_through_adds_drops_and_reloads(
    tmp_path: Path, steps: list[tuple[bool, list[int]]], probe: list[int]
) -> None:
    """recall's key -> slot table (dense keys) or dict (sparse ones) after any write order:
    keys below the table's base, beyond its room, dropped and written again."""
    from walrus_mem._recall.index import NamespaceIndex

    idx = NamespaceIndex("ns", tmp_path, "m", 4)
    vectors = np.ones((1, 4), dtype=np.float32)
    for adding, keys in steps:
        for key in keys:  # one key a call, as writes come
            if adding:
                idx.set_rows([key], vectors, [(1.0, 0.5, None)])
            else:
                idx.drop_rows([key])
        asked = keys + probe
        found, slots = idx.find(asked)
        assert found.tolist() == [key in idx.slots for key in asked]
        assert slots.tolist() == [idx.slots.get(key, -1) for key in asked]


def test_find_uses_the_dict_for_sparse_keys_and_the_table_for_dense_ones(tmp_path: Path) -> None:
    from walrus_mem._recall.index import NamespaceIndex

    idx = NamespaceIndex("ns", tmp_path, "m", 4)
    one = np.ones((1, 4), dtype=np.float32)
    idx.set_rows([1, 10_000_000], np.ones((2, 4), dtype=np.float32),
                 [(1.0, 0.5, None)] * 2)  # another namespace wrote millions in between
    assert idx.find([1, 10_000_000, 5])[0].tolist() == [True, True, False]
    assert idx._table is None
    for key in range(2, 40):
        idx.set_rows([key], one, [(1.0, 0.5, None)])
    idx.drop_rows([10_000_000])
    idx.clear_rows()
    idx.set_rows(list(range(100, 200)), np.ones((100, 4), dtype=np.float32),
                 [(1.0, 0.5, None)] * 100)
    found, slots = idx.find([99, 100, 150, 199, 200])
    assert idx._table is not None and found.tolist() == [False, True, True, True, False]
    assert slots[1:4].tolist() == [idx.slots[100], idx.slots[150], idx.slots[199]]


def test_exact_cosines_equal_usearch_search_similarities(tmp_path: Path) -> None:
    """A candidate scores the same whether USearch's search or the keyword side brought it
    in: the cosine of the int8 vectors is the one the search reports."""
    from walrus_mem._recall.index import NamespaceIndex

    rng = np.random.default_rng(3)
    idx = NamespaceIndex("ns", tmp_path, "m", 64)
    vectors = rng.standard_normal((300, 64)).astype(np.float32)
    idx.upsert(list(range(300)), vectors, [(1.0, 0.5, None)] * 300)
    for _ in range(20):
        query = rng.standard_normal(64).astype(np.float32)
        query /= np.linalg.norm(query)
        keys, sims = idx.search(query, 40)
        exact = idx.similarities_at(idx.slots_of(keys), query)
        # the same kernel on the same int8 vectors: equal to float rounding
        assert np.allclose(exact, sims, rtol=0, atol=1e-7)
        plain = (vectors[keys] @ query) / np.linalg.norm(vectors[keys], axis=1)
        # and it is the cosine, to int8 (both sides quantized; 64 dimensions)
        assert np.allclose(exact, plain, atol=1e-2)
    assert idx.similarities_at(idx.slots_of([]), query).shape == (0,)
