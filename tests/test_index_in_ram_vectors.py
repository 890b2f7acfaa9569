"""An index held in RAM reads its vectors from RAM, not from the mapped file (issue 28).

A process that writes copies the graph, with its int8 vectors, into memory
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
from walrus_mem._recall.index_vectors import lazy_zeros, quantize

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


def test_a_writer_with_dense_keys_keeps_no_key_dict(tmp_path: Path) -> None:
    """Slots are found in the key table (4 bytes a key) on writes as on recalls: the
    dict of every key (about 100 MB at 1M memories) is built only when asked for."""
    v = vectors(21, 400)
    idx = NamespaceIndex("ns", tmp_path, "m", DIM)
    idx.defer(list(range(100, 300)), v[:200], [ATTRS] * 200)  # pending: rows only
    idx.upsert(list(range(300, 400)), v[200:300], [ATTRS] * 100)
    idx.upsert([150, 301], v[301:303], [ATTRS] * 2)  # updates
    idx.remove([120, 121, 121, 999])  # a key twice, one never held
    idx.defer(list(range(400, 500)), v[303:403][:97].repeat(2, 0)[:100], [ATTRS] * 100)
    assert idx._slots is None
    truth = {k: v[k - 100] for k in range(100, 300)} | {k: v[k - 100] for k in range(300, 400)}
    truth |= {150: v[301], 301: v[302]}
    del truth[120], truth[121]
    extra = v[303:403][:97].repeat(2, 0)[:100]
    truth |= {400 + i: extra[i] for i in range(100)}
    assert idx.count() == len(truth) == len(idx)
    found, at = idx.find([150, 120, 999, 450])
    assert found.tolist() == [True, False, False, True]
    assert np.array_equal(idx.vectors[at[[0, 3]]], quantize(np.stack([truth[150], truth[450]])))
    sims = idx.similarities([301, 120, 450], truth[301])
    assert sims[0] == pytest.approx(1.0, abs=1e-3) and sims[1] == 0.0
    keys, _ = idx.search_all(truth[450])
    assert sorted(keys) == sorted(truth)
    assert idx._slots is None
    assert_holds(idx, truth)  # asks for the dict: built from the keys, and right
    idx.upsert([1000], v[:1], [ATTRS])  # kept in step once built
    idx.remove([100])
    assert idx.slots.get(1000) is not None and 100 not in idx.slots
    assert idx.count() == len(truth)


def _rss_kb() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_reading_rows_never_written_in_the_copies_takes_no_memory() -> None:
    """The copies are addressed by slot but hold few rows; a recall whose candidates mix
    saved memories and copied ones gathers from them. A shared anonymous mapping gave
    every page read a real page (117 MB of copies at 1M memories after 1,200 recalls,
    for 29 MB written); a private one reads untouched pages as the zero page."""
    copies = lazy_zeros(100_000, 384)  # 73 MB of address space
    before = _rss_kb()
    # reductions over the strided view: no temporary array, whose freed pages the heap
    # may keep (a CI worker that ran other tests first kept the 37 MB of np.abs's copy)
    assert float(copies[::2].max()) == 0.0 and float(copies[::2].min()) == 0.0
    copies[7] = 1.0
    assert float(copies[7].min()) == 1.0 and float(copies[8].max()) == 0.0
    assert _rss_kb() - before < 20_000  # every page was read: a shared mapping adds 73 MB
