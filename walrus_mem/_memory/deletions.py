"""Blobs of forgotten memories that are still to be deleted (catalog table ``pending_deletions``).

A forget writes its tombstone and these rows in one transaction
(:meth:`Catalog.forget_memory`; a store that completes after the forget of
one of its members adds its blob in :meth:`Catalog.record_location`), so a
process killed before the deletion leaves the work recorded: ``sync``,
``restore`` and ``pull`` retry it (``Publisher.retry_deletions``) until the
blob is deleted, or kept for a reason that no retry changes (a quilt another
live memory is stored in, a permanent blob, a backend with no delete).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .._catalog.catalog import Catalog
from .._log.heads import HeadRef
from ..errors import StorageError, WalrusMemError
from ..models import ForgetReport

if TYPE_CHECKING:
    from .._log.namespace_log import NamespaceLog
    from .parts import Parts

__all__ = ["failed", "forget", "pending", "quilt_members_elsewhere", "settle"]

log = logging.getLogger(__name__)


def pending(catalog: Catalog, namespace: str | None = None, *,
            blobs: Iterable[str] | None = None) -> dict[str, bool | None]:
    """Blob id -> deletable flag of the deletions still to do (of ``namespace``, or
    among ``blobs``)."""
    sql, params = "SELECT blob_id, deletable FROM pending_deletions", []
    if namespace is not None:
        sql += " WHERE namespace = ?"
        params.append(namespace)
    rows = catalog.query(sql + " ORDER BY at", params)
    wanted = None if blobs is None else set(blobs)
    return {str(r[0]): None if r[1] is None else bool(r[1]) for r in rows
            if wanted is None or str(r[0]) in wanted}


def settle(catalog: Catalog, blob_ids: Iterable[str]) -> None:
    """Drop the rows of blobs deleted, or kept for a reason no retry changes."""
    ids = [(b,) for b in blob_ids]
    if ids:
        with catalog.write() as c:
            c.executemany("DELETE FROM pending_deletions WHERE blob_id = ?", ids)


def failed(catalog: Catalog, reasons: dict[str, str]) -> None:
    """Note why these deletions did not happen yet (they stay for the next retry)."""
    if reasons:
        with catalog.write() as c:
            c.executemany(
                "UPDATE pending_deletions SET attempts = attempts + 1, last_error = ?, at = ? "
                "WHERE blob_id = ?", [(why, time.time(), b) for b, why in reasons.items()])


def quilt_members_elsewhere(catalog: Catalog, log_: NamespaceLog, blob_id: str,
                            cache: dict[str, dict[str, set[str]] | str]) -> set[str] | str:
    """Memories not forgotten here that any manifest this data dir knows (merged, seen, or
    an interrupted restore's) lists live in quilt ``blob_id``: e.g. one whose fetch
    failed during a restore, so no local row counts it. A reason (str) when those
    manifests cannot be read now: the quilt is then kept and retried. ``cache`` holds
    what one call of ``Publisher.delete_blobs`` read, per namespace."""
    row = catalog.query_one(
        "SELECT namespace FROM versions WHERE blob_id = ? AND quilt_patch_id IS NOT NULL "
        "LIMIT 1", (blob_id,))
    if row is None:
        return set()  # a blob of its own holds one memory
    ns = str(row[0])
    # merged but not fetched yet (catalog_log pending entries, manifest JSON: "b" = blob id)
    waiting = {mid for mid, entry in log_.tables.pending(ns).items()
               if isinstance(entry, dict) and entry.get("b") == blob_id}
    waiting -= set(catalog.tombstones(ns))
    if waiting:
        return waiting  # known without reading any manifest
    if ns not in cache:
        try:
            heads = {*log_.merged(ns), *log_.newest(ns)}
            marker = log_.tables.restoring(ns) or {}
            heads.update(HeadRef.parse(h) for h in marker.get("heads", []))
            found: dict[str, set[str]] = {}
            for ref in heads:
                for entry in log_.read(ns, ref)[1]:
                    if not entry.deleted and entry.blob_id:
                        found.setdefault(str(entry.blob_id), set()).add(entry.memory_id)
            cache[ns] = found
        except (WalrusMemError, ValueError) as exc:
            cache[ns] = (f"cannot tell which memories the quilt holds: the manifests of "
                         f"{ns!r} are unreadable now ({type(exc).__name__}); kept, "
                         "retried by the next sync")
    known = cache[ns]
    if isinstance(known, str):
        return known
    listed = known.get(blob_id, set())
    return listed - set(catalog.tombstones(ns)) if listed else set()


def forget(parts: Parts, ns: str, ids: list[str]) -> ForgetReport:
    """Forget ``ids`` of ``ns`` (Memory.forget / forget_all): tombstones in chunks of 500,
    then the blobs deleted where nothing live is stored in them, then a manifest when
    the namespace already has one and the epoch is known."""
    now = time.time()
    forgotten: list[str] = []
    blob_refs: dict[str, bool | None] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        with parts.lock, parts.catalog.write():
            for mid in chunk:
                blobs = parts.catalog.forget_memory(ns, mid, now)
                if blobs is None:
                    continue
                blob_refs.update(blobs)
                forgotten.append(mid)
            parts.catalog.bump_writes(ns, len(chunk))
        with parts.lock:
            parts.indexes.refresh(ns)
    with parts.lock:
        parts.catalog.scrub()
        if forgotten and parts.catalog.count(ns) == 0:
            # Nothing left: an empty rebuild is free and drops removed vectors from disk.
            info = parts.catalog.namespace(ns)
            if info is not None and info["model_id"] is not None:
                parts.indexes.rebuild(ns, str(info["model_id"]), int(info["dim"]))
    deleted, kept = parts.publisher.delete_blobs(blob_refs)
    manifest_id = None
    info = parts.catalog.namespace(ns)
    if forgotten and info is not None and info["manifest_blob_id"] is not None \
            and parts.epochs.ok_for_manifest(ns, now):
        try:
            manifest_id = parts.log.publish(ns)
        except (StorageError, WalrusMemError) as exc:
            log.warning("manifest after forget deferred to the next sync: %s", exc)
    return ForgetReport(forgotten=forgotten, deleted_blobs=deleted, kept_blobs=kept,
                        manifest_blob_id=manifest_id)
