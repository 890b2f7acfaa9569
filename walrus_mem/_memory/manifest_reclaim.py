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
- a kept head's manifest: the page quilts its root lists are kept (pages are reused
  from one manifest to the next); another page quilt goes with its ``manifest_pages``
  rows, so no later manifest reuses a page from it (when a kept root cannot be read,
  every page quilt is kept); any blob that holds a live memory's version is kept;
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

from .._log.manifest import parse_root
from ..envelope import open_envelope
from ..errors import WalrusMemError
from .served_mark import clear_mark

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


def _pages_in_use(parts: Parts, ns: str, heads: list[str]) -> set[str] | None:
    """The page quilts the roots of ``heads`` list (read from the relayer and opened),
    or None when one of them cannot be read."""
    client = parts.publisher.backend().client
    keys = parts.keys.for_namespace(ns)
    out: set[str] = set()
    for blob_id in heads:
        try:
            root = parse_root(open_envelope(keys, client.read_blob(blob_id),
                                            expected_kind="manifest"))
        except (WalrusMemError, ValueError, KeyError, TypeError) as exc:
            log.info("manifest %s not read (%s): its pages are all kept", blob_id,
                     type(exc).__name__)
            return None
        out |= {page[0] for page in root.pages}
    return out


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
    heads = {ref.blob_id: ref for ref in [*nslog.newest(ns), *nslog.merged(ns)]}
    keep = set(heads)
    page_blobs = {str(r[0]) for r in catalog.query(
        "SELECT blob_id FROM manifest_pages WHERE namespace = ?", (ns,))}
    own = {str(r[0]) for r in catalog.query(
        "SELECT blob_id FROM manifests WHERE namespace = ?", (ns,))}
    # only this data dir's manifests are in its embedded relayer (a head of another data
    # dir, from the per-user heads file, lists that data dir's own blobs)
    in_use = _pages_in_use(parts, ns, [b for b in heads if b in own])
    keep |= page_blobs if in_use is None else in_use
    backend = parts.publisher.backend()
    deleted: list[str] = []
    for blob_id in sorted(page_blobs - keep):  # superseded page quilts, never reused again
        if catalog.live_versions_in_blob(blob_id):
            continue
        with catalog.write() as c:
            c.execute("DELETE FROM manifest_pages WHERE namespace = ? AND blob_id = ?",
                      (ns, blob_id))
        done, reason = backend.delete_blob(blob_id)
        if done:
            deleted.append(blob_id)
        else:
            log.info("superseded manifest pages %s kept: %s", blob_id, reason)
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
        clear_mark(parts, ns)  # it may name a deleted head, or list a deleted manifest
        log.info("%d superseded manifest(s) of %r deleted from the embedded relayer",
                 len(deleted), ns)
    return deleted
