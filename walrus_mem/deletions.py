"""Blobs of forgotten memories that are still to be deleted (catalog table ``pending_deletions``).

A forget writes its tombstone and these rows in one transaction
(:meth:`Catalog.forget_memory`; a store that completes after the forget of
one of its members adds its blob in :meth:`Catalog.record_location`), so a
process killed before the deletion leaves the work recorded: ``sync``,
``restore`` and ``pull`` retry it (``Memory._retry_deletions``) until the
blob is deleted, or kept for a reason that no retry changes (a quilt another
live memory is stored in, a permanent blob, a backend with no delete).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from .catalog import Catalog

__all__ = ["failed", "pending", "settle"]


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
