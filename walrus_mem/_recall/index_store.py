"""All namespace indexes of one data dir: opened lazily, caught up with the catalog's
change log before use, rebuilt from the catalog when a file is unusable (index.py tells
how and why). Many memories at once (a restore, a pull, a rebuild) go into the graph in
the background (index_builder.py) while recall scans them exactly."""

from __future__ import annotations

import ctypes
import json
import sqlite3
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt
from filelock import FileLock, Timeout

from .._catalog.catalog import Catalog, vectors_from_blobs
from .._catalog.vectors import VECTOR_COLUMNS, resolve_vectors
from ..errors import LocalStoreError, ModelMismatch, WalrusMemError
from .index import (
    LOCK_TIMEOUT,
    VERIFIED_KEY,
    NamespaceIndex,
    _add,
    _new_index,
    index_file_stem,
    log,  # index.py's logger: the warnings keep the name callers filter on
)
from .index_builder import Builder

__all__ = ["IndexStore"]

_Mode = Literal["auto", "defer", "inline"]
Known = Mapping[int, tuple[bytes, tuple[float, float, float | None]]]
"""key -> (float16 vector bytes, (created_at, importance, expires_at)) a writer just wrote."""

_REBUILD_BATCH: Final = 10_000
OPEN_AFTER: Final = 1000
"""Changes waiting in the log that make a write open (and catch up) an index no recall
has opened yet: an import then builds it as memories arrive instead of leaving all of
it to the first recall (838 s at 1M memories, issue 28), while a one-off write of a
process that never recalls (a CLI ``remember``) still leaves the index file alone."""
SAVE_SHARE: Final = 8
"""A loaded index is saved once ``max(save_every, len // SAVE_SHARE)`` changes wait
(capped at :data:`SAVE_CAP`): a save writes the whole file, so saving every
``save_every`` changes made each write cost in proportion to the namespace."""
SAVE_CAP: Final = 50_000
DEFER_AT: Final = 1000
"""A catch-up of at least this many changed keys holds them pending (exact scan) and
leaves their graph insertion to the builder, instead of inserting them inline."""
TRIM_AFTER: Final = 1000
"""Changes applied in one step after which the index's next use returns the C heap's
freed memory to the system (:func:`release_freed_heap`)."""
BACKGROUND_MIN: Final = 1000
"""Pending memories that start a background builder; fewer are inserted at once (about a
second at most), so a small namespace's index is whole when its first recall returns."""


def _batches(
    conn: sqlite3.Connection, idx: NamespaceIndex
) -> Iterator[tuple[list[int], npt.NDArray[np.float16], list[tuple[float, float, float | None]]]]:
    """The namespace's keys, float16 vectors and ranking attributes, in key order by batch."""
    last = 0
    while True:
        rows = conn.execute(
            f"SELECT key, {VECTOR_COLUMNS}, created_at, importance, expires_at FROM memories "
            "WHERE namespace = ? AND key > ? ORDER BY key LIMIT ?",
            (idx.namespace, last, _REBUILD_BATCH),
        ).fetchall()
        if not rows:
            return
        # a row's vector may be in its sealed copy (catalog vectors.py)
        blobs = resolve_vectors(conn, idx.namespace, [(r[1], r[2]) for r in rows])
        yield ([int(r[0]) for r in rows], vectors_from_blobs(blobs, idx.dim),
               [(float(r[3]), float(r[4]), r[5]) for r in rows])
        last = int(rows[-1][0])


def _keys_agree(idx: NamespaceIndex, catalog: Catalog, sample: int = 16) -> bool:
    """The graph and the rows hold exactly the catalog's keys, and sampled vectors are its.

    A file with an intact header but damaged content must not survive the
    open: a graph key the catalog does not know would surface in a recall.
    The key sets are compared by count and sum (one index-only SQL scan, no
    vectors read); 16 sampled vectors of the graph and of the rows are
    compared with the catalog's.
    """
    row = catalog.query_one("SELECT count(*), total(key) FROM memories WHERE namespace = ?",
                            (idx.namespace,))
    count, total = (int(row[0]), float(row[1])) if row is not None else (0, 0.0)
    present = idx.keys >= 0
    held = idx.keys[present]  # the rows' keys, as numpy (1M in milliseconds)
    if (len(idx) != count or idx.count() != count or len(held) != count
            or float(held.sum(dtype=np.float64)) != total):
        return False
    if not len(held):
        return len(idx.index) == 0
    keys = idx.keys[present & (idx.in_graph != 0)].astype(np.uint64)  # not the pending
    if len(keys) != len(idx.index):
        return False
    if not len(keys):
        return True
    if not bool(np.asarray(idx.index.contains(keys), dtype=bool).all()):
        return False
    chosen = keys[:: max(1, len(keys) // sample)][:sample]
    truth = catalog.vectors_by_keys(idx.namespace, chosen.tolist())
    if len(truth) != len(chosen):
        return False
    expected = np.stack([truth[int(k)] for k in chosen]).astype(np.float32)
    graph = np.asarray(idx.index.get(chosen), dtype=np.float32).reshape(len(chosen), idx.dim)
    found, at = idx.find(chosen.tolist())
    if not found.all():
        return False
    rows = idx.vectors[at].astype(np.float32)
    return _same(graph, expected) and _same(rows, expected)


def _same(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> bool:
    """Row-wise: the same direction (float16 copies of one vector), or both zero."""
    dots = np.einsum("ij,ij->i", a, b)
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    return bool(np.all((dots >= 0.99 * na * nb) & ((na > 0) == (nb > 0))))


def release_freed_heap() -> None:
    """Hand the memory glibc's heap holds freed back to the system (``malloc_trim``).

    A batch write (a ``remember_many`` of 10,000, a catch-up) allocates and frees tens
    of megabytes of rows, sealed bytes and arrays; glibc keeps what they freed inside
    its heap, where the process's RSS still counts it (105 MB at 200k memories in the
    importing process, issue 28). A few milliseconds; elsewhere (not glibc) nothing."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


class IndexStore:
    """All namespace indexes of one data dir, loaded lazily and caught up on use."""

    def __init__(self, directory: Path, catalog: Catalog, *, save_every: int = 1000,
                 lock: threading.RLock | None = None) -> None:
        self.directory = Path(directory)
        self.catalog = catalog
        self.save_every = save_every
        self._indexes: dict[str, NamespaceIndex] = {}
        # The engine lock (Memory's) when given: recall reads the index under it, so the
        # background builder takes it for each batch it inserts.
        self._lock = lock if lock is not None else threading.RLock()
        self.auto_build = True  # False (tests): pending memories wait for build_some()
        self._builders: dict[str, Builder] = {}
        # PRAGMA data_version when each namespace last caught up: unchanged means no other
        # connection committed since, and our own writes call refresh() themselves.
        self._seen_version: dict[str, int] = {}
        self._trim_due = False  # a large step was applied: trim at the next use

    def path_for(self, namespace: str) -> Path:
        return self.directory / f"{index_file_stem(namespace)}.usearch"

    def loaded(self, namespace: str) -> NamespaceIndex | None:
        return self._indexes.get(namespace)

    def current(self, namespace: str, model_id: str, dim: int) -> NamespaceIndex | None:
        """The namespace's index if it is loaded and no other connection has committed
        since it caught up, else None (then :meth:`get`). Reads nothing but the catalog's
        data version, writes nothing: recall asks inside its read snapshot, whose one
        staleness check this shares."""
        with self._lock:
            self._trim_if_due()
            idx = self._loaded_as(namespace, model_id, dim)
            if idx is None or self._seen_version.get(namespace) != self.catalog.data_version():
                return None
            return idx

    def _trim_if_due(self) -> None:
        """After a large step, at the next use (by then the writer that made it has
        returned and freed its buffers): return the freed heap, once."""
        if self._trim_due:
            self._trim_due = False
            release_freed_heap()

    def _loaded_as(self, namespace: str, model_id: str, dim: int) -> NamespaceIndex | None:
        idx = self._indexes.get(namespace)
        if idx is not None and (idx.model_id != model_id or idx.dim != dim):
            raise ModelMismatch(
                f"namespace {namespace!r} index uses {idx.model_id} (dim {idx.dim}), "
                f"not {model_id} (dim {dim})"
            )
        return idx

    def get(self, namespace: str, model_id: str, dim: int, *,
            inline: bool = False) -> NamespaceIndex:
        """The namespace's index, loaded or rebuilt, with every catalog change applied:
        many at once (a rebuild, a large catch-up) held pending for the background
        builder, unless ``inline`` (a write that builds the index as memories arrive)."""
        mode: _Mode = "inline" if inline else "auto"
        with self._lock:
            self._trim_if_due()
            idx = self._loaded_as(namespace, model_id, dim)
            version = self.catalog.data_version()
            if idx is None:
                idx = self._open(namespace, model_id, dim, mode)
                self._indexes[namespace] = idx
            elif self._seen_version.get(namespace) != version:
                self._catch_up(idx, mode)
            self._seen_version[namespace] = version
            self._kick(idx)
            return idx

    def _verified_record(self, idx: NamespaceIndex) -> dict[str, Any] | None:
        """The stamp and digest of the file as this data dir last verified or saved it."""
        try:
            raw = self.catalog.get_meta(VERIFIED_KEY + idx.path.stem)
            data = json.loads(raw) if raw else None
        except (ValueError, WalrusMemError, sqlite3.Error):
            return None
        return data if isinstance(data, dict) else None

    def _note_verified(self, idx: NamespaceIndex, before: object) -> None:
        """Record what the last load verified or the last save wrote (best effort: a
        catalog that cannot take it only costs a hash at the next open)."""
        if idx.verified is None or idx.verified == before:
            return
        try:
            self.catalog.set_meta(VERIFIED_KEY + idx.path.stem,
                                  json.dumps(idx.verified, sort_keys=True))
        except (WalrusMemError, sqlite3.Error) as exc:
            log.info("could not record the verified index file (%s)", type(exc).__name__)

    def _load_locked(self, idx: NamespaceIndex) -> bool:
        """``idx.load`` under the index's file lock (no save replaces the file meanwhile)."""
        verified = self._verified_record(idx)
        try:
            with FileLock(str(idx.lock_path), timeout=LOCK_TIMEOUT, mode=0o600):
                loaded = idx.load(verified)
        except Timeout as exc:
            raise LocalStoreError(f"index lock {idx.lock_path} is held by another process") \
                from exc
        if loaded:
            self._note_verified(idx, verified)
        return loaded

    def _open(self, namespace: str, model_id: str, dim: int, mode: _Mode) -> NamespaceIndex:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        idx = NamespaceIndex(namespace, self.directory, model_id, dim)
        if self._load_locked(idx):
            if not idx.rows_loaded:
                self._load_rows(idx)
                idx.unsaved = max(idx.unsaved, 1)  # saved at close: the next open maps them
            if idx.applied_seq < self.catalog.changes_floor(namespace):
                log.warning("index %s is older than the change log; rebuilding", idx.path.name)
            else:
                self._catch_up(idx, mode)
                if _keys_agree(idx, self.catalog):  # counts included: one scan, not two
                    return idx
                log.warning("index %s disagrees with the catalog; rebuilding", idx.path.name)
        self._rebuild(idx, defer=mode != "inline")
        return idx

    def _load_rows(self, idx: NamespaceIndex) -> None:
        """Fill the per-memory rows (vector copies, attributes) of a loaded index."""
        idx.clear_rows()
        idx.reserve(self.catalog.count(idx.namespace))
        with self.catalog.snapshot() as conn:
            for keys, vectors, attrs in _batches(conn, idx):
                idx.set_rows(keys, vectors, attrs)

    def _rebuild(self, idx: NamespaceIndex, *, defer: bool = False) -> None:
        """Fill the index from the catalog: into the graph, or with ``defer`` into the rows
        only, pending (the builder inserts them; nothing is saved until it has)."""
        idx.index = _new_index(idx.dim)
        idx.viewed = False
        idx.clear_rows()
        idx.reserve(self.catalog.count(idx.namespace))
        with self.catalog.snapshot() as conn:
            seq = conn.execute(
                "SELECT max(seq) FROM changes WHERE namespace = ?", (idx.namespace,)
            ).fetchone()[0]
            floor = conn.execute(
                "SELECT value FROM meta WHERE key = ?", (f"changes_floor:{idx.namespace}",)
            ).fetchone()
            for keys, vectors, attrs in _batches(conn, idx):
                if not defer:
                    _add(idx.index, np.asarray(keys, dtype=np.uint64), vectors)
                idx.set_rows(keys, vectors, attrs, pending=defer)
        # The log may be pruned empty: the floor is then the newest applied change.
        idx.applied_seq = max(int(seq or 0), int(floor[0]) if floor else 0)
        idx.unsaved = max(len(idx), 1)
        if not defer:
            self._save(idx)

    def _catch_up(self, idx: NamespaceIndex, mode: _Mode = "auto",
                  known: Known | None = None) -> None:
        """Apply the change log past ``idx.applied_seq``. ``"defer"`` (a restore or pull
        under way), or ``"auto"`` with as many changes as :data:`DEFER_AT`: the new
        vectors are held pending for the builder, not inserted now (``"defer"`` also
        saves nothing: the merge saves once at its end); ``"inline"`` (a write):
        inserted now. ``known``: rows the caller wrote itself, with nothing committed by
        another connection since (so they are what the catalog holds), not read back."""
        defer = mode == "defer"
        floor = self.catalog.changes_floor(idx.namespace)
        if idx.applied_seq < floor:
            # Another process saved and pruned the log past us: its file is newer.
            reloaded = self._load_locked(idx)
            if not reloaded or idx.applied_seq < floor:
                self._rebuild(idx, defer=mode != "inline")
                return
            if not idx.rows_loaded:
                self._load_rows(idx)
        keys, newest = self.catalog.changes_since(idx.namespace, idx.applied_seq)
        if self.catalog.changes_floor(idx.namespace) > idx.applied_seq:
            # Another process pruned the log while we read it: start over from its file.
            self._catch_up(idx, mode)
            return
        if not keys:
            return
        self._trim_due |= len(keys) >= TRIM_AFTER
        known = known or {}
        need = [k for k in keys if k not in known]
        rows: dict[int, tuple[Any, tuple[float, float, float | None]]] = (
            self.catalog.index_rows(idx.namespace, need) if need else {})
        for key in keys:
            if key in known:
                blob, written = known[key]
                rows[key] = (np.frombuffer(blob, dtype="<f2"), written)
        present = [k for k in keys if k in rows]
        gone = [k for k in keys if k not in rows]
        idx.remove(gone)
        held = defer or (mode == "auto" and len(present) >= DEFER_AT)
        if present:
            vectors = np.stack([rows[k][0] for k in present])
            attrs = [rows[k][1] for k in present]
            if held:
                idx.defer(present, vectors, attrs)
            else:
                idx.upsert(present, vectors, attrs)
        idx.applied_seq = newest
        idx.unsaved += len(keys)
        # Held pending: saved by the builder (when due, and when done) or at close, not
        # here: this may be a recall's catch-up, and a save writes the whole file.
        if not held and idx.unsaved >= self.save_threshold(len(idx)):
            self._save(idx)

    def save_threshold(self, count: int) -> int:
        """Unsaved changes that trigger a save of an index of ``count`` memories: a crash
        replays at most that many from the change log on the next open."""
        return max(self.save_every, min(count // SAVE_SHARE, SAVE_CAP))

    def _save(self, idx: NamespaceIndex) -> None:
        if idx.save():
            self._note_verified(idx, None)
            self.catalog.prune_changes(idx.namespace, idx.applied_seq)

    def refresh(self, namespace: str, *, build: bool = False, defer: bool = False,
                known: Known | None = None, known_at: int | None = None) -> None:
        """Apply pending catalog changes to a loaded index (else a no-op). ``build`` (the
        write path: remember, remember_many, update): open one not loaded yet once
        :data:`OPEN_AFTER` changes wait for it. ``defer`` (restore and pull, per chunk):
        the changes are held pending, for the builder :meth:`start_build` starts at the
        merge's end (inline insertion would bound them by the HNSW rate); a namespace
        with no index file yet (a restore onto a fresh data dir) is opened for that, so
        the rows are saved once at the end and the first recall maps them. ``known``
        (with ``known_at``, the catalog's data version inside the transaction that wrote
        them): the vectors and attributes of rows just written, used instead of reading
        them back (a restore's vectors are in its sealed copies: each read opens one)
        unless another connection committed since."""
        with self._lock:
            self._trim_if_due()
            idx = self._indexes.get(namespace)
            if idx is not None:
                if known and known_at != self.catalog.data_version():
                    known = None  # another connection wrote meanwhile: read the rows
                self._catch_up(idx, "defer" if defer else "inline" if build else "auto",
                               known)
                if not defer:
                    self._kick(idx)  # many changes at once were held pending
                return
            if defer and not self.path_for(namespace).exists():
                info = self.catalog.namespace(namespace)
                if info is None or info["model_id"] is None or info["dim"] is None:
                    return
                idx = NamespaceIndex(namespace, self.directory, str(info["model_id"]),
                                     int(info["dim"]))
                self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
                self._rebuild(idx, defer=True)
                self._indexes[namespace] = idx
                self._seen_version[namespace] = self.catalog.data_version()
                return
            if not build:
                return
            waiting = self.catalog.query_one(
                "SELECT count(*) FROM (SELECT 1 FROM changes WHERE namespace = ? LIMIT ?)",
                (namespace, OPEN_AFTER))
            if waiting is None or int(waiting[0]) < OPEN_AFTER:
                return
            info = self.catalog.namespace(namespace)
            if info is None or info["model_id"] is None or info["dim"] is None:
                return
            self.get(namespace, str(info["model_id"]), int(info["dim"]), inline=True)

    def forget_namespace_index(self, namespace: str) -> None:
        """Drop the in-memory index (e.g. after reindex) so the next get rebuilds it."""
        with self._lock:
            self._stop_builder(namespace)
            self._indexes.pop(namespace, None)

    def rebuild(self, namespace: str, model_id: str, dim: int) -> NamespaceIndex:
        with self._lock:
            self._stop_builder(namespace)
            idx = NamespaceIndex(namespace, self.directory, model_id, dim)
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._rebuild(idx)
            self._indexes[namespace] = idx
            return idx

    def save_all(self) -> None:
        with self._lock:
            for idx in self._indexes.values():
                if idx.unsaved or idx.built_unsaved:
                    self._save(idx)

    # -- the background builder (index_builder.py) -----------------------------------

    def start_build(self, namespace: str) -> None:
        """After a restore or pull: move its pending memories into the graph, at once
        when few, else in the background."""
        with self._lock:
            idx = self._indexes.get(namespace)
            if idx is not None:
                self._kick(idx)

    def _kick(self, idx: NamespaceIndex) -> None:
        if not idx.pending or not self.auto_build:
            return
        if idx.pending < BACKGROUND_MIN:
            idx.build_step(idx.pending)
            # saved now when all of the graph was built here (a rebuild: the next open
            # then maps it), else when due
            self._built(idx, len(idx.index) == idx.built_unsaved)
            return
        running = self._builders.get(idx.namespace)
        if running is not None and running.is_alive() and running.idx is idx:
            return
        ns = idx.namespace
        builder = Builder(idx, self._lock, lambda: self._indexes.get(ns), self._built)
        self._builders[ns] = builder
        builder.start()

    def _built(self, idx: NamespaceIndex, done: bool) -> None:
        """After a builder's batch (under the lock): save when done or when due."""
        if idx.built_unsaved and (done or idx.built_unsaved >= self.save_threshold(len(idx))):
            self._save(idx)

    def build_some(self, namespace: str, limit: int) -> int:
        """Move up to ``limit`` pending memories into the graph now (tests, tools)."""
        with self._lock:
            idx = self._indexes.get(namespace)
            return 0 if idx is None else idx.build_step(limit)

    def wait_built(self, namespace: str, timeout: float | None = None) -> bool:
        """Wait for the namespace's background build to finish (the deterministic hook
        for tests); True when nothing of a loaded index is pending."""
        builder = self._builders.get(namespace)
        if builder is not None:
            builder.join(timeout)
        with self._lock:
            idx = self._indexes.get(namespace)
            return idx is None or idx.pending == 0

    def build_progress(self, namespace: str) -> dict[str, Any]:
        """How far the namespace's graph is built: ``in_graph`` and ``pending`` memories
        (from the loaded index, else from the saved file's metadata) and whether a
        background build runs in this process."""
        with self._lock:
            idx = self._indexes.get(namespace)
            builder = self._builders.get(namespace)
            building = builder is not None and builder.is_alive()
            if idx is not None:
                return {"in_graph": len(idx.index), "pending": idx.pending,
                        "building": building}
        try:
            meta = json.loads((self.directory / f"{index_file_stem(namespace)}.meta.json")
                              .read_text(encoding="utf-8"))
            return {"in_graph": int(meta.get("count", 0)), "pending": int(meta.get("pending", 0)),
                    "building": False}
        except (OSError, ValueError, TypeError, AttributeError):
            return {"in_graph": 0, "pending": 0, "building": False}

    def _stop_builder(self, namespace: str) -> None:
        builder = self._builders.pop(namespace, None)
        if builder is not None:
            builder.cancel()  # it sees the flag before its next batch

    def close(self) -> None:
        with self._lock:
            builders = list(self._builders.values())
            self._builders.clear()
            for builder in builders:
                builder.cancel()
            for builder in builders:
                builder.join()  # it polls the flag while we hold the lock: no wait
            try:
                self.save_all()
            finally:
                self._indexes.clear()
