"""Re-statements: ``remember`` of a text that a live memory already holds is a write.

A forget made elsewhere (another machine, or a copy of this data dir restored from a
backup) that this data dir has not merged yet is a tombstone of the memory's id, and
a tombstone wins over every version of that id (merge.py). Had a re-statement just
returned the live memory, the next pull would take the fact the user has just stated
again away with it (issue 23, item 7), while a machine that never held it would keep
the same statement under a new id.

So a re-statement moves the memory to a **new id**: the same content (text, metadata,
category, importance, creation time, expiry) sealed under the new id at version 1,
queued and published like a new memory (in the same quilt as the call's new facts),
and the old id forgotten here, in the same catalog transaction (its tombstone travels
with the next manifest, its blobs are deleted as :meth:`Memory.forget` does). Merged
with any forget of the old id, in any order and on any machine, the fact stays live
under the new id: a tombstone only ever comes from a forget of that very id. A forget
of the new id, by anyone who has seen it, forgets the fact as usual.

The price is that of a write: one sealed copy published and one tombstone per
re-stated memory, and the caller gets the new id back (``deduplicated=True``); the old
id answers :class:`MemoryNotFound` from then on. Items of one call with one text share
one new id; a memory stored under a fixed id (repair's salvage) is not a re-statement.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._catalog.catalog import Catalog, vector_to_blob
from .._catalog.rows import loads_metadata
from .._log import manifest as mf
from .inputs import new_memory_id

__all__ = ["Moved", "Snapshot", "move", "snapshot"]


@dataclass(frozen=True)
class Snapshot:
    """A live memory's content as a re-statement copies it (read before the write)."""

    memory_id: str
    text: str
    metadata: dict[str, Any]
    category: str | None
    importance: float
    created_at: float
    expires_at: float | None
    vector: bytes


@dataclass(frozen=True)
class Moved:
    """One re-statement done: the new id, its sealed copy, the old id's blobs."""

    memory_id: str
    sealed: bytes
    old_blobs: dict[str, bool | None]


SealFact = Callable[[str, Snapshot, float], bytes]
"""Seal ``snapshot``'s content as version 1 of a new id, updated at the given time."""


def snapshot(catalog: Catalog, ns: str, holders: Mapping[str, str]) -> dict[str, Snapshot]:
    """Dedupe hash -> the content of the memory holding it, for each of ``holders``
    (dedupe hash -> memory id) still live. The stored vector is reused: same text,
    same model, nothing to embed."""
    if not holders:
        return {}
    rows = catalog.memories_by_ids(ns, list(holders.values()))
    vectors = catalog.vectors_by_keys(ns, [int(r["key"]) for r in rows.values()])
    out: dict[str, Snapshot] = {}
    for dedupe_hash, mid in holders.items():
        row = rows.get(mid)
        if row is None or int(row["key"]) not in vectors:
            continue  # forgotten meanwhile: the text is stored as a new memory then
        out[dedupe_hash] = Snapshot(
            mid, str(row["text"]), loads_metadata(row["metadata"]), row["category"],
            float(row["importance"]), float(row["created_at"]), row["expires_at"],
            vector_to_blob(vectors[int(row["key"])]))
    return out


def move(catalog: Catalog, ns: str, dedupe_hash: str, snap: Snapshot, now: float,
         seal_fact: SealFact) -> Moved | None:
    """Re-state ``snap`` under a new id and forget its old id; the caller holds the
    catalog's write transaction. None when another writer re-stated or stored that
    text meanwhile (its id answers for this call too)."""
    holder = catalog.ids_by_dedupe_hash(ns, [dedupe_hash]).get(dedupe_hash)
    if holder is not None and holder != snap.memory_id:
        return None
    old_blobs: dict[str, bool | None] = {}
    if holder is not None:
        old_blobs = catalog.forget_memory(ns, snap.memory_id, now) or {}
        catalog.bump_writes(ns, 1)  # the next manifest carries the tombstone
    new_id = new_memory_id()
    sealed = seal_fact(new_id, snap, now)
    key = catalog.insert_memory(ns, {
        "id": new_id, "text": snap.text, "metadata": json.dumps(snap.metadata, sort_keys=True),
        "category": snap.category, "importance": snap.importance,
        "created_at": snap.created_at, "updated_at": now, "expires_at": snap.expires_at,
        "version": 1, "dedupe_hash": catalog.dedupe_slot(ns, dedupe_hash, new_id),
        "status": "queued", "sealed": sealed, "vector": snap.vector,
        "digest": mf.sealed_digest(sealed),
    }, event="ADD", at=now)
    assert key is not None, "a new id and a free dedupe slot cannot clash"
    return Moved(new_id, sealed, old_blobs)
