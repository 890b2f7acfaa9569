"""The index is built as memories arrive (issue 28 item 3): a write opens a namespace's
index once enough changes wait for it, so the first recall after an import finds it
built; a loaded index is saved at geometric intervals, not every few writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers_memory import MASTER_HEX, make_settings
from tests.test_index import DIM, add, unit
from walrus_mem._catalog.catalog import Catalog
from walrus_mem._recall import index_store
from walrus_mem._recall.index_store import IndexStore
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder


@pytest.fixture
def cat(tmp_path: Path):
    catalog = Catalog(tmp_path / "c.sqlite3")
    yield catalog
    catalog.close()


def _model(cat: Catalog, ns: str) -> None:
    with cat.write() as c:
        c.execute("UPDATE namespaces SET model_id = 'm', dim = ? WHERE name = ?", (DIM, ns))


def test_refresh_opens_the_index_once_enough_changes_wait(
        tmp_path: Path, cat: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_store, "OPEN_AFTER", 10)
    add(cat, "ns", 9)
    _model(cat, "ns")
    store = IndexStore(tmp_path / "index", cat)
    store.refresh("ns", build=True)
    assert store.loaded("ns") is None  # a small write leaves the index alone
    keys = add(cat, "ns", 1, start=9)
    store.refresh("ns")
    assert store.loaded("ns") is None  # not a write (a restore, a pull): left to the recall
    store.refresh("ns", build=True)
    idx = store.loaded("ns")
    assert idx is not None and len(idx) == 10  # opened and caught up: nothing left to build
    assert idx.search(unit(9), 1)[0] == keys
    more = add(cat, "ns", 2, start=20)
    store.refresh("ns")  # loaded: applied at once
    assert len(idx) == 12 and idx.search(unit(21), 1)[0] == [more[1]]
    store.close()


def test_refresh_without_a_model_leaves_the_namespace_alone(
        tmp_path: Path, cat: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_store, "OPEN_AFTER", 2)
    add(cat, "ns", 5)  # model_id not adopted yet
    store = IndexStore(tmp_path / "index", cat)
    store.refresh("ns", build=True)
    assert store.loaded("ns") is None
    store.close()


def test_saves_come_at_geometric_intervals(tmp_path: Path, cat: Catalog,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    store = IndexStore(tmp_path / "index", cat, save_every=4)
    saves: list[int] = []
    real = store._save

    def counted(idx) -> None:
        saves.append(len(idx))
        real(idx)

    monkeypatch.setattr(store, "_save", counted)
    add(cat, "ns", 1)
    store.get("ns", "m", DIM)
    saves.clear()
    for i in range(400):
        add(cat, "ns", 1, start=100 + i)
        store.refresh("ns")
    # save_every (4) alone would save 100 times; len // 8 between saves: about
    # log(400 / 32) / log(9 / 8) + 32 / 4 of them
    assert 10 < len(saves) < 40
    assert all(b - a >= max(4, a // 8) for a, b in zip(saves, saves[1:], strict=False))
    assert store.save_threshold(10**9) == index_store.SAVE_CAP
    store.close()


def test_an_import_leaves_the_index_built_for_the_first_recall(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_store, "OPEN_AFTER", 50)
    mem = Memory(make_settings(tmp_path / "data"), embedder=HashEmbedder(32),
                 master_key=MASTER_HEX)
    try:
        texts = [f"imported fact {i} about w{i % 13}" for i in range(120)]
        for start in range(0, 120, 40):
            mem.remember_many(texts[start:start + 40], namespace="imp")
        idx = mem._indexes.loaded("imp")
        assert idx is not None and len(idx) == 120  # built as the batches arrived

        def no_rebuild(*args: object) -> None:
            raise AssertionError("the first recall rebuilt the index")

        monkeypatch.setattr(mem._indexes, "_rebuild", no_rebuild)
        hits = mem.recall(texts[77], namespace="imp", k=1)
        assert hits and hits[0].text == texts[77]
        vec = np.asarray(mem.embedder.embed([texts[5]])[0], dtype=np.float32)
        assert idx.search(vec, 1)[0]  # answers from the graph built during the import
    finally:
        mem.close()
