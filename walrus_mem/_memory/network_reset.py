"""A wiped network, or one whose epochs were reset: confirm it, let the clock follow,
store every memory again.

A testnet wipe (or relayer_mock restarted on an empty dir) loses every blob and
starts the epochs again from 0. Nothing in a store answer says so, but its epoch
is suddenly far below the newest one this data dir has seen: the epoch clock
(expiry.py ``record_seen``) holds such a sighting apart instead of mixing it in.
A data dir that stores nothing meanwhile (an idle machine, or one whose catalog
was rebuilt and holds no sighting of the old network) sees no such answer: it
notices when a head it needs answers 404 before its end epoch (:func:`check_served`,
each sync: its newest merged head still served?; and any merge reading a seen
head, _log/merging.py). :func:`suspect` then asks the network's epoch (one probe
store): below the epoch that head was stored in (``SeenHead.stored_epoch``,
impossible on the same network), or below what the clock saw, it is a reset; not
below, the 404 stays "not yet" (_log/gone.py: a lagging aggregator).
Before, the clock stayed on the old epochs, the catalog's end epochs (45) stayed
far above the new network's (6), so no renewal ever came, ``extend`` kept the dead
locations (their recorded end was "longer") and a fresh restore of the newest
head got 1 of 9.

:func:`follow` (``sync``, before it renews) settles a held sighting: a few blobs
that must still be live by the old clock (the newest ones, the newest manifest,
the newest merged heads) are read, one byte each. Any answers 404: the network
lost it, it is a reset (two witnesses agree: the publisher's epoch went back,
an aggregator lost what must still be live). All are served: it is not (a lying
or misconfigured publisher); the sighting is dropped. Served proves nothing
more: a blob id is the hash of its content, so a machine that followed the
reset first stored the same bytes under the same id again. No answer: decided
at a later sync. On a reset the clock restarts from the new network's
sightings; each blob our memories live in is read (one byte, once per blob: a
quilt holds up to 666 memories) and the memories of every lost one, and of
every one whose recorded end only the old network could give (another machine
may have stored the same bytes again, for an end unknown here), get the new
epoch as their end, so this very sync stores them again (``renew_due``: the
same sealed bytes, verified) and publishes a manifest listing the new locations
(manifests and pages get it too: the old ones are gone); heads stored before
the reset count as gone (their manifests are), so a manifest names them as
parents and this writer's seq still only grows (no StaleDataDir for a head
that no longer exists).
Nothing is deleted locally: the catalog holds every memory, so nothing is lost
that this data dir held.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Final

from .._log.gone import provably_gone
from .._log.heads import HeadRef
from .._walrus.epoch_guard import AHEAD_KEY, REFUSED_KEY, ahead_sightings, refused_ends
from .._walrus.expiry import BACKWARDS_KEY, CLAIM_KEY, JUMP_SLACK, META_KEY
from .._walrus.network_identity import change_followed, change_pending, observe_identity
from ..errors import LocalStoreError, NetworkResetPending, WalrusMemError
from . import loss_pending
from .integrity import split_sound
from .network_sample import (
    is_served,
    mark_blobs,
    own_sample,
    sample_blobs,
    stored_at,
    stored_since,
)
from .renewal import renew_due
from .served_mark import MARK_KEY, read_mark, write_mark

if TYPE_CHECKING:
    from .parts import Parts

__all__ = ["BACKWARDS", "LOST", "RESET_KEY", "check_served", "follow",
           "mark_before_publish", "mark_published", "mark_restored", "settle", "suspect",
           "suspect_logged"]

log = logging.getLogger(__name__)

RESET_KEY: Final = "network_reset"
"""Catalog meta: the last reset followed ({"at", "kind", "from", "to", "lost_blobs",
"owed"}), for doctor and tests."""
BACKWARDS: Final = "backwards"  # kind: the network's epochs went back (a wipe, a reset)
LOST: Final = "lost"  # kind: they did not, but the network lost what must be live
RECENT: Final = 300.0  # seconds a sighting counts as the current epoch
LOST_CONFIRM_PAUSES: Final = (2.0, 3.0)
"""Seconds between the rounds of reads that confirm a loss seen only as 404s (no epoch
went back, no system object changed): an aggregator or its cache answers 404 for a blob
it has not served yet (the public networks' cached-404 window after a store), so one
round of 404s is a lagging aggregator as often as a lost network. Three rounds over 5 s
are paid only when a head already answered 404."""


def _missed_change(parts: Parts) -> bool:
    """Whether the heads store (or its mirror, outside the data dir) names a network
    change this catalog never followed: the data dir was rolled back to a backup taken
    before it (N10b). At the same epochs nothing else shows it: the backup's catalog
    holds the memories at the lost locations, and the heads it reads are served (the
    new network's). Held apart as a change whose blobs are all read (kind ``lost``,
    with the epoch and the heads it ended then): True."""
    change = parts.log.seen.last_change()
    if change is None:
        return False
    record = _reset_record(parts)
    try:
        at, to = float(change["at"]), int(change["to"])
        if record is not None and (record.get("id") == change.get("id")
                                   or float(record.get("at", 0)) >= at):
            return False
        seen_by = float(change["seen_by"])
    except (KeyError, TypeError, ValueError):
        return False
    log.warning("this data dir followed a change of the network behind the endpoints "
                "(epoch %d) that its catalog does not know (restored from a backup taken "
                "before it?): every blob its memories live in is read again", to)
    # the epoch the change was followed at, and what this catalog saw since (a catalog
    # repaired after the change has sightings of the new network: kept, not rolled back)
    since = {e: [f, last] for e, (f, last) in parts.epochs.clock.sightings().items() if f > at}
    first, last = since.pop(to, [at, at])
    seen = [[to, min(first, at), max(last, at)], *([e, f, end] for e, (f, end) in since.items())]
    parts.catalog.set_meta(BACKWARDS_KEY, json.dumps({
        "newest": parts.epochs.clock.reading().newest_seen, "kind": LOST,
        "seen": sorted(seen), "heads_seen_by": seen_by, "change": change.get("id")}))
    return True


def _held(parts: Parts) -> dict[str, Any] | None:
    raw = parts.catalog.get_meta(BACKWARDS_KEY)
    try:
        held = json.loads(raw) if raw else None
    except ValueError:
        return None
    return held if isinstance(held, dict) and held.get("seen") else None


def follow(parts: Parts, errors: list[str], witnesses: Collection[str] = ()) -> bool:
    """Settle a sighting the clock held apart (see the module doc); True when a reset was
    followed (the caller asks the clock again). ``witnesses``: blobs that must still be
    live by the old clock and were just answered 404 (no need to read a sample)."""
    held = _held(parts)
    verdict: dict[str, bool] = {}  # blob id -> still served
    if held is None and _missed_change(parts):
        held = _held(parts)
    if held is None and _identity_changed(parts, errors):
        held = _held(parts)
    if held is None:
        gone = _ahead(parts, errors)
        if gone is not None:  # decided: every blob of the old network asked is gone
            held, verdict = _held(parts), dict.fromkeys(gone, False)
    if held is None:
        witness = _below_heads(parts)
        if witness is None:
            return False
        held, witnesses = _held(parts), [*witnesses, witness]
        assert held is not None
    catalog = parts.catalog
    verdict.update(dict.fromkeys(witnesses, False))
    if not verdict and held.get("kind") != LOST:
        old_now = parts.epochs.clock.current()  # still on the old network's sightings
        for blob in dict.fromkeys(sample_blobs(parts, old_now or 0)):
            try:
                verdict[blob] = is_served(parts, blob)
            except (WalrusMemError, ValueError) as exc:
                errors.append(f"network reset check: {type(exc).__name__}: {exc}")
                return False  # decided at a later sync
    seen = [(int(e), float(f), float(last)) for e, f, last in held["seen"]]
    if verdict and all(verdict.values()):
        log.warning("store answers named epoch(s) %s, below epoch %s seen before, but the "
                    "network still serves this data dir's blobs: not a reset (a publisher "
                    "of another network, or lying); ignored", [e for e, _, _ in seen],
                    held.get("newest"))
        catalog.set_meta(BACKWARDS_KEY, "")
        return False
    # Which blobs did the network lose? Those stored since the reset are there. One whose
    # recorded end only the old network could give may be served because another
    # machine stored the same bytes again, for an end unknown here: stored again too.
    new = max(e for e, _, _ in seen)
    due = {str(b) for (b,) in catalog.query(
        "SELECT DISTINCT blob_id FROM memories WHERE status = 'published' AND blob_id IS NOT "
        "NULL AND end_epoch > ?", (new + parts.settings.epochs + JUMP_SLACK,))}
    for (blob,) in catalog.query("SELECT DISTINCT blob_id FROM memories WHERE status = "
                                 "'published' AND blob_id IS NOT NULL", ()):
        if str(blob) not in verdict and str(blob) not in due:
            try:
                verdict[str(blob)] = is_served(parts, str(blob))
            except (WalrusMemError, ValueError):
                verdict[str(blob)] = False  # unconfirmed: storing it again loses nothing
    lost = [b for b, ok in verdict.items() if not ok and b not in witnesses]  # heads aside
    kind = LOST if held.get("kind") == LOST else BACKWARDS
    served = [b for b, ok in verdict.items() if ok]
    seen_by = held.get("heads_seen_by")
    _apply(parts, seen, held.get("newest"), [*due, *lost], kind=kind, served=served,
           system_object=held.get("system_object"),
           heads_seen_by=float(seen_by) if isinstance(seen_by, int | float) else None,
           change=str(held["change"]) if held.get("change") else None)
    change_followed(parts.epochs.clock.store)
    return True


def settle(parts: Parts, ns: str, backwards: tuple[int, int] | None = None) -> None:
    """Before a manifest of ``ns`` (any path: sync, a rotation, a forget's, a periodic
    one): settle a sighting held apart, and once a reset was followed, store the lost
    memories of ``ns`` again first, so the manifest never lists a location the network
    lost (``renew_due``, as sync would; once: their end epochs move past the margin).
    ``backwards``: (the epoch a store answer named, the higher one the clock said): held
    apart first when the clock held nothing (it had no sighting of its own above it)."""
    errors: list[str] = []
    if backwards is not None and _held(parts) is None:
        _hold(parts, *backwards)
    if not mark_before_publish(parts, ns, errors):
        follow(parts, errors)
    if loss_pending.due(parts, ns):
        # a rotation's or a forget's manifest need not wait for a sync (N19)
        _recheck_pending(parts, ns, [], errors)
    loss_pending.hold_manifest(parts, ns)
    if _renewal_owed(parts, ns):
        current = parts.epochs.clock.current()
        renew_due(parts, ns, errors, current)
        _require_renewed(parts, ns, current, errors)
        _renewed(parts, ns)
    for error in errors:
        log.warning("before the manifest of %r: %s", ns, error)


def _reset_record(parts: Parts) -> dict[str, Any] | None:
    row = parts.catalog.get_meta(RESET_KEY)
    try:
        record = json.loads(row) if row else None
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _renewal_owed(parts: Parts, ns: str) -> bool:
    """Whether ``ns`` still owes the renewal of what the last followed reset lost: it is
    named in the reset's record (:func:`_apply`) until a manifest's :func:`settle` has
    stored them again. Not "no manifest since the reset's time": a manifest published
    while the wall clock ran ahead (10 days) is "later" than the reset, the renewal was
    skipped and the manifest left out every memory the reset lost (seed 11's F2)."""
    record = _reset_record(parts)
    if record is None:
        return False
    owed = record.get("owed")
    if isinstance(owed, list):
        return ns in owed
    try:  # a record written before "owed" existed: the time it was followed
        at = float(record["at"])
    except (KeyError, TypeError, ValueError):
        return False
    last = parts.catalog.query_one("SELECT max(at) FROM manifests WHERE namespace = ?", (ns,))
    return last is None or last[0] is None or float(last[0]) < at


def _renewed(parts: Parts, ns: str) -> None:
    """``ns`` stored again what the reset lost (_require_renewed passed): owed no more."""
    with parts.catalog.write():  # read and write in one transaction (other processes)
        record = _reset_record(parts)
        if record is None or not isinstance(record.get("owed"), list):
            return
        record["owed"] = [n for n in record["owed"] if n != ns]
        parts.catalog.set_meta(RESET_KEY, json.dumps(record))


def _require_renewed(parts: Parts, ns: str, current: int | None, errors: list[str]) -> None:
    """Raise NetworkResetPending while memories of ``ns`` the reset lost are not stored
    again (their renewal failed: publisher or read-back): a manifest would list them at
    lost locations, or leave them out. One whose local sealed copy is damaged is never
    stored again (renewal.py: never push damage) and does not hold the manifest back."""
    if current is None:
        return
    catalog = parts.catalog
    left = [str(r["id"]) for r in catalog.expiring(ns, current) if r["status"] == "published"]
    if not left:
        return
    rows = catalog.memories_by_ids(ns, left)
    payload = [(m, s) for m in left if m in rows and (s := catalog.sealed_of(ns, m)) is not None]
    sound, _ = split_sound(parts.keys.for_namespace(ns), payload, rows)
    if sound:
        raise NetworkResetPending(
            f"{len(sound)} memories of {ns!r} the network lost in a wipe or an epoch reset are "
            f"not stored again yet ({errors[-1] if errors else 'renewal failed'}): no "
            "manifest until they are; the next sync retries")


def check_served(parts: Parts, ns: str, errors: list[str]) -> bool:
    """Each sync: is the newest head the local state of ``ns`` contains still served, and
    the head last found served (:func:`_mark`)? A machine that stores nothing sees no
    store answer that would show it a wipe; this one GET (one byte) does. The mark
    matters once this machine has published on another network without noticing it:
    its newest head is then served there, and only an older one shows the loss. A 404
    before its end epoch asks the network (:func:`suspect`); True when a reset was
    followed. Both served: the newest head is the next mark."""
    merged = [h for h in parts.log.merged(ns) if not parts.log.seen.is_gone(ns, h.blob_id)]
    if _recheck_pending(parts, ns, merged, errors):
        return True
    if not merged:
        return False
    newest, expired = merged[0], True
    try:
        # every head the local state contains (after a pull, another machine's head of
        # the new network may be the newest, and the one of the lost network beside it).
        # A head past its end epoch is not read: its 404 says nothing, and the client
        # waits out a 404 for a blob it stored itself (a read-after-store lag) until
        # the read deadline, which every sync after an expiry paid (30 s).
        for head in merged:
            gone, _ = provably_gone(parts.log, ns, head)
            if head == newest:
                expired = gone
            if not gone:
                if not is_served(parts, head.blob_id):
                    return suspect(parts, ns, head, errors)
                loss_pending.clear_if_served(parts, ns, [head.blob_id])
    except (WalrusMemError, ValueError):
        return False  # an outage: the pull and the manifest of this sync say so
    # no mark yet (a data dir that published, then never synced): its own newest head,
    # read back when published, is one found served
    mark = read_mark(parts, ns) or _own_head(parts, ns)
    if mark is not None and mark[0] != newest:
        live = mark_blobs(parts, mark[1])
        verdict = _mark_served(parts, ns, mark[0], live)
        if verdict is None:
            return False  # no answer: asked again at the next sync
        if not verdict:
            return suspect(parts, ns, mark[0], errors, sample=live)
    if not expired:
        _set_mark(parts, ns, newest)
    return False


def _recheck_pending(parts: Parts, ns: str, merged: list[HeadRef], errors: list[str]) -> bool:
    """A loss seen before (loss_pending.py) whose head is not among the heads this check
    reads (another machine's manifest named it gone, or only a repair read it): read it
    again with the blobs seen then, or the sighting would hold the manifests for good.
    True when the loss was followed."""
    blob = loss_pending.head(parts, ns)
    seen = None if blob is None else parts.log.seen.get(ns, blob)
    if seen is None or seen.ref in merged:
        return False
    try:
        return suspect(parts, ns, seen.ref, errors, sample=loss_pending.witnesses(parts, ns))
    except (WalrusMemError, ValueError):
        return False


def mark_restored(parts: Parts, ns: str) -> None:
    """After a restore: the head just read is the mark, unless one is kept already (a
    data dir's first head may be the only one older than a network change)."""
    merged = parts.log.merged(ns)
    if merged and read_mark(parts, ns) is None:
        _set_mark(parts, ns, merged[0])


def mark_published(parts: Parts, ns: str, ref: HeadRef) -> None:
    """A manifest ``ref`` of ``ns`` was stored and read back: with no head marked yet (a
    namespace's first manifest, or the first since a change or a ``compact``) it is the
    mark, kept in heads.sqlite3 too (served_mark.py), so a catalog lost before the next
    sync still leaves blobs to read beside it (N14)."""
    if read_mark(parts, ns) is None:
        _set_mark(parts, ns, ref)


def mark_before_publish(parts: Parts, ns: str, errors: list[str]) -> bool:
    """Before a manifest of ``ns``: the marked head is read (one byte; 404 and none of
    its blobs served asks the network, :func:`suspect`). With no head marked served yet,
    the parent (the newest merged head) is read and marked, so a sync after writes made on another
    network still has an older head to read (:func:`check_served`). A 404 before its
    end epoch asks the network (:func:`suspect`); True when a reset was followed. With
    no parent (the namespace's first manifest) the blobs this data dir stored are read
    instead (up to 3, one byte each): stored before a change, nothing else shows it."""
    mark = read_mark(parts, ns)
    if mark is not None:
        # still served? A write's manifest (a forget publishes at once) after a change
        # would list the lost locations while no sync has checked since
        if parts.log.seen.is_gone(ns, mark[0].blob_id):
            return False
        try:  # the head alone first: the blobs beside it only once it answers 404
            if provably_gone(parts.log, ns, mark[0])[0] or is_served(parts, mark[0].blob_id):
                loss_pending.clear_if_served(parts, ns, [mark[0].blob_id])
                return False
        except (WalrusMemError, ValueError):
            return False  # no answer: the manifest's own store says more
        live = mark_blobs(parts, mark[1])
        verdict = _mark_served(parts, ns, mark[0], live)
        if verdict is None:
            # the head answers 404 and what would tell a lost network from a lagging
            # aggregator could not be read: a manifest now could list lost locations
            # for good (N15), so it waits; the memories wait in the catalog
            raise _unreadable(f"the head of {ns!r} last found served")
        if verdict:
            return False
        return suspect(parts, ns, mark[0], errors, sample=live)
    merged = parts.log.merged(ns)
    if not merged:
        try:
            own = own_sample(parts, parts.epochs.clock.current() or 0)
            if all(is_served(parts, blob) for blob in own):
                return False
        except (WalrusMemError, ValueError):
            return False
        return suspect(parts, ns, None, errors)
    if parts.log.seen.is_gone(ns, merged[0].blob_id):
        return False
    try:
        expired, _ = provably_gone(parts.log, ns, merged[0])
        if expired:
            return False
        if is_served(parts, merged[0].blob_id):
            loss_pending.clear_if_served(parts, ns, [merged[0].blob_id])
            _set_mark(parts, ns, merged[0])
            return False
    except (WalrusMemError, ValueError):
        return False
    # the parent answers 404: the blobs that had to be live with it, as for a mark
    live = sample_blobs(parts, parts.epochs.clock.current() or 0,
                        exclude={*refused_ends(parts.epochs.clock.store),
                                 *stored_since(parts, ns, merged[0])})
    if live and _mark_served(parts, ns, merged[0], live) is None:
        raise _unreadable(f"the newest head of {ns!r}")  # as for a marked head (N15)
    return suspect(parts, ns, merged[0], errors)


def _unreadable(head: str) -> NetworkResetPending:
    return NetworkResetPending(
        f"{head} answers 404 and its blobs could not be read (an aggregator failing?): no "
        "manifest until the network is known to still hold them or they are stored "
        "again; the next sync checks again")


def _own_head(parts: Parts, ns: str) -> tuple[HeadRef, list[str]] | None:
    """The newest manifest of ``ns`` this data dir published, as a mark with no blobs."""
    row = parts.catalog.query_one(
        "SELECT blob_id FROM manifests WHERE namespace = ? ORDER BY seq DESC LIMIT 1", (ns,))
    head = None if row is None else parts.log.seen.get(ns, str(row[0]))
    if head is None or parts.log.seen.is_gone(ns, head.ref.blob_id):
        return None
    return head.ref, []


def _set_mark(parts: Parts, ns: str, ref: HeadRef) -> None:
    """Mark ``ref`` (just found served) with the blobs that must be live by the clock now:
    if the network behind the endpoints changes later, they are what it lost."""
    witnesses = list(dict.fromkeys(sample_blobs(parts, parts.epochs.clock.current() or 0,
                                                before=time.time())))
    write_mark(parts, ns, ref, [b for b in witnesses if b != ref.blob_id])


def _mark_served(parts: Parts, ns: str, ref: HeadRef, live: list[str]) -> bool | None:
    """Is the marked head still served (None: no answer)? Past its end epoch, or answering
    404 while every blob ``live`` names is served (a head a rotation's cleanup deleted),
    the network is the same: True. Otherwise :func:`suspect` decides over three
    rounds. A loss pending on that head (loss_pending.py) is dropped only when the head
    itself is served: blobs served beside it may be ones stored since (a rotation's, on
    the new network: N19), and a pending loss is decided by its own reads."""
    try:
        expired, _ = provably_gone(parts.log, ns, ref)
        if expired or is_served(parts, ref.blob_id):
            loss_pending.clear_if_served(parts, ns, [ref.blob_id])
            return True
        served = all(is_served(parts, blob) for blob in live)
        if served:
            loss_pending.clear_if_served(parts, ns, live)
        return served
    except (WalrusMemError, ValueError):
        return None


def suspect(parts: Parts, ns: str, ref: HeadRef | None, errors: list[str],
            sample: list[str] | None = None) -> bool:
    """A head of ``ns`` this data dir needs answered 404 before its end epoch passed: was
    the network wiped or reset? True when it was, and the reset was followed.

    The network's epoch is asked (one probe store) unless a store answer below the
    clock's is held already. Below the clock's newest sighting (record_seen holds it)
    or below the epoch the head was stored in (minus :data:`JUMP_SLACK`), it is a
    reset: impossible on the same network, and the 404 confirms the loss. Otherwise
    the 404 is "not yet" (a lagging aggregator): nothing changes. ``sample``: the blobs
    that had to be live with ``ref`` (its mark's), else the newest ones stored before it."""
    if _held(parts) is None:
        try:
            epoch = parts.epochs.probe_epoch()
        except (WalrusMemError, ValueError) as exc:
            errors.append(f"network reset check: {type(exc).__name__}: {exc}")
            return False
        head = None if ref is None else parts.log.seen.get(ns, ref.blob_id)
        stored = None if head is None else head.stored_epoch
        if _held(parts) is None:
            if epoch is None:
                return False
            if stored is None or epoch >= stored - JUMP_SLACK:
                # not below: "not yet" (a lagging aggregator), unless the network lost
                # what must still be live (another network behind the endpoints)
                return _lost_here(parts, ns, ref, epoch, errors, sample)
            _hold(parts, epoch, stored)
    return follow(parts, errors, witnesses=[] if ref is None else [ref.blob_id])


def suspect_logged(parts: Parts, ns: str, ref: HeadRef) -> bool:
    """:func:`suspect` for a merge that read a seen head's 404 (Memory.reset_followed),
    its errors logged."""
    errors: list[str] = []
    followed = suspect(parts, ns, ref, errors)
    for error in errors:
        log.warning("%s", error)
    return followed


def _identity_changed(parts: Parts, errors: list[str]) -> bool:
    """The network's system object (``walrus_system_object``, or the one the publisher's
    metrics name: network_identity.py) is not the one recorded before: another network,
    declared. Its epoch is asked (one probe store) and the change held apart as a
    backwards sighting is; :func:`follow` then reads every blob and stores the lost
    memories again (no sample decides here: the system object said it). True when held."""
    store = parts.epochs.clock.store
    observe_identity(store, parts.settings)
    pending = change_pending(store)
    if pending is None:
        return False
    try:
        epoch = parts.epochs.probe_epoch()
    except (WalrusMemError, ValueError) as exc:
        errors.append(f"network change check: {type(exc).__name__}: {exc}")
        return False
    if epoch is None:
        return False
    now = time.time()
    parts.catalog.set_meta(BACKWARDS_KEY, json.dumps({
        "newest": parts.epochs.clock.reading().newest_seen, "kind": LOST,
        "seen": [[epoch, now, now]],
        "system_object": [pending.get("previous"), pending.get("system_object")]}))
    return True


def _ahead(parts: Parts, errors: list[str]) -> list[str] | None:
    """Store answers named epochs ahead of what the clock allows (epoch_guard.py keeps
    them, refused): a lying publisher, or another network behind the endpoints whose
    epochs are ahead. The blobs that must still be live by the clock and were stored
    before the first such answer are read (one byte each): one served, the old network
    is still here (the sightings are dropped: a lie, or a manifest of another network);
    every one answering 404, or none left (``extend`` replaced every location already),
    it is another network, held apart as a backwards sighting is and followed: the
    blobs found gone are returned (None: not followed)."""
    store = parts.epochs.clock.store
    ahead = ahead_sightings(store)
    if not ahead:
        return None
    first = min(f for f, _ in ahead.values())
    old_now = parts.epochs.clock.current() or 0
    sample = list(dict.fromkeys(sample_blobs(parts, old_now, exclude=refused_ends(store),
                                             before=first)))
    for blob in sample:
        try:
            if is_served(parts, blob):
                log.warning("store answers named epoch(s) %s, ahead of what the clock allows, "
                            "but the network still serves this data dir's blobs: not another "
                            "network (a lying publisher, or another network's manifest); "
                            "ignored", sorted(ahead))
                parts.catalog.set_meta(AHEAD_KEY, "")
                parts.catalog.set_meta(REFUSED_KEY, "")  # their ends stay the shifted ones
                return None
        except (WalrusMemError, ValueError) as exc:  # decided at a later sync
            log.info("network change check: %s: %s", type(exc).__name__, exc)
            return None
    parts.catalog.set_meta(BACKWARDS_KEY, json.dumps({
        "newest": parts.epochs.clock.reading().newest_seen, "kind": LOST,
        "seen": [[e, f, last] for e, (f, last) in sorted(ahead.items())]}))
    return sample


def _lost_here(parts: Parts, ns: str, ref: HeadRef | None, epoch: int, errors: list[str],
               sample: list[str] | None = None) -> bool:
    """A head (``ref``) answered 404 before its end epoch, or a blob this data dir stored
    did (``ref`` None), and the network's epoch (``epoch``) is not below: is this still
    the network that stored our blobs? Read, on every aggregator, in each of three
    rounds over 5 s (:data:`LOST_CONFIRM_PAUSES`: an aggregator that has not served a
    blob yet may answer 404 to its first reads), are the head and two kinds of blobs:

    - ``sample``, else the newest blobs our memories live in and our newest manifest,
      stored before this data dir saw the head (those stored since, or whose answers the
      clock refused as epochs ahead, may be another network's and say nothing);
    - the newest blobs this data dir stored itself that still hold a memory
      (network_sample.py ``own_sample``), whenever stored: certified and read back
      then, and never deleted while a memory lives in them.

    The head answering 404 in every round with one blob beside it, or one of our own
    blobs answering 404 in every round, is a loss, even while other blobs are served:
    another machine that followed the change first stored its memories again, often
    under the same blob ids. (Heads are never deleted before their end epoch on a
    shared network: ``compact`` deletes roots only from the embedded relayer.) A loss:
    another network (a redeploy, a new system object) or a wipe whose epochs did not
    go back, followed as a reset is (:func:`follow`): the clock restarts from ``epoch``,
    each blob is read and the memories of the lost ones are stored again by this sync.
    The head served in a round, or every blob: a lagging aggregator, nothing changes.
    Nothing to ask, or a read failing otherwise: undecided ("not yet")."""
    old_now = parts.epochs.clock.current() or 0
    head = [] if ref is None else [ref.blob_id]
    if sample is None:
        exclude = {*refused_ends(parts.epochs.clock.store),
                   *([] if ref is None else stored_since(parts, ns, ref))}
        sample = [] if ref is None else sample_blobs(parts, old_now, exclude=exclude)
    # a loss seen before (loss_pending.py): what answered 404 then is read again
    sample = [b for b in dict.fromkeys([*sample, *loss_pending.witnesses(parts, ns)])
              if b not in head]
    own = [b for b in own_sample(parts, old_now) if b not in head]
    if not sample and not own:
        return False
    served: set[str] = set()
    for pause in (0.0, *LOST_CONFIRM_PAUSES):
        time.sleep(pause)
        for blob in dict.fromkeys([*head, *sample, *own]):
            if blob in served:
                continue
            try:
                if is_served(parts, blob):
                    if blob in head:
                        loss_pending.clear_if_served(parts, ns, head)
                        return False  # a lagging aggregator: "not yet"
                    served.add(blob)
            except (WalrusMemError, ValueError) as exc:  # undecided, as before: "not yet"
                log.info("network change check: %s: %s", type(exc).__name__, exc)
                return False
    gone = [b for b in dict.fromkeys([*sample, *own]) if b not in served]
    if not (gone and head) and not any(b not in served for b in own):
        # every blob served: a lagging aggregator (or nothing that shows a loss), unless
        # the head has been gone since a loss was first seen ten minutes ago
        if not (head and loss_pending.head_gone_long(parts, ns, head[0])):
            loss_pending.clear_if_served(parts, ns, served)
            return False
    elif not loss_pending.confirmed(parts, ns, head[0] if head else None, gone,
                                    vouched=bool(head) and parts.log.seen.is_gone(ns, head[0])):
        return False  # seen once: a later sync decides (N16, loss_pending.py)
    newest = parts.epochs.clock.reading().newest_seen
    now = time.time()
    # heads seen by the head that answered 404 are lost too; with no such head, those
    # seen before the first of our own blobs found gone was stored
    seen_by = (parts.log.seen.end_bound(ns, ref.blob_id)[1] if ref is not None
               else stored_at(parts, [b for b in own if b not in served]))
    parts.catalog.set_meta(BACKWARDS_KEY, json.dumps({
        "newest": newest, "seen": [[epoch, now, now]], "kind": LOST,
        **({"heads_seen_by": seen_by} if seen_by is not None else {})}))
    log.warning("the network behind the endpoints (epoch %d) no longer serves %d of the "
                "%d newest blobs this data dir relies on that must still be live (%s): "
                "another network, or a wipe; following it", epoch, len(gone) + len(head),
                len({*sample, *own}) + len(head), ", ".join([*head, *gone]))
    return follow(parts, errors, witnesses=head)


def _below_heads(parts: Parts) -> str | None:
    """A clock with no sighting of the old network (its catalog rebuilt, its wall clock
    ahead when it saw it, only restores) would never notice that its memories' blobs
    are gone: here the current epoch is compared with the highest epoch a seen head was
    stored in (``SeenHeads.stored_floor``). The current epoch is at most the newest
    sighting when that is recent (a store answer of this sync), else the clock's upper
    bound; an old sighting bounds nothing. Below it by more than :data:`JUMP_SLACK`,
    and that head answering 404 (one byte), the sighting is held apart and the head's
    blob id returned: the witness of the loss. A head still served says the network
    was not reset (a lying publisher): nothing is held."""
    now = time.time()
    seen = parts.epochs.clock.sightings(now)
    if not seen:
        return None
    newest = max(seen)
    upper = newest if seen[newest][1] >= now - RECENT else parts.epochs.clock.reading(now).latest
    found = parts.log.seen.stored_floor()
    if upper is None or found is None or upper >= found[0] - JUMP_SLACK:
        return None
    floor, _, ref = found
    try:
        if is_served(parts, ref.blob_id):
            return None
    except (WalrusMemError, ValueError):
        return None  # no answer: decided at a later check
    _hold(parts, newest, floor)
    return ref.blob_id


def _hold(parts: Parts, epoch: int, stored: int) -> None:
    """Hold the network's epoch apart as record_seen does for one below the clock's: here
    it is below the epoch a head was stored in, or one the clock believed without a
    sighting of its own (it stored nothing since, its catalog was rebuilt, its wall clock
    ran ahead when it saw the old network). What it saw below is the new network's."""
    now = time.time()
    seen = {e: [f, last] for e, (f, last) in parts.epochs.clock.sightings(now).items()
            if e < stored - JUMP_SLACK}
    first, last = seen.get(epoch, [now, now])
    seen[epoch] = [min(first, now), max(last, now)]
    parts.catalog.set_meta(BACKWARDS_KEY, json.dumps({
        "newest": stored, "seen": [[e, f, last] for e, (f, last) in sorted(seen.items())]}))
    log.warning("the network names epoch %d, below epoch %d it had reached (a head stored "
                "then, or the clock's): wiped or its epochs reset? checking", epoch, stored)


def _namespaces(c: Any) -> set[str]:
    """Every namespace with a memory or a manifest: each owes the renewal of what the
    reset lost before its next manifest (settle)."""
    return {str(n) for (n,) in c.execute(
        "SELECT namespace FROM memories UNION SELECT namespace FROM manifests")}


def _apply(parts: Parts, seen: list[tuple[int, float, float]], old: object,
           lost: list[str], *, kind: str = "backwards", served: Collection[str] = (),
           system_object: object = None, heads_seen_by: float | None = None,
           change: str | None = None) -> None:
    new = max(e for e, _, _ in seen)
    now = time.time()
    change = change or secrets.token_hex(8)  # the same id when a rolled-back catalog
    # follows a change the heads store recorded (_missed_change)
    first_new = min(f for _, f, _ in seen)  # the new network's epochs first seen
    # blobs the new network stored (and serves) whose answers the old clock refused
    # (epochs ahead of it): their end is the one the answer named, not the shifted one
    own_ends = [(end, blob) for blob, (_, end) in refused_ends(parts.epochs.clock.store).items()
                if blob in served and end > new]
    with parts.lock, parts.catalog.write() as c:
        c.execute("UPDATE meta SET value = ? WHERE key = ?",
                  (json.dumps({"seen": [list(s) for s in seen]}), META_KEY))
        c.execute("UPDATE meta SET value = ? WHERE key = 'current_epoch'", (str(new),))
        c.execute("DELETE FROM meta WHERE key IN (?, ?)", (CLAIM_KEY, BACKWARDS_KEY))
        for table in ("memories", "versions"):  # lost: due for renewal by this very sync
            c.execute(f"UPDATE {table} SET end_epoch = ? WHERE end_epoch IS NOT NULL AND "
                      "blob_id IN (SELECT value FROM json_each(?))", (new, json.dumps(lost)))
        for table in ("memories", "versions"):
            c.executemany(f"UPDATE {table} SET end_epoch = ? WHERE blob_id = ?", own_ends)
        for table in ("manifests", "manifest_pages"):  # the old ones are gone; pages and
            # a new manifest are stored again
            c.execute(f"UPDATE {table} SET end_epoch = ? WHERE end_epoch IS NOT NULL", (new,))
        c.execute("DELETE FROM meta WHERE key IN (?, ?)", (REFUSED_KEY, AHEAD_KEY))
        loss_pending.clear_all(c)
        c.execute("DELETE FROM meta WHERE key LIKE ?", (f"{MARK_KEY}:%",))  # the old network's
        c.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE "
                  "SET value = excluded.value",
                  (RESET_KEY, json.dumps({"at": now, "id": change, "kind": kind,
                                          "from": old, "to": new,
                                          "lost_blobs": len(lost),
                                          **({"system_object": system_object}
                                             if system_object else {}),
                                          "owed": sorted(_namespaces(c))})))
    parts.log.seen.keep_mark(None, None)  # and the copies of the marks
    # the heads stored before: the network lost them. Backwards, those stored above the
    # new epochs; another network, every one seen by the head that answered 404 (or the
    # first sign of the change): its epochs say nothing
    seen_by = heads_seen_by if heads_seen_by is not None else first_new
    if kind == BACKWARDS:
        parts.log.seen.end_all(new, stored_above=new + JUMP_SLACK, seen_before=first_new)
    else:
        parts.log.seen.end_seen_by(new, seen_by)
    try:  # outside the data dir too: a backup of it taken before now learns of it
        parts.log.seen.record_change({"id": change, "at": now, "to": new, "kind": kind,
                                      "seen_by": seen_by})
    except LocalStoreError as exc:
        log.warning("could not record the network change in the heads store: %s", exc)
    what = ("its epochs went back from %s to %d: a wipe or an epoch reset" if kind == BACKWARDS
            else "its epochs did not go back (%s, now %d): another network behind the "
            "endpoints (a redeploy, another system object) or a wipe")
    log.warning("the network lost this data dir's blobs and " + what + ". The epoch clock "
                "follows the new network; the memories of the %d lost blob(s) are stored "
                "again by this sync and a new manifest lists them (docs/walrus.md#network-"
                "resets-and-network-changes)", old, new, len(lost))
