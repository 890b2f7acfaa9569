"""Sync's renewal: re-publish what is about to expire before a manifest lists it.

``Memory.sync`` calls :func:`renew_due` for each namespace it may publish a
manifest for. Memories whose blobs end within ``Settings.renew_margin_epochs``
of the current epoch (the mock's exact clock, else the epoch clock learned
from store answers; see :mod:`walrus_mem.expiry`) are stored again from their
verified sealed bytes, like ``extend``; a damaged copy is never stored (it is
reported, and ``walrus-mem repair`` fixes it). A head manifest that itself
ends within the margin makes the namespace due for a fresh manifest. When
``Settings.epochs`` is not above the margin, a re-store could not move an end
past it, so only what has already expired is renewed.

The default margin of one epoch also covers the clock's lag (at most one
epoch behind the network between stores), so a blob that has just expired is
renewed rather than listed.

``sync`` first makes sure the clock can be trusted (``Memory.epoch_estimate``):
the mock's exact epoch, or a clock that bounds the epoch to within one (a
configured or network-known epoch length, or learned bounds close enough), or
a store answer seen during this sync; else it stores a small probe blob to
read the epoch. Should even that fail, the namespace publishes no manifest
(it could list an expired blob) and the sync reports why.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .memory import Memory

__all__ = ["renew_due"]

log = logging.getLogger(__name__)


def renew_due(mem: Memory, namespace: str, errors: list[str], current: int | None) -> int:
    """Renew ``namespace``'s blobs ending within the margin of ``current`` (the
    epoch sync trusts); return how many were renewed.

    Failures are appended to ``errors`` (the sync report's); nothing raises for
    storage errors.
    """
    if current is None:
        return 0  # no store answer seen yet: nothing can be known to expire
    margin = mem.settings.renew_margin_epochs
    limit = current + margin
    # Storing for `epochs` <= margin cannot move an end past the margin: then only
    # what has already expired is stored again (each sync would re-store all else).
    reach = limit if mem.settings.epochs > margin else current
    catalog = mem._catalog
    due = [str(r["id"]) for r in catalog.expiring(namespace, reach) if r["status"] == "published"]
    renewed = 0
    if due:
        report = mem._republish(namespace, due, None)
        renewed = sum(1 for end in report.extended.values() if end is not None and end > reach)
        errors.extend(f"renewal of {mid} ({namespace!r}): {why}" for mid, why in report.failed)
        log.info("renewed %d of %d memories of %r ending by epoch %d", renewed, len(due),
                 namespace, limit)
    head = catalog.query_one(
        "SELECT end_epoch FROM manifests WHERE namespace = ? ORDER BY seq DESC LIMIT 1",
        (namespace,))
    if head is not None and head[0] is not None and int(head[0]) <= reach:
        catalog.bump_writes(namespace, 1)  # the head itself is about to go: publish a new one
    return renewed
