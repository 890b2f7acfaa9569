"""A wiped network, or one whose epochs were reset: confirm it, let the clock follow,
store every memory again.

A testnet wipe (or relayer_mock restarted on an empty dir) loses every blob and
starts the epochs again from 0. Nothing in a store answer says so, but its epoch
is suddenly far below the newest one this data dir has seen: the epoch clock
(expiry.py ``record_seen``) holds such a sighting apart instead of mixing it in.
Before, the clock stayed on the old epochs, the catalog's end epochs (45) stayed
far above the new network's (6), so no renewal ever came, ``extend`` kept the dead
locations (their recorded end was "longer") and a fresh restore of the newest
head got 1 of 9.

:func:`follow` (``sync``, before it renews) settles a held sighting: a few blobs
that must still be live by the old clock (the newest ones, the newest manifest)
are read, one byte each. All answer 404: the network lost them, it is a reset.
Any is served: it is not (a lying or misconfigured publisher); the sighting is
dropped. No answer: decided at a later sync. On a reset the clock restarts from
the new network's sightings; each blob our memories live in is read (one byte,
once per blob: a quilt holds up to 666 memories) and the memories of every lost
one get the new epoch as their end, so this very sync stores them again
(``renew_due``: the same sealed bytes, verified) and publishes a manifest
listing the new locations (manifests and pages get it too: the old ones are
gone); heads seen before the reset count as gone (their manifests are).
Nothing is deleted locally: the catalog holds every memory, so nothing is lost
that this data dir held.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any, Final

from .errors import BlobNotFound, WalrusMemError
from .expiry import BACKWARDS_KEY, CLAIM_KEY, META_KEY

if TYPE_CHECKING:
    from .memory import Memory

__all__ = ["RESET_KEY", "follow"]

log = logging.getLogger(__name__)

RESET_KEY: Final = "network_reset"
"""Catalog meta: the last reset followed ({"at", "from", "to"}), for doctor and tests."""
SAMPLE: Final = 3  # blobs read to confirm a reset


def _held(mem: Memory) -> dict[str, Any] | None:
    raw = mem._catalog.get_meta(BACKWARDS_KEY)
    try:
        held = json.loads(raw) if raw else None
    except ValueError:
        return None
    return held if isinstance(held, dict) and held.get("seen") else None


def follow(mem: Memory, errors: list[str]) -> bool:
    """Settle a sighting the clock held apart (see the module doc); True when a reset was
    followed (the caller asks the clock again)."""
    held = _held(mem)
    if held is None:
        return False
    catalog = mem._catalog
    old_now = mem.epoch_clock.current()  # still on the old network's sightings
    sample = [str(r[0]) for r in catalog.query(
        "SELECT blob_id FROM memories WHERE status = 'published' AND blob_id IS NOT NULL "
        "AND end_epoch > ? GROUP BY blob_id ORDER BY max(end_epoch) DESC LIMIT ?",
        (old_now or 0, SAMPLE))]
    sample += [str(r[0]) for r in catalog.query(
        "SELECT blob_id FROM manifests WHERE end_epoch > ? ORDER BY seq DESC LIMIT 1",
        (old_now or 0,))]
    verdict: dict[str, bool] = {}  # blob id -> the network still serves it
    for blob in dict.fromkeys(sample):
        try:
            verdict[blob] = _served(mem, blob)
        except (WalrusMemError, ValueError) as exc:
            errors.append(f"network reset check: {type(exc).__name__}: {exc}")
            return False  # decided at a later sync
    seen = [(int(e), float(f), float(last)) for e, f, last in held["seen"]]
    if any(verdict.values()):
        log.warning("store answers named epoch(s) %s, below epoch %s seen before, but the "
                    "network still serves this data dir's blobs: not a reset (a publisher "
                    "of another network, or lying); ignored", [e for e, _, _ in seen],
                    held.get("newest"))
        catalog.set_meta(BACKWARDS_KEY, "")
        return False
    # Which blobs did the network lose? Those stored since the reset are there.
    for (blob,) in catalog.query("SELECT DISTINCT blob_id FROM memories WHERE status = "
                                 "'published' AND blob_id IS NOT NULL", ()):
        if str(blob) not in verdict:
            try:
                verdict[str(blob)] = _served(mem, str(blob))
            except (WalrusMemError, ValueError):
                verdict[str(blob)] = False  # unconfirmed: storing it again loses nothing
    _apply(mem, seen, held.get("newest"), [b for b, ok in verdict.items() if not ok])
    return True


def _served(mem: Memory, blob: str) -> bool:
    """Whether an aggregator serves ``blob`` (one byte read); other failures raise."""
    try:
        mem.walrus.read_byte_range(blob, 0, 1)
        return True
    except BlobNotFound:
        return False


def _apply(mem: Memory, seen: list[tuple[int, float, float]], old: object,
           lost: list[str]) -> None:
    new = max(e for e, _, _ in seen)
    now = time.time()
    with mem._lock, mem._catalog.write() as c:
        c.execute("UPDATE meta SET value = ? WHERE key = ?",
                  (json.dumps({"seen": [list(s) for s in seen]}), META_KEY))
        c.execute("UPDATE meta SET value = ? WHERE key = 'current_epoch'", (str(new),))
        c.execute("DELETE FROM meta WHERE key IN (?, ?)", (CLAIM_KEY, BACKWARDS_KEY))
        for table in ("memories", "versions"):  # lost: due for renewal by this very sync
            c.execute(f"UPDATE {table} SET end_epoch = ? WHERE end_epoch IS NOT NULL AND "
                      "blob_id IN (SELECT value FROM json_each(?))", (new, json.dumps(lost)))
        for table in ("manifests", "manifest_pages"):  # the old ones are gone; pages and
            # a new manifest are stored again
            c.execute(f"UPDATE {table} SET end_epoch = ? WHERE end_epoch IS NOT NULL", (new,))
        c.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE "
                  "SET value = excluded.value",
                  (RESET_KEY, json.dumps({"at": now, "from": old, "to": new})))
    mem._log.seen.end_all(new, before=now)
    log.warning("the network lost this data dir's blobs and its epochs went back from %s "
                "to %d: a wipe or an epoch reset. The epoch clock follows the new network; "
                "the memories of the %d lost blob(s) are stored again by this sync and a new "
                "manifest lists them (docs/reliability.md#expiry)", old, new, len(lost))
