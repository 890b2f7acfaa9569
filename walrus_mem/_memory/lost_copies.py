"""Memories whose sealed copy only the embedded relayer held, and it lost or changed it.

A published row keeps no sealed copy while the embedded relayer of the data dir holds it
(walrus_mem._catalog.held). If that folder's file is removed (a delete, a reset, a copy of
the data dir without it) or changed, the row's digest no longer finds its bytes: nothing
else holds that version, so, like a queued memory whose copy does not open (repair), it is
sealed again from the row (text, metadata, category, importance, times, same version), with
its vector embedded again, and queued for publishing. Its text then comes from the
unauthenticated row: the callers report it (repair's ``resealed``, renewal's log).

Repair finds such rows (integrity.damaged_sealed) and so does renewal, when a memory due
for a re-store has no copy to store (:func:`reseal_lost`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Collection
from typing import TYPE_CHECKING

from .._catalog.catalog import vector_to_blob
from .._log.manifest import sealed_digest
from .._recall.carried import identity
from .records import fact_record, seal_fact

if TYPE_CHECKING:
    from .parts import Parts

__all__ = ["reseal_lost"]

log = logging.getLogger(__name__)

_BATCH = 666  # facts per outbox batch (the quilt limit)


def reseal_lost(parts: Parts, ns: str, ids: Collection[str]) -> list[str]:
    """Seal again from their rows the memories of ``ids`` whose row keeps no sealed copy
    and whose embedded relayer's copy is gone or fails its digest; queue them. Returns
    their ids (the others, still readable or keeping their copy, are left alone)."""
    catalog = parts.catalog
    if not ids or catalog.sealed_source is None:
        return []
    rows = catalog.query(
        "SELECT * FROM memories WHERE id IN (SELECT value FROM json_each(?)) AND "
        "namespace = ? AND sealed IS NULL ORDER BY key", (json.dumps(sorted(ids)), ns))
    lost = [r for r in rows if catalog.sealed_from_row(r) is None]
    if not lost:
        return []
    keys = parts.keys.for_namespace(ns)
    embedder = parts.embedding.embedder
    vectors = parts.embedding.embed([str(r["text"]) for r in lost])
    sealed: list[tuple[str, int, bytes, bytes]] = []
    for row, vector in zip(lost, vectors, strict=True):
        record = fact_record(
            str(row["id"]), int(row["version"]), str(row["text"]),
            json.loads(row["metadata"] or "{}"), row["category"], float(row["importance"]),
            float(row["created_at"]), float(row["updated_at"]), row["expires_at"])
        raw = vector_to_blob(vector)
        data = seal_fact(keys, record, max_plaintext=parts.publisher.max_plaintext(),
                         ident=identity(embedder), vector=raw)
        sealed.append((str(row["id"]), int(row["version"]), data, raw))
    with parts.lock, catalog.write() as c:
        done: list[tuple[str, int]] = []
        for mid, version, data, raw in sealed:
            cur = c.execute(
                "UPDATE memories SET sealed = ?, digest = ?, vector = ?, status = 'queued', "
                "blob_id = NULL, quilt_patch_id = NULL, object_id = NULL, end_epoch = NULL, "
                "deletable = NULL WHERE id = ? AND namespace = ? AND version = ? "
                "AND sealed IS NULL", (data, sealed_digest(data), raw, mid, ns, version))
            if cur.rowcount:
                done.append((mid, version))
        for start in range(0, len(done), _BATCH):
            catalog.add_outbox_batch(ns, done[start:start + _BATCH], time.time())
    if done:
        log.warning("%d memories of %r whose sealed copy only the embedded relayer held (now "
                    "gone or changed there) were sealed again from their catalog rows and "
                    "queued: their text comes from the row, which nothing authenticates",
                    len(done), ns)
    return [mid for mid, _ in done]
