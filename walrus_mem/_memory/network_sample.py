"""What the network checks of network_reset.py read: the blobs that must still be live
by the clock (from the catalog and the cost ledger), and whether an aggregator serves
one (one byte)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection
from typing import TYPE_CHECKING, Final

from .._log.heads import HeadRef
from .._walrus.epoch_guard import refused_ends
from ..errors import BlobNotFound, LocalStoreError

if TYPE_CHECKING:
    from .parts import Parts

__all__ = ["SAMPLE", "SERVED_DEADLINE", "is_served", "live_blobs", "mark_blobs", "own_sample",
           "sample_blobs", "stored_at", "stored_since"]

SAMPLE: Final = 3  # blobs read to confirm a reset
SERVED_DEADLINE: Final = 5.0  # seconds the per-sync "is our newest head served?" read may take


def sample_blobs(parts: Parts, old_now: int, exclude: Collection[str] = (),
                 before: float | None = None) -> list[str]:
    """Blobs that must still be live by the old clock: the newest ones our memories live
    in, our newest manifest, the newest head of each namespace's local state (not those
    in ``exclude``; with ``before``, only manifests stored before then and no heads)."""
    catalog = parts.catalog
    sample = [str(r[0]) for r in catalog.query(
        "SELECT blob_id FROM memories WHERE status = 'published' AND blob_id IS NOT NULL "
        "AND end_epoch > ? AND blob_id NOT IN (SELECT value FROM json_each(?)) "
        "GROUP BY blob_id ORDER BY max(end_epoch) DESC LIMIT ?",
        (old_now, json.dumps(list(exclude)), SAMPLE))]
    sample += [str(r[0]) for r in catalog.query(
        "SELECT blob_id FROM manifests WHERE end_epoch > ? AND at < ? ORDER BY seq DESC "
        "LIMIT 1", (old_now, float("inf") if before is None else before))]
    if before is not None:
        return sample
    for ns in catalog.namespaces():
        merged = parts.log.merged(ns)
        if merged:
            bound, _ = parts.log.seen.end_bound(ns, merged[0].blob_id)
            if bound is not None and bound > old_now:
                sample.append(merged[0].blob_id)
    return sample


def live_blobs(parts: Parts, blobs: list[str]) -> list[str]:
    """Those of ``blobs`` the catalog still needs and the clock says must be live: a
    memory (or a manifest) still lives there. A forget may have deleted the others, a
    rotation replaced them."""
    if not blobs:
        return []
    now = parts.epochs.clock.current() or 0
    rows = parts.catalog.query(  # by blob id (an index), never a scan of the memories
        "SELECT value FROM json_each(?) j WHERE EXISTS (SELECT 1 FROM memories m WHERE "
        "m.blob_id = j.value AND m.status = 'published' AND m.end_epoch > ?) OR EXISTS "
        "(SELECT 1 FROM manifests f WHERE f.blob_id = j.value AND f.end_epoch > ?)",
        (json.dumps(blobs), now, now))
    return [str(b) for (b,) in rows]


def mark_blobs(parts: Parts, witnesses: list[str]) -> list[str]:
    """What to read beside a marked head that answered 404: its ``witnesses`` still in use
    and the blobs this data dir stored last (stored and read back on the old network,
    then lost with it, while the heads it reads may be the new network's: N8)."""
    own = own_sample(parts, parts.epochs.clock.current() or 0)
    return [*live_blobs(parts, witnesses), *(b for b in own if b not in witnesses)]


def stored_since(parts: Parts, ns: str, ref: HeadRef) -> list[str]:
    """Blobs this data dir stored after it first saw (or stored) the head ``ref`` (the
    cost ledger's store times): on another network since, they are served and say
    nothing of what the head's network held. Empty when the ledger has none."""
    _, seen_at = parts.log.seen.end_bound(ns, ref.blob_id)
    try:
        if seen_at is None:  # heads.sqlite3 lost: the time this data dir published it
            rows = parts.catalog.query(
                "SELECT DISTINCT c.blob_id FROM store_costs c JOIN manifests m ON "
                "m.blob_id = ? WHERE c.at > m.at", (ref.blob_id,))
        else:
            rows = parts.catalog.query(
                "SELECT DISTINCT blob_id FROM store_costs WHERE at > ?", (seen_at,))
    except (sqlite3.Error, LocalStoreError):  # no ledger (a catalog of an older version)
        return []
    return [str(b) for (b,) in rows]


def own_sample(parts: Parts, old_now: int) -> list[str]:
    """The blobs this data dir stored itself last (the cost ledger) that a memory still
    lives in and that must be live by the clock (not those whose answers it refused)."""
    try:
        # from the ledger (a row per store), each blob looked up by id: grouping the
        # memories by blob read every row of the namespace (725 ms at 1M, per manifest)
        rows = parts.catalog.query(
            "SELECT c.blob_id FROM store_costs c WHERE c.blob_id NOT IN (SELECT value FROM "
            "json_each(?)) AND EXISTS (SELECT 1 FROM memories m WHERE m.blob_id = c.blob_id "
            "AND m.status = 'published' AND m.end_epoch > ?) GROUP BY c.blob_id "
            "ORDER BY max(c.at) DESC LIMIT ?",
            (json.dumps(list(refused_ends(parts.epochs.clock.store))), old_now, SAMPLE))
    except (sqlite3.Error, LocalStoreError):  # no ledger (a catalog of an older version)
        return []
    return [str(b) for (b,) in rows]


def stored_at(parts: Parts, blobs: list[str]) -> float | None:
    """When this data dir stored the first of ``blobs`` (the cost ledger), if known."""
    try:
        row = parts.catalog.query_one(
            "SELECT min(at) FROM store_costs WHERE blob_id IN (SELECT value FROM json_each(?))",
            (json.dumps(blobs),))
    except (sqlite3.Error, LocalStoreError):
        return None
    return None if row is None or row[0] is None else float(row[0])


def is_served(parts: Parts, blob: str) -> bool:
    """Whether an aggregator serves ``blob`` (one byte read); other failures raise."""
    try:  # one question, not a wait: a 404 only leads to asking the network's epoch
        parts.publisher.client.read_byte_range(blob, 0, 1,
                                   deadline=min(SERVED_DEADLINE, parts.settings.read_deadline))
        return True
    except BlobNotFound:
        return False
