"""Per-namespace USearch indexes, kept in step with the catalog.

One HNSW index per namespace (metric cos, int8 storage: index_vectors.quantize), keyed by the
catalog's ``memories.key``. Files live in ``<data_dir>/index/``, named by a
hash of the namespace (``<hash>.usearch`` + ``<hash>.meta.json`` + ``.lock``,
and the per-memory ``<hash>.<token>.rows.npy`` / ``.vectors.npy`` the metadata
names) so a directory listing or a backup does not reveal namespace names.

The catalog is the source of truth; an index file is only a cache of it:

* every catalog write appends the touched keys to the ``changes`` log;
  :meth:`IndexStore.get` (index_store.py) replays the log past the index's ``applied_seq``
  (upsert keys whose row exists, remove the others), so writes of other
  processes become visible before each recall, incrementally;
* files are saved atomically (temp file + ``os.replace``) under a file lock,
  on close / sync / every ``save_every`` applied changes, never on every write
  (that would be O(n) per write). A crash loses at most the unsaved tail,
  which the change log replays on the next open;
* each save records the BLAKE2b-256 digest of the USearch file in its
  metadata. USearch trusts the graph's links: a file with damaged links but
  an intact header, keys and vectors passes every cheap check and then
  crashes the process (SIGSEGV) inside a search. An open therefore verifies
  the digest before USearch reads the file, unless the file's
  (size, mtime_ns, inode) and digest are exactly those this data dir last
  verified or saved (catalog ``meta`` key ``index_verified:<stem>``): hashing
  0.9 GB at every reopen of a 1M index would cost seconds
  (docs/architecture.md, "Index file integrity");
* on open, a missing, unreadable or inconsistent file (wrong model, digest
  mismatch, count not matching the catalog after catch-up, change log
  already pruned past it) is rebuilt from the vectors stored in the catalog,
  with a warning log;
* vectors are inserted on one thread (:func:`_add`): USearch's concurrent
  insertion can leave a stored node that no search reaches, and makes the
  graph, so recall, differ from one build of the same memories to the next;
* a memory can be held in the rows (vector copy and attributes) before it is
  in the graph: *pending*, the background builder's queue (index_builder.py).
  A search answers from the graph plus an exact scan of the pending vectors,
  merged by score (:meth:`NamespaceIndex.search`), so a restore or pull of
  many memories never makes a recall wait on the HNSW build. The rows file
  marks them (``norm`` 0), so a process killed mid-build resumes where the
  last save left it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from itertools import repeat
from pathlib import Path
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt
from filelock import FileLock, Timeout

from ..errors import LocalStoreError
from .index_upgrade import F16_FORMAT, upgrade_index
from .index_vectors import VECTOR_DTYPE as _VECTOR_DTYPE
from .index_vectors import SlotVectors, file_slots, graph_vectors, lazy_zeros, quantize
from .native import before_usearch
from .usearch_file import file_digest, file_stamp, map_file, slot_keys, vector_matrix

before_usearch()  # onnxruntime would crash once USearch is loaded otherwise (native.py)
import numkong as nk  # noqa: E402  (USearch's own kernels; loaded by usearch.index already)
from usearch.index import Index  # noqa: E402

__all__ = ["NamespaceIndex", "file_digest", "index_file_stem"]

log = logging.getLogger(__name__)

META_FORMAT: Final = 3  # 3: int8 vectors; 2: float16 (upgraded at open); 1: no digest
LOCK_TIMEOUT: Final = 60.0
VERIFIED_KEY: Final = "index_verified:"  # + file stem: catalog meta of the last verified file
_LOAD_ATTEMPTS: Final = 3
_MAPPING: Final = "_walrus_mem_mapping"  # on a viewed Index: the mapping its view reads


def index_file_stem(namespace: str) -> str:
    """File name stem for a namespace's index: a hash, not the name itself."""
    return hashlib.blake2b(namespace.encode(), digest_size=12, person=b"walrusmem.idx").hexdigest()


def _new_index(dim: int) -> Index:
    return Index(ndim=dim, metric="cos", dtype="i8")


def _add(index: Index, keys: npt.NDArray[np.uint64], vectors: npt.ArrayLike) -> None:
    """Insert on one thread. USearch's default (every core) races (unum-cloud/USearch#735,
    seen with 2.26): a node can end up stored yet unreachable, never returned by a search,
    and which one varies from build to build. On 2 cores, 92 of 300 builds of the same 95
    vectors stranded one (a fact the calibration test then missed); on one thread 0 of
    300, the same graph every time. A bulk rebuild costs more wall time: 100k vectors in
    100-115 s instead of 60-85 s (2 cores, load about 2). Vectors go in as int8 (quantize)."""
    index.add(keys, quantize(vectors), threads=1)


_ROWS_V1: Final = [("key", "<i8"), ("created_at", "<f8"), ("importance", "<f8"),
                   ("expires_at", "<f8"), ("norm", "<f4")]
_ROWS_DTYPE_V1: Final = np.dtype(_ROWS_V1)  # rows files whose vector copies hold every row
_ROWS_DTYPE: Final = np.dtype([*_ROWS_V1, ("file_slot", "<i4")])
# ``norm`` once held the vector's norm (never 0: a zero vector is refused); now 0 marks a
# memory held in the rows but not yet in the graph (pending), anything else one in it.
# Rows files of earlier versions hold no 0 there: every memory in them is in the graph.
# ``file_slot``: the row's slot in the saved USearch file, whose vector matrix holds its
# vector (usearch_file.py); -1: the vector is in the copies (pending, or written since).


def _empty_rows(count: int) -> npt.NDArray[np.void]:
    rows = np.zeros(count, _ROWS_DTYPE)
    rows["key"] = -1
    rows["norm"] = 1.0
    rows["expires_at"] = np.nan
    rows["file_slot"] = -1
    return rows


class NamespaceIndex:
    """The in-memory USearch index of one namespace plus what it has applied.

    Beside the HNSW graph it keeps, per memory, the attributes ranking needs
    (created_at, importance, expires_at) in numpy arrays addressed by slot:
    recall gathers them for a hundred candidates with one indexing operation
    instead of reading catalog rows (40 bytes per memory, read whole on open).
    The int8 vectors (the cosines of keyword-only candidates without
    USearch's per-key lookups) are gathered by slot too (:meth:`vectors_at`),
    from one of two places: a memory in the last saved USearch file
    (``file_slot``, found when the file is saved: usearch_file.py) is read from
    that file's vector matrix, mapped read-only, while the graph is a view of
    the file, and from the graph in RAM once a write copied it there; a memory
    not in it (pending, or written since that save) from the *copies*, an
    array that holds only those rows and is saved as its own small file. So
    the index directory keeps a built memory's vector once, and a process holds
    only the copies written since its last save in RAM.

    A saved graph is opened as a read-only memory map of its file (USearch's
    ``view``): nothing is read until searches touch it, and a process that only
    recalls never holds the graph in RAM. The first write copies it into memory
    (:meth:`_writable`) and unmaps the file: a process that writes holds the
    graph and its vectors once, in RAM, not the file's pages beside them.
    """

    _slots: dict[int, int] | None

    def __init__(self, namespace: str, directory: Path, model_id: str, dim: int) -> None:
        self.namespace = namespace
        self.model_id = model_id
        self.dim = dim
        stem = index_file_stem(namespace)
        self.path = directory / f"{stem}.usearch"
        self.meta_path = directory / f"{stem}.meta.json"
        self.lock_path = directory / f"{stem}.lock"
        self.index = _new_index(dim)
        self.viewed = False  # self.index maps the saved file read-only
        self.applied_seq = 0
        self.unsaved = 0
        self.rows_loaded = False
        # {"stamp", "blake2b"} of the file as last verified or saved by this object
        self.verified: dict[str, Any] | None = None
        self.damage: str | None = None  # why the last load refused the file as damaged
        self.built_unsaved = 0  # pending memories moved into the graph since the last save
        self.clear_rows()

    def __len__(self) -> int:
        """Memories held: in the graph, plus pending (in the rows, not yet in the graph)."""
        return len(self.index) + self.pending

    # -- per-memory rows beside the graph ---------------------------------------------

    @property
    def slots(self) -> dict[int, int]:
        """Catalog key -> slot in the arrays below. Built from the rows' keys when asked
        for (then kept in step with writes): reads and writes find slots with
        :meth:`find`, in the key table while the keys are dense, so neither a process
        that only recalls (0.1-0.2 s at 1M memories on open) nor one that writes (about
        100 MB at 1M) pays for it."""
        if self._slots is None:
            present = np.flatnonzero(self.keys >= 0)
            self._slots = dict(zip(self.keys[present].tolist(), present.tolist(), strict=True))
        return self._slots

    def count(self) -> int:
        """How many memories the rows hold (without building :attr:`slots`)."""
        return self._count

    def clear_rows(self) -> None:
        self.pending = 0
        self._pending_cache: npt.NDArray[np.intp] | None = None
        self._slots = None
        self._count = 0
        self._free: list[int] = []
        self._forget_table()
        self._file_vectors: npt.NDArray[np.int8] = np.zeros((0, self.dim), _VECTOR_DTYPE)
        self._bind(_empty_rows(0), np.zeros((0, self.dim), _VECTOR_DTYPE))

    def _bind(self, rows: npt.NDArray[np.void], copies: npt.NDArray[np.int8]) -> None:
        """Use ``rows`` (one record per slot) and ``copies`` (one vector per slot, stored
        where ``file_slot`` is -1).

        One structured array holds every attribute so that it is saved as one
        file and reopened as one memory map; the vector copies are a second
        file, so that reading the attributes on open touches none of them.
        """
        self.rows = rows
        self.keys: npt.NDArray[np.int64] = rows["key"]  # -1: free slot
        self._copies: npt.NDArray[np.int8] = copies
        self.file_slot: npt.NDArray[np.int32] = rows["file_slot"]  # -1: in the copies
        # 0: pending (not in the graph yet). The field once held norms (the exact cosines
        # are NumKong's now, which normalise); it keeps saved rows files' layout.
        self.in_graph: npt.NDArray[np.float32] = rows["norm"]
        self.created_at: npt.NDArray[np.float64] = rows["created_at"]
        self.importance: npt.NDArray[np.float64] = rows["importance"]
        self.expires_at: npt.NDArray[np.float64] = rows["expires_at"]  # NaN: never expires

    def reserve(self, count: int) -> None:
        """Make room for ``count`` memories in all (saves regrowing while loading)."""
        self._grow(count, exact=True)

    def _grow(self, needed: int, *, exact: bool = False) -> None:
        size = len(self.rows)
        if needed <= size:
            return
        new = needed if exact else max(needed, 2 * size, 64)
        rows = _empty_rows(new)
        rows[:size] = self.rows
        copies = lazy_zeros(new, self.dim)
        held = self._copied()
        copies[held] = self._copies[held]  # only those: the others' pages stay unmapped
        self._bind(rows, copies)
        self._free.extend(range(new - 1, size - 1, -1))  # lowest slot popped first

    def set_rows(
        self,
        keys: list[int],
        vectors: npt.ArrayLike | None,
        attrs: list[tuple[float, float, float | None]],
        *,
        pending: bool = False,
    ) -> None:
        """Record vectors (None: keep the stored ones) and attributes of ``keys``;
        ``pending``: they are not in the graph (else they are)."""
        once = list(dict.fromkeys(keys))
        found, at = self.find(once)
        if not found.all():
            new = [key for key, held in zip(once, found.tolist(), strict=True) if not held]
            self._grow(self._count + len(new))
            fresh = [self._free.pop() for _ in new]
            at[~found] = fresh
            self._count += len(new)
            if self._slots is not None:
                self._slots.update(zip(new, fresh, strict=True))
            self._table_add(new, fresh)
        if len(once) < len(keys):  # a key twice: each place gets its slot
            of = dict(zip(once, at.tolist(), strict=True))
            at = np.fromiter(map(of.__getitem__, keys), np.intp, len(keys))
        unique = np.unique(at)
        was = int(np.count_nonzero((self.in_graph[unique] == 0) & (self.keys[unique] >= 0)))
        self.keys[at] = keys
        self.in_graph[at] = 0.0 if pending else 1.0
        self.pending += (len(unique) if pending else 0) - was
        self._pending_cache = None
        if vectors is not None:
            self._copies[at] = quantize(vectors)
            self.file_slot[at] = -1  # the saved file's row is the old vector, if any
        self.created_at[at] = [a[0] for a in attrs]
        self.importance[at] = [a[1] for a in attrs]
        self.expires_at[at] = [np.nan if a[2] is None else a[2] for a in attrs]

    def drop_rows(self, keys: list[int]) -> None:
        found, at = self.find(keys)
        for key, held, slot in zip(keys, found.tolist(), at.tolist(), strict=True):
            if held and self.keys[slot] == key:  # (not dropped already: a key twice)
                if self._slots is not None:
                    del self._slots[key]
                self._count -= 1
                if self.file_slot[slot] < 0:
                    self._copies[slot] = 0  # a forgotten memory's vector does not linger
                self.file_slot[slot] = -1
                if self.in_graph[slot] == 0:
                    self.pending -= 1
                    self.in_graph[slot] = 1.0
                    self._pending_cache = None
                self.keys[slot] = -1
                self._free.append(slot)
                if self._table is not None and 0 <= key - self._table_base < len(self._table):
                    self._table[key - self._table_base] = -1

    # -- the vectors: the saved file's matrix, or the copies ------------------------------

    @property
    def vectors(self) -> SlotVectors:
        """``vectors[slots]``: the int8 vectors at ``slots`` (:meth:`vectors_at`)."""
        return SlotVectors(self.vectors_at, len(self.keys))

    def vectors_at(self, slots: npt.NDArray[np.intp]) -> npt.NDArray[np.int8]:
        """The int8 vectors at ``slots``: those in the saved file (``file_slot``) from
        the file's matrix while the graph is a view of that file, from the graph in RAM
        once a write copied it there (:meth:`_writable`); the others from the copies.
        One gather when all are in the file (a recall's candidates, once saved)."""
        at = self.file_slot[slots]
        if len(at) and int(at.min()) >= 0:
            return self._saved_vectors(slots, at)
        out = self._copies[slots]
        saved = at >= 0
        if saved.any():
            out[saved] = self._saved_vectors(slots[saved], at[saved])
        return out

    def _saved_vectors(self, slots: npt.NDArray[np.intp],
                       at: npt.NDArray[np.int32]) -> npt.NDArray[np.int8]:
        """The vectors of built memories held in the saved file (``at``: their file slots).

        A viewed graph reads them from the file's matrix (the mapping the view reads,
        counted once). A graph in RAM holds every one of them itself, unchanged since
        that save (a new vector goes to the copies and clears ``file_slot``): reading
        the file then counted its pages a second time in the process's memory (2.56 GB
        at 1M memories in the importing process, issue 28), so they come from USearch,
        by key (about 25 µs per 100 keys against 4 µs for the matrix gather)."""
        if self.viewed:
            return self._file_vectors[at]
        return graph_vectors(self.index, self.keys[slots], self.dim)

    def _copied(self) -> npt.NDArray[np.intp]:
        """Slots whose vector is in the copies: pending, or written since the last save."""
        return np.flatnonzero((self.keys >= 0) & (self.file_slot < 0))

    def _adopt_file(self, path: Path) -> None:
        """Read the vectors of the memories the just-saved USearch file holds from it, and
        keep copies of the others only. A file whose layout is not the one usearch_file.py
        reads changes nothing: every vector stays in the copies."""
        try:
            file_keys, matrix = slot_keys(path, self.dim), vector_matrix(path, self.dim)
        except (OSError, ValueError):
            file_keys = matrix = None
        if file_keys is None or matrix is None or len(file_keys) != len(matrix):
            log.warning("index file %s: its vectors cannot be read in place (another "
                        "USearch layout?); keeping copies", self.path.name)
            # every vector into the copies: the rows saved next must not name slots of
            # the file this one replaces
            file_slot = np.full(len(self.keys), -1, dtype=np.int32)
            matrix = np.zeros((0, self.dim), _VECTOR_DTYPE)
        else:
            built = (self.keys >= 0) & (self.in_graph != 0)
            file_slot = file_slots(self.keys, built, file_keys)
        held = np.flatnonzero((self.keys >= 0) & (file_slot < 0))
        copies = lazy_zeros(len(self.keys), self.dim)
        copies[held] = self.vectors_at(held)  # before the switch: from where they are now
        self.file_slot[:] = file_slot
        if not self.viewed:  # the graph in RAM holds them: the new file is not mapped
            matrix = np.zeros((0, self.dim), _VECTOR_DTYPE)
        self._copies, self._file_vectors = copies, matrix

    def slots_of(self, keys: list[int]) -> npt.NDArray[np.intp]:
        """Slots of ``keys``; every key must be present (see :meth:`find`)."""
        found, at = self.find(keys)
        if not found.all():
            raise KeyError(keys[int(np.flatnonzero(~found)[0])])
        return at

    # -- key -> slot table (recall's lookups) -------------------------------------------
    #
    # Recall looks up ~150 candidate keys. In the dict each costs two cache misses (the
    # entry and the int object it compares): ~0.5 us apiece on a 100k namespace, ~0.1 ms a
    # recall. A table indexed by key - base (int32, 4 bytes a key) costs one numpy gather.
    # Keys are catalog keys, allocated in write order across namespaces; the table is
    # kept while they are dense enough (span <= 4 x count + 64k), else the dict answers.

    def _forget_table(self) -> None:
        self._table: npt.NDArray[np.int32] | None = None
        self._table_base = 0
        self._table_stale = True
        self._sparse_at = 0  # key count when the keys were last found too sparse

    def _table_add(self, new: list[int], slots: list[int]) -> None:
        """Enter the new keys' slots, or mark the table for a rebuild when out of range
        (from the rows' keys: the caller writes them before the next lookup)."""
        table = self._table
        if table is None:
            # sparse keys are looked at again once the count doubled: not at every write
            self._table_stale |= self._count > 2 * self._sparse_at
            return
        at = np.asarray(new, dtype=np.int64) - self._table_base
        if int(at.min()) < 0 or int(at.max()) >= len(table):
            self._forget_table()  # rebuilt, with headroom, at the next lookup
            return
        table[at] = slots

    def _key_table(self) -> npt.NDArray[np.int32] | None:
        if self._table_stale:
            self._table_stale = False
            present = np.flatnonzero(self.keys >= 0)
            if not len(present) or len(present) >= 2**31:
                return None
            keys = self.keys[present]
            base, span = int(keys.min()), int(keys.max() - keys.min()) + 1
            if span > 4 * len(keys) + 65_536:
                self._sparse_at = len(keys)
                return None  # sparse (namespaces written interleaved): the dict answers
            table = np.full(span + span // 4 + 1024, -1, dtype=np.int32)  # room for appends
            table[keys - base] = present
            self._table, self._table_base = table, base
        return self._table

    def find(self, keys: Sequence[int] | npt.NDArray[np.int64]
             ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.intp]]:
        """Which of ``keys`` are in the index, and their slots (-1 where absent)."""
        if not self._count:
            return np.zeros(len(keys), dtype=bool), np.full(len(keys), -1, dtype=np.intp)
        table = self._key_table()
        if table is None:
            slots = np.fromiter(map(self.slots.get, keys, repeat(-1)), np.intp, len(keys))
            return slots >= 0, slots
        at = np.asarray(keys, dtype=np.int64) - self._table_base
        if not len(at) or (int(at.min()) >= 0 and int(at.max()) < len(table)):
            found = table[at]
        else:
            inside = (at >= 0) & (at < len(table))
            found = np.where(inside, table[np.where(inside, at, 0)], -1)
        return found >= 0, found.astype(np.intp)

    # -- search -----------------------------------------------------------------------

    def search(self, vector: npt.NDArray[np.float32], count: int) -> tuple[list[int], list[float]]:
        """Top ``count`` keys by cosine similarity (1 - cosine distance): the graph's, and
        while memories are pending (not in the graph yet), the best of an exact scan of
        their vector copies merged in by score. Both score with the same kernel on the
        same int8 vectors, so the merged answer is the one the built graph gives."""
        if count <= 0 or len(self) == 0:
            return [], []
        if len(self.index):
            matches: Any = self.index.search(quantize(vector), count)
            if not self.pending:
                keys: list[int] = matches.keys.tolist()
                sims: list[float] = (1.0 - matches.distances.astype(np.float64)).tolist()
                return keys, sims
            graph_keys = np.asarray(matches.keys, dtype=np.int64)
            graph_sims = 1.0 - np.asarray(matches.distances, dtype=np.float64)
        else:
            graph_keys, graph_sims = np.zeros(0, np.int64), np.zeros(0)
        slots = self.pending_slots()
        exact = self.similarities_at(slots, vector)
        if len(exact) > count:
            best = np.argpartition(-exact, count - 1)[:count]
            slots, exact = slots[best], exact[best]
        all_keys = np.concatenate([graph_keys, self.keys[slots]])
        all_sims = np.concatenate([graph_sims, exact])
        order = np.lexsort((all_keys, -all_sims))[:count]  # by score, ties by key
        return all_keys[order].tolist(), all_sims[order].tolist()

    # -- pending memories: in the rows, not yet in the graph (index_builder.py) ----------

    def pending_slots(self) -> npt.NDArray[np.intp]:
        """Slots of the pending memories, in key order (the order the builder takes)."""
        if self._pending_cache is None:
            slots = np.flatnonzero((self.in_graph == 0) & (self.keys >= 0))
            self._pending_cache = slots[np.argsort(self.keys[slots], kind="stable")]
        return self._pending_cache

    def defer(
        self,
        keys: list[int],
        vectors: npt.ArrayLike,
        attrs: list[tuple[float, float, float | None]],
    ) -> None:
        """Hold ``keys`` with their vectors and attributes, pending: searched exactly until
        :meth:`build_step` moves them into the graph (a restore or pull of many memories
        costs no HNSW insertion)."""
        if not keys:
            return
        arr = np.asarray(keys, dtype=np.uint64)
        if len(self.index):
            present = np.asarray(self.index.contains(arr), dtype=bool).reshape(-1)
            if present.any():  # an updated vector: the graph's copy is stale
                self._writable()
                self.index.remove(arr[present])
        self.set_rows(keys, vectors, attrs, pending=True)

    def build_step(self, limit: int) -> int:
        """Move up to ``limit`` pending memories (lowest keys first, as a rebuild from the
        catalog inserts them) into the graph; how many moved."""
        slots = self.pending_slots()[:max(0, limit)]
        if not len(slots):
            return 0
        self._writable()
        keys = self.keys[slots].astype(np.uint64)
        _add(self.index, keys, self.vectors_at(slots))
        self.in_graph[slots] = 1.0
        self.pending -= len(slots)
        self.built_unsaved += len(slots)
        cache = self._pending_cache
        self._pending_cache = None if cache is None else cache[len(slots):]
        return len(slots)

    def search_all(self, vector: npt.NDArray[np.float32]) -> tuple[list[int], list[float]]:
        """Every key, best first: USearch's answer completed with what its beam missed.

        For a pool as large as the namespace: HNSW's beam need not reach every
        node, and a filtered recall that widened to the whole namespace must.
        Keys USearch returns keep its similarity (as in :meth:`search`); the
        others get the exact cosine of their vector copies.
        """
        keys, sims = self.search(vector, len(self))
        if len(keys) >= len(self):
            return keys, sims
        found = set(keys)
        missing = [key for key in self.keys[self.keys >= 0].tolist() if key not in found]
        extra = self.similarities_at(self.slots_of(missing), vector)
        all_keys = np.asarray(keys + missing, dtype=np.int64)
        all_sims = np.concatenate([np.asarray(sims, dtype=np.float64), extra])
        order = np.argsort(-all_sims, kind="stable")
        return all_keys[order].tolist(), all_sims[order].tolist()

    def similarities_at(
        self, slots: npt.NDArray[np.intp], vector: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.float64]:
        """Cosine similarity of ``vector`` to the stored vectors at ``slots``.

        Computed as USearch's search computes it: the query quantized to int8
        (index_vectors.quantize) and NumKong's cosine kernel (the library
        USearch is built on) over the int8 vectors (the saved file's, or the
        copies), so a candidate scores the same whether the ANN search or the
        keyword side brought it in, to the last bit.
        """
        if len(slots) == 0:
            return np.empty(0)
        query = quantize(vector).reshape(1, -1)
        angular = np.asarray(nk.cdist(query, self.vectors_at(slots), "angular"))
        sims: npt.NDArray[np.float64] = 1.0 - angular.reshape(-1)
        return sims

    def similarities(self, keys: list[int], vector: npt.NDArray[np.float32]) -> list[float]:
        """Exact cosine similarity of ``vector`` to the stored vectors of ``keys`` (0 if absent)."""
        held, at = self.find(keys)
        present = np.flatnonzero(held).tolist()
        out = [0.0] * len(keys)
        if present:
            sims = self.similarities_at(at[held], vector)
            for i, sim in zip(present, sims.tolist(), strict=True):
                out[i] = sim
        return out

    def upsert(
        self,
        keys: list[int],
        vectors: npt.NDArray[np.float32],
        attrs: list[tuple[float, float, float | None]],
    ) -> None:
        if not keys:
            return
        self._writable()
        arr = np.asarray(keys, dtype=np.uint64)
        present = np.asarray(self.index.contains(arr), dtype=bool).reshape(-1)
        if present.any():
            self.index.remove(arr[present])
        stored = quantize(vectors)
        _add(self.index, arr, stored)
        self.set_rows(keys, stored, attrs)

    def remove(self, keys: list[int]) -> None:
        if not keys:
            return
        self._writable()
        arr = np.asarray(keys, dtype=np.uint64)
        present = np.asarray(self.index.contains(arr), dtype=bool).reshape(-1)
        if present.any():
            self.index.remove(arr[present])
        self.drop_rows(keys)

    def _writable(self) -> None:
        """Copy a mapped graph into memory before its first change (a view is read-only).
        The file is then unmapped: the saved vectors are read from the copy
        (:meth:`_saved_vectors`), so its pages are not held twice."""
        if self.viewed:
            self.index = self.index.copy()
            self.viewed = False
            self._file_vectors = np.zeros((0, self.dim), _VECTOR_DTYPE)  # the last reference

    def read_meta(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def load(self, verified: object = None, *, full_check: bool = False) -> bool:
        """Load the saved file if it matches this model and its digest; False: rebuild it.

        ``verified`` is the record (:attr:`verified`) of the file as this data
        dir last verified it: a file with the same stamp and digest is not
        hashed again (``full_check`` hashes it anyway). Callers hold the
        index's file lock, so no save replaces the file while it is read.
        """
        self.damage = None
        meta = self.read_meta()
        if not self.path.exists() and meta is None:
            return False
        if meta is not None and meta.get("format") == 1:
            log.warning("index %s was saved without a checksum (older version); rebuilding",
                        self.path.name)
            return False
        if meta is None or meta.get("format") not in (F16_FORMAT, META_FORMAT):
            log.warning("index %s: metadata missing or unreadable; rebuilding", self.path.name)
            return False
        if meta.get("model_id") != self.model_id or meta.get("dim") != self.dim:
            log.warning(
                "index %s was built with model %s/%s; rebuilding for %s/%s",
                self.path.name, meta.get("model_id"), meta.get("dim"), self.model_id, self.dim,
            )
            return False
        if meta.get("format") == F16_FORMAT and not (  # float16 vectors: made int8, once
                meta := upgrade_index(self.path, self.meta_path, meta, self.dim, META_FORMAT)):
            return False
        for _ in range(_LOAD_ATTEMPTS):
            index = self._load_verified(meta.get("blake2b"), verified, full_check)
            if index is not False:
                break
            meta = self.read_meta() or meta  # replaced while read (a writer without the lock)
        else:
            return False
        if index is None:
            return False
        if index.ndim != self.dim or len(index) != meta.get("count"):
            log.warning("index file %s does not match its metadata; rebuilding", self.path.name)
            return False
        self.index = index
        self.viewed = True
        self.applied_seq = int(meta.get("applied_seq", 0))
        self.unsaved = 0
        self.rows_loaded = self._load_rows_file(meta)
        return True

    def _load_verified(
        self, digest: object, verified: object, full_check: bool
    ) -> Index | None | Literal[False]:
        """The USearch file, digest checked before USearch reads it; None if unusable,
        False if the file changed while it was read (read it again)."""
        try:
            stamp = file_stamp(self.path)
            record = {"stamp": stamp, "blake2b": digest}
            if full_check or record != verified:
                actual = file_digest(self.path)
                if actual != digest:
                    self.damage = "the index file does not match its checksum (damaged)"
                    log.warning("index file %s does not match its checksum (damaged, or a "
                                "save was cut short); rebuilding from the catalog",
                                self.path.name)
                    return None
            index = _new_index(self.dim)
            # Mapped, not read: opening costs no read of the graph (about 1 GB at 1M
            # memories); replacing the file (save) leaves this mapping on the old one.
            # Our own mapping, which the vector matrix reads too (usearch_file.py); the
            # view does not own it, so the index object keeps it for as long as it lives.
            mapped = map_file(self.path)
            index.view(memoryview(mapped))
            index.__dict__[_MAPPING] = mapped
            if file_stamp(self.path) != stamp:
                return False
        except Exception as exc:
            log.warning("index file %s is unreadable (%s); rebuilding from the catalog",
                        self.path.name, exc)
            return None
        self.verified = record
        return index

    def _load_rows_file(self, meta: dict[str, Any]) -> bool:
        """Map the saved per-memory rows named by ``meta``; False if they must be read again.

        The rows file is mapped copy-on-write (writes stay private until the next
        save); built memories' vectors are read from the USearch file's matrix,
        mapped read-only: opening reads none (384 MB at 1M memories). The vector
        copies (pending memories) are read into the copies array. Rows files of
        earlier versions (no ``file_slot``) come with a copy of every vector:
        mapped copy-on-write and used as the copies until the next save.
        """
        names = meta.get("rows_file"), meta.get("vectors_file")
        if not all(isinstance(name, str) and "/" not in name and name.startswith(self.path.stem)
                   for name in names):
            return False
        try:
            rows, vectors = (np.load(self.path.parent / str(name), mmap_mode="c",
                                     allow_pickle=False) for name in names)
            matrix = vector_matrix(self.index.__dict__.get(_MAPPING, self.path), self.dim)
        except (OSError, ValueError) as exc:
            log.info("index rows %s unreadable (%s); reading the catalog", names, exc)
            return False
        if (rows.ndim != 1 or rows.dtype not in (_ROWS_DTYPE, _ROWS_DTYPE_V1)
                or vectors.dtype != _VECTOR_DTYPE or vectors.ndim != 2
                or vectors.shape[1] != self.dim or matrix is None):
            return False
        keys = rows["key"]
        present = np.flatnonzero(keys >= 0)
        pending = int(np.count_nonzero(rows["norm"][present] == 0))
        if len(present) - pending != len(self.index) or pending != int(meta.get("pending", 0)):
            log.info("index rows %s do not match the index; reading the catalog", names[0])
            return False
        # Plain ndarray views of the maps: np.memmap's Python-level __getitem__ costs
        # about 0.1 ms per recall over its dozen gathers.
        rows, vectors = rows.view(np.ndarray), vectors.view(np.ndarray)
        if rows.dtype == _ROWS_DTYPE_V1:  # a copy of every vector, one per slot
            if len(vectors) != len(rows):
                return False
            old, rows = rows, _empty_rows(len(rows))
            for name in _ROWS_DTYPE_V1.names or ():
                rows[name] = old[name]
            copies = vectors
        else:
            slots = rows["file_slot"][present]
            held = present[slots < 0]
            if (len(vectors) != len(held) or int(slots.max(initial=-1)) >= len(matrix)
                    or bool(np.any(slots[rows["norm"][present] == 0] >= 0))):
                log.info("index rows %s do not match their vector files; reading the catalog",
                         names[0])
                return False
            copies = lazy_zeros(len(rows), self.dim)
            copies[held] = vectors  # the pending memories' (and the rest of a cut save's)
        self._bind(rows, copies)
        self._file_vectors = matrix
        self._slots = None  # built from the keys if asked for (see slots)
        self._count = len(present)
        self._free = np.flatnonzero(keys < 0)[::-1].tolist()
        self._forget_table()
        self.pending, self._pending_cache = pending, None
        return True

    def _save_rows(self) -> tuple[str, str]:
        """Write the rows and the vector copies (of the memories not in the USearch file
        just saved: the pending ones) to new files (named in the metadata next)."""
        count = self.count()
        if len(self._free) < count // 8:
            self._grow(count + count // 8 + 64, exact=True)  # headroom
        # The files end that headroom past the last slot in use: the arrays double as
        # memories arrive, and their empty tail saved whole cost up to a vector copy per
        # memory on disk (issue 28 item 4). A file's free slots are its keys < 0.
        used = np.flatnonzero(self.keys >= 0)
        end = min(len(self.rows), (int(used[-1]) + 1 if len(used) else 0) + count // 8 + 64)
        token = os.urandom(6).hex()
        names = f"{self.path.stem}.{token}.rows.npy", f"{self.path.stem}.{token}.vectors.npy"
        copies = self._copies[self._copied()]  # in slot order: the rows file says whose
        for name, array in zip(names, (self.rows[:end], copies), strict=True):
            tmp = self.path.with_name(name + f".{os.getpid()}.tmp")
            with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as fh:
                np.save(fh, array, allow_pickle=False)
            os.replace(tmp, self.path.with_name(name))
        return names

    def _drop_old_rows(self, keep: tuple[str, str]) -> None:
        for pattern in ("rows", "vectors"):
            for old in self.path.parent.glob(f"{self.path.stem}.*.{pattern}.npy"):
                if old.name not in keep:
                    old.unlink(missing_ok=True)

    def save(self) -> bool:
        """Write the index atomically unless a newer state is already on disk."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            with FileLock(str(self.lock_path), timeout=LOCK_TIMEOUT, mode=0o600):
                meta = self.read_meta()
                if (
                    meta is not None
                    and meta.get("model_id") == self.model_id
                    and self.path.exists()
                    and (int(meta.get("applied_seq", 0)), -int(meta.get("pending", 0)))
                    > (self.applied_seq, -self.pending)
                ):
                    self.unsaved = self.built_unsaved = 0
                    return False  # another process saved a newer state (or built more of it)
                tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
                self.index.save(str(tmp))
                os.chmod(tmp, 0o600)  # vectors say something about the texts: owner only
                digest = file_digest(tmp)  # read back from the page cache
                self._adopt_file(tmp)  # built memories' vectors: read from the file now
                os.replace(tmp, self.path)
                stamp = file_stamp(self.path)
                rows_file, vectors_file = self._save_rows()
                new_meta = {
                    "format": META_FORMAT,
                    "model_id": self.model_id,
                    "dim": self.dim,
                    "count": len(self.index),  # in the graph
                    "pending": self.pending,  # in the rows only (index_builder.py)
                    "applied_seq": self.applied_seq,
                    "rows_file": rows_file,
                    "blake2b": digest,
                    "vectors_file": vectors_file,
                }
                tmp_meta = self.meta_path.with_name(self.meta_path.name + f".{os.getpid()}.tmp")
                tmp_meta.write_text(json.dumps(new_meta, sort_keys=True), encoding="utf-8")
                os.chmod(tmp_meta, 0o600)
                os.replace(tmp_meta, self.meta_path)
                # a reader that mapped the old ones keeps their pages
                self._drop_old_rows((rows_file, vectors_file))
                self.verified = {"stamp": stamp, "blake2b": digest}
        except Timeout as exc:
            raise LocalStoreError(
                f"index lock {self.lock_path} is held by another process"
            ) from exc
        self.unsaved = self.built_unsaved = 0
        return True
