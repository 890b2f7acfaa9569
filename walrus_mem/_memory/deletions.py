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
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from .._catalog.catalog import Catalog
from .._log.heads import HeadRef
from ..errors import WalrusMemError

if TYPE_CHECKING:
    from ..memory import Memory

__all__ = ["delete_blobs", "failed", "pending", "quilt_members_elsewhere", "retry", "settle"]


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


def delete_blobs(
    mem: Memory, blobs: Mapping[str, bool | None]
) -> tuple[list[str], dict[str, str]]:
    """Delete blobs of forgotten memories where nothing live is stored in them; settle
    their ``pending_deletions`` rows, except where a later retry may do better
    (``Memory._delete_blobs``)."""
    deleted: list[str] = []
    kept: dict[str, str] = {}
    retry_later: dict[str, str] = {}
    members: dict[str, dict[str, set[str]] | str] = {}  # namespace -> quilts known
    for blob_id, deletable in blobs.items():
        live = mem._catalog.live_versions_in_blob(blob_id)
        if live > 0:
            kept[blob_id] = (
                f"quilt still holds {live} other live memory version(s); "
                "a single quilt patch cannot be deleted"
            )
            continue
        if deletable is False:
            kept[blob_id] = "permanent blob: cannot be deleted before its end epoch"
            continue
        backend = mem._get_backend()
        if not backend.can_delete:  # real Walrus over HTTP: no reads for nothing
            kept[blob_id] = backend.delete_blob(blob_id)[1]
            if backend.delete_unknown:  # the server was unreachable: ask again later
                retry_later[blob_id] = kept[blob_id]
            continue
        others = quilt_members_elsewhere(mem, blob_id, members)
        if isinstance(others, str):
            kept[blob_id] = retry_later[blob_id] = others
            continue
        if others:
            kept[blob_id] = (
                f"quilt holds {len(others)} live memory(ies) this data dir knows of but "
                "does not hold (not fetched yet, or in a head not merged yet): kept"
            )
            continue
        ok, reason = backend.delete_blob(blob_id)
        if ok:
            deleted.append(blob_id)
        else:
            kept[blob_id] = retry_later[blob_id] = reason  # a failed request: try again later
    with mem._lock:
        settle(mem._catalog, [b for b in blobs if b not in retry_later])
        failed(mem._catalog, retry_later)
    return deleted, kept


def retry(mem: Memory, namespace: str | None) -> list[str]:
    """Run the deletions recorded but not finished (a process killed, a backend that
    failed the request); return error lines for what is still waiting (never raises)."""
    todo = pending(mem._catalog, namespace)
    if not todo:
        return []
    try:
        _, kept = mem._delete_blobs(todo)
    except WalrusMemError as exc:
        return [f"pending blob deletions: {type(exc).__name__}: {exc}"]
    left = pending(mem._catalog, namespace, blobs=kept)
    return [f"{len(left)} blob(s) of forgotten memories not deleted yet, retried by the "
            f"next sync: {next(iter(kept[b] for b in left))}"] if left else []


def quilt_members_elsewhere(mem: Memory, blob_id: str,
                            cache: dict[str, dict[str, set[str]] | str]) -> set[str] | str:
    """Memories not forgotten here that any manifest this data dir knows (merged, seen, or
    an interrupted restore's) lists live in quilt ``blob_id``: e.g. one whose fetch
    failed during a restore, so no local row counts it. A reason (str) when those
    manifests cannot be read now: the quilt is then kept and retried. ``cache`` holds
    what one call of ``Memory._delete_blobs`` read, per namespace."""
    row = mem._catalog.query_one(
        "SELECT namespace FROM versions WHERE blob_id = ? AND quilt_patch_id IS NOT NULL "
        "LIMIT 1", (blob_id,))
    if row is None:
        return set()  # a blob of its own holds one memory
    ns = str(row[0])
    # merged but not fetched yet (catalog_log pending entries, manifest JSON: "b" = blob id)
    waiting = {mid for mid, entry in mem._log.tables.pending(ns).items()
               if isinstance(entry, dict) and entry.get("b") == blob_id}
    waiting -= set(mem._catalog.tombstones(ns))
    if waiting:
        return waiting  # known without reading any manifest
    if ns not in cache:
        log_ = mem._log
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
    return listed - set(mem._catalog.tombstones(ns)) if listed else set()
