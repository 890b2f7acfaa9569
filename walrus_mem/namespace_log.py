"""The namespace log: publishing manifests and restoring a namespace from one.

A manifest (format: manifest.py) is a sealed snapshot of a namespace's live
memories. This module publishes them (one at a time per namespace, across
threads and processes) and rebuilds a namespace from one. Memory (memory.py)
is the façade; the SQL lives in catalog.py / catalog_log.py.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, Protocol

import numpy as np
import numpy.typing as npt
from filelock import FileLock, Timeout

from . import manifest as mf
from .blobio import check_patches, read_checked, store_batches
from .catalog import Catalog, vector_to_blob
from .catalog_log import LogTables
from .config import Settings
from .embeddings import Embedder
from .envelope import open_envelope, seal
from .errors import InvalidInput, LocalStoreError, WalrusMemError, WrongNamespace
from .index import IndexStore, index_file_stem
from .inputs import new_memory_id
from .keys import NamespaceKeys
from .models import RestoreReport
from .walrus import WalrusClient

__all__ = ["MANIFEST_MAX_PLAINTEXT", "LogHost", "NamespaceLog", "ProgressCallback"]

log = logging.getLogger(__name__)

MANIFEST_MAX_PLAINTEXT: Final = 8 * 1024 * 1024
MANIFEST_LOCK_TIMEOUT: Final = 300.0
RESTORE_WORKERS: Final = 8
RESTORE_CHUNK: Final = 256
DEFAULT_IMPORTANCE: Final = 0.5

ProgressCallback = Callable[[int, int], object]


class LogHost(Protocol):
    """What the log needs from its Memory."""

    settings: Settings
    data_dir: Path

    @property
    def embedder(self) -> Embedder: ...

    @property
    def walrus(self) -> WalrusClient: ...

    def keys_for(self, namespace: str | None = None) -> NamespaceKeys: ...

    def embed_texts(self, texts: list[str]) -> npt.NDArray[np.float32]: ...

    def check_model(self, namespace: str) -> None: ...


class NamespaceLog:
    """Manifests of every namespace of one data dir."""

    def __init__(self, host: LogHost, catalog: Catalog, indexes: IndexStore,
                 lock: threading.RLock) -> None:
        self.host = host
        self.catalog = catalog
        self.tables = LogTables(catalog)
        self.indexes = indexes
        self.lock = lock
        self._manifest_locks: dict[str, tuple[threading.Lock, FileLock]] = {}

    @contextmanager
    def turn(self, ns: str, *, wait: bool) -> Iterator[bool]:
        """Hold the namespace's manifest lock (this process's threads and other processes).

        Yields False, holding nothing, when ``wait`` is False and it is taken.
        """
        with self.lock:
            locks = self._manifest_locks.get(ns)
            if locks is None:
                path = self.host.data_dir / "locks" / f"manifest-{index_file_stem(ns)}.lock"
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                locks = self._manifest_locks[ns] = (threading.Lock(),
                                                    FileLock(str(path), mode=0o600))
        thread_lock, file_lock = locks
        busy = LocalStoreError(
            f"another process has been publishing a manifest of {ns!r} for over "
            f"{MANIFEST_LOCK_TIMEOUT:.0f} s"
        )
        if not (thread_lock.acquire(timeout=MANIFEST_LOCK_TIMEOUT) if wait
                else thread_lock.acquire(blocking=False)):
            if wait:
                raise busy
            yield False
            return
        try:
            try:
                file_lock.acquire(timeout=MANIFEST_LOCK_TIMEOUT if wait else 0)
            except Timeout:
                if wait:
                    raise busy from None
                yield False
                return
            try:
                yield True
            finally:
                file_lock.release()
        finally:
            thread_lock.release()

    def publish(self, ns: str) -> str:
        """Seal and publish a complete manifest of ``ns``; return its root blob id.

        One manifest of a namespace at a time, across threads and processes:
        snapshot, stores and the recorded pointer of one manifest all happen
        before the next one takes its snapshot. Otherwise the slower of two
        overlapping publications would record an older snapshot as the latest
        (and restore reads only the latest).
        """
        with self.turn(ns, wait=True):
            return self.publish_now(ns)

    def publish_now(self, ns: str) -> str:
        keys = self.host.keys_for(ns)
        client = self.host.walrus
        with self.lock:
            snap = self.tables.snapshot(ns)
        info, rows, known, current_epoch = snap.info, snap.rows, snap.pages, snap.current_epoch
        writes_seen = int(info["writes_since_manifest"])
        entries = [mf.Entry(str(r[0]), int(r[1]), str(r[2]), r[3], r[4]) for r in rows]
        deadline = self.host.settings.publish_deadline
        inline: list[mf.Entry] | None = entries
        layout: list[tuple[str, int]] = []  # (digest, entry count) in page order
        placed: dict[str, tuple[str, str | None, int | None]] = {}  # digest -> location
        to_store: list[tuple[str, bytes]] = []
        if len(entries) > mf.INLINE_MAX:
            changed: list[tuple[list[mf.Entry], dict[str, Any], str]] = []
            for chunk in mf.chunk_entries(entries):
                record, digest = mf.page_record(chunk)
                reuse = known.get(digest)
                if reuse is not None and (
                    reuse[2] is None or current_epoch is None or reuse[2] > current_epoch + 1
                ):
                    placed[digest] = reuse  # unchanged and not about to expire: reuse it
                    layout.append((digest, len(chunk)))
                else:
                    changed.append((chunk, record, digest))
            # Changed entries ride inline in the root (one store call) up to about
            # 1 MiB of root; more become pages, stored together as one quilt.
            if sum(len(chunk) for chunk, _, _ in changed) <= mf.CHANGED_INLINE_MAX:
                inline = [entry for chunk, _, _ in changed for entry in chunk]
            else:
                inline = None
                for chunk, record, digest in changed:
                    layout.append((digest, len(chunk)))
                    if digest not in placed:
                        sealed_page = seal(keys, record, max_plaintext=MANIFEST_MAX_PLAINTEXT)
                        to_store.append((digest, sealed_page))
                        placed[digest] = ("", None, None)
        # New pages travel together: one quilt (or one blob), not one blob per page.
        new_pages: list[tuple[str, str, str | None, int | None]] = []
        for span in store_batches([len(data) for _, data in to_store]):
            part = [to_store[i] for i in span]
            if len(part) == 1:
                stored = client.store_blob(part[0][1], deadline=deadline)
                found: dict[str, str | None] = {part[0][0]: None}
            else:
                quilt = client.store_quilt(dict(part), deadline=deadline)
                check_patches(quilt.patches, [d for d, _ in part])
                stored = quilt.blob
                found = {d: quilt.patches.get(d) for d, _ in part}
            for digest, patch in found.items():
                placed[digest] = (stored.blob_id, patch, stored.end_epoch)
                new_pages.append((digest, stored.blob_id, patch, stored.end_epoch))
        pages = [(placed[d][0], placed[d][1], d, n) for d, n in layout]
        seq = int(info["manifest_seq"]) + 1
        now = time.time()
        root = mf.root_record(
            manifest_id=f"manifest-{new_memory_id()}", seq=seq, created_at=now,
            prev=info["manifest_blob_id"], model_id=info["model_id"], dim=info["dim"],
            count=len(entries), entries=inline, pages=pages,
        )
        stored = client.store_blob(
            seal(keys, root, max_plaintext=MANIFEST_MAX_PLAINTEXT), deadline=deadline
        )
        with self.lock:
            self.tables.record_manifest(
                ns, seq=seq, blob_id=stored.blob_id, head=stored.blob_id,
                parents=[info["manifest_blob_id"]] if info["manifest_blob_id"] else [],
                entries=len(entries), pages=len(pages), end_epoch=stored.end_epoch,
                new_pages=new_pages, writes_seen=writes_seen,
                registered_epoch=stored.registered_epoch)
        log.info("published manifest %d of %r (%d entries, %d pages)", seq, ns, len(entries),
                 len(pages))
        return stored.blob_id

    def restore(
        self,
        ns: str,
        manifest_blob_id: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> RestoreReport:
        """Rebuild a namespace's catalog and index from Walrus alone.

        Reads the manifest ``manifest_blob_id`` (default: the latest one
        recorded locally), fetches and verifies every fact blob / quilt patch
        it lists, re-embeds the texts and inserts them. Memories already
        present or forgotten in this data dir are skipped. ``progress(done,
        total)`` is called as facts are processed.
        """
        keys = self.host.keys_for(ns)
        self.host.check_model(ns)
        if manifest_blob_id is None:
            info = self.catalog.namespace(ns)
            manifest_blob_id = None if info is None else info["manifest_blob_id"]
            if manifest_blob_id is None:
                raise InvalidInput(
                    f"no manifest recorded here for namespace {ns!r}: pass manifest_blob_id "
                    "(Memory.stats().manifest_blob_id / `walrus-mem stats` where it was written)"
                )
        client = self.host.walrus

        def opener(expected_id: str | None, kind: str) -> Callable[[bytes], None]:
            def check(data: bytes) -> None:
                open_envelope(keys, data, expected_id=expected_id, expected_kind=kind)
            return check

        # A wrong key or namespace shows as WrongNamespace on the root: no failover helps.
        raw = read_checked(client, opener(None, "manifest"), blob_id=manifest_blob_id,
                            fail_fast=(WrongNamespace,))
        root = mf.parse_root(open_envelope(keys, raw, expected_kind="manifest"))
        entries = list(root.entries or [])
        for blob_id, patch_id, digest, _ in root.pages:
            page_raw = read_checked(client, opener(f"page-{digest}", "manifest-page"),
                                     blob_id=blob_id, patch_id=patch_id)
            entries.extend(mf.parse_page(
                open_envelope(keys, page_raw, expected_id=f"page-{digest}",
                              expected_kind="manifest-page"), digest))
        total = len(entries)
        present = set(self.catalog.memory_ids(ns))
        tombstoned = set(self.catalog.tombstones(ns))
        todo = [e for e in entries if e.memory_id not in present and e.memory_id not in tombstoned]
        skipped = total - len(todo)
        done = skipped
        restored = 0
        failed: list[tuple[str, str]] = []
        if progress is not None:
            progress(done, total)

        def fetch(entry: mf.Entry) -> tuple[mf.Entry, bytes, dict[str, Any]]:
            def check(data: bytes) -> None:
                record = open_envelope(keys, data, expected_id=entry.memory_id,
                                       expected_kind="fact")
                if record.get("version") != entry.version:
                    raise InvalidInput(f"blob holds version {record.get('version')}, "
                                       f"manifest says {entry.version}")

            data = read_checked(client, check, blob_id=entry.blob_id, patch_id=entry.patch_id)
            record = open_envelope(keys, data, expected_id=entry.memory_id, expected_kind="fact")
            return entry, data, record

        with ThreadPoolExecutor(max_workers=RESTORE_WORKERS) as pool:
            for start in range(0, len(todo), RESTORE_CHUNK):
                chunk = todo[start : start + RESTORE_CHUNK]
                fetched: list[tuple[mf.Entry, bytes, dict[str, Any]]] = []
                futures = [(e, pool.submit(fetch, e)) for e in chunk]
                for entry, future in futures:
                    try:
                        fetched.append(future.result())
                    except (WalrusMemError, ValueError) as exc:
                        failed.append((entry.memory_id, f"{type(exc).__name__}: {exc}"))
                restored += self._insert_restored(ns, keys, fetched)
                done += len(chunk)
                if progress is not None:
                    progress(done, total)
        with self.lock:
            self.tables.note_merged(ns, [manifest_blob_id], root.seq)
        with self.lock:
            self.indexes.save_all()
        return RestoreReport(namespace=ns, manifest_blob_id=manifest_blob_id, total=total,
                             restored=restored, skipped=total - restored - len(failed),
                             failed=failed)

    def _insert_restored(
        self,
        ns: str,
        keys: NamespaceKeys,
        fetched: list[tuple[mf.Entry, bytes, dict[str, Any]]],
    ) -> int:
        if not fetched:
            return 0
        texts = [str(rec.get("text", "")) for _, _, rec in fetched]
        vectors = self.host.embed_texts(texts)
        emb = self.host.embedder
        now = time.time()
        count = 0
        with self.lock, self.catalog.write():
            self.catalog.adopt_model(ns, emb.model_id, emb.dim)
            for (entry, data, rec), text, vector in zip(fetched, texts, vectors, strict=True):
                metadata = rec.get("metadata") if isinstance(rec.get("metadata"), dict) else {}
                key = self.catalog.insert_memory(ns, {
                    "id": entry.memory_id, "text": text,
                    "metadata": json.dumps(metadata, sort_keys=True),
                    "category": rec.get("category"),
                    "importance": float(rec.get("importance") or DEFAULT_IMPORTANCE),
                    "created_at": float(rec.get("created_at") or now),
                    "updated_at": float(rec.get("updated_at") or now),
                    "expires_at": rec.get("expires_at"), "version": entry.version,
                    "dedupe_hash": keys.dedupe_hash(text), "status": "published",
                    "blob_id": entry.blob_id, "quilt_patch_id": entry.patch_id,
                    "end_epoch": entry.end_epoch, "sealed": data,
                    "vector": vector_to_blob(vector), "digest": mf.sealed_digest(data),
                }, event="RESTORE", at=now)
                if key is not None:
                    count += 1
        with self.lock:
            self.indexes.refresh(ns)
        return count

