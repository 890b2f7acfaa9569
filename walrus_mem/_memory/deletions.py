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

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .._catalog.catalog import Catalog
from .._log.heads import HeadRef
from ..errors import WalrusMemError

if TYPE_CHECKING:
    from .._log.namespace_log import NamespaceLog

__all__ = ["failed", "pending", "quilt_members_elsewhere", "settle"]


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
    row = catalog.query_one(  # memories: the current versions' (catalog schema 8)
        "SELECT namespace FROM versions WHERE blob_id = ? AND quilt_patch_id IS NOT NULL "
        "UNION ALL SELECT namespace FROM memories WHERE blob_id = ? "
        "AND quilt_patch_id IS NOT NULL LIMIT 1", (blob_id, blob_id))
    if row is None:
        return set()  # a blob of its own holds one memory
    ns = str(row[0])
    # merged but not fetched yet (log_tables pending entries, manifest JSON: "b" = blob id)
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
