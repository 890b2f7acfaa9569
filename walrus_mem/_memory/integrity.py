"""Integrity checks of one data dir: what ``doctor`` reports and ``repair`` fixes.

Each check reads; none writes. They look at:

* the catalog file (SQLite's ``PRAGMA integrity_check``);
* a namespace's index file on disk: its BLAKE2b digest against the one its
  save recorded (the whole file, whatever the last verified open recorded),
  then against the catalog: count, keys, the stored vectors of a sample of
  keys, and (only when all of that agrees) a search of the graph in a child
  process, which a damaged graph may crash;
* the outbox against memory statuses: a ``queued`` memory must have an outbox
  row, or nothing would ever publish it;
* the sealed bytes kept for re-publishing: each must open under the
  namespace key as the memory's current version with the catalog's text, so
  that nothing damaged is ever stored on Walrus (see :func:`sealed_problem`).

**Usage**::

    problems = catalog_problems(catalog)            # [] when SQLite finds nothing
    health = check_index_file(catalog, index_dir, "default", model_id, dim)
    lost = queued_without_outbox(catalog, "default")
"""

from __future__ import annotations

import io
import json
import logging
import math
import sqlite3
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
from filelock import FileLock, Timeout

from .._catalog.catalog import Catalog
from .._recall.index import LOCK_TIMEOUT, NamespaceIndex
from ..envelope import open_envelope
from ..errors import EnvelopeError, LocalStoreError
from ..keys import NamespaceKeys

__all__ = [
    "IndexHealth",
    "catalog_problems",
    "check_index_file",
    "damaged_sealed",
    "queued_without_outbox",
    "sealed_problem",
    "split_damaged",
    "split_sound",
]

log = logging.getLogger(__name__)

SAMPLE: Final = 32  # index lookups checked per namespace
_SIMILAR: Final = 0.99  # float16 copies of one vector agree far better than this


def sealed_problem(
    keys: NamespaceKeys,
    sealed: bytes,
    memory_id: str,
    version: int,
    text: str | None = None,
) -> str | None:
    """Why ``sealed`` must not be published for this memory version, or None if it is sound.

    Sound means: it opens under the namespace key (signature and AEAD, so a
    single flipped bit fails), holds this memory id as a fact of this version,
    and, when ``text`` is given, that exact text.
    """
    try:
        record = open_envelope(keys, sealed, expected_id=memory_id, expected_kind="fact")
    except EnvelopeError as exc:
        return f"{type(exc).__name__}: {exc}"
    if record.get("version") != version:
        return f"sealed bytes hold version {record.get('version')}, the catalog {version}"
    if text is not None and record.get("text") != text:
        return "sealed bytes hold another text than the catalog"
    return None


def split_damaged(
    keys: NamespaceKeys, rows: Iterable[Any]
) -> tuple[list[Any], list[tuple[str, str]]]:
    """Outbox payload rows (memory_id, version, sealed) -> (sound rows, [(id, reason)])."""
    good: list[Any] = []
    bad: list[tuple[str, str]] = []
    for row in rows:
        mid, version, sealed = str(row[0]), int(row[1]), row[2]
        problem = sealed_problem(keys, bytes(sealed), mid, version)
        if problem is None:
            good.append(row)
        else:
            bad.append((mid, problem))
    return good, bad


def split_sound(
    keys: NamespaceKeys,
    payload: Sequence[tuple[str, tuple[bytes, int]]],
    rows: Mapping[str, Any],
) -> tuple[list[tuple[str, tuple[bytes, int]]], list[tuple[str, str]]]:
    """extend's payload [(memory_id, (sealed, version))] -> (sound, [(id, why not re-published)]).

    ``rows`` maps memory id -> catalog row (its ``text`` must be what is sealed).
    """
    good: list[tuple[str, tuple[bytes, int]]] = []
    bad: list[tuple[str, str]] = []
    for mid, (sealed, version) in payload:
        problem = sealed_problem(keys, sealed, mid, version, str(rows[mid]["text"]))
        if problem is None:
            good.append((mid, (sealed, version)))
        else:
            bad.append((mid, f"not re-published, the local sealed copy is damaged ({problem}); "
                             "the copy on Walrus is kept: run `walrus-mem repair`"))
    return good, bad


def damaged_sealed(
    catalog: Catalog, keys: NamespaceKeys, namespace: str, *, limit: int | None = None
) -> list[tuple[str, str]]:
    """Memories of ``namespace`` whose sealed copy is unsound: [(memory_id, reason)].

    ``limit=None`` opens every copy (~0.1-0.3 ms each); with a limit, every
    queued memory (the next to be published) and about ``limit`` published
    ones spread over the key range are checked.
    """
    bad: list[tuple[str, str]] = []
    last = 0
    step = 1
    if limit is not None:
        step = max(1, -(-catalog.count(namespace) // max(1, limit)))
    while True:
        rows = catalog.query(
            "SELECT key, id, version, text, sealed, blob_id, quilt_patch_id, digest FROM "
            "memories WHERE namespace = ? AND key > ? "
            "AND (status = 'queued' OR key % ? = 0) ORDER BY key LIMIT 500",
            (namespace, last, step))
        if not rows:
            return bad
        for r in rows:
            data = catalog.sealed_from_row(r)  # the embedded relayer's, if the row keeps none
            if data is None:
                problem: str | None = ("no sealed copy kept" if r["sealed"] is None and (
                    r["blob_id"] is None or r["digest"] is None) else
                    "the sealed copy the embedded relayer held is gone or changed")
            else:
                problem = sealed_problem(keys, data, str(r["id"]),
                                         int(r["version"]), str(r["text"]))
            if problem is not None:
                bad.append((str(r["id"]), problem))
        last = int(rows[-1]["key"])


def catalog_problems(catalog: Catalog, limit: int = 20) -> list[str]:
    """What ``PRAGMA integrity_check`` finds (empty list: the file is sound)."""
    try:
        rows = catalog.query(f"PRAGMA integrity_check({int(limit)})")
    except LocalStoreError as exc:
        return [str(exc)]
    found = [str(r[0]) for r in rows]
    return [] if found == ["ok"] else found


def queued_without_outbox(catalog: Catalog, namespace: str | None = None) -> list[str]:
    """Ids of ``queued`` memories no outbox batch holds (nothing would ever publish them)."""
    sql = (
        "SELECT m.id FROM memories m WHERE m.status = 'queued' {ns} AND NOT EXISTS ("
        "SELECT 1 FROM outbox_items i JOIN outbox o ON o.id = i.outbox_id "
        "WHERE i.memory_id = m.id AND i.version = m.version AND o.namespace = m.namespace) "
        "ORDER BY m.key"
    )
    if namespace is None:
        rows = catalog.query(sql.format(ns=""))
    else:
        rows = catalog.query(sql.format(ns="AND m.namespace = ?"), (namespace,))
    return [str(r[0]) for r in rows]


@dataclass
class IndexHealth:
    """A namespace's index file compared with the catalog."""

    namespace: str
    path: Path
    catalog_count: int
    index_count: int | None = None  # None: no usable file (rebuilt on the next recall)
    missing: int = 0  # catalog keys the file lacks
    extra: int = 0  # keys in the file that no memory has
    sampled: int = 0
    bad_lookups: int = 0  # sampled keys whose stored vector or search disagrees
    pending: int = 0  # changes the file has not applied yet (replayed on open)
    unbuilt: int = 0  # memories its rows hold that the graph does not yet (index_builder.py)
    damage: str | None = None  # the file fails its checksum
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        if self.damage is not None:
            return False
        return self.index_count is None or not (self.missing or self.extra or self.bad_lookups)

    def describe(self) -> str:
        if self.damage is not None:
            return f"{self.damage}: rebuilt from the catalog on the next recall or by repair"
        if self.index_count is None:
            return "; ".join(self.notes) or "no index file (built from the catalog on first recall)"
        parts = [f"{self.index_count} vectors in the file, {self.catalog_count} memories"]
        if self.pending:
            parts.append(f"{self.pending} recent changes replayed on open")
        if self.unbuilt:
            parts.append(f"{self.unbuilt} not in the graph yet (built in the background; "
                         "recall scans them exactly meanwhile)")
        if self.missing or self.extra:
            parts.append(f"{self.missing} keys missing, {self.extra} unknown keys")
        parts.append(f"{self.sampled - self.bad_lookups}/{self.sampled} sampled lookups agree")
        return ", ".join(parts + self.notes)


def _sample(keys: Sequence[int], size: int) -> list[int]:
    if len(keys) <= size:
        return list(keys)
    step = len(keys) / size
    return [keys[int(i * step)] for i in range(size)]


def check_index_file(
    catalog: Catalog,
    directory: Path,
    namespace: str,
    model_id: str,
    dim: int,
    *,
    sample: int = SAMPLE,
) -> IndexHealth:
    """Load the namespace's index file as it is on disk and compare it with the catalog.

    Changes logged after the file was saved are left out of the comparison
    (opening the index replays them). A file older than the pruned change log,
    or built with another model, is reported as rebuilt-on-open, not broken.
    """
    idx = NamespaceIndex(namespace, directory, model_id, dim)
    health = IndexHealth(namespace, idx.path, catalog.count(namespace))
    if not idx.path.exists():
        health.notes.append("no index file (built from the catalog on first recall)")
        return health
    try:
        with FileLock(str(idx.lock_path), timeout=LOCK_TIMEOUT, mode=0o600):
            loaded = idx.load(full_check=True)  # the whole file hashed, whatever its stamp
    except Timeout:
        health.notes.append("index file busy (another process holds its lock): not checked")
        return health
    if not loaded:
        health.damage = idx.damage
        health.notes.append("index file unreadable or for another model: rebuilt on next recall")
        return health
    if idx.applied_seq < catalog.changes_floor(namespace):
        health.notes.append("index file older than the change log: rebuilt on next recall")
        return health
    pending, _ = catalog.changes_since(namespace, idx.applied_seq)
    pending_set = set(pending)
    health.pending = len(pending_set)
    health.index_count = len(idx.index)
    in_file = {int(k) for k in np.asarray(idx.index.keys, dtype=np.uint64).tolist()}
    if idx.rows_loaded:  # the rows file's pending memories: the builder's queue, not missing
        unbuilt = {int(k) for k in idx.keys[(idx.keys >= 0) & (idx.in_graph == 0)].tolist()}
        health.unbuilt = len(unbuilt)
        pending_set |= unbuilt
    catalog_keys = [int(r[0]) for r in catalog.query(
        "SELECT key FROM memories WHERE namespace = ? ORDER BY key", (namespace,))]
    settled = [k for k in catalog_keys if k not in pending_set]
    settled_set = set(settled)
    health.missing = sum(1 for k in settled if k not in in_file)
    health.extra = sum(1 for k in in_file if k not in settled_set and k not in pending_set)
    chosen = [k for k in _sample(settled, sample) if k in in_file]
    if not chosen:
        return health
    try:
        found = catalog.vectors_by_keys(namespace, sorted(chosen))  # maybe from sealed copies
    except LocalStoreError as exc:  # kept in sealed copies this process has no key for
        health.notes.append(f"sampled vectors not compared: {exc}")
        return health
    keys = sorted(found)
    vectors = (np.stack([found[k] for k in keys]).astype(np.float32) if keys
               else np.zeros((0, dim), np.float32))
    for key, vector in zip(keys, vectors, strict=True):
        health.sampled += 1
        if not _stored_vector_agrees(idx, key, vector):
            health.bad_lookups += 1
    if health.missing or health.extra or health.bad_lookups:
        return health  # a graph that failed these checks is never searched (it may crash)
    problem = search_probe(idx.path, dim, vectors, in_file)
    if problem is not None:
        health.bad_lookups = health.sampled
        health.notes.append(problem)
    return health


def _cosine(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return 0.0 if na == 0 or nb == 0 else float(a @ b) / (na * nb)


def _stored_vector_agrees(idx: NamespaceIndex, key: int, vector: np.ndarray[Any, Any]) -> bool:
    """The graph's vector for ``key`` (and the rows' copy, when loaded) is the catalog's.

    Exact per key: memories sharing one embedding cannot make it fail, as an
    approximate search for the key could (HNSW need not reach a duplicate cluster).
    """
    try:
        stored = idx.index.get(np.uint64(key))
    except (KeyError, ValueError, IndexError, sqlite3.Error):
        return False
    if stored is None:
        return False
    if _cosine(np.asarray(stored, dtype=np.float32).reshape(-1), vector) < _SIMILAR:
        return False
    if idx.rows_loaded:
        slot = idx.slots.get(key)
        if slot is None:
            return False
        if _cosine(idx.vectors[slot].astype(np.float32), vector) < _SIMILAR:
            return False
    return True


_PROBE: Final = """
import io, json, sys
import numpy as np
from usearch.index import Index
path, dim = sys.argv[1], int(sys.argv[2])
vectors = np.load(io.BytesIO(sys.stdin.buffer.read()), allow_pickle=False)
index = Index(ndim=dim, metric="cos", dtype="f16")
index.load(path)
found = index.search(vectors, 5)
keys = np.asarray(found.keys).reshape(len(vectors), -1)
dist = np.asarray(found.distances, dtype=np.float64).reshape(len(vectors), -1)
# one query gives a Matches (already trimmed, no counts), several a BatchMatches
counts = np.asarray(getattr(found, "counts", [keys.shape[1]])).reshape(-1)
rows = [zip(keys[i][:counts[i]], dist[i][:counts[i]]) for i in range(len(vectors))]
print(json.dumps([[[int(k), float(1.0 - d)] for k, d in row] for row in rows]))
"""
PROBE_TIMEOUT: Final = 60.0


def search_probe(
    path: Path, dim: int, vectors: np.ndarray[Any, Any], known: set[int]
) -> str | None:
    """Search the graph file for ``vectors`` in a child process; why it is unusable, or None.

    The graph's links are not covered by the key and vector checks, and a
    search over damaged links can crash the native library (SIGSEGV): the
    child dies, not doctor or repair. Every key it returns must be a known
    key with a finite similarity. Whether a key finds itself is not asked:
    an approximate search need not reach memories that share one embedding.
    """
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(vectors, dtype=np.float32), allow_pickle=False)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, str(path), str(dim)], input=buf.getvalue(),
            capture_output=True, timeout=PROBE_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"a search of the index file failed ({type(exc).__name__})"
    if done.returncode != 0:
        if done.returncode < 0:
            return f"a search of the index file crashed (signal {-done.returncode})"
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:]
        return f"a search of the index file failed ({' '.join(tail) or done.returncode})"
    try:
        results = json.loads(done.stdout)
        pairs = [(int(k), float(s)) for found in results for k, s in found]
    except (ValueError, TypeError):
        return "a search of the index file returned nothing readable"
    if any(k not in known or not math.isfinite(s) or abs(s) > 1.01 for k, s in pairs):
        return "a search of the index file returned unknown keys or bad similarities"
    return None
