"""When a 404 for a head's manifest proves it gone, and the bound that decides it.

A 404 is "not yet / not here" (an aggregator lagging behind the publisher, one that
lost the blob) until the manifest's own end epoch has passed on the network's
clock. Only then may the namespace log record a seen head as merged without its
content (merging.py ``_merge``); before, the head is reported, left out of
the next manifest's parents and read again by the next sync or restore.

Each seen head keeps an upper bound of its manifest blob's end epoch
(heads.sqlite3 and the per-user mirror, ``SeenHead.end_epoch``): the store
answer's end epoch for a head this data dir published, else the root's
``ends_by``, which its writer seals in (:func:`root_end_bound`: its clock's
highest possible epoch, one more for the store's own time, plus ``epochs``) and
checks against the store answer before anyone sees the head (:func:`store_root`).
Whatever else is known, a blob ends at most :data:`MAX_EPOCHS_AHEAD` epochs after
it was stored (Walrus' limit), so a head also ends by that many epochs after the
first epoch this data dir saw at or after it first saw the head: old roots
without ``ends_by`` are covered, only later.

"Passed" is the network's word, not the wall clock's: the highest epoch a store
answer named (``Catalog.current_epoch``) must have reached the bound. When only
the clock's estimate has, one probe store asks the network (a wall clock running
ahead must not bury a head).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final

from .._walrus.expiry import JUMP_SLACK
from ..envelope import seal
from ..errors import WalrusMemError
from ..keys import NamespaceKeys
from ..walrus import StoreResult, WalrusClient
from .heads import HeadRef

if TYPE_CHECKING:
    from .._walrus.expiry import EpochClock
    from .context import LogContext

__all__ = ["MAX_EPOCHS_AHEAD", "clock_epoch", "end_bound", "provably_gone", "root_end_bound",
           "store_root", "stored_bound"]

log = logging.getLogger(__name__)

MAX_EPOCHS_AHEAD: Final = 53
"""Walrus stores a blob at most this many epochs ahead (mainnet and testnet)."""


def clock_epoch(clock: object) -> int | None:
    """The epoch a root's ``clock`` names (its writer's newest sighting), None if none."""
    epoch = clock.get("epoch") if isinstance(clock, dict) else None
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) and epoch >= 0 \
        else None


def stored_bound(clock: object) -> int | None:
    """A lower bound of the epoch a root with this ``clock`` was stored in
    (``SeenHead.stored_epoch``): its writer stores again without the clock a root whose
    clock names an epoch more than :data:`JUMP_SLACK` above it (:func:`store_root`)."""
    epoch = clock_epoch(clock)
    return None if epoch is None else max(0, epoch - JUMP_SLACK)


def root_end_bound(clock: EpochClock, epochs: int) -> int | None:
    """The ``ends_by`` a root stored now for ``epochs`` carries, or None when the clock
    cannot bound the current epoch from above."""
    latest = clock.reading().latest
    return None if latest is None else latest + 1 + epochs


def store_root(client: WalrusClient, keys: NamespaceKeys, root: dict[str, Any],
               max_plaintext: int, deadline: float | None) -> tuple[bytes, StoreResult]:
    """Seal and store a root; (sealed bytes, store answer).

    A root whose ``ends_by`` the store answer exceeds (the clock's bound was wrong, or
    the publisher stored it longer) is stored again without one: a bound below the
    real end would let a reader bury a live head at its first 404. So is one whose
    ``clock`` names an epoch above the one it was stored in (a clock still on a network
    since wiped or reset): readers take it as a lower bound of that epoch
    (``SeenHead.stored_epoch``), and a bound above it would let a reader take a
    lagging head for one lost in a reset (network_reset.py)."""
    sealed = seal(keys, root, max_plaintext=max_plaintext)
    stored = client.store_blob(sealed, deadline=deadline)
    drop = []
    claimed = root.get("ends_by")
    if claimed is not None and stored.end_epoch > claimed:
        log.warning("manifest stored until epoch %d, beyond the %d its root claims: stored "
                    "again without the claim", stored.end_epoch, claimed)
        drop.append("ends_by")
    seen = clock_epoch(root.get("clock"))
    if seen is not None and stored.registered_epoch is not None \
            and seen > stored.registered_epoch + JUMP_SLACK:
        log.warning("manifest stored in epoch %d, below the epoch %d its root's clock names "
                    "(a wiped or reset network): stored again without the clock",
                    stored.registered_epoch, seen)
        drop.append("clock")
    if drop:
        root = {k: v for k, v in root.items() if k not in drop}
        sealed = seal(keys, root, max_plaintext=max_plaintext)
        stored = client.store_blob(sealed, deadline=deadline)
    return sealed, stored


def end_bound(nslog: LogContext, ns: str, ref: HeadRef) -> int | None:
    """The highest the end epoch of ``ref``'s manifest can be, None when unknown."""
    end, seen_at = nslog.seen.end_bound(ns, ref.blob_id)
    bounds = [] if end is None else [end]
    row = nslog.catalog.query_one(  # a head this data dir published before heads kept it
        "SELECT end_epoch FROM manifests WHERE namespace = ? AND blob_id = ?",
        (ns, ref.blob_id))
    if row is not None and row[0] is not None:
        bounds.append(int(row[0]))
    if seen_at is not None:
        later = [e for e, (first, _) in nslog.host.epoch_clock.sightings().items()
                 if first >= seen_at]
        if later:
            bounds.append(min(later) + MAX_EPOCHS_AHEAD)
    return min(bounds, default=None)


def provably_gone(nslog: LogContext, ns: str, ref: HeadRef) -> tuple[bool, int | None]:
    """(whether the network has passed the end epoch of ``ref``'s manifest, that bound)."""
    bound = end_bound(nslog, ns, ref)
    if bound is None:
        return False, None
    reached = nslog.catalog.current_epoch()
    if (reached is None or reached < bound) and nslog.host.epoch_clock.expired(bound):
        try:  # the estimate says passed: ask the network before believing it
            nslog.host.probe_epoch()
        except WalrusMemError as exc:
            log.info("epoch probe for head %s failed: %s", ref, type(exc).__name__)
        reached = nslog.catalog.current_epoch()
    return reached is not None and reached >= bound, bound
