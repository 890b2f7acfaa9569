"""Superseded manifests in the embedded relayer (issue 28 item 4), deleted by ``compact``.

Every manifest a data dir publishes stays in its store: with the embedded relayer
(no Walrus endpoint configured) that is the data dir itself, where ten manifests of
a growing namespace took 1,180 bytes per memory at 10k (docs/benchmarks.md). Only
this data dir can read its embedded relayer, so whether an old manifest is still
needed is known here. A manifest root this data dir published is deleted when none of
these may still read it:

- the namespace log: its newest heads (own and seen, including the per-user heads
  file's lines) and the heads its local state contains are kept; an ancestry walk
  over the older ones uses the seen-heads table (parents recorded when first seen),
  not the blobs;
- a later manifest: every page blob the catalog knows (``manifest_pages``) is kept,
  since pages are reused from one manifest to the next, and so is any blob that
  holds a live memory's version;
- a restore or pull under way or interrupted in this namespace: then nothing is
  deleted (its plan may name an older head).

On Walrus proper blobs are public and other machines may still hold an older head,
so nothing is deleted there (and the HTTP API has no delete): the roots expire with
their epochs. A relayer injected into Memory (``walrus=``) may be shared: nothing is
deleted from it either.

Why at ``compact`` and not after every publish (which would keep the footprint at rest
1,100 bytes per memory lower at 10k, measured): a head this data dir printed or
exported before (``keys export --with-heads``, a head reference from ``sync``) stays
restorable from the embedded relayer's folder (served with ``walrus-mem relayer``,
docs/keys.md) until the user compacts; after ``compact`` only the newest head is.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from .parts import Parts

__all__ = ["reclaim_manifests", "reclaim_superseded"]

log = logging.getLogger(__name__)

FLOOR_KEY: Final = "manifests_reclaimed:"  # meta key prefix (+ namespace): seq done up to


def reclaim_manifests(parts: Parts, ns: str) -> list[str]:
    """Delete ``ns``'s superseded manifest roots from the embedded relayer; their ids."""
    if not _embedded(parts):
        return []
    with parts.log.turn(ns, wait=True):  # no manifest of ns is being published meanwhile
        return reclaim_superseded(parts, ns)


def _embedded(parts: Parts) -> bool:
    backend = parts.publisher.backend()
    return backend.is_embedded and backend.can_delete


def reclaim_superseded(parts: Parts, ns: str) -> list[str]:
    """:func:`reclaim_manifests` for a caller holding the namespace's turn. Manifests up
    to the meta ``manifests_reclaimed:<ns>`` seq were all deleted before: each call looks
    only at the ones published since (a kept one stops the floor until it goes)."""
    if not _embedded(parts):
        return []
    catalog, nslog = parts.catalog, parts.log
    if nslog.unfinished(ns) is not None:
        return []
    top = catalog.query_one("SELECT max(seq) FROM manifests WHERE namespace = ?", (ns,))
    floor = int(catalog.get_meta(FLOOR_KEY + ns) or 0)
    rows = catalog.query(
        "SELECT seq, blob_id FROM manifests WHERE namespace = ? AND seq > ? AND seq < ? "
        "ORDER BY seq", (ns, floor, int(top[0]) if top and top[0] is not None else 0))
    if not rows:
        return []
    keep = {ref.blob_id for ref in nslog.newest(ns)}
    keep |= {ref.blob_id for ref in nslog.merged(ns)}
    keep |= {str(r[0]) for r in catalog.query(
        "SELECT blob_id FROM manifest_pages WHERE namespace = ?", (ns,))}
    backend = parts.publisher.backend()
    deleted: list[str] = []
    settled, stopped = floor, False
    for seq, blob_id in rows:
        blob_id = str(blob_id)
        done = False
        if blob_id not in keep and not catalog.live_versions_in_blob(blob_id):
            done, reason = backend.delete_blob(blob_id)
            if done:
                deleted.append(blob_id)
            else:
                log.info("superseded manifest %s kept: %s", blob_id, reason)
        stopped = stopped or not done
        if not stopped:
            settled = int(seq)
    if settled != floor:
        catalog.set_meta(FLOOR_KEY + ns, str(settled))
    if deleted:
        log.info("%d superseded manifest(s) of %r deleted from the embedded relayer",
                 len(deleted), ns)
    return deleted
