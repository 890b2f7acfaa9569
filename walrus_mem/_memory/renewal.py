"""Sync's renewal: re-publish what is about to expire before a manifest lists it.

``Memory.sync`` calls :func:`renew_due` for each namespace it may publish a
manifest for. Memories whose blobs end within ``Settings.renew_margin_epochs``
of the current epoch (the mock's exact clock, else the epoch clock learned
from store answers; see :mod:`walrus_mem._walrus.expiry`) are stored again from their
verified sealed bytes (:func:`republish`, which ``extend`` uses too); a damaged
copy is never stored (it is reported, and ``walrus-mem repair`` fixes it). A
head manifest that itself ends within the margin makes the namespace due for a
fresh manifest. When ``Settings.epochs`` is not above the margin, a re-store
could not move an end past it, so only what has already expired is renewed.

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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._catalog.outbox_poison import refused_for_good
from .._walrus.blobio import PART_OVERHEAD, cheapest_batches, check_patches
from .._walrus.cost import store_scope
from .._walrus.publish_check import require_read_back, verify_published
from .._walrus.retry import call_deadline
from ..errors import BlobNotFound, StorageError, WalrusMemError
from ..models import ExtendReport
from ..walrus import QuiltStoreResult, StoreResult, WalrusClient
from .integrity import split_sound
from .lost_copies import reseal_lost

if TYPE_CHECKING:
    from .parts import Parts

__all__ = ["renew_due", "republish"]

log = logging.getLogger(__name__)


def renew_due(parts: Parts, namespace: str, errors: list[str], current: int | None) -> int:
    """Renew ``namespace``'s blobs ending within the margin of ``current`` (the
    epoch sync trusts); return how many were renewed.

    Failures are appended to ``errors`` (the sync report's); nothing raises for
    storage errors.
    """
    if current is None:
        return 0  # no store answer seen yet: nothing can be known to expire
    margin = parts.settings.renew_margin_epochs
    limit = current + margin
    # Storing for `epochs` <= margin cannot move an end past the margin: then only
    # what has already expired is stored again (each sync would re-store all else).
    reach = limit if parts.settings.epochs > margin else current
    catalog = parts.catalog
    rows = [r for r in catalog.expiring(namespace, reach) if r["status"] == "published"]
    due = [str(r["id"]) for r in rows]
    renewed = 0
    if due:
        report = republish(parts, namespace, due, None)
        # What was stored again: its location or end epoch moved (the same bytes in the
        # same quilt keep their blob id). Counting ends past `reach` said 0 whenever the
        # clock ran ahead of the network, though every memory was stored again.
        before = {str(r["id"]): _where(r) for r in rows}
        renewed = sum(1 for mid, r in catalog.memories_by_ids(namespace, due).items()
                      if _where(r) != before.get(mid))
        errors.extend(f"renewal of {mid} ({namespace!r}): {why}" for mid, why in report.failed)
        log.info("renewed %d of %d memories of %r ending by epoch %d", renewed, len(due),
                 namespace, limit)
    head = catalog.query_one(
        "SELECT end_epoch FROM manifests WHERE namespace = ? ORDER BY seq DESC LIMIT 1",
        (namespace,))
    if head is not None and head[0] is not None and int(head[0]) <= reach:
        catalog.bump_writes(namespace, 1)  # the head itself is about to go: publish a new one
    return renewed


def _where(row: Any) -> tuple[object, object, object]:
    return row["blob_id"], row["quilt_patch_id"], row["end_epoch"]


def republish(parts: Parts, ns: str, ids: Sequence[str], epochs: int | None) -> ExtendReport:
    """Store the verified sealed bytes of ``ids`` again (extend and sync's renewal)."""
    rows = parts.catalog.memories_by_ids(ns, ids)
    failed = [(m, "MemoryNotFound: not in this namespace") for m in ids if m not in rows]
    payload = [
        (m, r) for m in ids if (r := parts.catalog.sealed_of(ns, m)) is not None and m in rows
    ]
    payload, damaged = split_sound(parts.keys.for_namespace(ns), payload, rows)  # never push damage
    failed.extend(damaged)
    extended: dict[str, int | None] = {}
    held = {m for m, _ in payload} | {m for m, _ in damaged}
    lost = reseal_lost(parts, ns, [m for m in ids if m in rows and m not in held])
    if lost:  # only the embedded relayer held them, and no longer does: sealed again
        _, errors = parts.publisher.flush(ns)
        now = parts.catalog.memories_by_ids(ns, lost)
        for mid in lost:
            if mid in now and now[mid]["status"] == "published":
                extended[mid] = now[mid]["end_epoch"]
            else:
                failed.append((mid, "sealed again from its row (the embedded relayer lost "
                                    "its copy) and queued: " + "; ".join(errors)[:300]))
    client = parts.publisher.backend().client
    policy = parts.settings.verify_publish
    deadline = parts.settings.publish_deadline
    if payload and policy != "none":
        require_read_back(client, f"verify_publish = {policy!r}")
    failing: str | None = None
    # sized under the publisher's request cap and by cost, as fact batches are (writer.py)
    for span in cheapest_batches([len(s) + PART_OVERHEAD for _, (s, _) in payload],
                              parts.publisher.quilt_budget()):
        part = [payload[i] for i in span]
        if failing is not None:  # each part would spend a whole deadline the same way
            failed.extend((m, f"not tried: the publish path is failing ({failing})")
                          for m, _ in part)
            continue
        keys = parts.keys.for_namespace(ns)  # public patch names: keyed (keys.quilt_identifier)
        names = {m: keys.quilt_identifier(m, version) for m, (_, version) in part}
        files = {names[m]: s for m, (s, _) in part}
        try:
            stored: StoreResult | QuiltStoreResult
            # store + read-back; the store's units go to the ledger as a renewal
            with call_deadline(parts.publisher.publish_budget()), \
                    store_scope(ns, "renewal", parts.publisher.sink):
                if len(part) == 1:
                    blob = stored = client.store_blob(part[0][1][0], epochs=epochs,
                                                      deadline=deadline)
                    locations: dict[str, str | None] = {part[0][0]: None}
                else:
                    stored = client.store_quilt(files, epochs=epochs, deadline=deadline)
                    check_patches(stored.patches, list(files))
                    blob = stored.blob
                    locations = {m: stored.patches.get(names[m]) for m, _ in part}
                # a location that does not read back is never recorded (the old one stays)
                verify_published(client, policy, stored, files,
                                 deadline=parts.settings.read_back_deadline)
        except StorageError as exc:
            failed.extend((m, f"{type(exc).__name__}: {exc}") for m, _ in part)
            if not refused_for_good(exc):
                failing = type(exc).__name__
            continue
        # A current location that lasts longer is kept, unless the network no longer
        # has it (a wipe, an epoch reset: its recorded end is no promise then).
        longer = {mid: rows[mid]["end_epoch"] for mid, _ in part}
        for mid in _lost(client, [rows[m] for m, end in longer.items()
                                  if end is not None and end >= blob.end_epoch]):
            longer[mid] = None
        with parts.lock:
            extended.update(parts.catalog.record_location(
                ns, {mid: version for mid, (_, version) in part}, locations, blob,
                only_if_longer=longer))
    return ExtendReport(extended=extended, failed=failed)


def _lost(client: WalrusClient, rows: Sequence[Any]) -> set[str]:
    """Ids of ``rows`` whose recorded blob no aggregator has (404): one 1-byte read per
    blob. Any other answer keeps the location (it may well be there)."""
    out: set[str] = set()
    verdict: dict[str, bool] = {}
    for row in rows:
        blob = str(row["blob_id"])
        if blob not in verdict:
            try:
                client.read_byte_range(blob, 0, 1)
                verdict[blob] = False
            except BlobNotFound:
                verdict[blob] = True
                log.warning("blob %s answers 404 before its recorded end epoch %s: the "
                            "network lost it; its memories take the new location", blob,
                            row["end_epoch"])
            except (WalrusMemError, ValueError):
                verdict[blob] = False
        if verdict[blob]:
            out.add(str(row["id"]))
    return out
