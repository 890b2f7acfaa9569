"""Superseded manifests in the embedded relayer (issue 28 item 4, run by ``compact``).

Every manifest a data dir publishes stays in its store: with the embedded relayer
(no Walrus endpoint configured) that is the data dir itself, where ten manifests of
a growing namespace took 1,180 bytes per memory at 10k (docs/benchmarks.md). Only
this data dir can read its embedded relayer, so whether an old manifest is still
needed is known here. ``compact`` deletes a manifest root this data dir published
when none of these may still read it:

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
their epochs.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .parts import Parts

__all__ = ["reclaim_manifests"]

log = logging.getLogger(__name__)


def reclaim_manifests(parts: Parts, ns: str) -> list[str]:
    """Delete ``ns``'s superseded manifest roots from the embedded relayer; their ids."""
    backend = parts.publisher.backend()
    if not backend.is_embedded or not backend.can_delete:
        return []
    catalog, nslog = parts.catalog, parts.log
    with nslog.turn(ns, wait=True):  # no manifest of ns is being published meanwhile
        if nslog.unfinished(ns) is not None:
            return []
        keep = {ref.blob_id for ref in nslog.newest(ns)}
        keep |= {ref.blob_id for ref in nslog.merged(ns)}
        keep |= {str(r[0]) for r in catalog.query(
            "SELECT blob_id FROM manifest_pages WHERE namespace = ?", (ns,))}
        top = catalog.query_one("SELECT max(seq) FROM manifests WHERE namespace = ?", (ns,))
        rows = catalog.query(
            "SELECT DISTINCT blob_id FROM manifests WHERE namespace = ? AND seq < ?",
            (ns, int(top[0]) if top and top[0] is not None else 0))
        deleted: list[str] = []
        for (blob_id,) in rows:
            blob_id = str(blob_id)
            if blob_id in keep or catalog.live_versions_in_blob(blob_id):
                continue
            ok, reason = backend.delete_blob(blob_id)
            if ok:
                deleted.append(blob_id)
            else:
                log.info("superseded manifest %s kept: %s", blob_id, reason)
    if deleted:
        log.info("compact: %d superseded manifest(s) of %r deleted from the embedded relayer",
                 len(deleted), ns)
    return deleted
