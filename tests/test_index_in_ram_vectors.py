"""An index held in RAM reads its vectors from RAM, not from the mapped file (issue 28).

A process that writes copies the graph, with its float16 vectors, into memory
(``NamespaceIndex._writable``). Built memories' vectors used to be read from the saved
USearch file's matrix even then, so the file's pages that recalls touched (and the
kernel's readahead around them) were counted in the process's memory a second time:
2.56 GB at 1M memories in the importing process against 1.2 GB in one that only
recalls. Once the graph is in RAM, the vectors come from it, and the file is not mapped.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.test_index import DIM, add, cat  # noqa: F401  (cat: a fixture)
from tests.test_index_file_vectors import ATTRS, assert_holds, vectors
from walrus_mem._catalog.catalog import Catalog
from walrus_mem._recall import index_store
from walrus_mem._recall.index import NamespaceIndex
from walrus_mem._recall.index_store import IndexStore

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads /proc/self/maps")


def _mappings_of(path: Path) -> int:
    gc.collect()
    return sum(line.rstrip().endswith(str(path)) for line in open("/proc/self/maps"))


def _answers(idx: NamespaceIndex, queries: np.ndarray) -> list[tuple[list[int], list[float]]]:
    return [idx.search(q, 10) for q in queries]


def test_a_written_index_reads_its_vectors_from_ram_not_the_file(tmp_path: Path) -> None:
    v = vectors(11, 300)
    first = NamespaceIndex("ns", tmp_path, "m", DIM)
    first.upsert(list(range(300)), v, [ATTRS] * 300)
    assert first.save()
    path = first.path.resolve()
    assert _mappings_of(path) == 0  # saved from RAM: the new file is not mapped either
    assert_holds(first, dict(enumerate(v)))
    del first

    viewed = NamespaceIndex("ns", tmp_path, "m", DIM)
    assert viewed.load() and viewed.viewed
    queries = vectors(12, 8)
    before = _answers(viewed, queries)
    slots = viewed.find(list(range(0, 300, 7)))[1]
    sims_before = viewed.similarities_at(slots, queries[0])
    assert _mappings_of(path) == 1  # a view: the file is mapped, and read

    new = vectors(13, 1)
    viewed.upsert([1000], new, [ATTRS])  # the graph is copied into RAM
    assert not viewed.viewed
    assert _mappings_of(path) == 0
    truth = {**dict(enumerate(v)), 1000: new[0]}
    assert_holds(viewed, truth)
    assert np.array_equal(viewed.similarities_at(slots, queries[0]), sims_before)
    for (keys, sims), (was_keys, was_sims) in zip(_answers(viewed, queries), before,
                                                  strict=True):
        kept = [(k, s) for k, s in zip(keys, sims, strict=True) if k != 1000]
        assert kept == list(zip(was_keys, was_sims, strict=True))[:len(kept)]

    viewed.remove([5, 6])  # freed slots; the rest still read from RAM
    del truth[5], truth[6]
    assert_holds(viewed, truth)
    assert viewed.save()
    assert _mappings_of(path) == 0
    assert_holds(viewed, truth)

    again = NamespaceIndex("ns", tmp_path, "m", DIM)  # a fresh reader maps the new file
    assert again.load() and again.viewed
    assert_holds(again, truth)
    assert _mappings_of(path) == 1


def test_the_first_use_after_a_large_catch_up_returns_the_freed_heap(
    tmp_path: Path, cat: Catalog, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    """An import's batches leave their freed buffers in the C heap (105 MB at 200k
    memories in the importing process): the index's next use after it applied a large
    batch of changes hands them back, once; small writes do not pay for it."""
    trims: list[int] = []
    monkeypatch.setattr(index_store, "release_freed_heap", lambda: trims.append(1))
    store = IndexStore(tmp_path / "index", cat)
    store.auto_build = False
    add(cat, "ns", 20)
    store.get("ns", "m", DIM)
    store.refresh("ns")
    add(cat, "ns", 5, start=20)
    store.refresh("ns")
    assert store.current("ns", "m", DIM) is not None
    assert trims == []
    add(cat, "ns", index_store.TRIM_AFTER, start=25)
    store.refresh("ns", build=True)
    assert trims == []  # its own buffers are freed once the write returns
    assert store.current("ns", "m", DIM) is not None  # a recall's first look
    assert trims == [1]
    store.get("ns", "m", DIM)
    store.refresh("ns")
    assert trims == [1]
    store.close()


def test_release_freed_heap_runs_where_it_can() -> None:
    index_store.release_freed_heap()  # glibc's malloc_trim, or nothing
